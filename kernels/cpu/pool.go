package cpu

import (
	"sync"
	"sync/atomic"
)

// job is work split into chunks; do runs chunk [lo, hi) on worker w.
type job interface {
	do(w, lo, hi int)
}

// pool is a fixed set of worker goroutines that run jobs chunk by chunk. The
// calling goroutine works too, as worker 0, so a pool of n threads keeps n
// goroutines busy. Calls are serialised: one job at a time.
type pool struct {
	n     int
	mu    sync.Mutex
	start []chan struct{}
	done  sync.WaitGroup
	cur   job
	total int
	chunk int
	next  atomic.Int64
	quit  chan struct{}
}

func newPool(n int) *pool {
	p := &pool{n: n, quit: make(chan struct{})}
	for w := 1; w < n; w++ {
		ch := make(chan struct{}, 1)
		p.start = append(p.start, ch)
		go p.worker(w, ch)
	}
	return p
}

func (p *pool) worker(w int, start chan struct{}) {
	for {
		select {
		case <-start:
			p.drain(w)
			p.done.Done()
		case <-p.quit:
			return
		}
	}
}

func (p *pool) drain(w int) {
	for {
		lo := int(p.next.Add(int64(p.chunk))) - p.chunk
		if lo >= p.total {
			return
		}
		p.cur.do(w, lo, min(lo+p.chunk, p.total))
	}
}

// run splits [0, total) into chunks of at least grain items, about four per
// worker so uneven chunks even out, and returns when all are done.
func (p *pool) run(j job, total, grain int) {
	if total <= 0 {
		return
	}
	chunk := max(grain, (total+4*p.n-1)/(4*p.n))
	if p.n == 1 || chunk >= total {
		j.do(0, 0, total)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.total, p.chunk = j, total, chunk
	p.next.Store(0)
	p.done.Add(len(p.start))
	for _, ch := range p.start {
		ch <- struct{}{}
	}
	p.drain(0)
	p.done.Wait()
	p.cur = nil
}

func (p *pool) close() { close(p.quit) }

// funcJob adapts a closure to a job.
type funcJob func(lo, hi int)

func (f funcJob) do(_, lo, hi int) { f(lo, hi) }
