package hidden

import (
	"fmt"
	"math"
	"unsafe"

	"arborist/engine/sample"
	"arborist/kernels"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// fnet is the float32 training network: the same unrolled levels, loss and
// gradients as net (the float64 reference the tests check it against), with
// every matrix product on the target's backend (its float32 kernels and
// worker threads) and attention split over heads on the backend's workers.
//
// The backend multiplies activations by prepared weight matrices
// (out = x · W^T), so each product of the backward pass is put in that form:
// dx = dy · W reads a transposed copy of W (refreshed after every update),
// dW = dy^T · x multiplies dy^T by x^T taken as a matrix.
type fnet struct {
	s       Shape
	lay     []Block
	be      kernels.Backend
	p, g    []float32
	pt      []float32 // the matrix blocks transposed (Cols x Rows), same offsets
	w, wt   [nBlocks]kernels.Matrix
	emb     []float32 // Vocab x Dim, frozen
	head    kernels.Matrix
	headT   kernels.Matrix
	hd, htd []float32 // head and its transpose
	outNorm []float32
	mseW    float32
	klW     float32
	tmp     []float32 // product scratch
	ta, tb  []float32 // transpose scratch
}

// flevel holds one unrolled level's activations in float32.
type flevel struct {
	rows                                   int
	x, a, q, k, v, att, x1, b, gt, u, s, y []float32
	ra, rb, ro                             []float32
	xo, ul, pd, e                          []float32
	cos, sin                               []float32
	p                                      []float32 // attention weights, all (head, row) pairs: prow
	j, heads, span                         int
	dk, dv                                 []float32
	kT, vT                                 []float32 // k and v transposed (level 0: transposedKV)
}

// transposedKV returns the level's keys and values transposed (width
// rows of L.rows), made once and kept: every deeper level reads them.
func (L *flevel) transposedKV(width int) (kT, vT []float32) {
	if L.kT == nil {
		L.kT, L.vT = make([]float32, L.rows*width), make([]float32, L.rows*width)
		transpose(L.kT, L.k[:L.rows*width], L.rows, width)
		transpose(L.vT, L.v[:L.rows*width], L.rows, width)
	}
	return L.kT, L.vT
}

// prow returns the attention weights of query row t, head h: t+1+j of them
// (keys 0..t of level 0, then row t of levels 1..j).
func (L *flevel) prow(t, h int) []float32 {
	base := h*L.span + t*(t+1)/2 + t*L.j
	return L.p[base : base+t+1+L.j]
}

// f32View returns p's bytes without copying (the backend's F32 matrices
// read them in place, so a view sees every later update of p).
func f32View(p []float32) []byte {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&p[0])), 4*len(p))
}

func (n *fnet) matrix(data []float32, rows, cols int) kernels.Matrix {
	m, err := n.be.NewMatrix(quant.F32, f32View(data[:rows*cols]), rows, cols)
	if err != nil {
		panic(fmt.Sprintf("hidden: an F32 matrix of %dx%d: %v", rows, cols, err)) // F32 of any width is supported
	}
	return m
}

// newFNet makes the float32 training copy of d beside target's frozen
// parts, on target's backend.
func newFNet(d *Drafter, n64 *net, be kernels.Backend) *fnet {
	n := &fnet{s: d.Shape, lay: d.Layout(), be: be, mseW: float32(n64.mseW), klW: float32(n64.klW)}
	n.p = append([]float32(nil), d.P...)
	n.g = make([]float32, len(n.p))
	n.pt = make([]float32, len(n.p))
	for i, b := range n.lay {
		if b.Rows == 1 {
			continue
		}
		n.w[i] = n.matrix(n.p[b.Off:], b.Rows, b.Cols)
		n.wt[i] = n.matrix(n.pt[b.Off:], b.Cols, b.Rows)
	}
	n.transposeAll()
	n.emb = to32(n64.emb)
	n.hd = to32(n64.head)
	n.htd = make([]float32, len(n.hd))
	transpose(n.htd, n.hd, d.Vocab, d.Dim)
	n.head = n.matrix(n.hd, d.Vocab, d.Dim)
	n.headT = n.matrix(n.htd, d.Dim, d.Vocab)
	n.outNorm = to32(n64.outNorm)
	return n
}

