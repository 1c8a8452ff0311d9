package hidden

import (
	"math"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"arborist/engine/sample"
)

// net is the float64 training copy of a drafter beside the target's frozen
// parts (embedding, final norm, output head). Training runs in float64 so
// the hand-written gradients can be checked against finite differences.
//
// One training sequence is unrolled over K levels (the curriculum depth).
// Level 0 reads the target's hidden states H_0..H_{T-2}; level j reads the
// outputs of level j-1, so its row t sits at position t+j and is the
// drafter's (j+1)-step prediction from the true prefix H_<=t. A query at
// (level j, row t) attends to the true rows 0..t of level 0 and to its own
// branch, rows t of levels 1..j: exactly what the decoder sees after j
// drafted steps. Level j row t predicts H_{t+j+1}; its logits add the
// token-info of token t+j+1 and are compared with the target's logits there.
type net struct {
	s       Shape
	lay     []Block
	p, g    []float64
	emb     []float64 // Vocab x Dim, frozen
	head    []float64 // Vocab x Dim, frozen
	outNorm []float64 // Dim, frozen
	mseW    float64
	klW     float64
}

// seq is one self-distilled training sequence.
type seq struct {
	tokens []int
	h      []float32 // T x Dim: the target's hidden states
	z      []float32 // T x Vocab: the target's logits
}

// level holds one unrolled level's activations.
type level struct {
	rows                                   int
	x, a, q, k, v, att, x1, b, gt, u, s, y []float64
	ra, rb, ro                             []float64 // inverse RMS per row
	xo, ul, pd                             []float64 // head input, token-info U, drafter distribution
	cos, sin                               []float64
	p                                      [][]float64 // attention weights per (row, head)
	dk, dv                                 []float64   // gradients reaching this level's keys and values
}

// lossParts are one level's loss components, summed over rows.
type lossParts struct {
	mse, kl  float64 // sums: squared error over rows and dims; KL over rows
	agree, n int     // top-1 agreements, rows
	sqN      int     // rows*dims
}

func gemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	ta, tb := blas.NoTrans, blas.NoTrans
	ar, ac := m, k
	if tA {
		ta, ar, ac = blas.Trans, k, m
	}
	br, bc := k, n
	if tB {
		tb, br, bc = blas.Trans, n, k
	}
	blas64.Gemm(ta, tb, alpha,
		blas64.General{Rows: ar, Cols: ac, Stride: lda, Data: a[:(ar-1)*lda+ac]},
		blas64.General{Rows: br, Cols: bc, Stride: ldb, Data: b[:(br-1)*ldb+bc]},
		beta, blas64.General{Rows: m, Cols: n, Stride: ldc, Data: c[:(m-1)*ldc+n]})
}

// linear: y (rows x out) = x (rows x in) · W^T.
func linear(y, x, w []float64, rows, in, out int) {
	gemm(false, true, rows, out, in, 1, x, in, w, in, 0, y, out)
}

// linearBack accumulates dW += dy^T x and dx += dy W.
func linearBack(dx, dw, dy, x, w []float64, rows, in, out int) {
	gemm(true, false, out, in, rows, 1, dy, out, x, in, 1, dw, in)
	if dx != nil {
		gemm(false, false, rows, in, out, 1, dy, out, w, in, 1, dx, in)
	}
}

func (n *net) block(i int) []float64 {
	b := n.lay[i]
	return n.p[b.Off : b.Off+b.Size()]
}

func (n *net) grad(i int) []float64 {
	b := n.lay[i]
	return n.g[b.Off : b.Off+b.Size()]
}

// float is the element type of the two training networks: float64 for the
// reference whose gradients are checked, float32 for training.
type float interface{ ~float32 | ~float64 }

// rmsNorm64: out = x / rms(x) * w per row; r[row] = 1/rms (the sum of
// squares is taken in float64 for both element types).
func rmsNorm64[F float](out, r, x, w []F, rows, dim int, eps float64) {
	for i := 0; i < rows; i++ {
		xr := x[i*dim : (i+1)*dim]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := F(1 / math.Sqrt(ss/float64(dim)+eps))
		r[i] = inv
		or := out[i*dim : (i+1)*dim]
		for j, v := range xr {
			or[j] = v * inv * w[j]
		}
	}
}

