//go:build !linux

package cpu

import "unsafe"

// kvMemory maps a cache's memory with huge pages on Linux; elsewhere a
// cache is Go slices.
type kvMemory struct{}

func newKVMemory(bytes uint64) *kvMemory                   { return nil }
func (m *kvMemory) carve(count, size int) []unsafe.Pointer { return nil }
func (m *kvMemory) free()                                  {}