// workers returns count copies of n that share its parameters, transposes
// and frozen parts but own their gradient and scratch, each on a one-thread
// CPU backend of its own: sequences then train side by side with no
// synchronisation inside a pass (on a busy machine every hand-off between
// threads can cost a scheduler time slice). A backend other than the CPU
// one gets a single worker on itself.
func (n *fnet) workers(count int) []*fnet {
	if n.be.Name() != "cpu" || count <= 1 {
		return []*fnet{n}
	}
	out := make([]*fnet, count)
	for i := range out {
		w := *n
		w.be = cpu.New(1)
		w.g = make([]float32, len(n.p))
		w.tmp, w.ta, w.tb = nil, nil, nil
		out[i] = &w
	}
	return out
}

// close stops the workers' backends.
func closeWorkers(ws []*fnet, n *fnet) {
	for _, w := range ws {
		if w != n {
			w.be.Close()
		}
	}
}

// transposeAll refreshes the transposed copies after the parameters changed.
func (n *fnet) transposeAll() {
	kernels.ParallelFor(n.be, len(n.lay), func(lo, hi int) {
		for _, b := range n.lay[lo:hi] {
			if b.Rows > 1 {
				transpose(n.pt[b.Off:b.Off+b.Size()], n.p[b.Off:b.Off+b.Size()], b.Rows, b.Cols)
			}
		}
	})
}

// transpose writes src (rows x cols) transposed into dst (cols x rows), in
// tiles so both sides stay in cache.
func transpose(dst, src []float32, rows, cols int) {
	const t = 32
	for r0 := 0; r0 < rows; r0 += t {
		for c0 := 0; c0 < cols; c0 += t {
			for r := r0; r < min(r0+t, rows); r++ {
				row := src[r*cols : (r+1)*cols]
				for c := c0; c < min(c0+t, cols); c++ {
					dst[c*rows+r] = row[c]
				}
			}
		}
	}
}

func (n *fnet) block(i int) []float32 {
	b := n.lay[i]
	return n.p[b.Off : b.Off+b.Size()]
}

func (n *fnet) grad(i int) []float32 {
	b := n.lay[i]
	return n.g[b.Off : b.Off+b.Size()]
}

func (n *fnet) scratch(size int) []float32 {
	if cap(n.tmp) < size {
		n.tmp = make([]float32, size)
	}
	return n.tmp[:size]
}

// mulAdd: y (rows x out) += x (rows x in) · W^T.
func (n *fnet) mulAdd(y []float32, w kernels.Matrix, x []float32, rows int) {
	n.mul(y, w, x, rows, true)
}

// mul: y (rows x out) = x (rows x in) · W^T, or += when add. A CPU F32
// matrix (every matrix of training) goes through cpu.GemmNT, the blocked
// product made for training; others through the backend's MatMul.
func (n *fnet) mul(y []float32, w kernels.Matrix, x []float32, rows int, add bool) {
	if cm, ok := w.(*cpu.Matrix); ok {
		if wd := cm.F32(); wd != nil {
			cpu.GemmNT(y, x, wd, rows, w.Rows(), w.Cols(), add)
			return
		}
	}
	if !add {
		n.be.MatMul(y, w, x, rows)
		return
	}
	t := n.scratch(rows * w.Rows())
	n.be.MatMul(t, w, x, rows)
	for i, v := range t {
		y[i] += v
	}
}

// weightGrad: dW (out x in) += dy^T · x for dy (rows x out) and x (rows x
// in); xT, when not nil, is x already transposed (in x rows).
func (n *fnet) weightGrad(dw, dy, x, xT []float32, rows, in, out int) {
	if xT == nil {
		xT = n.transposed(&n.ta, x, rows, in)
	}
	dyT := n.transposed(&n.tb, dy, rows, out)
	cpu.GemmNT(dw, dyT, xT, out, in, rows, true)
}

