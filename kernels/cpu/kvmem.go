package cpu

// hugeMin is the smallest cache kvMemory maps with huge pages (on Linux):
// below it a cache is a few Go slices, as a short context's or a test's
// needs.
const hugeMin = 32 << 20
