package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// job is work split into chunks; do runs chunk [lo, hi) on worker w.
type job interface {
	do(w, lo, hi int)
}

// cJob is a job with a C form (cpool_cgo.go): runC hands its total units
// to the workers' C side, which claims them in chunks of chunk units or
// more (cpool.c's drain), and reports false where this job has none (it
// then runs chunk by chunk as any job).
type cJob interface {
	runC(total, chunk int) bool
}

// spinLimit is how many polls an idle worker makes before it sleeps. A
// forward pass dispatches a job every few microseconds, and waking a
// sleeping goroutine costs about as much as a small matmul, so workers spin
// briefly (tens of microseconds) between jobs.
const spinLimit = 20000

// pool is a fixed set of worker goroutines that run jobs chunk by chunk. The
// calling goroutine works too, as worker 0, so a pool of n threads keeps n
// goroutines busy. Calls to run must be serialised by the caller.
type pool struct {
	n       int
	gen     atomic.Uint64 // bumped once per job
	pending atomic.Int32  // workers yet to finish the current job
	cur     job
	total   int
	chunk   int
	next    atomic.Int64
	quit    atomic.Bool
	sleepMu sync.Mutex
	wake    *sync.Cond
	// sleepers counts the workers asleep on wake (or about to be): run
	// takes sleepMu to wake them only when there are some, so handing a
	// job to spinning workers costs an atomic add
	sleepers atomic.Int32
	// c is the workers' C side where the C kernels are built in: the
	// workers then wait in C and run the C kernels' jobs there (see
	// cpool.c), and come back to Go only for a job of Go code
	c       cpool
	running sync.WaitGroup // the workers, for close
}

func newPool(n int) *pool {
	p := &pool{n: n}
	p.wake = sync.NewCond(&p.sleepMu)
	if n > 1 {
		p.c.start(n)
	}
	p.running.Add(n - 1)
	for w := 1; w < n; w++ {
		go p.worker(w)
	}
	return p
}

func (p *pool) worker(w int) {
	defer p.running.Done()
	if p.c.ok() {
		for p.c.work(w) { // a job of Go code
			p.drain(w)
			p.c.done()
		}
		return
	}
	var last uint64
	for {
		for spins := 0; p.gen.Load() == last; spins++ {
			if p.quit.Load() {
				return
			}
			if spins < spinLimit {
				if spins%128 == 127 {
					runtime.Gosched()
				}
				continue
			}
			p.sleepMu.Lock()
			p.sleepers.Add(1) // before the check: run reads it after bumping gen
			for p.gen.Load() == last && !p.quit.Load() {
				p.wake.Wait()
			}
			p.sleepers.Add(-1)
			p.sleepMu.Unlock()
		}
		last = p.gen.Load()
		p.drain(w)
		p.pending.Add(-1)
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

// run splits [0, total) into chunks of at least grain items and returns
// when all are done: in Go about four per worker, so uneven chunks even
// out; on the C workers a share of what is left a claim, grain at least
// (cpool.c's drain).
func (p *pool) run(j job, total, grain int) {
	if total <= 0 {
		return
	}
	chunk := chunkSize(total, grain, p.n)
	if p.n == 1 || chunk >= total {
		j.do(0, 0, total)
		return
	}
	if p.c.ok() {
		if cj, ok := j.(cJob); ok {
			p.c.tick()
			if cj.runC(total, grain) {
				return
			}
		}
	}
	p.cur, p.total, p.chunk = j, total, chunk
	p.next.Store(0)
	if p.c.ok() {
		p.c.postGo()
		p.drain(0)
		p.c.wait()
		p.cur = nil
		return
	}
	p.pending.Store(int32(p.n - 1))
	p.gen.Add(1)
	if p.sleepers.Load() > 0 {
		p.sleepMu.Lock()
		p.wake.Broadcast()
		p.sleepMu.Unlock()
	}
	p.drain(0)
	for spins := 0; p.pending.Load() > 0; spins++ {
		if spins%128 == 127 {
			runtime.Gosched()
		}
	}
	p.cur = nil
}

// chunkSize is how many of total items run makes a chunk for n workers:
// at least grain, and about four chunks a worker.
func chunkSize(total, grain, n int) int {
	return max(grain, (total+4*n-1)/(4*n))
}

func (p *pool) close() {
	if p.c.ok() {
		p.c.close()
		p.running.Wait()
		p.c.free()
		return
	}
	p.sleepMu.Lock()
	p.quit.Store(true)
	p.wake.Broadcast()
	p.sleepMu.Unlock()
}

// funcJob adapts a closure to a job.
type funcJob func(lo, hi int)

func (f funcJob) do(_, lo, hi int) { f(lo, hi) }