// rmsNormBack adds to dx the gradient through out = x*r*w, and to dw (when
// not nil) the weight gradient.
func rmsNormBack[F float](dx, dw, dout, x, r, w []F, rows, dim int) {
	for i := 0; i < rows; i++ {
		xr, dr := x[i*dim:(i+1)*dim], dout[i*dim:(i+1)*dim]
		inv := r[i]
		var dot float64
		for j := range xr {
			dot += float64(dr[j] * w[j] * xr[j])
		}
		c := inv * inv * inv * F(dot/float64(dim))
		dxr := dx[i*dim : (i+1)*dim]
		for j := range xr {
			dxr[j] += inv*dr[j]*w[j] - xr[j]*c
			if dw != nil {
				dw[j] += dr[j] * xr[j] * inv
			}
		}
	}
}

// ropeTables fills cos/sin for rows at positions first..first+rows-1, built
// like the model package builds them (repeated multiplication).
func ropeTables[F float](s Shape, cos, sin []F, rows, first int) {
	half := s.RopeDim / 2
	scale := math.Pow(float64(s.RopeBase), -2.0/float64(s.RopeDim))
	for i := 0; i < rows; i++ {
		theta := float64(first + i)
		for j := 0; j < half; j++ {
			t := theta / float64(s.RopeScale)
			cos[i*half+j], sin[i*half+j] = F(math.Cos(t)), F(math.Sin(t))
			theta *= scale
		}
	}
}

// rope rotates each head of each row by the tables; inverse rotates back
// (the gradient of a rotation is its inverse).
func rope[F float](s Shape, x []F, rows, heads int, cos, sin []F, inverse bool) {
	hd, half := s.HeadDim, s.RopeDim/2
	w := heads * hd
	for i := 0; i < rows; i++ {
		c, sn := cos[i*half:(i+1)*half], sin[i*half:(i+1)*half]
		for h := 0; h < heads; h++ {
			v := x[i*w+h*hd : i*w+(h+1)*hd]
			for j := 0; j < half; j++ {
				a, b := 2*j, 2*j+1
				if s.RopeNeox {
					a, b = j, j+half
				}
				sj := sn[j]
				if inverse {
					sj = -sj
				}
				x0, x1 := v[a], v[b]
				v[a] = x0*c[j] - x1*sj
				v[b] = x0*sj + x1*c[j]
			}
		}
	}
}

// keys calls f for every key (level, row) that query (lv, t) attends to.
func keys(lv, t int, f func(l, r int)) {
	for r := 0; r <= t; r++ {
		f(0, r)
	}
	for l := 1; l <= lv; l++ {
		f(l, t)
	}
}

// parallelKV runs f over the key/value heads in two halves (each half owns
// its heads' columns, so gradient writes never collide).
func parallelKV(kvHeads int, f func(kh int)) {
	var wg sync.WaitGroup
	parts := 2
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for kh := p; kh < kvHeads; kh += parts {
				f(kh)
			}
		}(p)
	}
	wg.Wait()
}

// targetLogits returns the target's logits at every position of sq (T x
// Vocab): the stored ones, or head(norm(H_t)), which is how the target
// computes them.
func (n *net) targetLogits(sq *seq) []float64 {
	T, V, dim := len(sq.tokens), n.s.Vocab, n.s.Dim
	if sq.z != nil {
		return to64(sq.z[:T*V])
	}
	xo, r := make([]float64, T*dim), make([]float64, T)
	rmsNorm64(xo, r, to64(sq.h[:T*dim]), n.outNorm, T, dim, float64(n.s.Eps))
	z := make([]float64, T*V)
	linear(z, xo, n.head, T, dim, V)
	return z
}

