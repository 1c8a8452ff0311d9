package model

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// CacheBudget admits sequences' KV caches within a memory bound: a server
// running many sequences at once gives each its own cache, and the
// caches, not the weights, are what grows with the load. A cache's bytes
// (its capacity times what a position takes in the cache's type, every
// layer's key and value) are taken from the budget before anything is
// allocated, and a cache that does not fit what is left is refused with
// an error naming the bound; freeing the cache (Cache.Free) gives its
// bytes back at once. Its methods may be called from any goroutine.
//
// A freed cache's device memory is kept as a spare for the next cache of
// the same model that fits in it, within the budget, rather than given
// back to the system: a fresh host cache is zeroed by the kernel page by
// page as its first rows are written (a server's every request paid that,
// most of a short request's cache stores), and a device allocation costs
// a driver call. A spare is released as soon as a cache that does not
// fit in one needs its bytes.
type CacheBudget struct {
	mu    sync.Mutex
	limit uint64
	used  uint64 // the admitted caches' bytes
	held  int
	spare []spareKV
	kept  uint64 // the spares' bytes
}

// spareKV is a freed cache's device memory, kept for the next cache of
// the same model (cfg), device and type.
type spareKV struct {
	cfg   *Config
	dev   kernels.Device
	kv    kernels.KV
	bytes uint64
}

// ErrOverBudget is a cache larger than the whole budget: it can never be
// admitted (a request asking for more context than the budget holds).
var ErrOverBudget = errors.New("larger than the whole cache budget")

// ErrBudgetFull is a cache that fits the budget but not what the caches
// admitted before it leave of it: it can be admitted once some are freed.
var ErrBudgetFull = errors.New("the cache budget is taken")

// NewCacheBudget makes a budget of bytes bytes of KV cache.
func NewCacheBudget(bytes uint64) *CacheBudget { return &CacheBudget{limit: bytes} }

// Limit is the budget's bound in bytes.
func (b *CacheBudget) Limit() uint64 { return b.limit }

// Used is the bytes the admitted caches hold, and Held how many they are.
func (b *CacheBudget) Used() (bytes uint64, caches int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.held
}

// Fits says whether a cache of ctx positions of m could ever be admitted
// (nil), or the error NewCache would give with the budget empty.
func (b *CacheBudget) Fits(m *Model, ctx int) error {
	need := m.KVBytesAs(ctx, m.KVType)
	if need > b.limit {
		return b.over(m, ctx, need)
	}
	return nil
}

func (b *CacheBudget) over(m *Model, ctx int, need uint64) error {
	return fmt.Errorf("model: a %s KV cache of %d positions takes %s (%s a position), %w of %s", m.KVType, ctx, mib(need), mib(need/uint64(max(ctx, 1))), ErrOverBudget, mib(b.limit))
}

// NewCache takes a cache of ctx positions of m's KVType from the budget
// and allocates it on m's device. It refuses, before allocating anything,
// a cache larger than the whole budget (ErrOverBudget), one larger than
// what is left (ErrBudgetFull) and one larger than the machine's memory
// (CheckCache). The cache's Free gives its bytes back.
func (b *CacheBudget) NewCache(m *Model, ctx int) (*Cache, error) {
	if ctx < 1 {
		return nil, fmt.Errorf("model: a KV cache of %d positions", ctx)
	}
	need := m.KVBytesAs(ctx, m.KVType)
	if need > b.limit {
		return nil, b.over(m, ctx, need)
	}
	if err := m.CheckCache(ctx); err != nil {
		return nil, err
	}
	c := m.NewCache(ctx)
	b.mu.Lock()
	if sp, ok := b.take(&m.Config, m.Backend, m.KVType, ctx); ok {
		b.used += sp.bytes
		b.held++
		b.mu.Unlock()
		c.kv, c.budget, c.budgetBytes = sp.kv, b, sp.bytes
		return c, nil
	}
	var release []kernels.KV
	for len(b.spare) > 0 && need > b.limit-b.used-b.kept {
		sp := b.spare[0]
		b.spare = b.spare[1:]
		b.kept -= sp.bytes
		release = append(release, sp.kv)
	}
	if left := b.limit - b.used - b.kept; need > left {
		used, held := b.used, b.held
		b.mu.Unlock()
		return nil, fmt.Errorf("model: a %s KV cache of %d positions takes %s, more than the %s left: %w (%s by %d caches of %s)", m.KVType, ctx, mib(need), mib(left), ErrBudgetFull, mib(used), held, mib(b.limit))
	}
	b.used += need
	b.held++
	b.mu.Unlock()
	for _, kv := range release {
		kv.Free()
	}
	c.budget, c.budgetBytes = b, need
	if err := c.alloc(); err != nil {
		c.Free()
		return nil, err
	}
	return c, nil
}

// take removes and returns the smallest spare of cfg's model on dev of
// type t with room for ctx positions (b.mu held).
func (b *CacheBudget) take(cfg *Config, dev kernels.Device, t quant.Type, ctx int) (spareKV, bool) {
	best := -1
	for i, sp := range b.spare {
		if sp.cfg == cfg && sp.dev == dev && sp.kv.Type() == t && sp.kv.Cap() >= ctx && (best < 0 || sp.bytes < b.spare[best].bytes) {
			best = i
		}
	}
	if best < 0 {
		return spareKV{}, false
	}
	sp := b.spare[best]
	b.spare = slices.Delete(b.spare, best, best+1)
	b.kept -= sp.bytes
	return sp, true
}

// keep takes back a freed cache's bytes and keeps its memory as a spare.
func (b *CacheBudget) keep(c *Cache) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= c.budgetBytes
	b.held--
	b.spare = append(b.spare, spareKV{cfg: c.cfg, dev: c.dev, kv: c.kv, bytes: c.budgetBytes})
	b.kept += c.budgetBytes
}

// Spare is the bytes of freed caches' memory the budget keeps for the
// next caches (within its limit), and how many caches that is.
func (b *CacheBudget) Spare() (bytes uint64, caches int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kept, len(b.spare)
}

// Release gives every spare's memory back to the system (a server going
// idle or shutting down).
func (b *CacheBudget) Release() {
	b.mu.Lock()
	spare := b.spare
	b.spare, b.kept = nil, 0
	b.mu.Unlock()
	for _, sp := range spare {
		sp.kv.Free()
	}
}

// release gives bytes back.
func (b *CacheBudget) release(bytes uint64) {
	b.mu.Lock()
	b.used -= bytes
	b.held--
	b.mu.Unlock()
}

// mib writes a byte count for a message.
func mib(n uint64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
