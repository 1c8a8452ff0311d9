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

// chunkMasks are the masks TestAttentionChunks runs over past cached
// slots and n rows, with c the chunk length: the causal rule (nil); a
// tree whose rows see the whole prefix; a tree whose rows all hide a hole
// of more than a chunk of the prefix, so that slots of whole chunks are
// hidden and a row's chunks reach over the hole; a sliding window of a
// chunk and a half, whose rows' first visible slots differ.
func chunkMasks(rng *rand.Rand, past, n, c int) map[string][]bool {
	total := past + n
	tree := treeMask(rng, past, n)
	holes := append([]bool(nil), tree...)
	for i := 0; i < n; i++ {
		for j := c / 2; j < c/2+c+17 && j < past; j++ {
			holes[i*total+j] = false
		}
	}
	window := make([]bool, n*total)
	w := c + c/2
	for i := 0; i < n; i++ {
		for j := max(0, past+i-w+1); j <= past+i; j++ {
			window[i*total+j] = true
		}
	}
	return map[string][]bool{"causal": nil, "tree": tree, "holes": holes, "window": window}
}

// visibleSlots lists the slots row i sees (mask nil: 0..past+i).
func visibleSlots(mask []bool, past, n, i int) []int {
	total := past + n
	var vis []int
	for j := 0; j < total; j++ {
		if mask == nil && j <= past+i || mask != nil && mask[i*total+j] {
			vis = append(vis, j)
		}
	}
	return vis
}