// forward runs one sequence through K levels, returning each level's loss
// parts; info are the tokens whose token-info is added (noised in training).
// It keeps the activations for backward.
func (n *net) forward(sq *seq, info []int, K int) ([]*level, []lossParts) {
	s := n.s
	T := len(sq.tokens)
	dim, qd, kvd, f, V, D := s.Dim, s.qDim(), s.kvDim(), s.FFN, s.Vocab, s.D
	K = min(K, T-1)
	lvs := make([]*level, K)
	parts := make([]lossParts, K)
	hd, group := s.HeadDim, s.Heads/s.KVHeads
	scale := 1 / math.Sqrt(float64(hd))
	z := n.targetLogits(sq)
	for j := 0; j < K; j++ {
		R := T - 1 - j
		L := &level{rows: R}
		lvs[j] = L
		mk := func(w int) []float64 { return make([]float64, R*w) }
		L.x = mk(dim)
		if j == 0 {
			for i := range L.x {
				L.x[i] = float64(sq.h[i])
			}
		} else {
			copy(L.x, lvs[j-1].y[:R*dim])
		}
		L.a, L.ra = mk(dim), make([]float64, R)
		rmsNorm64(L.a, L.ra, L.x, n.block(bAttnNorm), R, dim, float64(s.Eps))
		L.q, L.k, L.v = mk(qd), mk(kvd), mk(kvd)
		linear(L.q, L.a, n.block(bQ), R, dim, qd)
		linear(L.k, L.a, n.block(bK), R, dim, kvd)
		linear(L.v, L.a, n.block(bV), R, dim, kvd)
		half := s.RopeDim / 2
		L.cos, L.sin = mk(half), mk(half)
		ropeTables(s, L.cos, L.sin, R, j)
		rope(s, L.q, R, s.Heads, L.cos, L.sin, false)
		rope(s, L.k, R, s.KVHeads, L.cos, L.sin, false)
		L.att = mk(qd)
		L.p = make([][]float64, R*s.Heads)
		parallelKV(s.KVHeads, func(kh int) {
			for h := kh * group; h < (kh+1)*group; h++ {
				for t := 0; t < R; t++ {
					qv := L.q[t*qd+h*hd : t*qd+(h+1)*hd]
					p := make([]float64, t+1+j)
					mx := math.Inf(-1)
					i := 0
					keys(j, t, func(l, r int) {
						kv := lvs[l].k[r*kvd+kh*hd : r*kvd+(kh+1)*hd]
						var d float64
						for e := range qv {
							d += qv[e] * kv[e]
						}
						p[i] = d * scale
						mx = math.Max(mx, p[i])
						i++
					})
					var sum float64
					for i := range p {
						p[i] = math.Exp(p[i] - mx)
						sum += p[i]
					}
					o := L.att[t*qd+h*hd : t*qd+(h+1)*hd]
					i = 0
					keys(j, t, func(l, r int) {
						p[i] /= sum
						vv := lvs[l].v[r*kvd+kh*hd : r*kvd+(kh+1)*hd]
						for e := range o {
							o[e] += p[i] * vv[e]
						}
						i++
					})
					L.p[t*s.Heads+h] = p
				}
			}
		})
		L.x1 = mk(dim)
		linear(L.x1, L.att, n.block(bO), R, qd, dim)
		for i := range L.x1 {
			L.x1[i] += L.x[i]
		}
		L.b, L.rb = mk(dim), make([]float64, R)
		rmsNorm64(L.b, L.rb, L.x1, n.block(bFFNNorm), R, dim, float64(s.Eps))
		L.gt, L.u, L.s = mk(f), mk(f), mk(f)
		linear(L.gt, L.b, n.block(bGate), R, dim, f)
		linear(L.u, L.b, n.block(bUp), R, dim, f)
		for i, g := range L.gt {
			L.s[i] = g / (1 + math.Exp(-g)) * L.u[i]
		}
		L.y = mk(dim)
		linear(L.y, L.s, n.block(bDown), R, f, dim)
		for i := range L.y {
			L.y[i] += L.x1[i]
		}
		// loss head: logits = head(norm(y)) + W2 · W1 · emb(info[t+j+1])
		L.xo, L.ro = mk(dim), make([]float64, R)
		rmsNorm64(L.xo, L.ro, L.y, n.outNorm, R, dim, float64(s.Eps))
		L.pd = mk(V)
		linear(L.pd, L.xo, n.head, R, dim, V)
		e := mk(dim)
		for t := 0; t < R; t++ {
			tok := info[t+j+1]
			copy(e[t*dim:(t+1)*dim], n.emb[tok*dim:(tok+1)*dim])
		}
		L.ul = mk(D)
		linear(L.ul, e, n.block(bW1), R, dim, D)
		gemm(false, true, R, V, D, 1, L.ul, D, n.block(bW2), D, 1, L.pd, V)
		pt := make([]float64, V)
		lp := &parts[j]
		for t := 0; t < R; t++ {
			tau := t + j + 1
			row := L.pd[t*V : (t+1)*V]
			softmax64(row, row)
			softmax64(pt, z[tau*V:(tau+1)*V])
			for i, p := range pt {
				if p > 0 {
					lp.kl += p * (math.Log(p) - math.Log(math.Max(row[i], 1e-300)))
				}
			}
			if sample.Argmax(row) == sample.Argmax(pt) {
				lp.agree++
			}
			ht := sq.h[tau*dim : (tau+1)*dim]
			yr := L.y[t*dim : (t+1)*dim]
			for i, v := range ht {
				d := yr[i] - float64(v)
				lp.mse += d * d
			}
		}
		lp.n, lp.sqN = R, R*dim
	}
	return lvs, parts
}

