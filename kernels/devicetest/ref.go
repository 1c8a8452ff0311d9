package devicetest

import (
	"math"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// The float64 references of the Device primitives. The Fake device computes
// with them, and Run holds every device against them; they are written as
// directly from the definitions in kernels/device.go as possible, so that a
// reader can check them against the equations.

// refMatMul: out[r, o] = sum_i w[o][i] * x[r, i] for r < n.
func refMatMul(w [][]float64, x []float64, n int) []float64 {
	rows := len(w)
	out := make([]float64, n*rows)
	if rows == 0 {
		return out
	}
	cols := len(w[0])
	for r := 0; r < n; r++ {
		xr := x[r*cols : (r+1)*cols]
		for o, wr := range w {
			var s float64
			for i, v := range wr {
				s += v * xr[i]
			}
			out[r*rows+o] = s
		}
	}
	return out
}

// refRMSNorm: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w.
func refRMSNorm(out, x, w []float64, rows, dim int, eps float64) {
	for r := 0; r < rows; r++ {
		xr := x[r*dim : (r+1)*dim]
		var ss float64
		for _, v := range xr {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(dim)+eps)
		or := out[r*dim : (r+1)*dim]
		for i, v := range xr {
			or[i] = v * s * w[i]
		}
	}
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// gelu is GELU in its tanh form (gemma's gelu_pytorch_tanh).
func gelu(x float64) float64 {
	const c = 0.7978845608028654 // sqrt(2/pi)
	return 0.5 * x * (1 + math.Tanh(c*x*(1+0.044715*x*x)))
}

// refRoPE rotates rows rows of x (heads x headDim each) by cos and sin
// (rows x ropeDim/2).
func refRoPE(x []float64, rows int, s kernels.RoPEShape, cos, sin []float32) {
	half := s.RopeDim / 2
	for r := 0; r < rows; r++ {
		for h := 0; h < s.Heads; h++ {
			v := x[(r*s.Heads+h)*s.HeadDim : (r*s.Heads+h+1)*s.HeadDim]
			for i := 0; i < half; i++ {
				a, b := 2*i, 2*i+1
				if s.Neox {
					a, b = i, i+half
				}
				c, sn := float64(cos[r*half+i]), float64(sin[r*half+i])
				x0, x1 := v[a], v[b]
				v[a] = x0*c - x1*sn
				v[b] = x0*sn + x1*c
			}
		}
	}
}

// visible reports whether batch row i sees slot j: by mask, or causally.
func visible(mask []bool, past, n, i, j int) bool {
	if mask != nil {
		return mask[i*(past+n)+j]
	}
	return j <= past+i
}

// refAttention: for each row i and head h, softmax over the visible slots
// of (q·k * scale, soft-capped) times v; k and v are slots x width.
func refAttention(q, k, v []float64, past, n int, mask []bool, s kernels.AttnShape) []float64 {
	hd, group, width := s.HeadDim, s.Heads/s.KVHeads, s.KVHeads*s.HeadDim
	out := make([]float64, n*s.Heads*hd)
	for i := 0; i < n; i++ {
		for h := 0; h < s.Heads; h++ {
			kh := h / group
			qv := q[(i*s.Heads+h)*hd : (i*s.Heads+h+1)*hd]
			var w []float64
			var slots []int
			m := math.Inf(-1)
			for j := 0; j < past+n; j++ {
				if !visible(mask, past, n, i, j) {
					continue
				}
				var d float64
				for t := range qv {
					d += qv[t] * k[j*width+kh*hd+t]
				}
				d *= float64(s.Scale)
				if s.Softcap > 0 {
					c := float64(s.Softcap)
					d = c * math.Tanh(d/c)
				}
				w, slots = append(w, d), append(slots, j)
				m = max(m, d)
			}
			var sum float64
			for x := range w {
				w[x] = math.Exp(w[x] - m)
				sum += w[x]
			}
			o := out[(i*s.Heads+h)*hd : (i*s.Heads+h+1)*hd]
			for x, j := range slots {
				p := w[x] / sum
				for t := range o {
					o[t] += p * v[j*width+kh*hd+t]
				}
			}
		}
	}
	return out
}

// roundKV rounds a value to what a cache of type t stores.
func roundKV(t quant.Type, v float64) float64 {
	if t == quant.F16 {
		return float64(quant.F16ToF32(quant.F32ToF16(float32(v))))
	}
	return float64(float32(v))
}

// dequantRows returns the rows of a ggml-layout matrix as float64.
func dequantRows(t quant.Type, data []byte, rows, cols int) ([][]float64, error) {
	rb, err := quant.RowBytes(t, cols)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, rows)
	buf := make([]float32, cols)
	for o := range out {
		if err := quant.Dequantize(t, data[o*rb:(o+1)*rb], buf); err != nil {
			return nil, err
		}
		out[o] = make([]float64, cols)
		for i, v := range buf {
			out[o][i] = float64(v)
		}
	}
	return out, nil
}