func (n *fnet) transposed(buf *[]float32, x []float32, rows, cols int) []float32 {
	if cap(*buf) < rows*cols {
		*buf = make([]float32, rows*cols)
	}
	t := (*buf)[:rows*cols]
	transpose(t, x[:rows*cols], rows, cols)
	return t
}

// tdist is the target's next-token distribution at positions 1..T-1 of a
// sequence (row t-1 for position t) and each row's sum p log p.
type tdist struct {
	p   []float32
	ent []float64
}

// targetDist computes the target's distributions for sq: from the stored
// logits when the sequence has them, else from head(norm(H_t)), which is
// how the target computes them.
func (n *fnet) targetDist(sq *seq) tdist {
	T, V, dim := len(sq.tokens), n.s.Vocab, n.s.Dim
	out := tdist{p: make([]float32, (T-1)*V), ent: make([]float64, T-1)}
	if sq.z != nil {
		copy(out.p, sq.z[V:T*V])
	} else {
		xo, r := make([]float32, (T-1)*dim), make([]float32, T-1)
		rmsNorm64(xo, r, sq.h[dim:T*dim], n.outNorm, T-1, dim, float64(n.s.Eps))
		n.mul(out.p, n.head, xo, T-1, false)
	}
	kernels.ParallelFor(n.be, T-1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			row := out.p[t*V : (t+1)*V]
			// sum p log p with log p = z - lse: no logarithm per entry
			lse := logSumExp(row)
			var e float64
			for i, z := range row {
				lp := float64(z) - lse
				p := math.Exp(lp)
				row[i] = float32(p)
				e += p * lp
			}
			out.ent[t] = e
		}
	})
	return out
}

func logSumExp(x []float32) float64 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - mx))
	}
	return float64(mx) + math.Log(sum)
}

// softmaxLSE replaces x by softmax(x) and returns log sum exp(x).
func softmaxLSE(x []float32) float64 {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
	return float64(mx) + math.Log(sum)
}

