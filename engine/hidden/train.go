package hidden

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"arborist/engine/model"
	"arborist/engine/sample"
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
	// the state to resume from; an error stops training.
	Checkpoint func(d *Drafter, st *State) error

	data, heldOut []*seq
}

// DepthAt is the curriculum: 1 on the first epoch, rising evenly to the
// configured depth on the last.
func (s *Settings) DepthAt(epoch int) int {
	if s.Epochs <= 1 {
		return s.Depth
	}
	return 1 + epoch*(s.Depth-1)/(s.Epochs-1)
}

// Generate produces the self-distilled data (once per Trainer).
func (tr *Trainer) Generate(ctx context.Context) error {
	if tr.data != nil {
		return nil
	}
	s := &tr.Settings
	if len(tr.Prompts) == 0 {
		return fmt.Errorf("hidden: no prompts to generate training data from")
	}
	m := tr.Target
	samples := max(1, s.Samples)
	total := len(tr.Prompts) * samples * s.Tokens
	done := 0
	var all []*seq
	for si := 0; si < len(tr.Prompts)*samples; si++ {
		pi := si % len(tr.Prompts)
		prompt := tr.Prompts[pi]
		if len(prompt) == 0 {
			continue
		}
		if len(prompt)+s.Tokens > m.CtxLen {
			prompt = prompt[:max(1, m.CtxLen-s.Tokens)]
		}
		smp := sample.New(sample.Params{Temp: float32(s.Temp), Seed: s.Seed + uint64(si)*7919})
		sq := &seq{tokens: append([]int(nil), prompt...)}
		cache := m.NewCache(len(prompt) + s.Tokens)
		var res model.Result
		scratch := make([]float32, m.Vocab)
		if err := m.Forward(ctx, cache, model.Batch{Tokens: prompt}, &res); err != nil {
			return fmt.Errorf("hidden: generating training data: %w", err)
		}
		sq.h = append(sq.h, res.Hidden...)
		sq.z = append(sq.z, res.Logits...)
		for g := 0; g < s.Tokens; g++ {
			last := res.Logits[len(res.Logits)-m.Vocab:]
			next := smp.Sample(last, scratch)
			if m.Tok.IsEOG(next) || cache.Len() >= cache.Cap() {
				break
			}
			sq.tokens = append(sq.tokens, next)
			if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{next}}, &res); err != nil {
				return fmt.Errorf("hidden: generating training data: %w", err)
			}
			sq.h = append(sq.h, res.Hidden...)
			sq.z = append(sq.z, res.Logits...)
			done++
			if tr.Progress != nil && done%16 == 0 {
				tr.Progress(Progress{Phase: "data", Done: done, Total: total})
			}
		}
		if len(sq.tokens) >= 3 {
			all = append(all, sq)
		}
	}
	if len(all) == 0 {
		return fmt.Errorf("hidden: the prompts gave no usable training sequences")
	}
	nh := 0
	if s.HeldOut > 0 && len(all) >= 2 {
		nh = max(1, int(math.Round(s.HeldOut*float64(len(all)))))
		nh = min(nh, len(all)-1)
	}
	tr.data, tr.heldOut = all[:len(all)-nh], all[len(all)-nh:]
	return nil
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
	n.outNorm = to64(target.OutNorm)
	return n, nil
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Train trains d from st (nil: from scratch) until Settings.Epochs,
// generating the data first if needed. On cancellation it returns the
// context's error; the last checkpoint is the place to resume from.
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
	n, err := newNet(d, tr.Target, s)
	if err != nil {
		return err
	}
	P := len(n.p)
	m, v := make([]float64, P), make([]float64, P)
	epoch, step := 0, 0
	if st != nil {
		if len(st.M) != P || len(st.V) != P {
			return fmt.Errorf("hidden: resume state has %d moments for %d parameters", len(st.M), P)
		}
		epoch, step = st.Epoch, st.Step
		m, v = to64(st.M), to64(st.V)
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	V := d.Vocab
	for ; epoch < s.Epochs; epoch++ {
		t0 := time.Now()
		depth := s.DepthAt(epoch)
		rng := rand.New(rand.NewPCG(s.Seed, uint64(epoch)+1))
		order := rng.Perm(len(tr.data))
		batches := (len(order) + s.Batch - 1) / s.Batch
		var sum float64
		for bi := 0; bi < batches; bi++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			clear(n.g)
			idx := order[bi*s.Batch : min(len(order), (bi+1)*s.Batch)]
			var bl float64
			for _, i := range idx {
				sq := tr.data[i]
				info := append([]int(nil), sq.tokens...)
				for k := range info {
					if rng.Float64() < s.Noise {
						info[k] = rng.IntN(V)
					}
				}
				lvs, parts := n.forward(sq, info, depth)
				l, _, _ := n.loss(parts)
				bl += l / float64(len(idx))
				n.backward(sq, info, lvs, 1/float64(len(idx)))
			}
			sum += bl
			if s.Clip > 0 {
				var norm float64
				for _, g := range n.g {
					norm += g * g
				}
				if norm = math.Sqrt(norm); norm > s.Clip {
					for i := range n.g {
						n.g[i] *= s.Clip / norm
					}
				}
			}
			step++
			c1, c2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
			for i, g := range n.g {
				m[i] = b1*m[i] + (1-b1)*g
				v[i] = b2*v[i] + (1-b2)*g*g
				n.p[i] -= s.LR * (m[i] / c1) / (math.Sqrt(v[i]/c2) + eps)
			}
			if tr.Progress != nil {
				tr.Progress(Progress{Phase: "train", Done: bi + 1, Total: batches, Epoch: epoch, Depth: depth, Loss: bl})
			}
		}
		for i, x := range n.p {
			d.P[i] = float32(x)
		}
		rec := tr.evaluate(n, depth)
		rec.Epoch, rec.Depth = epoch+1, depth
		rec.Train = sum / float64(max(1, batches))
		rec.Seconds = time.Since(t0).Seconds()
		d.Losses = append(d.Losses, rec)
		if tr.Progress != nil {
			tr.Progress(Progress{Phase: "eval", Epoch: epoch, Depth: depth, Loss: rec.HeldOut, Record: &rec})
		}
		if tr.Checkpoint != nil {
			var next *State
			if epoch+1 < s.Epochs {
				next = &State{Epoch: epoch + 1, Step: step, M: to32(m), V: to32(v)}
			}
			if err := tr.Checkpoint(d, next); err != nil {
				return err
			}
		}
	}
	return nil
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// evaluate measures the held-out loss at depth (the training set when
// nothing is held out).
func (tr *Trainer) evaluate(n *net, depth int) Epoch {
	set := tr.heldOut
	if len(set) == 0 {
		set = tr.data
	}
	var e Epoch
	var agree, rows int
	var ss float64
	var cnt int
	for _, sq := range set {
		for _, v := range sq.h[n.s.Dim:] { // the first state is never a prediction target
			ss += float64(v) * float64(v)
			cnt++
		}
		_, parts := n.forward(sq, sq.tokens, depth)
		l, mse, kl := n.loss(parts)
		e.HeldOut += l / float64(len(set))
		e.MSE += mse / float64(len(set))
		e.KL += kl / float64(len(set))
		agree += parts[0].agree
		rows += parts[0].n
	}
	if rows > 0 {
		e.Agree = float64(agree) / float64(rows)
	}
	if cnt > 0 {
		e.StateMS = ss / float64(cnt)
	}
	return e
}

// Evaluate reports the held-out metrics of d at depth, without training.
func (tr *Trainer) Evaluate(ctx context.Context, d *Drafter, depth int) (Epoch, error) {
	if err := tr.Generate(ctx); err != nil {
		return Epoch{}, err
	}
	n, err := newNet(d, tr.Target, tr.Settings)
	if err != nil {
		return Epoch{}, err
	}
	e := tr.evaluate(n, depth)
	e.Depth = depth
	return e, nil
}

// MemoryNeed estimates the live bytes training takes for a drafter of shape s
// over tokens generated tokens: the recorded states and logits, the frozen
// embedding and head in float64, parameters with gradients and Adam
// moments, and one sequence's unrolled activations (seqLen positions,
// depth levels).
func MemoryNeed(s Shape, tokens, seqLen, depth int) int64 {
	data := int64(tokens) * int64(s.Dim+s.Vocab) * 4
	frozen := 2 * int64(s.Vocab) * int64(s.Dim) * 8
	params := int64(s.Params()) * 8 * 4
	perRow := int64(12*s.Dim+4*s.FFN+3*s.Vocab+s.Heads*(seqLen+depth)) * 8
	acts := int64(depth) * int64(seqLen) * perRow
	return data + frozen + params + acts
}
