package hidden

import (
	"fmt"
	"math"

	"arborist/engine/sample"
	"arborist/kernels"
)

// fnet is the float32 training network: the same unrolled levels, loss and
// gradients as net (the float64 reference the tests check it against), with
// every matrix product on the host math (tm's Gemm) over the float32
// values in place (its packing folds the backward pass's transposes,
// dx = dy · W and dW = dy^T · x, into the copy every blocked product makes
// anyway; with prec BF16 the packing also rounds the inputs to bfloat16,
// the sums stay float32) and attention split over heads on the backend's
// workers.
//
// The products run on the host whatever the target's backend: the
// parameters change after every update, and a device matrix is a copy made
// when it is created, so a drafter trained through device matrices would
// compute with its first weights.
type fnet struct {
	s       Shape
	lay     []Block
	be      kernels.Backend // for its workers (kernels.ParallelFor)
	p, g    []float32
	emb     []float32 // Vocab x Dim, frozen
	hd      []float32 // the target's head (Vocab x Dim), frozen
	outNorm []float32
	mseW    float32
	klW     float32
	ar      *arena            // this worker's scratch, reused sequence after sequence
	pk      *packs            // the weights packed for the products, shared by the workers
	tm      kernels.TrainMath // the host math every product runs on (trainMath)
	// prec is the products' input precision (Settings.Products): every
	// product's, packed or not, so a pass never mixes them.
	prec kernels.Precision
}

// flevel holds one unrolled level's activations in float32.
type flevel struct {
	rows                                   int
	x, a, q, k, v, att, x1, b, gt, u, s, y []float32
	sg                                     []float32 // sigmoid(gt), kept for the backward pass
	ra, rb, ro                             []float32
	xo, ul, pd, e                          []float32
	cos, sin                               []float32
	p                                      []float32 // attention weights, all (head, row) pairs: prow
	j, heads, span                         int
	dk, dv                                 []float32
	kT, vT                                 []float32 // k and v transposed (level 0: transposedKV)
	st                                     *stacked  // the levels' product operands side by side (every level shares it)
	off                                    int       // this level's first row in st
	ek, ev                                 []float32 // levels 1..j's keys and values, packed (packLevels)
}

// transposedKV returns the level's keys and values transposed (width
// rows of L.rows), made once and kept: every deeper level reads them.
func (L *flevel) transposedKV(ar *arena, width int) (kT, vT []float32) {
	if L.kT == nil {
		L.kT, L.vT = ar.dirty(L.rows*width), ar.dirty(L.rows*width)
		transpose(L.kT, L.k[:L.rows*width], L.rows, width)
		transpose(L.vT, L.v[:L.rows*width], L.rows, width)
	}
	return L.kT, L.vT
}

// arena is a worker's scratch for one sequence's activations and
// gradients: taken slice by slice, zeroed, and all given back by reset
// when the worker's next sequence begins (targetDist). A pass took a fresh
// slice for every activation, tens of MiB a sequence, and the page faults,
// collections and returned pages that followed cost a seventh of the
// trainer's time. It keeps the largest sequence's worth between calls.
type arena struct {
	chunks  [][]float32
	at, off int
	poison  bool // tests: dirty fills with NaN, so a value read before it is written shows
}

func (a *arena) reset() { a.at, a.off = 0, 0 }

// take returns n zeroed values valid until the next reset.
func (a *arena) take(n int) []float32 {
	s := a.dirty(n)
	clear(s)
	return s
}

// dirty is take without the zeroing, for outputs written whole (the
// forward pass's: products that overwrite, norms, copies).
func (a *arena) dirty(n int) []float32 {
	for ; a.at < len(a.chunks); a.at, a.off = a.at+1, 0 {
		if c := a.chunks[a.at]; a.off+n <= len(c) {
			s := c[a.off : a.off+n : a.off+n]
			a.off += n
			a.fill(s)
			return s
		}
	}
	c := make([]float32, max(n, 1<<20))
	a.chunks = append(a.chunks, c)
	a.at, a.off = len(a.chunks)-1, n
	a.fill(c[:n])
	return c[:n:n]
}

func (a *arena) fill(s []float32) {
	if a.poison {
		for i := range s {
			s[i] = float32(math.NaN())
		}
	}
}

