//go:build cgo && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"arborist/kernels/quant"
)

// BenchmarkAttention: attention of the bench target's shape (64 heads of 8,
// 32 kv heads) over 128 cached positions: one decode step (n=1), and the
// verification of 8 tokens, as a chain (causal, no mask) and as an 8-node
// tree (each node seeing the prefix, its ancestors and itself): the tree's
// mask must cost no more than the dense case.
func BenchmarkAttention(b *testing.B) {
	const heads, kvHeads, hd, past = 64, 32, 8, 128
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 { return gaussian(rng, n) }
	for _, c := range []struct {
		name string
		n    int
		tree bool
	}{{"n=1", 1, false}, {"n=8/causal", 8, false}, {"n=8/tree", 8, true}} {
		b.Run(c.name, func(b *testing.B) {
			n := c.n
			total := past + n
			q, kc, vc := fill(n*heads*hd), fill(total*kvHeads*hd), fill(total*kvHeads*hd)
			var mask []bool
			if c.tree { // a binary tree: node i's parent is (i-1)/2
				mask = make([]bool, n*total)
				for i := 0; i < n; i++ {
					for j := 0; j < past; j++ {
						mask[i*total+j] = true
					}
					for a := i; ; a = (a - 1) / 2 {
						mask[i*total+past+a] = true
						if a == 0 {
							break
						}
					}
				}
			}
			out := make([]float32, n*heads*hd)
			be := New(DefaultThreads())
			defer be.Close()
			for b.Loop() {
				be.HostAttention(out, q, kc, vc, past, n, mask, heads, kvHeads, hd, 0.35)
			}
		})
	}
}

// BenchmarkAttentionBatch: a verification pass's attention over 128
// cached positions for 1, 8, 32 and 128 rows (causal), of llama-3.2-1b's
// shape (32 heads of 64 over 8 kv heads) and the bench target's (64 of 8
// over 32), and a 512-row prefill of each: how a wide pass's attention
// grows with the rows.
func BenchmarkAttentionBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name               string
		heads, kvHeads, hd int
	}{{"1b", 32, 8, 64}, {"bench", 64, 32, 8}} {
		for _, w := range []struct{ past, n int }{{128, 1}, {1024, 1}, {128, 8}, {128, 32}, {128, 128}, {0, 512}} {
			b.Run(fmt.Sprintf("%s/past=%d/n=%d", c.name, w.past, w.n), func(b *testing.B) {
				total, kvd := w.past+w.n, c.kvHeads*c.hd
				q, kc, vc := gaussian(rng, w.n*c.heads*c.hd), gaussian(rng, total*kvd), gaussian(rng, total*kvd)
				out := make([]float32, w.n*c.heads*c.hd)
				be := New(DefaultThreads())
				defer be.Close()
				for b.Loop() {
					be.HostAttention(out, q, kc, vc, w.past, w.n, nil, c.heads, c.kvHeads, c.hd, 0.125)
				}
			})
		}
	}
}

