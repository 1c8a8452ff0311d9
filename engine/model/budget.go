package model

import (
	"errors"
	"fmt"
	"sync"
)

// CacheBudget admits sequences' KV caches within a memory bound: a server
// running many sequences at once gives each its own cache, and the
// caches, not the weights, are what grows with the load. A cache's bytes
// (its capacity times what a position takes in the cache's type, every
// layer's key and value) are taken from the budget before anything is
// allocated, and a cache that does not fit what is left is refused with
// an error naming the bound; freeing the cache (Cache.Free) gives its
// bytes back at once. Its methods may be called from any goroutine.
type CacheBudget struct {
	mu    sync.Mutex
	limit uint64
	used  uint64
	held  int
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
	b.mu.Lock()
	if left := b.limit - b.used; need > left {
		used, held := b.used, b.held
		b.mu.Unlock()
		return nil, fmt.Errorf("model: a %s KV cache of %d positions takes %s, more than the %s left: %w (%s by %d caches of %s)", m.KVType, ctx, mib(need), mib(left), ErrBudgetFull, mib(used), held, mib(b.limit))
	}
	b.used += need
	b.held++
	b.mu.Unlock()
	c := m.NewCache(ctx)
	c.budget, c.budgetBytes = b, need
	if err := c.alloc(); err != nil {
		c.Free()
		return nil, err
	}
	return c, nil
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
