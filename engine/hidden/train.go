package hidden

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"arborist/assets"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels"
)

// Progress reports training as it goes.
type Progress struct {
	Phase       string // "data", "train" or "eval"
	Done, Total int    // within the phase (tokens for data, batches for train)
	Epoch       int    // 0-based epoch being trained
	Depth       int    // its curriculum depth
	Loss        float64
	Record      *Epoch // set when an epoch has finished
}

// Trainer distils a drafter from its target. Data comes from the target
// itself: each prompt is continued by the target (sampled at Settings.Temp),
// and its hidden states and logits at every position are the labels.
type Trainer struct {
	Target   *model.Model
	Prompts  [][]int // tokenized, BOS included where the model wants it
	Settings Settings
	// Progress, when set, receives progress (from the training goroutine).
	Progress func(Progress)
	// Checkpoint, when set, is called after each epoch with the drafter and
	// the state to resume from (nil after the last epoch); an error stops
	// training.
	Checkpoint func(d *Drafter, st *State) error
	// Fingerprint identifies the target in the data cache's key.
	Fingerprint string
	// Cache, when set, keeps the generated data for the next run.
	Cache DataCache
	// Cached reports that Generate found the data in Cache.
	Cached bool

	data, heldOut []*seq
	corpusAdded   bool
}

// DepthAt is the curriculum: 1 on the first epoch, rising evenly to the
// configured depth on the last.
func (s *Settings) DepthAt(epoch int) int {
	if s.Epochs <= 1 {
		return s.Depth
	}
	return 1 + epoch*(s.Depth-1)/(s.Epochs-1)
}

// Generate produces the self-distilled data (once per Trainer): every
// prompt is continued Settings.Samples times, sample i at temperature
// Temps[i mod len(Temps)] with its own seed. When Cache is set, data
// generated before for the same target, prompts and settings is reused,
// and new data is stored there.
func (tr *Trainer) Generate(ctx context.Context) error {
	if tr.data != nil {
		return nil
	}
	s := &tr.Settings
	if len(tr.Prompts) == 0 {
		return fmt.Errorf("hidden: no prompts to generate training data from")
	}
	tr.addCorpus()
	key := tr.DataKey()
	var all []*seq
	if tr.Cache != nil {
		blob, err := tr.Cache.LoadData(ctx, key)
		if err != nil {
			return fmt.Errorf("hidden: reading cached training data: %w", err)
		}
		if blob != nil {
			if all, err = decodeData(blob, tr.Target.Dim, tr.Target.Vocab); err != nil {
				return fmt.Errorf("hidden: cached training data: %w", err)
			}
			tr.Cached = true
		}
	}
	if all == nil {
		var err error
		if all, err = tr.generate(ctx); err != nil {
			return err
		}
		if tr.Cache != nil {
			if err := tr.Cache.SaveData(context.WithoutCancel(ctx), key, encodeData(all, tr.Target.Dim)); err != nil {
				return fmt.Errorf("hidden: caching training data: %w", err)
			}
		}
	}
	if len(all) == 0 {
		return fmt.Errorf("hidden: the prompts gave no usable training sequences")
	}
	// the held-out sequences are spread over the prompts (every k-th), so
	// they are not all continuations of the last prompts
	nh := 0
	if s.HeldOut > 0 && len(all) >= 2 {
		nh = max(1, int(math.Round(s.HeldOut*float64(len(all)))))
		nh = min(nh, len(all)-1)
	}
	tr.data, tr.heldOut = nil, nil
	for i, sq := range all {
		if nh > 0 && (i*nh)%len(all) < nh && len(tr.heldOut) < nh {
			tr.heldOut = append(tr.heldOut, sq)
		} else {
			tr.data = append(tr.data, sq)
		}
	}
	return nil
}

// addCorpus appends the built-in prompt corpus to the prompts (once) when
// the settings ask for it, keeping at most MaxPrompts of them in all (the
// given prompts first, assets.TrainingPrompts): the training's size.
func (tr *Trainer) addCorpus() {
	if tr.corpusAdded {
		return
	}
	tr.corpusAdded = true
	var corpus [][]int
	if tr.Settings.Corpus {
		for _, t := range assets.CorpusPrompts() {
			corpus = append(corpus, tr.Target.Tok.Encode(t, true, false))
		}
	}
	tr.Prompts = assets.TrainingPrompts(tr.Prompts, corpus, tr.Settings.MaxPrompts)
}