// forward runs one sequence through K levels like net.forward; pt is
// targetDist(sq).
func (n *fnet) forward(sq *seq, info []int, K int, td tdist) ([]*flevel, []lossParts) {
	pt := td.p
	s := n.s
	T := len(sq.tokens)
	dim, qd, kvd, f, V, D := s.Dim, s.qDim(), s.kvDim(), s.FFN, s.Vocab, s.D
	K = min(K, T-1)
	lvs := make([]*flevel, K)
	parts := make([]lossParts, K)
	hd, group := s.HeadDim, s.Heads/s.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	for j := 0; j < K; j++ {
		R := T - 1 - j
		L := &flevel{rows: R}
		lvs[j] = L
		mk := func(w int) []float32 { return make([]float32, R*w) }
		L.x = mk(dim)
		if j == 0 {
			copy(L.x, sq.h[:R*dim])
		} else {
			copy(L.x, lvs[j-1].y[:R*dim])
		}
		L.a, L.ra = mk(dim), make([]float32, R)
		rmsNorm64(L.a, L.ra, L.x, n.block(bAttnNorm), R, dim, float64(s.Eps))
		L.q, L.k, L.v = mk(qd), mk(kvd), mk(kvd)
		n.mul(L.q, n.w[bQ], L.a, R, false)
		n.mul(L.k, n.w[bK], L.a, R, false)
		n.mul(L.v, n.w[bV], L.a, R, false)
		half := s.RopeDim / 2
		L.cos, L.sin = mk(half), mk(half)
		ropeTables(s, L.cos, L.sin, R, j)
		rope(s, L.q, R, s.Heads, L.cos, L.sin, false)
		rope(s, L.k, R, s.KVHeads, L.cos, L.sin, false)
		L.att = mk(qd)
		L.j, L.heads, L.span = j, s.Heads, R*(R+1)/2+R*j
		L.p = make([]float32, s.Heads*L.span)
		// query (level j, row t) reads keys (0, 0..t) and (1..j, t). The
		// level-0 keys and values are read transposed (a row per channel),
		// so a query's scores and output are hd products along the keys
		// rather than t products of hd values (heads can be 8 wide)
		R0 := lvs[0].rows
		kT, vT := lvs[0].transposedKV(kvd)
		kernels.ParallelFor(n.be, s.Heads*R, func(lo, hi int) {
			for it := lo; it < hi; it++ {
				h, t := it/R, it%R
				kh := h / group
				qv := L.q[t*qd+h*hd : t*qd+(h+1)*hd]
				p := L.prow(t, h)
				pr := p[:t+1]
				clear(pr)
				for d, qx := range qv {
					c := kh*hd + d
					axpy32(pr, qx, kT[c*R0:c*R0+t+1])
				}
				mx := float32(math.Inf(-1))
				for r := range pr {
					pr[r] *= scale
					mx = max(mx, pr[r])
				}
				for l := 1; l <= j; l++ {
					i := t + l
					p[i] = cpu.DotF32(qv, lvs[l].k[t*kvd+kh*hd:t*kvd+(kh+1)*hd]) * scale
					mx = max(mx, p[i])
				}
				var sum float32
				for i, v := range p {
					p[i] = float32(math.Exp(float64(v - mx)))
					sum += p[i]
				}
				inv := 1 / sum
				for i := range p {
					p[i] *= inv
				}
				o := L.att[t*qd+h*hd : t*qd+(h+1)*hd]
				for d := range o {
					c := kh*hd + d
					o[d] = cpu.DotF32(pr, vT[c*R0:c*R0+t+1])
				}
				for l := 1; l <= j; l++ {
					axpy32(o, p[t+l], lvs[l].v[t*kvd+kh*hd:t*kvd+(kh+1)*hd])
				}
			}
		})
		L.x1 = append([]float32(nil), L.x...)
		n.mulAdd(L.x1, n.w[bO], L.att, R)
		L.b, L.rb = mk(dim), make([]float32, R)
		rmsNorm64(L.b, L.rb, L.x1, n.block(bFFNNorm), R, dim, float64(s.Eps))
		L.gt, L.u, L.s = mk(f), mk(f), mk(f)
		n.mul(L.gt, n.w[bGate], L.b, R, false)
		n.mul(L.u, n.w[bUp], L.b, R, false)
		for i, g := range L.gt {
			L.s[i] = g / (1 + float32(math.Exp(float64(-g)))) * L.u[i]
		}
		L.y = append([]float32(nil), L.x1...)
		n.mulAdd(L.y, n.w[bDown], L.s, R)
		// loss head: logits = head(norm(y)) + W2 · W1 · emb(info[t+j+1])
		L.xo, L.ro = mk(dim), make([]float32, R)
		rmsNorm64(L.xo, L.ro, L.y, n.outNorm, R, dim, float64(s.Eps))
		L.pd = mk(V)
		n.mul(L.pd, n.head, L.xo, R, false)
		L.e = mk(dim)
		for t := 0; t < R; t++ {
			tok := info[t+j+1]
			copy(L.e[t*dim:(t+1)*dim], n.emb[tok*dim:(tok+1)*dim])
		}
		L.ul = mk(D)
		n.mul(L.ul, n.w[bW1], L.e, R, false)
		n.mulAdd(L.pd, n.w[bW2], L.ul, R)
		lp := &parts[j]
		type acc struct {
			kl, mse float64
			agree   int
		}
		accs := make([]acc, R)
		kernels.ParallelFor(n.be, R, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				tau := t + j + 1
				row := L.pd[t*V : (t+1)*V]
				ptr := pt[(tau-1)*V : tau*V]
				// KL = sum p log p - sum p log q, log q = logits - lse
				var cross float64
				for i, p := range ptr {
					cross += float64(p * row[i])
				}
				lse := softmaxLSE(row)
				kl := td.ent[tau-1] - (cross - lse)
				a := acc{kl: kl}
				if sample.Argmax(row) == sample.Argmax(ptr) {
					a.agree = 1
				}
				ht := sq.h[tau*dim : (tau+1)*dim]
				yr := L.y[t*dim : (t+1)*dim]
				for i, v := range ht {
					d := float64(yr[i] - v)
					a.mse += d * d
				}
				accs[t] = a
			}
		})
		for _, a := range accs {
			lp.kl += a.kl
			lp.mse += a.mse
			lp.agree += a.agree
		}
		lp.n, lp.sqN = R, R*dim
	}
	return lvs, parts
}

