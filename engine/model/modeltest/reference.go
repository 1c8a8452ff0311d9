package modeltest

import (
	"fmt"
	"math"
	"testing"

	"arborist/engine/gguf"
	"arborist/kernels/quant"
)

// refModel is a plain float64 implementation of the published Qwen3, Gemma 3
// and Phi-3 (longrope) architectures (Hugging Face's modeling_qwen3,
// modeling_gemma3, modeling_phi3),
// reading the GGUF's F32 tensors itself: the check on those families that
// the conformance kit does not cover. It shares no code with the engine.
type refModel struct {
	arch                       string
	dim, layers, heads, kv, hd int
	eps, base, scale           float64
	window                     int
	f                          *gguf.File
	// phi3 longrope: per-pair frequency divisors and the cos/sin factor
	factors []float64
	mscale  float64
}

func (r *refModel) tensor(t testing.TB, name string) []float64 {
	t.Helper()
	ti, data, err := r.f.TensorData(name)
	if err != nil {
		t.Fatal(err)
	}
	f32 := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, data, f32); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(f32))
	for i, v := range f32 {
		out[i] = float64(v)
	}
	return out
}

// matVec: W (rows of len(x)) times x.
func matVec(w, x []float64) []float64 {
	n := len(x)
	out := make([]float64, len(w)/n)
	for o := range out {
		var s float64
		for i, v := range x {
			s += w[o*n+i] * v
		}
		out[o] = s
	}
	return out
}

func rms(x, w []float64, eps float64) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	k := 1 / math.Sqrt(s/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * k * w[i]
	}
	return out
}

// ropeHalf rotates x (one head) NeoX style: pairs (i, i+hd/2), angle
// pos/scale * base^(-2i/hd) / factors[i], cos and sin times mscale.
func (r *refModel) ropeHalf(x []float64, pos int, base, scale float64) {
	half := len(x) / 2
	for i := 0; i < half; i++ {
		a := float64(pos) / scale * math.Pow(base, -2*float64(i)/float64(len(x)))
		ms := 1.0
		if r.factors != nil {
			a /= r.factors[i]
			ms = r.mscale
		}
		c, s := math.Cos(a)*ms, math.Sin(a)*ms
		x0, x1 := x[i], x[i+half]
		x[i], x[i+half] = x0*c-x1*s, x0*s+x1*c
	}
}

func gelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// forward returns the logits of every position of ids (causal).
func (r *refModel) forward(t testing.TB, ids []int) [][]float64 {
	gemma, phi := r.arch == "gemma3", r.arch == "phi3"
	emb := r.tensor(t, "token_embd.weight")
	vocab := len(emb) / r.dim
	xs := make([][]float64, len(ids))
	for i, id := range ids {
		xs[i] = append([]float64(nil), emb[id*r.dim:(id+1)*r.dim]...)
		if gemma {
			for j := range xs[i] {
				xs[i][j] *= math.Sqrt(float64(r.dim)) // Gemma3TextScaledWordEmbedding
			}
		}
	}
	group := r.heads / r.kv
	for l := 0; l < r.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		attnNorm, wo := r.tensor(t, p+"attn_norm.weight"), r.tensor(t, p+"attn_output.weight")
		ffnNorm, wd := r.tensor(t, p+"ffn_norm.weight"), r.tensor(t, p+"ffn_down.weight")
		var qn, kn, wq, wk, wv, wg, wu []float64
		if phi {
			// Phi3Attention.qkv_proj: rows Q, K, V; Phi3MLP.gate_up_proj: rows gate, up
			qkv, gu := r.tensor(t, p+"attn_qkv.weight"), r.tensor(t, p+"ffn_up.weight")
			q, kv := r.heads*r.hd*r.dim, r.kv*r.hd*r.dim
			wq, wk, wv = qkv[:q], qkv[q:q+kv], qkv[q+kv:]
			wg, wu = gu[:len(gu)/2], gu[len(gu)/2:]
		} else {
			qn, kn = r.tensor(t, p+"attn_q_norm.weight"), r.tensor(t, p+"attn_k_norm.weight")
			wq, wk, wv = r.tensor(t, p+"attn_q.weight"), r.tensor(t, p+"attn_k.weight"), r.tensor(t, p+"attn_v.weight")
			wg, wu = r.tensor(t, p+"ffn_gate.weight"), r.tensor(t, p+"ffn_up.weight")
		}
		// Gemma 3: five local (sliding, base 10000, unscaled) layers per global one
		sliding := gemma && (l+1)%6 != 0
		base, scale := r.base, r.scale
		if sliding {
			base, scale = 10000, 1
		}
		qs, ks, vs := make([][]float64, len(ids)), make([][]float64, len(ids)), make([][]float64, len(ids))
		for i, x := range xs {
			h := rms(x, attnNorm, r.eps)
			qs[i], ks[i], vs[i] = matVec(wq, h), matVec(wk, h), matVec(wv, h)
			for hh := 0; hh < r.heads; hh++ {
				q := qs[i][hh*r.hd : (hh+1)*r.hd]
				if qn != nil {
					copy(q, rms(q, qn, r.eps))
				}
				r.ropeHalf(q, i, base, scale)
			}
			for hh := 0; hh < r.kv; hh++ {
				k := ks[i][hh*r.hd : (hh+1)*r.hd]
				if kn != nil {
					copy(k, rms(k, kn, r.eps))
				}
				r.ropeHalf(k, i, base, scale)
			}
		}
		out := make([][]float64, len(ids))
		for i := range xs {
			att := make([]float64, r.heads*r.hd)
			for hh := 0; hh < r.heads; hh++ {
				q := qs[i][hh*r.hd : (hh+1)*r.hd]
				kh := hh / group
				var ws []float64
				var js []int
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					if (sliding || phi) && i-j >= r.window {
						continue
					}
					k := ks[j][kh*r.hd : (kh+1)*r.hd]
					var s float64
					for d := range q {
						s += q[d] * k[d]
					}
					s /= math.Sqrt(float64(r.hd)) // query_pre_attn_scalar = head_dim
					ws, js = append(ws, s), append(js, j)
					mx = math.Max(mx, s)
				}
				var sum float64
				for m := range ws {
					ws[m] = math.Exp(ws[m] - mx)
					sum += ws[m]
				}
				o := att[hh*r.hd : (hh+1)*r.hd]
				for m, j := range js {
					v := vs[j][kh*r.hd : (kh+1)*r.hd]
					for d := range o {
						o[d] += ws[m] / sum * v[d]
					}
				}
			}
			out[i] = matVec(wo, att)
		}
		var postAttn, postFFN []float64
		if gemma {
			postAttn, postFFN = r.tensor(t, p+"post_attention_norm.weight"), r.tensor(t, p+"post_ffw_norm.weight")
		}
		for i, x := range xs {
			o := out[i]
			if gemma {
				o = rms(o, postAttn, r.eps)
			}
			for d := range x {
				x[d] += o[d]
			}
			h := rms(x, ffnNorm, r.eps)
			g, u := matVec(wg, h), matVec(wu, h)
			for d := range g {
				if gemma {
					g[d] = gelu(g[d]) * u[d]
				} else {
					g[d] = silu(g[d]) * u[d]
				}
			}
			f := matVec(wd, g)
			if gemma {
				f = rms(f, postFFN, r.eps)
			}
			for d := range x {
				x[d] += f[d]
			}
		}
	}
	outNorm := r.tensor(t, "output_norm.weight")
	head := emb
	if _, ok := r.f.Tensor("output.weight"); ok {
		head = r.tensor(t, "output.weight")
	}
	logits := make([][]float64, len(ids))
	for i, x := range xs {
		logits[i] = matVec(head, rms(x, outNorm, r.eps))
		if len(logits[i]) != vocab {
			t.Fatalf("head gives %d logits, vocabulary %d", len(logits[i]), vocab)
		}
	}
	return logits
}
