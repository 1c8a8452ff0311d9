//go:build cgo && !purego

// q40x8.c's eight-row tiles compiled a second time with AVX-VNNI (x8.h's
// X8_VNNI): arb_mm_x8 runs them where the CPU has it (arb_avx_vnni).
#define X8_VNNI 1
#include "q40x8.c"