// packs holds every weight matrix packed for TrainMath.GemmPacked, as the
// forward product (x · W^T) and the backward one (dy · W) read it, so a
// weight is packed once an update rather than once a product. valid says
// the packs match the parameters: pack sets it, and whoever changes the
// parameters clears it (the products then fall back to packing as they
// go, so a stale pack is never read).
type packs struct {
	fwd, back      [bW2 + 1]kernels.Packed // by a matrix's first block
	head, headBack kernels.Packed          // the target's frozen head, packed once
	valid          bool
}

// newPacks returns empty packs for tm's products.
func newPacks(tm kernels.TrainMath) *packs {
	pk := &packs{head: tm.NewPacked(), headBack: tm.NewPacked()}
	for i := range pk.fwd {
		pk.fwd[i], pk.back[i] = tm.NewPacked(), tm.NewPacked()
	}
	return pk
}

// trainMath is the host math the trainer's and the source's products run
// on: the host backend's (kernels.LookupHost), whatever backend the target
// runs on.
func trainMath() (kernels.TrainMath, error) {
	r, err := kernels.LookupHost()
	if err != nil {
		return nil, fmt.Errorf("hidden: %w", err)
	}
	return r.Host, nil
}

// pack packs the current parameters; call it before a batch's passes.
func (n *fnet) pack() {
	for _, m := range matrices {
		w, _, out, in := n.span(m)
		n.pk.fwd[m.first].PackAt(n.prec, w, out, in, true)
		n.pk.back[m.first].PackAt(n.prec, w, in, out, false)
	}
	n.pk.valid = true
}

// changed marks the packs stale after the parameters change.
func (n *fnet) changed() { n.pk.valid = false }

// setPrecision makes every product of n (and of workers made after it)
// run at prec: the frozen head is packed again, the weights' packs are
// stale until the next pack.
func (n *fnet) setPrecision(prec kernels.Precision) {
	n.prec = prec
	n.pk.head.PackAt(prec, n.hd, n.s.Vocab, n.s.Dim, true)
	n.pk.headBack.PackAt(prec, n.hd, n.s.Dim, n.s.Vocab, false)
	n.changed()
}

// newFNet makes the float32 training copy of d beside target's frozen
// parts; be lends its workers to attention and the loss. The host backend
// is linked into every binary that trains (profiles/pairs links it, and
// Settings.Validate has found it), so its absence is a build's mistake and
// panics.
func newFNet(d *Drafter, n64 *net, be kernels.Backend) *fnet {
	tm, err := trainMath()
	if err != nil {
		panic(err)
	}
	s := d.Shape
	n := &fnet{s: s, lay: d.Layout(), be: be, mseW: float32(n64.mseW), klW: float32(n64.klW), ar: &arena{}, pk: newPacks(tm), tm: tm}
	n.p = append([]float32(nil), d.P...)
	n.g = make([]float32, len(n.p))
	n.emb = to32(n64.emb)
	n.hd = to32(n64.head)
	n.outNorm = to32(n64.outNorm)
	n.setPrecision(kernels.PrecisionF32)
	return n
}