// axpy32: y += a * x.
func axpy32(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// backward accumulates into n.g the gradient of the loss (as net.backward).
func (n *fnet) backward(sq *seq, info []int, lvs []*flevel, weight float64, td tdist) {
	pt := td.p
	s := n.s
	K := len(lvs)
	dim, qd, kvd, f, V, D := s.Dim, s.qDim(), s.kvDim(), s.FFN, s.Vocab, s.D
	hd, group := s.HeadDim, s.Heads/s.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	for _, L := range lvs {
		L.dk, L.dv = make([]float32, L.rows*kvd), make([]float32, L.rows*kvd)
	}
	var dnext []float32
	for j := K - 1; j >= 0; j-- {
		L := lvs[j]
		R := L.rows
		mk := func(w int) []float32 { return make([]float32, R*w) }
		w := weight / float64(K)
		// loss head
		dlog := mk(V)
		c := float32(w * float64(n.klW) / float64(R))
		for t := 0; t < R; t++ {
			ptr := pt[(t+j)*V : (t+j+1)*V]
			pd := L.pd[t*V : (t+1)*V]
			dl := dlog[t*V : (t+1)*V]
			for i := range dl {
				dl[i] = c * (pd[i] - ptr[i])
			}
		}
		dy := mk(dim)
		if dnext != nil {
			copy(dy, dnext)
		}
		cm := float32(w * float64(n.mseW) * 2 / float64(R*dim))
		for t := 0; t < R; t++ {
			tau := t + j + 1
			ht := sq.h[tau*dim : (tau+1)*dim]
			yr, dr := L.y[t*dim:(t+1)*dim], dy[t*dim:(t+1)*dim]
			for i := range dr {
				dr[i] += cm * (yr[i] - ht[i])
			}
		}
		dxo := mk(dim)
		n.mul(dxo, n.headT, dlog, R, false)
		rmsNormBack(dy, nil, dxo, L.y, L.ro, n.outNorm, R, dim)
		// token-info: dW2 += dlog^T U, dU = dlog W2, dW1 += dU^T e
		n.weightGrad(n.grad(bW2), dlog, L.ul, nil, R, D, V)
		du := mk(D)
		n.mul(du, n.wt[bW2], dlog, R, false)
		n.weightGrad(n.grad(bW1), du, L.e, nil, R, dim, D)
		// feed-forward block: y = x1 + Down · (silu(g) * u)
		dx1 := append([]float32(nil), dy...)
		ds := mk(f)
		n.weightGrad(n.grad(bDown), dy, L.s, nil, R, f, dim)
		n.mul(ds, n.wt[bDown], dy, R, false)
		dg, du2 := ds, mk(f) // dg overwrites ds in place
		for i, g := range L.gt {
			sg := 1 / (1 + float32(math.Exp(float64(-g))))
			d := ds[i]
			du2[i] = d * g * sg
			dg[i] = d * L.u[i] * sg * (1 + g*(1-sg))
		}
		db := mk(dim)
		bT := n.transposed(&n.ta, L.b, R, dim)
		n.weightGrad(n.grad(bGate), dg, nil, bT, R, dim, f)
		n.weightGrad(n.grad(bUp), du2, nil, bT, R, dim, f)
		n.mulAdd(db, n.wt[bGate], dg, R)
		n.mulAdd(db, n.wt[bUp], du2, R)
		rmsNormBack(dx1, n.grad(bFFNNorm), db, L.x1, L.rb, n.block(bFFNNorm), R, dim)
		// attention block: x1 = x + O · att
		datt := mk(qd)
		n.weightGrad(n.grad(bO), dx1, L.att, nil, R, qd, dim)
		n.mul(datt, n.wt[bO], dx1, R, false)
		dq := mk(qd)
		// each key/value head's queries run on one worker, so the writes to
		// its keys' and values' gradients never collide
		// level 0's keys and values transposed (as the forward pass reads
		// them), and their gradients gathered transposed, then added in
		R0 := lvs[0].rows
		kT, vT := lvs[0].transposedKV(kvd)
		dkT, dvT := make([]float32, R0*kvd), make([]float32, R0*kvd)
		kernels.ParallelFor(n.be, s.KVHeads, func(lo, hi int) {
			dps := make([]float32, R+j)
			for kh := lo; kh < hi; kh++ {
				for h := kh * group; h < (kh+1)*group; h++ {
					for t := 0; t < R; t++ {
						p := L.prow(t, h)
						pr := p[:t+1]
						do := datt[t*qd+h*hd : t*qd+(h+1)*hd]
						qv := L.q[t*qd+h*hd : t*qd+(h+1)*hd]
						dqv := dq[t*qd+h*hd : t*qd+(h+1)*hd]
						dp := dps[:len(p)]
						dpr := dp[:t+1]
						clear(dpr)
						for d, g := range do {
							c := (kh*hd + d) * R0
							axpy32(dpr, g, vT[c:c+t+1]) // dp_r = do . v_r
							axpy32(dvT[c:c+t+1], g, pr) // dv_r += p_r do
						}
						for l := 1; l <= j; l++ {
							i, lv := t+l, lvs[l]
							axpy32(lv.dv[t*kvd+kh*hd:t*kvd+(kh+1)*hd], p[i], do)
							dp[i] = cpu.DotF32(do, lv.v[t*kvd+kh*hd:t*kvd+(kh+1)*hd])
						}
						dot := cpu.DotF32(p, dp)
						for i := range p {
							dp[i] = p[i] * (dp[i] - dot) * scale // the score's gradient
						}
						for d, qx := range qv {
							c := (kh*hd + d) * R0
							dqv[d] += cpu.DotF32(dpr, kT[c:c+t+1])
							axpy32(dkT[c:c+t+1], qx, dpr) // dk_r += dsc_r q
						}
						for l := 1; l <= j; l++ {
							i, lv := t+l, lvs[l]
							axpy32(dqv, dp[i], lv.k[t*kvd+kh*hd:t*kvd+(kh+1)*hd])
							axpy32(lv.dk[t*kvd+kh*hd:t*kvd+(kh+1)*hd], dp[i], qv)
						}
					}
				}
			}
		})
		d0 := lvs[0]
		for r := 0; r < R0; r++ {
			for c := 0; c < kvd; c++ {
				d0.dk[r*kvd+c] += dkT[c*R0+r]
				d0.dv[r*kvd+c] += dvT[c*R0+r]
			}
		}
		rope(s, dq, R, s.Heads, L.cos, L.sin, true)
		rope(s, L.dk, R, s.KVHeads, L.cos, L.sin, true)
		da := mk(dim)
		aT := n.transposed(&n.ta, L.a, R, dim)
		n.weightGrad(n.grad(bQ), dq, nil, aT, R, dim, qd)
		n.weightGrad(n.grad(bK), L.dk, nil, aT, R, dim, kvd)
		n.weightGrad(n.grad(bV), L.dv, nil, aT, R, dim, kvd)
		n.mulAdd(da, n.wt[bQ], dq, R)
		n.mulAdd(da, n.wt[bK], L.dk, R)
		n.mulAdd(da, n.wt[bV], L.dv, R)
		dx := dx1
		rmsNormBack(dx, n.grad(bAttnNorm), da, L.x, L.ra, n.block(bAttnNorm), R, dim)
		if j > 0 {
			dnext = dx
		}
	}
}
