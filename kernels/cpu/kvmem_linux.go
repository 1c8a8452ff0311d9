package cpu

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"
)

// hugeSize is a transparent huge page.
const hugeSize = 2 << 20

// kvMemory is a cache's memory outside the Go heap, mapped anonymously
// and advised to the kernel as huge pages (MADV_HUGEPAGE, which Linux
// honours where transparent huge pages are "madvise" or "always").
// Attention reads a kv head's keys a row at a time, a cache row (every
// head's) apart: 1-2 KiB in llama-3.2-1b, so with 4 KiB pages each page
// held two or four of a head's rows and a decode step over 4096 cached
// tokens took a new page (a TLB miss) every other row. A decode step's
// attention over 4096 cached float16 tokens of that shape ran in 0.61 of
// the time with the cache on huge pages (medians of 30 interleaved
// rounds in one process, 2 shared cores).
type kvMemory struct{ r *kvRegion }

// kvRegion is the mapping, unmapped once: by free, or when its cache is
// collected without it.
type kvRegion struct {
	mu sync.Mutex
	b  []byte
}

func (r *kvRegion) unmap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.b != nil {
		_ = syscall.Munmap(r.b)
		r.b = nil
	}
}

// newKVMemory maps bytes of memory for a cache, or returns nil where Go
// slices serve (a small cache, or a failed mapping).
func newKVMemory(bytes uint64) *kvMemory {
	if bytes < hugeMin || bytes > maxBytes {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(bytes)+hugeSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	_ = syscall.Madvise(b, 14) // MADV_HUGEPAGE; refused, the pages are small, as on the Go heap
	m := &kvMemory{r: &kvRegion{b: b}}
	runtime.AddCleanup(m, func(r *kvRegion) { r.unmap() }, m.r)
	return m
}

// carve returns the memory as count buffers of size bytes each, the
// first on a huge page, each on a cache line.
func (m *kvMemory) carve(count, size int) []unsafe.Pointer {
	b := m.r.b
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (hugeSize - 1))
	step := (size + 63) &^ 63
	out := make([]unsafe.Pointer, count)
	for i := range out {
		out[i] = unsafe.Pointer(&b[off+i*step])
	}
	return out
}

// free unmaps the memory now rather than when its cache is collected.
func (m *kvMemory) free() { m.r.unmap() }