// workers returns count copies of n that share its parameters and frozen
// parts but own their gradient, each on a one-thread CPU backend of its
// own (the host backend's, by name): sequences then train side by side
// with no synchronisation inside a pass (on a busy machine every hand-off
// between threads can cost a scheduler time slice).
func (n *fnet) workers(count int) []*fnet {
	if count <= 1 {
		return []*fnet{n}
	}
	out := make([]*fnet, count)
	for i := range out {
		w := *n
		be, err := kernels.Open(kernels.HostBackend, 1)
		if err != nil {
			panic(err) // newFNet found the host backend
		}
		w.be = be
		w.g = make([]float32, len(n.p))
		w.ar = &arena{}
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

// mul: y (rows x out) = x (rows x in) · W^T, or += when add, for the
// weight W (out x in) with values w.
func (n *fnet) mul(y, w, x []float32, rows, out, in int, add bool) {
	n.tm.Gemm(n.prec, y, x, w, rows, out, in, false, true, add)
}

// matrix is one weight matrix of the products: blocks first..last, laid
// out one after another with the same width, so Q, K and V (and gate and
// up) are one matrix and one product serves them (one packing of the
// input, one pass over the output's gradient).
type matrix struct{ first, last int }

var (
	mQKV  = matrix{bQ, bV}
	mO    = matrix{bO, bO}
	mGU   = matrix{bGate, bUp}
	mDown = matrix{bDown, bDown}
	mW1   = matrix{bW1, bW1}
	mW2   = matrix{bW2, bW2}
	// matrices lists them all, for pack
	matrices = [...]matrix{mQKV, mO, mGU, mDown, mW1, mW2}
)

// span returns m's values, gradient and shape (rows x cols).
func (n *fnet) span(m matrix) (w, g []float32, rows, cols int) {
	a, b := n.lay[m.first], n.lay[m.last]
	end := b.Off + b.Size()
	return n.p[a.Off:end], n.g[a.Off:end], (end - a.Off) / a.Cols, a.Cols
}

// fwd is mul for weight matrix m.
func (n *fnet) fwd(y []float32, m matrix, x []float32, rows int, add bool) {
	if n.pk.valid {
		n.tm.GemmPacked(y, x, n.pk.fwd[m.first], rows, false, add)
		return
	}
	w, _, out, in := n.span(m)
	n.mul(y, w, x, rows, out, in, add)
}

// mulBack: dx (rows x in) = dy (rows x out) · W, or += when add, for the
// weight W (out x in) with values w.
func (n *fnet) mulBack(dx, w, dy []float32, rows, out, in int, add bool) {
	n.tm.Gemm(n.prec, dx, dy, w, rows, in, out, false, false, add)
}

// back is mulBack for weight matrix m.
func (n *fnet) back(dx []float32, m matrix, dy []float32, rows int, add bool) {
	if n.pk.valid {
		n.tm.GemmPacked(dx, dy, n.pk.back[m.first], rows, false, add)
		return
	}
	w, _, out, in := n.span(m)
	n.mulBack(dx, w, dy, rows, out, in, add)
}

// wgrad adds to m's gradient dy^T · x (dy: rows x m's rows, x: rows x
// m's columns).
func (n *fnet) wgrad(m matrix, dy, x []float32, rows int) {
	_, g, out, in := n.span(m)
	n.weightGrad(g, dy, x, rows, in, out)
}

// weightGrad: dW (out x in) += dy^T · x for dy (rows x out) and x (rows x
// in).
func (n *fnet) weightGrad(dw, dy, x []float32, rows, in, out int) {
	n.tm.Gemm(n.prec, dw, dy, x, out, in, rows, true, false, true)
}

// tdist is the target's next-token distribution at positions 1..T-1 of a
// sequence (row t-1 for position t) and each row's sum p log p.
type tdist struct {
	p   []float32
	ent []float64
}

// targetDist computes the target's distributions for sq: from the stored
// logits when the sequence has them, else from head(norm(H_t)), which is
// how the target computes them. It begins the worker's next sequence: the
// worker's arena is reset, so the levels and distribution of the sequence
// before are no longer valid.
func (n *fnet) targetDist(sq *seq) tdist {
	T, V, dim := len(sq.tokens), n.s.Vocab, n.s.Dim
	n.ar.reset()
	out := tdist{p: n.ar.dirty((T - 1) * V), ent: make([]float64, T-1)}
	if sq.z != nil {
		copy(out.p, sq.z[V:T*V])
	} else {
		xo, r := n.ar.dirty((T-1)*dim), n.ar.dirty(T-1)
		rmsNorm64(xo, r, sq.h[dim:T*dim], n.outNorm, T-1, dim, float64(n.s.Eps))
		n.tm.GemmPacked(out.p, xo, n.pk.head, T-1, false, false)
	}
	kernels.ParallelFor(n.be, T-1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			// sum p log p = sum p z - lse: no logarithm per entry
			lse, mean := n.tm.Softmax(out.p[t*V : (t+1)*V])
			out.ent[t] = mean - lse
		}
	})
	return out
}

// stacked holds, for every weight matrix, the inputs of its products at
// all levels of a sequence one level after another (and, in the backward
// pass, their output gradients the same way), so each weight gradient is
// one product over all the levels' rows (about 480) rather than one a
// level over about 160: a third of the calls, of the gradient's reads and
// writes, and of the packing.
type stacked struct {
	rows                         int // all levels' rows
	a, att, b, s, e, ul          []float32
	dqkv, dx1, dgu, dy, du, dlog []float32
}