// temps is the list of sampling temperatures of the generated data.
func (s *Settings) temps() []float64 {
	if len(s.Temps) > 0 {
		return s.Temps
	}
	return []float64{s.Temp}
}

// DataKey identifies the generated data: the target's fingerprint, the
// tokenized prompts and the settings that shape the data.
func (tr *Trainer) DataKey() string {
	h := sha256.New()
	s := &tr.Settings
	fmt.Fprintf(h, "v1 %s %d %d %v %d|", tr.Fingerprint, s.Tokens, s.Samples, s.temps(), s.Seed)
	for _, p := range tr.Prompts {
		fmt.Fprintln(h, p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// genBatch is how many sequences are generated side by side in one cache:
// each decoding pass then reads the target's weights once for all of them.
const genBatch = 8

// generate continues every prompt Samples times, genBatch sequences at a
// time sharing one forward pass per token (a block-diagonal mask keeps them
// apart), recording the target's hidden state at every position.
func (tr *Trainer) generate(ctx context.Context) ([]*seq, error) {
	s := &tr.Settings
	m := tr.Target
	type job struct {
		prompt []int
		temp   float64
		seed   uint64
	}
	var jobs []job
	temps := s.temps()
	for si := 0; si < max(1, s.Samples); si++ {
		for pi, p := range tr.Prompts {
			if len(p) == 0 {
				continue
			}
			if len(p)+s.Tokens > m.CtxLen {
				p = p[:max(1, m.CtxLen-s.Tokens)]
			}
			n := si*len(tr.Prompts) + pi
			jobs = append(jobs, job{p, temps[si%len(temps)], s.Seed + uint64(n)*7919})
		}
	}
	total := len(jobs) * s.Tokens
	done := 0
	var all []*seq
	V, dim := m.Vocab, m.Dim
	scratch := make([]float32, V)
	var res model.Result
	for b0 := 0; b0 < len(jobs); b0 += genBatch {
		group := jobs[b0:min(len(jobs), b0+genBatch)]
		slots := 0
		for _, j := range group {
			slots += len(j.prompt) + s.Tokens
		}
		cache := m.NewCache(slots)
		seqs := make([]*seq, len(group))
		smp := make([]*sample.Sampler, len(group))
		owner := []int{} // cache slot -> sequence
		var toks, pos []int
		for i, j := range group {
			seqs[i] = &seq{tokens: append([]int(nil), j.prompt...)}
			smp[i] = sample.New(sample.Params{Temp: float32(j.temp), Seed: j.seed})
			for p, t := range j.prompt {
				toks = append(toks, t)
				pos = append(pos, p)
				owner = append(owner, i)
			}
		}
		rows := owner // the batch's rows, by sequence
		active := make([]int, len(group))
		for i := range active {
			active[i] = i
		}
		for step := 0; ; step++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			past := cache.Len()
			n := len(toks)
			mask := make([]bool, n*(past+n))
			for r := 0; r < n; r++ {
				row := mask[r*(past+n) : (r+1)*(past+n)]
				for sl, o := range owner[:past] {
					row[sl] = o == rows[r]
				}
				for c := 0; c <= r; c++ {
					row[past+c] = rows[c] == rows[r]
				}
			}
			if err := m.Forward(ctx, cache, model.Batch{Tokens: toks, Pos: pos, Mask: mask, Hidden: true}, &res); err != nil {
				return nil, fmt.Errorf("hidden: generating training data: %w", err)
			}
			if step > 0 {
				owner = append(owner, rows...)
			}
			for r, i := range rows {
				seqs[i].h = append(seqs[i].h, res.Hidden[r*dim:(r+1)*dim]...)
			}
			// the last row of each sequence chooses its next token
			last := map[int]int{}
			for r, i := range rows {
				last[i] = r
			}
			toks, pos, rows = toks[:0], pos[:0], nil
			next := active[:0]
			for _, i := range active {
				sq := seqs[i]
				if len(sq.tokens)-len(group[i].prompt) >= s.Tokens {
					continue
				}
				r := last[i]
				t := smp[i].Sample(res.Logits[r*V:(r+1)*V], scratch)
				if m.Tok.IsEOG(t) {
					continue
				}
				sq.tokens = append(sq.tokens, t)
				toks = append(toks, t)
				pos = append(pos, len(sq.tokens)-1)
				rows = append(rows, i)
				next = append(next, i)
			}
			active = next
			done += len(rows)
			if tr.Progress != nil {
				tr.Progress(Progress{Phase: "data", Done: done, Total: total})
			}
			if len(rows) == 0 {
				break
			}
		}
		for _, sq := range seqs {
			if len(sq.tokens) >= 3 {
				all = append(all, sq)
			}
		}
	}
	return all, nil
}

// Tokens counts the generated tokens (training, held out).
func (tr *Trainer) Tokens() (train, held int) {
	for _, s := range tr.data {
		train += len(s.tokens)
	}
	for _, s := range tr.heldOut {
		held += len(s.tokens)
	}
	return
}

// HotTokens ranks the training data's tokens by frequency (most frequent
// first, ties by id), keeping at most n, and reports the share of token
// occurrences they cover.
func (tr *Trainer) HotTokens(n int) ([]int, float64) {
	count := map[int]int{}
	total := 0
	for _, s := range tr.data {
		for _, t := range s.tokens {
			count[t]++
			total++
		}
	}
	ids := make([]int, 0, len(count))
	for t := range count {
		ids = append(ids, t)
	}
	sort.Slice(ids, func(a, b int) bool {
		if count[ids[a]] != count[ids[b]] {
			return count[ids[a]] > count[ids[b]]
		}
		return ids[a] < ids[b]
	})
	if len(ids) > n {
		ids = ids[:n]
	}
	cov := 0
	for _, t := range ids {
		cov += count[t]
	}
	if total == 0 {
		return ids, 0
	}
	return ids, float64(cov) / float64(total)
}

// newNet makes the float64 training copy of d beside target's frozen parts.
func newNet(d *Drafter, target *model.Model, set Settings) (*net, error) {
	if err := d.Fits(&target.Config); err != nil {
		return nil, err
	}
	n := &net{s: d.Shape, lay: d.Layout(), mseW: set.MSEWeight, klW: set.KLWeight}
	n.p = make([]float64, len(d.P))
	for i, v := range d.P {
		n.p[i] = float64(v)
	}
	n.g = make([]float64, len(d.P))
	V, dim := d.Vocab, d.Dim
	tmp := make([]float32, V*dim)
	if err := readTensor(target, "token_embd.weight", tmp); err != nil {
		return nil, err
	}
	n.emb = to64(tmp)
	name := "output.weight"
	if _, ok := target.File.Tensor(name); !ok {
		name = "token_embd.weight"
	}
	if err := readTensor(target, name, tmp); err != nil {
		return nil, err
	}
	n.head = to64(tmp)
	outNorm := make([]float32, target.Dim)
	target.Backend.Download(outNorm, target.OutNorm)
	n.outNorm = to64(outNorm)
	return n, nil
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Train trains d from st (nil: from scratch) until Settings.Epochs or
// early stopping, generating the data first if needed. Training runs in
// float32 on the target's backend (fnet). The learning rate warms up
// linearly over the first Warmup share of the updates, then follows a
// cosine to a tenth of LR. After every epoch the held-out acceptance
// (greedy agreement with the target at depths 1..Depth, reading the
// drafter's own states) is measured; d keeps the best epoch's weights, and
// training stops once Patience epochs at full depth bring no improvement.
// On cancellation it returns the context's error; the last checkpoint is
// the place to resume from.
func (tr *Trainer) Train(ctx context.Context, d *Drafter, st *State) error {
	s := tr.Settings
	if err := s.Validate(); err != nil {
		return err
	}
	if err := tr.Generate(ctx); err != nil {
		return err
	}
	if d.Hot == nil {
		d.Hot, _ = tr.HotTokens(s.Hot)
	}
	d.Settings = s
	n64, err := newNet(d, tr.Target, s)
	if err != nil {
		return err
	}
	n := newFNet(d, n64, tr.Target.Backend)
	prec, err := s.Products()
	if err != nil {
		return err
	}
	n.setPrecision(prec)
	ws := n.workers(tr.Target.Backend.Threads())
	defer closeWorkers(ws, n)
	P := len(n.p)
	m, v := make([]float32, P), make([]float32, P)
	epoch, step := 0, 0
	if st != nil {
		if len(st.M) != P || len(st.V) != P {
			return fmt.Errorf("hidden: resume state has %d moments for %d parameters", len(st.M), P)
		}
		epoch, step = st.Epoch, st.Step
		copy(m, st.M)
		copy(v, st.V)
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	V := d.Vocab
	perEpoch := (len(tr.data) + s.Batch - 1) / s.Batch
	totalSteps := perEpoch * s.Epochs
	warm := int(math.Ceil(s.Warmup * float64(totalSteps)))
	lrAt := func(step int) float64 {
		if step < warm {
			return s.LR * float64(step+1) / float64(warm)
		}
		f := float64(step-warm) / float64(max(1, totalSteps-warm))
		return s.LR * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*min(1, f))))
	}
	best, bestP, stale := -1.0, []float32(nil), 0
	for _, r := range d.Losses {
		if r.Accept > best {
			best = r.Accept
		}
	}
	for ; epoch < s.Epochs; epoch++ {
		t0 := time.Now()
		depth := s.DepthAt(epoch)
		rng := rand.New(rand.NewPCG(s.Seed, uint64(epoch)+1))
		order := rng.Perm(len(tr.data))
		var sum float64
		for bi := 0; bi < perEpoch; bi++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			clear(n.g)
			idx := order[bi*s.Batch : min(len(order), (bi+1)*s.Batch)]
			infos := make([][]int, len(idx))
			for k, i := range idx {
				info := append([]int(nil), tr.data[i].tokens...)
				for k := range info {
					if rng.Float64() < s.Noise {
						info[k] = rng.IntN(V)
					}
				}
				infos[k] = info
			}
			losses := make([]float64, len(idx))
			n.pack()
			parallel(len(ws), func(wi int) {
				w := ws[wi]
				if w != n {
					clear(w.g)
				}
				for k := wi; k < len(idx); k += len(ws) {
					sq := tr.data[idx[k]]
					pt := w.targetDist(sq)
					lvs, parts := w.forward(sq, infos[k], depth, pt)
					losses[k], _, _ = n64loss(w, parts)
					w.backward(sq, infos[k], lvs, 1/float64(len(idx)), pt)
				}
			})
			for _, w := range ws {
				if w != n {
					for i, g := range w.g {
						n.g[i] += g
					}
				}
			}
			var bl float64
			for _, l := range losses {
				bl += l / float64(len(idx))
			}
			sum += bl
			if s.Clip > 0 {
				var norm float64
				for _, g := range n.g {
					norm += float64(g) * float64(g)
				}
				if norm = math.Sqrt(norm); norm > s.Clip {
					c := float32(s.Clip / norm)
					for i := range n.g {
						n.g[i] *= c
					}
				}
			}
			lr := lrAt(step)
			step++
			c1, c2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
			a := float32(lr / c1)
			ic2 := float32(1 / c2)
			kernels.ParallelFor(n.be, P, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					g := n.g[i]
					m[i] = b1*m[i] + (1-b1)*g
					v[i] = b2*v[i] + (1-b2)*g*g
					n.p[i] -= a * m[i] / (float32(math.Sqrt(float64(v[i]*ic2))) + eps)
				}
			})
			n.changed()
			if tr.Progress != nil {
				tr.Progress(Progress{Phase: "train", Done: bi + 1, Total: perEpoch, Epoch: epoch, Depth: depth, Loss: bl})
			}
		}
		rec := tr.evaluate(n, s.Depth)
		rec.Epoch, rec.Depth = epoch+1, depth
		rec.Train = sum / float64(max(1, perEpoch))
		rec.LR = lrAt(step)
		rec.Seconds = time.Since(t0).Seconds()
		d.Losses = append(d.Losses, rec)
		if rec.Accept > best {
			best, stale = rec.Accept, 0
			bestP = append(bestP[:0], n.p...)
		} else if depth == s.Depth {
			stale++
		}
		stop := s.Patience > 0 && stale >= s.Patience
		last := epoch+1 == s.Epochs || stop
		copy(d.P, n.p)
		if last && bestP != nil {
			copy(d.P, bestP)
		}
		if tr.Progress != nil {
			tr.Progress(Progress{Phase: "eval", Epoch: epoch, Depth: depth, Loss: rec.HeldOut, Record: &rec})
		}
		if tr.Checkpoint != nil {
			var next *State
			if !last {
				next = &State{Epoch: epoch + 1, Step: step, M: append([]float32(nil), m...), V: append([]float32(nil), v...)}
			}
			if err := tr.Checkpoint(d, next); err != nil {
				return err
			}
		}
		if stop {
			break
		}
	}
	return nil
}