// TestSiLUMul: the vector SiLU matches the float64 formula, including
// large magnitudes, and a row's result is the same whether it is computed
// alone or inside a longer batch (rows of 172, not a multiple of 8).
func TestSiLUMul(t *testing.T) {
	const width, rows = 172, 5
	rng := rand.New(rand.NewPCG(3, 9))
	g, u := make([]float32, width*rows), make([]float32, width*rows)
	for i := range g {
		g[i] = float32(rng.NormFloat64() * 6)
		u[i] = float32(rng.NormFloat64())
	}
	g[3], g[4], g[5] = 95, -95, 0
	be := New(2)
	defer be.Close()
	all := append([]float32(nil), g...)
	be.SiLUMul(all, u)
	for i := range g {
		x := float64(g[i])
		want := x / (1 + math.Exp(-x)) * float64(u[i])
		if d := math.Abs(float64(all[i]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("element %d: silu(%g)*%g = %g, want %g", i, g[i], u[i], all[i], want)
		}
	}
	for r := 0; r < rows; r++ {
		one := append([]float32(nil), g[r*width:(r+1)*width]...)
		be.SiLUMul(one, u[r*width:(r+1)*width])
		for i, v := range one {
			if v != all[r*width+i] {
				t.Fatalf("row %d element %d: %g alone, %g in the batch", r, i, v, all[r*width+i])
			}
		}
	}
}

// refAttention is softmax(q.K*scale over the visible slots).V in float64.
func refAttention(q, kc, vc []float32, past, n int, mask []bool, heads, kvHeads, hd int, scale float64) []float32 {
	total, group, kvd := past+n, heads/kvHeads, kvHeads*hd
	out := make([]float32, n*heads*hd)
	for i := 0; i < n; i++ {
		for h := 0; h < heads; h++ {
			kh := h / group
			var w []float64
			var slots []int
			m := math.Inf(-1)
			for j := 0; j < total; j++ {
				if mask != nil && !mask[i*total+j] || mask == nil && j > past+i {
					continue
				}
				var d float64
				for t := 0; t < hd; t++ {
					d += float64(q[(i*heads+h)*hd+t]) * float64(kc[j*kvd+kh*hd+t])
				}
				d *= scale
				w, slots = append(w, d), append(slots, j)
				m = max(m, d)
			}
			var sum float64
			for k := range w {
				w[k] = math.Exp(w[k] - m)
				sum += w[k]
			}
			for t := 0; t < hd; t++ {
				var o float64
				for k, j := range slots {
					o += w[k] / sum * float64(vc[j*kvd+kh*hd+t])
				}
				out[(i*heads+h)*hd+t] = float32(o)
			}
		}
	}
	return out
}

// TestAttentionMatchesReference: the C attention (the per-kv-head kernel for
// heads of width 8, the general one for other multiples of 8 up to and past
// 64 dims a pass, several rows a task, and the scalar one) against
// float64, causal and with a tree mask, and a batch row gives the same
// bits alone as among the others (decoded alone it sees exactly the slots
// its mask row allows; and alone with its mask row over the whole cache).
func TestAttentionMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	be := New(2)
	defer be.Close()
	fill := func(n int) []float32 { return gaussian(rng, n) }
	for _, c := range []struct{ heads, kvHeads, hd, past, n int }{
		{64, 32, 8, 37, 1}, {64, 32, 8, 37, 9}, {8, 8, 8, 0, 5}, {12, 3, 8, 130, 3}, {4, 2, 16, 21, 6}, {4, 4, 12, 9, 2},
		{8, 2, 128, 70, 3}, {6, 2, 64, 40, 4}, {4, 4, 72, 11, 2}, {6, 3, 24, 15, 2},
		{64, 32, 8, 5, 33}, {16, 4, 64, 3, 9},
		// heads of 8, a decode step's few query rows: blocks of kv heads
		// a task, the last one short, rows of a block's weighted sums
		// from two kv heads
		{10, 5, 8, 20, 1}, {6, 2, 8, 40, 1}, {3, 3, 8, 17, 2}, {48, 16, 8, 1030, 1},
		// a decode step and a two-row pass over a long cache (keys and
		// values requested ahead)
		{32, 8, 64, 1100, 1}, {16, 4, 128, 1030, 2},
		// several rows a task, blocks of eight slots and a tail: heads
		// sharing kv heads by 4 (four rows a task), by 8 and alone
		{32, 8, 64, 45, 20}, {16, 2, 64, 29, 11}, {8, 8, 32, 17, 18}, {4, 1, 16, 0, 13},
		// heads of 8, many query vectors a kv head: blocks of 16 and 32
		// lanes, one ending inside a row's group of three heads
		{12, 4, 8, 23, 13}, {6, 2, 8, 50, 70}, {8, 8, 8, 9, 16}, {4, 4, 8, 0, 9},
		// widths of 48 and 80 (16 past a multiple of 32), nine and more
		// query vectors a task
		{6, 2, 48, 13, 7}, {10, 2, 80, 6, 5}, {36, 2, 16, 3, 2},
		// Gemma's width of 256
		{8, 2, 256, 12, 5},
	} {
		total := c.past + c.n
		kvd := c.kvHeads * c.hd
		q, kc, vc := fill(c.n*c.heads*c.hd), fill(total*kvd), fill(total*kvd)
		mask := treeMask(rng, c.past, c.n)
		if c.n > 2 { // a padding row that sees nothing gets zeros
			clear(mask[(c.n-1)*total : c.n*total])
		}
		for _, m := range [][]bool{nil, mask} {
			got := make([]float32, c.n*c.heads*c.hd)
			be.HostAttention(got, q, kc, vc, c.past, c.n, m, c.heads, c.kvHeads, c.hd, 0.3)
			want := refAttention(q, kc, vc, c.past, c.n, m, c.heads, c.kvHeads, c.hd, 0.3)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
					t.Fatalf("%+v mask=%v: out[%d] = %v, want %v", c, m != nil, i, got[i], want[i])
				}
			}
			// row i alone: the other batch rows' slots are left out of its cache
			for i := 0; i < c.n; i++ {
				var kc1, vc1 []float32
				for j := 0; j < total; j++ {
					if j < c.past || j == c.past+i || m != nil && m[i*total+j] || m == nil && j < c.past+i {
						kc1 = append(kc1, kc[j*kvd:(j+1)*kvd]...)
						vc1 = append(vc1, vc[j*kvd:(j+1)*kvd]...)
					}
				}
				if m != nil { // alone with its own mask row over the same cache
					one := make([]float32, c.heads*c.hd)
					be.HostAttention(one, q[i*c.heads*c.hd:(i+1)*c.heads*c.hd], kc, vc, total-1, 1, m[i*total:(i+1)*total], c.heads, c.kvHeads, c.hd, 0.3)
					for k, v := range one {
						if math.Float32bits(v) != math.Float32bits(got[i*c.heads*c.hd+k]) {
							t.Fatalf("%+v: row %d value %d alone with its mask %v, in the batch %v", c, i, k, v, got[i*c.heads*c.hd+k])
						}
					}
				}
				if m != nil && !slicesEqualPrefix(m[i*total:(i+1)*total], c.past+i) {
					continue // a sparse mask row does not correspond to one contiguous cache
				}
				one := make([]float32, c.heads*c.hd)
				be.HostAttention(one, q[i*c.heads*c.hd:(i+1)*c.heads*c.hd], kc1, vc1, len(kc1)/kvd-1, 1, nil, c.heads, c.kvHeads, c.hd, 0.3)
				for k, v := range one {
					if v != got[i*c.heads*c.hd+k] {
						t.Fatalf("%+v mask=%v: row %d value %d alone %v, in the batch %v", c, m != nil, i, k, v, got[i*c.heads*c.hd+k])
					}
				}
			}
		}
	}
}

