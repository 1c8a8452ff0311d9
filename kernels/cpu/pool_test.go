package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// passWork is a wide pass's kinds of job on one backend: products of one
// input in each layout the kernels read (MatMulMulti of Q8_0, Q4_K and
// F16 weights, and a Q6_K one alone), the element-wise operations, the
// store in a float and a half-float cache, and attention over both; and a
// job of Go code (ParallelFor) between them. Its results are compared bit
// for bit across thread counts: a chunk computes the same whichever
// thread runs it.
type passWork struct {
	rows, cols, n     int
	x, y, w, cos, sin []float32
	mats              map[quant.Type][]byte
}

func newPassWork(t testing.TB, seed uint64) *passWork {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	p := &passWork{rows: 96, cols: 512, n: 72, mats: map[quant.Type][]byte{}}
	p.x, p.y, p.w = gaussian(rng, p.n*p.cols), gaussian(rng, p.n*p.cols), gaussian(rng, p.cols)
	p.cos, p.sin = gaussian(rng, p.n*32), gaussian(rng, p.n*32)
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_K, quant.F16, quant.Q6_K} {
		p.mats[typ] = quantized(t, rng, typ, p.rows, p.cols)
	}
	return p
}

// run does the work on b and returns every result.
func (p *passWork) run(t testing.TB, b *Backend) [][]float32 {
	var outs [][]float32
	keep := func(v []float32) { outs = append(outs, append([]float32(nil), v...)) }
	ms := map[quant.Type]kernels.Matrix{}
	for typ, w := range p.mats {
		m, err := b.NewMatrix(typ, w, p.rows, p.cols)
		if err != nil {
			t.Fatal(err)
		}
		ms[typ] = m
	}
	x := append([]float32(nil), p.x...)
	norm := make([]float32, len(x))
	b.RMSNorm(Wrap(norm), Wrap(x), Wrap(p.w), p.n, p.cols, 1e-5)
	keep(norm)
	multi := []quant.Type{quant.Q8_0, quant.Q4_K, quant.F16}
	var mouts []kernels.Tensor
	var mws []kernels.Matrix
	for _, typ := range multi {
		mouts = append(mouts, Wrap(make([]float32, p.n*p.rows)))
		mws = append(mws, ms[typ])
	}
	b.MatMulMulti(mouts, mws, Wrap(norm), p.n)
	for _, o := range mouts {
		keep(Data(o))
	}
	sum := 0
	b.ParallelFor(p.n, func(lo, hi int) { // a job of Go code between C ones
		for i := lo; i < hi; i++ {
			x[i*p.cols] += 1
		}
	})
	for i := 0; i < p.n; i++ {
		sum += int(x[i*p.cols] - p.x[i*p.cols] + 0.5)
	}
	if sum != p.n {
		t.Fatalf("ParallelFor touched %d rows of %d", sum, p.n)
	}
	o6 := make([]float32, p.n*p.rows)
	b.MatMul(o6, ms[quant.Q6_K], x, p.n)
	keep(o6)
	g := append([]float32(nil), p.x...)
	b.GLU(Wrap(g), Wrap(p.y), len(g), false)
	keep(g)
	b.Add(Wrap(g), Wrap(p.y), len(g))
	keep(g)
	s := kernels.RoPEShape{Heads: 8, HeadDim: 64, RopeDim: 64}
	r := append([]float32(nil), p.x...)
	b.RoPE(Wrap(r), p.n, s, p.cos, p.sin)
	keep(r)
	for _, kt := range []quant.Type{quant.F32, quant.F16} {
		kv, err := b.NewKV(1, p.n+8, p.cols, kt)
		if err != nil {
			t.Fatal(err)
		}
		b.StoreKV(kv, 0, 8, Wrap(r), Wrap(g), p.n)
		b.StoreKV(kv, 0, 0, Wrap(g[:8*p.cols]), Wrap(r[:8*p.cols]), 8)
		out := make([]float32, p.n*p.cols)
		b.Attention(Wrap(out), Wrap(norm), kv, 0, 8, p.n, nil,
			kernels.AttnShape{Heads: 8, KVHeads: 8, HeadDim: 64, Scale: 0.125})
		keep(out)
	}
	return outs
}

func sameBits(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	for k := range a {
		for i := range a[k] {
			if math.Float32bits(a[k][i]) != math.Float32bits(b[k][i]) {
				t.Fatalf("%s: result %d, value %d: %v against %v", what, k, i, b[k][i], a[k][i])
			}
		}
	}
}

// TestPoolJobsInTurn runs a pass's jobs, C and Go in turn, many times on
// pools of two and four threads, against one thread: a worker late for a
// job, or back from a job of Go code, must neither run a chunk twice nor
// miss one.
func TestPoolJobsInTurn(t *testing.T) {
	p := newPassWork(t, 81)
	one := New(1)
	want := p.run(t, one)
	one.Close()
	for _, threads := range []int{2, 4} {
		b := New(threads)
		for round := 0; round < 20; round++ {
			sameBits(t, "jobs in turn", want, p.run(t, b))
		}
		b.Close()
	}
}

// TestPoolsSideBySide runs three backends' passes at once, more threads
// than cores: each pool's results stay its own.
func TestPoolsSideBySide(t *testing.T) {
	p := newPassWork(t, 83)
	one := New(1)
	want := p.run(t, one)
	one.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 3)
	for k := 0; k < 3; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := New(2)
			defer b.Close()
			for round := 0; round < 8; round++ {
				got := p.run(t, b)
				for j := range want {
					for i := range want[j] {
						if math.Float32bits(want[j][i]) != math.Float32bits(got[j][i]) {
							errs <- "a backend's result changed beside the others'"
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestCloseEndsWorkers: closing a backend ends its workers, so backends
// opened and closed in turn (a session per model) leave none behind.
func TestCloseEndsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		b := New(4)
		b.ParallelFor(100, func(lo, hi int) {})
		b.Close()
	}
	for deadline := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after closing twenty backends", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