// backward accumulates into n.g the gradient of the loss
// sum_j (mseW * MSE_j + klW * KL_j) / K, each level's terms averaged over
// its rows, times weight.
func (n *net) backward(sq *seq, info []int, lvs []*level, weight float64) {
	s := n.s
	K := len(lvs)
	dim, qd, kvd, f, V, D := s.Dim, s.qDim(), s.kvDim(), s.FFN, s.Vocab, s.D
	hd, group := s.HeadDim, s.Heads/s.KVHeads
	scale := 1 / math.Sqrt(float64(hd))
	for _, L := range lvs {
		L.dk, L.dv = make([]float64, L.rows*kvd), make([]float64, L.rows*kvd)
	}
	var dnext []float64 // gradient reaching level j's output from level j+1's input
	pt := make([]float64, V)
	z := n.targetLogits(sq)
	for j := K - 1; j >= 0; j-- {
		L := lvs[j]
		R := L.rows
		mk := func(w int) []float64 { return make([]float64, R*w) }
		w := weight / float64(K)
		// loss head
		dlog := mk(V)
		for t := 0; t < R; t++ {
			tau := t + j + 1
			softmax64(pt, z[tau*V:(tau+1)*V])
			c := w * n.klW / float64(R)
			for i := 0; i < V; i++ {
				dlog[t*V+i] = c * (L.pd[t*V+i] - pt[i])
			}
		}
		dy := mk(dim)
		if dnext != nil {
			copy(dy, dnext)
		}
		c := w * n.mseW * 2 / float64(R*dim)
		for t := 0; t < R; t++ {
			tau := t + j + 1
			for i := 0; i < dim; i++ {
				dy[t*dim+i] += c * (L.y[t*dim+i] - float64(sq.h[tau*dim+i]))
			}
		}
		dxo := mk(dim)
		gemm(false, false, R, dim, V, 1, dlog, V, n.head, dim, 0, dxo, dim)
		rmsNormBack(dy, nil, dxo, L.y, L.ro, n.outNorm, R, dim)
		// token-info: dW2 += dlog^T U, dU = dlog W2, dW1 += dU^T e
		gemm(true, false, V, D, R, 1, dlog, V, L.ul, D, 1, n.grad(bW2), D)
		du := mk(D)
		gemm(false, false, R, D, V, 1, dlog, V, n.block(bW2), D, 0, du, D)
		e := mk(dim)
		for t := 0; t < R; t++ {
			tok := info[t+j+1]
			copy(e[t*dim:(t+1)*dim], n.emb[tok*dim:(tok+1)*dim])
		}
		gemm(true, false, D, dim, R, 1, du, D, e, dim, 1, n.grad(bW1), dim)
		// feed-forward block: y = x1 + Down · (silu(g) * u)
		dx1 := append([]float64(nil), dy...)
		ds := mk(f)
		linearBack(ds, n.grad(bDown), dy, L.s, n.block(bDown), R, f, dim)
		dg, du2 := mk(f), mk(f)
		for i, g := range L.gt {
			sg := 1 / (1 + math.Exp(-g))
			silu := g * sg
			du2[i] = ds[i] * silu
			dg[i] = ds[i] * L.u[i] * sg * (1 + g*(1-sg))
		}
		db := mk(dim)
		linearBack(db, n.grad(bGate), dg, L.b, n.block(bGate), R, dim, f)
		linearBack(db, n.grad(bUp), du2, L.b, n.block(bUp), R, dim, f)
		rmsNormBack(dx1, n.grad(bFFNNorm), db, L.x1, L.rb, n.block(bFFNNorm), R, dim)
		// attention block: x1 = x + O · att
		datt := mk(qd)
		linearBack(datt, n.grad(bO), dx1, L.att, n.block(bO), R, qd, dim)
		dq := mk(qd)
		parallelKV(s.KVHeads, func(kh int) {
			for h := kh * group; h < (kh+1)*group; h++ {
				for t := 0; t < R; t++ {
					p := L.p[t*s.Heads+h]
					do := datt[t*qd+h*hd : t*qd+(h+1)*hd]
					qv := L.q[t*qd+h*hd : t*qd+(h+1)*hd]
					dp := make([]float64, len(p))
					var dot float64
					i := 0
					keys(j, t, func(l, r int) {
						vv := lvs[l].v[r*kvd+kh*hd : r*kvd+(kh+1)*hd]
						dvv := lvs[l].dv[r*kvd+kh*hd : r*kvd+(kh+1)*hd]
						var d float64
						for e := range do {
							d += do[e] * vv[e]
							dvv[e] += p[i] * do[e]
						}
						dp[i] = d
						dot += p[i] * d
						i++
					})
					dqv := dq[t*qd+h*hd : t*qd+(h+1)*hd]
					i = 0
					keys(j, t, func(l, r int) {
						dsc := p[i] * (dp[i] - dot) * scale
						kv := lvs[l].k[r*kvd+kh*hd : r*kvd+(kh+1)*hd]
						dkv := lvs[l].dk[r*kvd+kh*hd : r*kvd+(kh+1)*hd]
						for e := range dqv {
							dqv[e] += dsc * kv[e]
							dkv[e] += dsc * qv[e]
						}
						i++
					})
				}
			}
		})
		// every query that reads this level's keys has run: un-rotate and
		// back through the projections
		rope(s, dq, R, s.Heads, L.cos, L.sin, true)
		rope(s, L.dk, R, s.KVHeads, L.cos, L.sin, true)
		da := mk(dim)
		linearBack(da, n.grad(bQ), dq, L.a, n.block(bQ), R, dim, qd)
		linearBack(da, n.grad(bK), L.dk, L.a, n.block(bK), R, dim, kvd)
		linearBack(da, n.grad(bV), L.dv, L.a, n.block(bV), R, dim, kvd)
		dx := dx1
		rmsNormBack(dx, n.grad(bAttnNorm), da, L.x, L.ra, n.block(bAttnNorm), R, dim)
		if j > 0 {
			dnext = make([]float64, lvs[j-1].rows*dim)
			copy(dnext, dx)
		}
	}
}

func softmax64[F float](dst, x []F) {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v) - mx)
		dst[i] = F(e)
		sum += e
	}
	inv := F(1 / sum)
	for i := range dst {
		dst[i] *= inv
	}
}

// loss combines summed parts into the training objective over K levels.
func (n *net) loss(parts []lossParts) (total, mse, kl float64) {
	K := float64(len(parts))
	for _, p := range parts {
		m, k := p.mse/float64(p.sqN), p.kl/float64(p.n)
		mse += m / K
		kl += k / K
	}
	return n.mseW*mse + n.klW*kl, mse, kl
}