// TestAttentionF16Cache: over a float16 cache, each row of a batch is
// the row alone to the bit (for every kernel a batch of that shape picks:
// query vectors a row each or sixteen to a vector), and the values are
// the reference's over the cache's rounded values, causal and masked.
func TestAttentionF16Cache(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	be := New(2)
	defer be.Close()
	for _, c := range []struct{ heads, kvHeads, hd, past, n int }{
		{32, 8, 64, 45, 20}, {16, 2, 64, 29, 11}, {8, 2, 128, 70, 3}, {6, 2, 48, 13, 7}, {8, 8, 32, 17, 18},
		{8, 2, 256, 12, 5}, {64, 32, 8, 5, 33}, {12, 4, 8, 23, 13}, {10, 5, 8, 20, 1}, {6, 2, 8, 40, 1},
	} {
		total, kvd, qd := c.past+c.n, c.kvHeads*c.hd, c.heads*c.hd
		q, kc, vc := gaussian(rng, c.n*qd), gaussian(rng, total*kvd), gaussian(rng, total*kvd)
		k16, v16 := make([]uint16, len(kc)), make([]uint16, len(vc))
		for i := range kc {
			k16[i], v16[i] = quant.F32ToF16(kc[i]), quant.F32ToF16(vc[i])
			kc[i], vc[i] = quant.F16ToF32(k16[i]), quant.F16ToF32(v16[i])
		}
		mask := treeMask(rng, c.past, c.n)
		for _, m := range [][]bool{nil, mask} {
			got := make([]float32, c.n*qd)
			be.attendC(got, q, unsafe.Pointer(&k16[0]), unsafe.Pointer(&v16[0]), true, c.past, c.n, m, c.heads, c.kvHeads, c.hd, 0.3)
			want := refAttention(q, kc, vc, c.past, c.n, m, c.heads, c.kvHeads, c.hd, 0.3)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
					t.Fatalf("%+v mask=%v: out[%d] = %v, want %v", c, m != nil, i, got[i], want[i])
				}
			}
			for i := 0; i < c.n; i++ {
				one := make([]float32, qd)
				if m == nil { // the cache up to the row's own slot
					be.attendC(one, q[i*qd:(i+1)*qd], unsafe.Pointer(&k16[0]), unsafe.Pointer(&v16[0]), true, c.past+i, 1, nil, c.heads, c.kvHeads, c.hd, 0.3)
				} else { // its mask row over the whole cache
					be.attendC(one, q[i*qd:(i+1)*qd], unsafe.Pointer(&k16[0]), unsafe.Pointer(&v16[0]), true, total-1, 1, m[i*total:(i+1)*total], c.heads, c.kvHeads, c.hd, 0.3)
				}
				for k, v := range one {
					if math.Float32bits(v) != math.Float32bits(got[i*qd+k]) {
						t.Fatalf("%+v mask=%v: row %d value %d alone %v, in the batch %v", c, m != nil, i, k, v, got[i*qd+k])
					}
				}
			}
		}
	}
}