// at returns level L's rows (width w) of the stacked array x.
func (L *flevel) at(x []float32, w int) []float32 { return x[L.off*w : (L.off+L.rows)*w] }

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
	hd := s.HeadDim
	st := &stacked{}
	for j := 0; j < K; j++ {
		st.rows += T - 1 - j
	}
	st.a, st.att, st.b = n.ar.dirty(st.rows*dim), n.ar.dirty(st.rows*qd), n.ar.dirty(st.rows*dim)
	st.s, st.e, st.ul = n.ar.dirty(st.rows*f), n.ar.dirty(st.rows*dim), n.ar.dirty(st.rows*D)
	off := 0
	for j := 0; j < K; j++ {
		R := T - 1 - j
		L := &flevel{rows: R, st: st, off: off}
		off += R
		lvs[j] = L
		mk := func(w int) []float32 { return n.ar.dirty(R * w) } // every forward buffer is written whole
		L.x = mk(dim)
		if j == 0 {
			copy(L.x, sq.h[:R*dim])
		} else {
			copy(L.x, lvs[j-1].y[:R*dim])
		}
		L.a, L.ra = L.at(st.a, dim), mk(1)
		rmsNorm64(L.a, L.ra, L.x, n.block(bAttnNorm), R, dim, float64(s.Eps))
		L.q, L.k, L.v = mk(qd), mk(kvd), mk(kvd)
		qkv := mk(qd + 2*kvd)
		n.fwd(qkv, mQKV, L.a, R, false)
		moveCols(qkv, R, true, cols{L.q, qd}, cols{L.k, kvd}, cols{L.v, kvd})
		half := s.RopeDim / 2
		L.cos, L.sin = mk(half), mk(half)
		ropeTables(s, L.cos, L.sin, R, j)
		rope(s, L.q, R, s.Heads, L.cos, L.sin, false)
		rope(s, L.k, R, s.KVHeads, L.cos, L.sin, false)
		L.att = L.at(st.att, qd)
		L.j, L.heads, L.span = j, s.Heads, kernels.TrainRowBase(R, j)
		L.p = n.ar.dirty(s.Heads * L.span)
		// query (level j, row t) reads keys (0, 0..t) and (1..j, t): level
		// 0's keys and values transposed (a row per channel, so a query's
		// scores are hd products along the keys rather than t products of
		// hd values: heads can be 8 wide), the other levels' packed per
		// key/value head; one call per head
		kT, vT := lvs[0].transposedKV(n.ar, kvd)
		L.ek, L.ev = packLevels(n.ar, lvs[1:j+1], R, kvd, hd, false), packLevels(n.ar, lvs[1:j+1], R, kvd, hd, true)
		kernels.ParallelFor(n.be, s.Heads, func(lo, hi int) {
			for h := lo; h < hi; h++ {
				a := n.attention(L, h, lvs[0].rows, kT, vT)
				n.tm.TrainForward(a, L.att[h*hd:], qd)
			}
		})
		L.x1 = mk(dim)
		copy(L.x1, L.x)
		n.fwd(L.x1, mO, L.att, R, true)
		L.b, L.rb = L.at(st.b, dim), mk(1)
		rmsNorm64(L.b, L.rb, L.x1, n.block(bFFNNorm), R, dim, float64(s.Eps))
		L.gt, L.u, L.s, L.sg = mk(f), mk(f), L.at(st.s, f), mk(f)
		gu := mk(2 * f)
		n.fwd(gu, mGU, L.b, R, false)
		moveCols(gu, R, true, cols{L.gt, f}, cols{L.u, f})
		n.tm.SiLUGate(L.s, L.sg, L.gt, L.u)
		L.y = mk(dim)
		copy(L.y, L.x1)
		n.fwd(L.y, mDown, L.s, R, true)
		// loss head: logits = head(norm(y)) + W2 · W1 · emb(info[t+j+1])
		L.xo, L.ro = mk(dim), mk(1)
		rmsNorm64(L.xo, L.ro, L.y, n.outNorm, R, dim, float64(s.Eps))
		L.pd = mk(V)
		n.tm.GemmPacked(L.pd, L.xo, n.pk.head, R, false, false)
		L.e = L.at(st.e, dim)
		for t := 0; t < R; t++ {
			tok := info[t+j+1]
			copy(L.e[t*dim:(t+1)*dim], n.emb[tok*dim:(tok+1)*dim])
		}
		L.ul = L.at(st.ul, D)
		n.fwd(L.ul, mW1, L.e, R, false)
		n.fwd(L.pd, mW2, L.ul, R, true)
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
				lse, _ := n.tm.Softmax(row)
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

// attention describes query head h of level L for TrainMath's attention:
// level 0's transposed keys and values (r0 rows) and L's packed extra
// levels, for the head's key/value head.
func (n *fnet) attention(L *flevel, h, r0 int, kT, vT []float32) *kernels.TrainAttention {
	s := n.s
	hd := s.HeadDim
	kh := h / (s.Heads / s.KVHeads)
	e := packedAt(kh, L.j, 0, L.rows, 0, hd)
	return &kernels.TrainAttention{
		Q: L.q[h*hd:], QStride: s.qDim(), KT: kT[kh*hd*r0:], VT: vT[kh*hd*r0:], R0: r0,
		EK: L.ek[e:], EV: L.ev[e:], J: L.j, Rows: L.rows, HeadDim: hd,
		Scale: float32(1 / math.Sqrt(float64(hd))), P: L.p[h*L.span:],
	}
}

// packedAt is where packLevels puts the hd channels of key/value head kh
// of packed level li (0-based; J levels of rows rows) at row t: each key/
// value head's levels one after another, as kernels.TrainAttention reads them.
func packedAt(kh, J, li, rows, t, hd int) int { return ((kh*J+li)*rows + t) * hd }

// eachPacked calls f for every row t < rows and key/value head of the
// levels: at is where the row's head sits in the level's (rows x kvd)
// arrays, o where packLevels puts it.
func eachPacked(lvs []*flevel, rows, kvd, hd int, f func(L *flevel, at, o int)) {
	for li, L := range lvs {
		for t := 0; t < rows; t++ {
			for kh := 0; kh < kvd/hd; kh++ {
				f(L, t*kvd+kh*hd, packedAt(kh, len(lvs), li, rows, t, hd))
			}
		}
	}
}

// packLevels packs rows 0..rows-1 of the levels' keys (values when v) for
// kernels.TrainAttention (packedAt).
func packLevels(ar *arena, lvs []*flevel, rows, kvd, hd int, v bool) []float32 {
	out := ar.dirty(len(lvs) * rows * kvd)
	eachPacked(lvs, rows, kvd, hd, func(L *flevel, at, o int) {
		src := L.k
		if v {
			src = L.v
		}
		copy(out[o:o+hd], src[at:at+hd])
	})
	return out
}

// unpackLevels adds gradients packed as packLevels packs into the levels'
// dk (dv when v).
func unpackLevels(lvs []*flevel, g []float32, rows, kvd, hd int, v bool) {
	eachPacked(lvs, rows, kvd, hd, func(L *flevel, at, o int) {
		dst := L.dk
		if v {
			dst = L.dv
		}
		for i, x := range g[o : o+hd] {
			dst[at+i] += x
		}
	})
}

// backward accumulates into n.g the gradient of the loss (as net.backward).
func (n *fnet) backward(sq *seq, info []int, lvs []*flevel, weight float64, td tdist) {
	pt := td.p
	s := n.s
	K := len(lvs)
	dim, qd, kvd, f, V, D := s.Dim, s.qDim(), s.kvDim(), s.FFN, s.Vocab, s.D
	hd, group := s.HeadDim, s.Heads/s.KVHeads
	for _, L := range lvs {
		L.dk, L.dv = n.ar.take(L.rows*kvd), n.ar.take(L.rows*kvd)
	}
	st := lvs[0].st
	st.dqkv, st.dx1, st.dgu = n.ar.dirty(st.rows*(qd+2*kvd)), n.ar.dirty(st.rows*dim), n.ar.dirty(st.rows*2*f)
	st.dy, st.du, st.dlog = n.ar.take(st.rows*dim), n.ar.dirty(st.rows*D), n.ar.dirty(st.rows*V)
	var dnext []float32
	for j := K - 1; j >= 0; j-- {
		L := lvs[j]
		R := L.rows
		mk := func(w int) []float32 { return n.ar.take(R * w) }
		w := weight / float64(K)
		// loss head
		dlog := L.at(st.dlog, V)
		c := float32(w * float64(n.klW) / float64(R))
		for t := 0; t < R; t++ {
			ptr := pt[(t+j)*V : (t+j+1)*V]
			pd := L.pd[t*V : (t+1)*V]
			dl := dlog[t*V : (t+1)*V]
			for i := range dl {
				dl[i] = c * (pd[i] - ptr[i])
			}
		}
		dy := L.at(st.dy, dim)
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
		n.tm.GemmPacked(dxo, dlog, n.pk.headBack, R, false, false)
		rmsNormBack(dy, nil, dxo, L.y, L.ro, n.outNorm, R, dim)
		// token-info: dW2 += dlog^T U, dU = dlog W2, dW1 += dU^T e
		du := L.at(st.du, D)
		n.back(du, mW2, dlog, R, false)
		// feed-forward block: y = x1 + Down · (silu(g) * u)
		dx1 := mk(dim)
		copy(dx1, dy)
		ds := mk(f)
		n.back(ds, mDown, dy, R, false)
		dg, du2 := ds, mk(f) // dg overwrites ds in place
		for i, g := range L.gt {
			sg := L.sg[i]
			d := ds[i]
			du2[i] = d * g * sg
			dg[i] = d * L.u[i] * sg * (1 + g*(1-sg))
		}
		db := mk(dim)
		dgu := L.at(st.dgu, 2*f)
		moveCols(dgu, R, false, cols{dg, f}, cols{du2, f})
		n.back(db, mGU, dgu, R, false)
		rmsNormBack(dx1, n.grad(bFFNNorm), db, L.x1, L.rb, n.block(bFFNNorm), R, dim)
		// attention block: x1 = x + O · att
		datt := mk(qd)
		copy(L.at(st.dx1, dim), dx1) // dx1 goes on to take the attention norm's gradient
		n.back(datt, mO, dx1, R, false)
		dq := mk(qd)
		// each key/value head's queries run on one worker, so the writes to
		// its keys' and values' gradients never collide; level 0's are
		// gathered transposed and the other levels' packed (as the forward
		// pass reads them), then added in
		R0 := lvs[0].rows
		kT, vT := lvs[0].transposedKV(n.ar, kvd)
		dkT, dvT := n.ar.take(R0*kvd), n.ar.take(R0*kvd)
		dek, dev := n.ar.take(len(L.ek)), n.ar.take(len(L.ev))
		kernels.ParallelFor(n.be, s.KVHeads, func(lo, hi int) {
			scratch := make([]float32, R+j)
			for kh := lo; kh < hi; kh++ {
				e := packedAt(kh, j, 0, R, 0, hd)
				for h := kh * group; h < (kh+1)*group; h++ {
					a := n.attention(L, h, R0, kT, vT)
					n.tm.TrainBackward(a, datt[h*hd:], qd, dq[h*hd:], qd, dkT[kh*hd*R0:], dvT[kh*hd*R0:], dek[e:], dev[e:], scratch)
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
		unpackLevels(lvs[1:j+1], dek, R, kvd, hd, false)
		unpackLevels(lvs[1:j+1], dev, R, kvd, hd, true)
		rope(s, dq, R, s.Heads, L.cos, L.sin, true)
		rope(s, L.dk, R, s.KVHeads, L.cos, L.sin, true)
		da := mk(dim)
		dqkv := L.at(st.dqkv, qd+2*kvd)
		moveCols(dqkv, R, false, cols{dq, qd}, cols{L.dk, kvd}, cols{L.dv, kvd})
		n.back(da, mQKV, dqkv, R, false)
		dx := dx1
		rmsNormBack(dx, n.grad(bAttnNorm), da, L.x, L.ra, n.block(bAttnNorm), R, dim)
		if j > 0 {
			dnext = dx
		}
	}
	// the weight gradients, every level's rows in one product each
	n.wgrad(mW2, st.dlog, st.ul, st.rows)
	n.wgrad(mW1, st.du, st.e, st.rows)
	n.wgrad(mDown, st.dy, st.s, st.rows)
	n.wgrad(mGU, st.dgu, st.b, st.rows)
	n.wgrad(mO, st.dx1, st.att, st.rows)
	n.wgrad(mQKV, st.dqkv, st.a, st.rows)
}

// cols is an array of rows of width w, one of the arrays a fused
// product's output (or gradient) is split into (joined from).
type cols struct {
	v []float32
	w int
}

// moveCols copies between wide (rows x the parts' widths summed) and the
// parts side by side: into the parts when split (a fused product's output
// into Q, K and V), from them otherwise (their gradients into one
// product's).
func moveCols(wide []float32, rows int, split bool, parts ...cols) {
	w := 0
	for _, p := range parts {
		w += p.w
	}
	for t := 0; t < rows; t++ {
		off := t * w
		for _, p := range parts {
			part, whole := p.v[t*p.w:(t+1)*p.w], wide[off:off+p.w]
			if split {
				copy(part, whole)
			} else {
				copy(whole, part)
			}
			off += p.w
		}
	}
}