// TestAttentionChunks: attention over contexts of several chunks (not a
// multiple of the chunk, with a verification's rows straddling a chunk's
// end), of the shapes each kernel takes (heads of 8, of multiples of 16,
// of other multiples of 8, and others), causal, under tree masks, masks
// that hide whole chunks' slots and sliding windows, float32 and float16
// caches: against float64; each row's chunks are its visible slots
// counted in order, chunk c from number c*chunk; each row gives the same
// bits alone over the same cache with its mask row, alone over a cache
// of just the slots it sees (a tree row's path decoded alone), and on 1,
// 2 and 8 threads (a task a kv head and row group, or a task a chunk with
// a second job to fold them: both run). Negative controls: a row whose
// last chunk is left out misses the reference, and moving the last
// chunk's values changes the row's bits.
func TestAttentionChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	be1, be2, be8 := New(1), New(2), New(8)
	defer be1.Close()
	defer be2.Close()
	defer be8.Close()
	ran := map[bool]bool{}
	for _, s := range []struct {
		heads, kvHeads, hd int
		f16                bool
	}{
		{32, 8, 64, true}, {64, 32, 8, true}, {8, 2, 128, false}, {14, 2, 64, false}, {6, 2, 48, false}, {6, 3, 24, false},
		{4, 4, 12, false},
	} {
		c := attnChunk(s.hd)
		for _, w := range []struct{ past, n int }{{2*c - 3, 9}, {3*c + c/3, 1}} {
			total, kvd, qd := w.past+w.n, s.kvHeads*s.hd, s.heads*s.hd
			q, kc, vc := gaussian(rng, w.n*qd), gaussian(rng, total*kvd), gaussian(rng, total*kvd)
			types := []bool{false}
			if s.f16 {
				types = append(types, true)
			}
			for _, f16 := range types {
				var k16, v16 []uint16
				if f16 { // the cache's rounded values are the reference's
					k16, v16 = make([]uint16, len(kc)), make([]uint16, len(vc))
					for i := range kc {
						k16[i], v16[i] = quant.F32ToF16(kc[i]), quant.F32ToF16(vc[i])
						kc[i], vc[i] = quant.F16ToF32(k16[i]), quant.F16ToF32(v16[i])
					}
				}
				// attend runs the kernels over the cache's first len(k)/kvd slots
				attend := func(be *Backend, out, q []float32, k, v []float32, kh, vh []uint16, past, n int, mask []bool) {
					if f16 {
						be.attendC(out, q, unsafe.Pointer(&kh[0]), unsafe.Pointer(&vh[0]), true, past, n, mask, s.heads, s.kvHeads, s.hd, 0.3)
						return
					}
					be.HostAttention(out, q, k, v, past, n, mask, s.heads, s.kvHeads, s.hd, 0.3)
				}
				for name, m := range chunkMasks(rng, w.past, w.n, c) {
					what := fmt.Sprintf("%d heads of %d over %d, %d + %d slots (chunk %d), f16 %v, %s", s.heads, s.hd, s.kvHeads, w.past, w.n, c, f16, name)
					got := make([]float32, w.n*qd)
					attend(be2, got, q, kc, vc, k16, v16, w.past, w.n, m)
					_, bounds := be2.lastPlan()
					want := refAttention(q, kc, vc, w.past, w.n, m, s.heads, s.kvHeads, s.hd, 0.3)
					for i := range want {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-5 {
							t.Fatalf("%s: out[%d] = %v, want %v", what, i, got[i], want[i])
						}
					}
					for i := 0; i < w.n; i++ {
						vis := visibleSlots(m, w.past, w.n, i)
						// its chunks: the visible slots numbered c*chunk, then one past the last
						var wantB []int32
						for k := 0; k < len(vis); k += c {
							wantB = append(wantB, int32(vis[k]))
						}
						if len(vis) > 0 {
							wantB = append(wantB, int32(vis[len(vis)-1]+1))
						}
						if fmt.Sprint(bounds[i]) != fmt.Sprint(wantB) && !(len(bounds[i]) == 0 && len(wantB) == 0) {
							t.Fatalf("%s: row %d's chunks %v, want %v", what, i, bounds[i], wantB)
						}
						row := got[i*qd : (i+1)*qd]
						one := make([]float32, qd)
						if m != nil { // alone, with its mask row over the same cache
							attend(be2, one, q[i*qd:(i+1)*qd], kc, vc, k16, v16, total-1, 1, m[i*total:(i+1)*total])
							sameRow(t, fmt.Sprintf("%s: row %d alone with its mask row", what, i), one, row)
						}
						// alone over the slots it sees, one after another (its path)
						pk, pv := make([]float32, 0, len(vis)*kvd), make([]float32, 0, len(vis)*kvd)
						var pk16, pv16 []uint16
						for _, j := range vis {
							pk, pv = append(pk, kc[j*kvd:(j+1)*kvd]...), append(pv, vc[j*kvd:(j+1)*kvd]...)
							if f16 {
								pk16, pv16 = append(pk16, k16[j*kvd:(j+1)*kvd]...), append(pv16, v16[j*kvd:(j+1)*kvd]...)
							}
						}
						attend(be2, one, q[i*qd:(i+1)*qd], pk, pv, pk16, pv16, len(vis)-1, 1, nil)
						sameRow(t, fmt.Sprintf("%s: row %d against its path alone", what, i), one, row)
						if i == 0 && len(vis) > c && !f16 { // the negative controls
							for x := (len(vis) - 1) / c * c * kvd; x < len(pv); x++ {
								pv[x] += 0.25
							}
							attend(be2, one, q[:qd], pk, pv, nil, nil, len(vis)-1, 1, nil)
							if equalBits(one, row) {
								t.Fatalf("%s: the last chunk's values moved and left the row's bits as they were", what)
							}
							short := make([]bool, total)
							for _, s := range vis[:len(vis)/c*c] {
								short[s] = true
							}
							part := make([]float32, qd)
							attend(be2, part, q[:qd], kc, vc, nil, nil, total-1, 1, short)
							far := 0.0
							for x := range part {
								far = max(far, math.Abs(float64(part[x]-want[x])))
							}
							if far <= 1e-5 {
								t.Fatalf("%s: leaving out the last chunk stays within the tolerance (%g)", what, far)
							}
						}
					}
					for _, be := range []*Backend{be1, be8} {
						other := make([]float32, w.n*qd)
						attend(be, other, q, kc, vc, k16, v16, w.past, w.n, m)
						split, _ := be.lastPlan()
						ran[split] = true
						sameRow(t, fmt.Sprintf("%s: %d threads (split %v)", what, be.Threads(), split), other, got)
					}
				}
			}
		}
	}
	if !ran[true] || !ran[false] {
		t.Fatalf("the chunks ran as tasks of their own %v, inside a kv head's task %v: want both", ran[true], ran[false])
	}
}

// sameRow fails unless got and want are the same bits.
func sameRow(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for k := range want {
		if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
			t.Fatalf("%s: value %d is %v, want %v", what, k, got[k], want[k])
		}
	}
}

// equalBits reports whether a and b are the same bits.
func equalBits(a, b []float32) bool {
	for k := range a {
		if math.Float32bits(a[k]) != math.Float32bits(b[k]) {
			return false
		}
	}
	return true
}
