package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"arborist/kernels"
	"arborist/kernels/devicetest"
	"arborist/kernels/quant"
)

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

// TestDeviceAttentionKV: attention through the Device (StoreKV, then
// Attention on a float32 and a float16 cache, with and without a soft-cap,
// causal and with a tree mask) against the float64 reference on the values
// the cache holds (float16-rounded for the f16 cache): the C kernels and
// the Go loop read both cache types.
func TestDeviceAttentionKV(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	be := New(2)
	defer be.Close()
	for _, c := range []struct{ heads, kvHeads, hd, past, n int }{
		{64, 32, 8, 37, 3}, {8, 2, 64, 20, 4}, {4, 4, 12, 9, 2}, {6, 3, 24, 15, 1},
	} {
		total := c.past + c.n
		kvd := c.kvHeads * c.hd
		q, k, v := gaussian(rng, c.n*c.heads*c.hd), gaussian(rng, total*kvd), gaussian(rng, total*kvd)
		mask := make([]bool, c.n*total)
		for i := 0; i < c.n; i++ {
			for j := 0; j < total; j++ {
				mask[i*total+j] = j < c.past || j == c.past+i || j < c.past+i && rng.IntN(2) == 0
			}
		}
		for _, typ := range []quant.Type{quant.F32, quant.F16} {
			kv, err := be.NewKV(2, total+3, kvd, typ)
			if err != nil {
				t.Fatal(err)
			}
			kt, vt := Wrap(k), Wrap(v)
			be.StoreKV(kv, 1, 0, kt, vt, total)
			// the values the cache holds
			kh, vh := slices.Clone(k), slices.Clone(v)
			if typ == quant.F16 {
				for i := range kh {
					kh[i], vh[i] = quant.F16ToF32(quant.F32ToF16(kh[i])), quant.F16ToF32(quant.F32ToF16(vh[i]))
				}
			}
			for _, m := range [][]bool{nil, mask} {
				for _, softcap := range []float32{0, 0.5} {
					out := Wrap(make([]float32, c.n*c.heads*c.hd))
					be.Attention(out, Wrap(q), kv, 1, c.past, c.n, m, kernels.AttnShape{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: 0.3, Softcap: softcap})
					var want []float32
					if softcap == 0 {
						want = refAttention(q, kh, vh, c.past, c.n, m, c.heads, c.kvHeads, c.hd, 0.3)
					} else {
						want = refSoftcapAttention(q, kh, vh, c.past, c.n, m, c.heads, c.kvHeads, c.hd, 0.3, float64(softcap))
					}
					for i, w := range want {
						if d := math.Abs(float64(Data(out)[i] - w)); d > 1e-5 {
							t.Fatalf("%+v %s mask=%v softcap=%g: out[%d] = %v, want %v", c, typ, m != nil, softcap, i, Data(out)[i], w)
						}
					}
				}
			}
		}
	}
}

// refSoftcapAttention is refAttention with scores mapped to c*tanh(s/c).
func refSoftcapAttention(q, kc, vc []float32, past, n int, mask []bool, heads, kvHeads, hd int, scale, c float64) []float32 {
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
				d = c * math.Tanh(d*scale/c)
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

// TestDeviceKVCompactCopy: Compact moves the listed slots (in place and
// out of order) and CopyKV copies a prefix, on both cache types; bad
// arguments are refused.
func TestDeviceKVCompactCopy(t *testing.T) {
	be := New(1)
	defer be.Close()
	const layers, slots, w = 2, 6, 4
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		for _, keep := range [][]int{{0, 2, 3}, {4, 1, 0}, {}} {
			kv, err := be.NewKV(layers, slots, w, typ)
			if err != nil {
				t.Fatal(err)
			}
			vals := make([]float32, slots*w)
			for i := range vals {
				vals[i] = float32(i)
			}
			for l := 0; l < layers; l++ {
				be.StoreKV(kv, l, 0, Wrap(vals), Wrap(vals), slots)
			}
			if err := be.Compact(kv, keep, 5); err != nil {
				t.Fatal(err)
			}
			cp, _ := be.NewKV(layers, slots, w, typ)
			if err := be.CopyKV(cp, kv, len(keep)); err != nil {
				t.Fatal(err)
			}
			for _, c := range []kernels.KV{kv, cp} {
				for l := 0; l < layers; l++ {
					for i, s := range keep {
						for x := 0; x < w; x++ {
							got := c.(*KV).at(l, i*w+x)
							if got != float32(s*w+x) {
								t.Fatalf("%s keep %v layer %d slot %d: %v, want %v", typ, keep, l, i, got, s*w+x)
							}
						}
					}
				}
			}
			if be.Compact(kv, []int{5}, 5) == nil || be.CopyKV(cp, kv, slots+1) == nil {
				t.Fatalf("%s: out-of-range compact or copy accepted", typ)
			}
		}
	}
	if _, err := be.NewKV(1, 1, 1, quant.Q8_0); err == nil {
		t.Fatal("a Q8_0 KV cache was accepted")
	}
	if _, err := be.NewTensor(-1); err == nil {
		t.Fatal("a negative tensor size was accepted")
	}
}

// at reads key element i of layer l as float32.
func (c *KV) at(l, i int) float32 {
	if c.typ == quant.F32 {
		return c.k[l][i]
	}
	return quant.F16ToF32(c.k16[l][i])
}

// TestDeviceArgmaxGather: ties go to the lowest index; Gather picks rows.
func TestDeviceArgmaxGather(t *testing.T) {
	be := New(1)
	defer be.Close()
	x := Wrap([]float32{1, 3, 3, 0, -1, -2, 5, 5, 5})
	dst := make([]int, 3)
	be.Argmax(dst, x, 3, 3)
	if !slices.Equal(dst, []int{1, 0, 0}) {
		t.Fatalf("argmax %v", dst)
	}
	g := Wrap(make([]float32, 6))
	be.Gather(g, x, []int{2, 0}, 3)
	if !slices.Equal(Data(g), []float32{5, 5, 5, 1, 3, 3}) {
		t.Fatalf("gather %v", Data(g))
	}
}

// TestDeviceSuite runs the primitive-level suite every kernels.Device runs
// on the CPU backend (every weight type, float32 and float16 caches).
func TestDeviceSuite(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) kernels.Device { return New(2) }, devicetest.Options{})
}