// parallel runs f(0..n-1) on n goroutines and waits for them.
func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// n64loss combines loss parts with the float32 network's weights.
func n64loss(n *fnet, parts []lossParts) (total, mse, kl float64) {
	r := net{mseW: float64(n.mseW), klW: float64(n.klW)}
	return r.loss(parts)
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// evaluate measures the held-out loss and agreement through depth levels
// (the training set when nothing is held out).
func (tr *Trainer) evaluate(n *fnet, depth int) Epoch {
	set := tr.heldOut
	if len(set) == 0 {
		set = tr.data
	}
	var e Epoch
	agree, rows := make([]int, depth), make([]int, depth)
	sqe, sqn := make([]float64, depth), make([]int, depth)
	var ss float64
	var cnt int
	mean := make([]float64, n.s.Dim)
	// at f32 whatever the training products run at: this is the
	// acceptance the served drafter gets
	if n.prec != kernels.PrecisionF32 {
		defer n.setPrecision(n.prec)
		n.setPrecision(kernels.PrecisionF32)
	}
	ws := n.workers(n.be.Threads())
	defer closeWorkers(ws, n)
	type result struct {
		l, mse, kl float64
		parts      []lossParts
	}
	res := make([]result, len(set))
	n.pack()
	parallel(len(ws), func(wi int) {
		for i := wi; i < len(set); i += len(ws) {
			pt := ws[wi].targetDist(set[i])
			_, parts := ws[wi].forward(set[i], set[i].tokens, depth, pt)
			r := &res[i]
			r.l, r.mse, r.kl = n64loss(n, parts)
			r.parts = parts
		}
	})
	for i, sq := range set {
		for i, v := range sq.h[n.s.Dim : len(sq.tokens)*n.s.Dim] { // the first state is never a prediction target
			ss += float64(v) * float64(v)
			mean[i%n.s.Dim] += float64(v)
			cnt++
		}
		r := res[i]
		e.HeldOut += r.l / float64(len(set))
		e.MSE += r.mse / float64(len(set))
		e.KL += r.kl / float64(len(set))
		for k, p := range r.parts {
			agree[k] += p.agree
			rows[k] += p.n
			sqe[k] += p.mse
			sqn[k] += p.sqN
		}
	}
	e.AgreeAt, e.MSEAt = make([]float64, depth), make([]float64, depth)
	for k := range sqe {
		if sqn[k] > 0 {
			e.MSEAt[k] = sqe[k] / float64(sqn[k])
		}
	}
	for k := range agree {
		if rows[k] > 0 {
			e.AgreeAt[k] = float64(agree[k]) / float64(rows[k])
		}
	}
	e.Agree = e.AgreeAt[0]
	// a greedy chain accepts its k-th token when the first k agree: the
	// expected accepted length per drafted token, with the depths taken as
	// independent, is the acceptance estimate early stopping follows
	run := 1.0
	for _, a := range e.AgreeAt {
		run *= a
		e.Accept += run / float64(depth)
	}
	if cnt > 0 {
		e.StateMS = ss / float64(cnt)
		// variance = mean square - the squared mean state's mean square
		rows := float64(cnt / n.s.Dim)
		var ms float64
		for _, m := range mean {
			ms += (m / rows) * (m / rows)
		}
		e.StateVar = e.StateMS - ms/float64(n.s.Dim)
	}
	return e
}

// Evaluate reports the held-out metrics of d at depth, without training.
func (tr *Trainer) Evaluate(ctx context.Context, d *Drafter, depth int) (Epoch, error) {
	if err := tr.Generate(ctx); err != nil {
		return Epoch{}, err
	}
	n64, err := newNet(d, tr.Target, tr.Settings)
	if err != nil {
		return Epoch{}, err
	}
	e := tr.evaluate(newFNet(d, n64, tr.Target.Backend), depth)
	e.Depth = depth
	return e, nil
}

// MemoryNeed estimates the live bytes training takes for a drafter of shape s
// over tokens generated tokens: the recorded hidden states, the frozen
// embedding and head in float64 and float32, parameters with gradients
// and Adam moments, and per worker one sequence's unrolled
// activations (seqLen positions, depth levels) and target distribution.
func MemoryNeed(s Shape, tokens, seqLen, depth, workers int) int64 {
	data := int64(tokens) * int64(s.Dim) * 4
	frozen := 2 * int64(s.Vocab) * int64(s.Dim) * (8 + 8)
	params := int64(s.Params()) * (8 + 4*4)
	perRow := int64(12*s.Dim+4*s.FFN+3*s.Vocab+s.Heads*(seqLen+depth)) * 4
	acts := int64(depth)*int64(seqLen)*perRow + int64(seqLen)*int64(s.Vocab)*4
	return data + frozen + params + int64(max(1, workers))*(acts+int64(s.Params())*4)
}