// treeMask is a tree's mask over past cached slots and n batch rows: row
// i sees the prefix, itself and (at random) earlier batch rows.
func treeMask(rng *rand.Rand, past, n int) []bool {
	total := past + n
	mask := make([]bool, n*total)
	for i := 0; i < n; i++ {
		for j := 0; j < total; j++ {
			mask[i*total+j] = j < past || j == past+i || j < past+i && rng.IntN(2) == 0
		}
	}
	return mask
}

// slicesEqualPrefix reports whether row allows exactly slots [0, k] and
// nothing after.
func slicesEqualPrefix(row []bool, k int) bool {
	for j, v := range row {
		if v != (j <= k) {
			return false
		}
	}
	return true
}

// BenchmarkAttentionWide: one decode step's attention of real models'
// shapes over a long cache: Llama-2-7B/Llama-3-8B-like heads (32 of 128,
// over 32 or 8 kv heads) at 2000 cached positions, and Qwen2-0.5B-like ones
// (14 of 64 over 2 kv heads) at 1000.
func BenchmarkAttentionWide(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ heads, kvHeads, hd, past int }{{32, 32, 128, 2000}, {32, 8, 128, 2000}, {14, 2, 64, 1000}} {
		b.Run(fmt.Sprintf("%dx%d/kv%d/past%d", c.heads, c.hd, c.kvHeads, c.past), func(b *testing.B) {
			kvd := c.kvHeads * c.hd
			q, kc, vc := gaussian(rng, c.heads*c.hd), gaussian(rng, (c.past+1)*kvd), gaussian(rng, (c.past+1)*kvd)
			out := make([]float32, c.heads*c.hd)
			be := New(DefaultThreads())
			defer be.Close()
			for b.Loop() {
				be.HostAttention(out, q, kc, vc, c.past, 1, nil, c.heads, c.kvHeads, c.hd, 0.1)
			}
		})
	}
}

// BenchmarkAttentionDecodeLong: one decode step's attention of
// llama-3.2-1b's shape (32 heads of 64 over 8 kv heads) after 2048 cached
// tokens, over twelve layers' caches in turn (100 MiB), so each call reads
// its cache from memory as a model's decode step does, not from the last
// level of cache.
func BenchmarkAttentionDecodeLong(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	const heads, kvHeads, hd, past, layers = 32, 8, 64, 2048, 12
	total, kvd := past+1, kvHeads*hd
	q := gaussian(rng, heads*hd)
	var kc, vc [layers][]float32
	for l := range kc {
		kc[l], vc[l] = gaussian(rng, total*kvd), gaussian(rng, total*kvd)
	}
	out := make([]float32, heads*hd)
	be := New(DefaultThreads())
	defer be.Close()
	i := 0
	for b.Loop() {
		be.HostAttention(out, q, kc[i%layers], vc[i%layers], past, 1, nil, heads, kvHeads, hd, 0.125)
		i++
	}
}
