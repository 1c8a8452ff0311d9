// Package predictor is Yggdrasil's depth predictor: a small network that
// decides, level by level, how deep an Equal-Growth Tree drafts this step,
// trained on a pair's recorded steps to choose the depth the latency-aware
// speedup model rewards (Fit), and run as an EGT depth policy (Policy).
package predictor

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gonum.org/v1/gonum/floats"

	"arborist/profiles/costmodel"
)

// Version is the stored predictor's format; predictors of another format
// are refused (train again).
const Version = 2

// The feature groups a predictor's trunk may read (Features).
const (
	// Confidence is the drafter's distribution at the root: its highest
	// probability and its entropy.
	Confidence = "confidence"
	// Hidden is the target's last hidden state before the step.
	Hidden = "hidden"
	// Embedding is the target's embedding of the last committed token
	// (Yggdrasil's input).
	Embedding = "embedding"
)

// Predictor decides whether an Equal-Growth Tree drafts level k+1 once it
// has drafted k levels (k = 1..Depth-1; the first level is always
// drafted). A trunk reads the step's features, x -> relu(W1 x + B1) of
// Units units (Yggdrasil's 128; none when Features is empty), and head k
// adds what the step shows at depth k when Path is set, the log of the
// best path probability on the frontier:
//
//	p_k = sigmoid(B2[k] + W2[k] . a + U[k] * (log best_k - PMean[k]) / PStd[k])
//
// the probability that drafting deeper pays off on this step. Inputs are
// standardised with the training set's mean and spread.
type Predictor struct {
	Version  int
	Features []string // trunk feature groups, in input order
	Path     bool     // heads read the frontier's best path probability
	In       int      // trunk inputs
	Units    int      // trunk units
	Depth    int      // levels of Plan (heads: Depth-1)
	Dim      int      // the target's width (hidden and embedding groups)
	Mean     []float64
	Std      []float64
	W1       [][]float64 // Units x In
	B1       []float64
	W2       [][]float64 // heads x Units
	B2       []float64
	U        []float64 // heads
	PMean    []float64 // heads
	PStd     []float64 // heads
	// EMA smooths each head's probability across steps (1: not at all),
	// as Yggdrasil smooths its predictions, and a level is drafted when
	// that probability is at least Cut; Fit chooses both on validation
	// prompts (stopping early and drafting on do not cost the same).
	EMA float64
	Cut float64
	// Plan is the EGT shape the predictor decides depth for.
	Plan  costmodel.Plan
	Stats Stats
}

// Step is one recorded step as the predictor sees it: its features, what
// the shape's frontier showed at each level, and what drafting each depth
// would have kept.
type Step struct {
	Prompt        int // the prompt it came from (splits keep prompts apart)
	Hidden        []float32
	Embedding     []float32
	Top1, Entropy float64
	// Best[d] is the best path probability among the nodes the shape
	// grows at depth d+1; Kept[L-1] the draft tokens the step keeps
	// drafting L levels.
	Best      []float64
	Kept      []int
	Resampled bool // the source drafted the step by re-sampling
}

// reach is how many levels the step can be drafted to (at least one).
func (s *Step) reach(depth int) int { return max(1, min(depth, len(s.Best), len(s.Kept))) }

// newPredictor makes an untrained predictor reading features (and the
// path when path is set) for a shape of depth levels.
func newPredictor(features []string, path bool, dim, units, depth int, seed uint64) *Predictor {
	in := 0
	for _, f := range features {
		in += groupSize(f, dim)
	}
	if in == 0 {
		units = 0
	}
	heads := max(0, depth-1)
	p := &Predictor{Version: Version, Features: features, Path: path, In: in, Units: units, Depth: depth, Dim: dim, EMA: 1, Cut: 0.5,
		Mean: make([]float64, in), Std: ones(in), B1: make([]float64, units), B2: make([]float64, heads),
		U: make([]float64, heads), PMean: make([]float64, heads), PStd: ones(heads)}
	rng := rand.New(rand.NewPCG(seed, seed+7))
	mat := func(r, c int, scale float64) [][]float64 {
		m := make([][]float64, r)
		for i := range m {
			m[i] = make([]float64, c)
			for j := range m[i] {
				m[i][j] = rng.NormFloat64() * scale
			}
		}
		return m
	}
	p.W1 = mat(units, in, math.Sqrt(2/float64(max(1, in))))
	p.W2 = mat(heads, units, math.Sqrt(1/float64(max(1, units))))
	return p
}

func ones(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// groupSize is how many inputs a feature group adds.
func groupSize(group string, dim int) int {
	if group == Confidence {
		return 2
	}
	return dim
}

// input writes the step's trunk features, standardised, into x.
func (p *Predictor) input(hidden, emb []float32, top1, entropy float64, x []float64) {
	at := 0
	put := func(v float64) {
		x[at] = (v - p.Mean[at]) / p.Std[at]
		at++
	}
	for _, f := range p.Features {
		switch f {
		case Confidence:
			put(top1)
			put(entropy)
		case Hidden:
			for i := 0; i < p.Dim; i++ {
				put(at32(hidden, i))
			}
		case Embedding:
			for i := 0; i < p.Dim; i++ {
				put(at32(emb, i))
			}
		}
	}
}

// at32 reads v[i], 0 past its end (a feature the step did not record).
func at32(v []float32, i int) float64 {
	if i < len(v) {
		return float64(v[i])
	}
	return 0
}

// pathFeature is head k's standardised path input.
func (p *Predictor) pathFeature(k int, best float64) float64 {
	return (math.Log(math.Max(best, 1e-4)) - p.PMean[k]) / p.PStd[k]
}

// trunk computes a = relu(W1 x + B1) into a (and the pre-activations into
// z, when not nil).
func (p *Predictor) trunk(x, z, a []float64) {
	for j := range a {
		s := p.B1[j] + floats.Dot(p.W1[j], x)
		if z != nil {
			z[j] = s
		}
		a[j] = math.Max(0, s)
	}
}

// head is head k's probability from the trunk's activations a and the
// frontier's best path probability.
func (p *Predictor) head(k int, a []float64, best float64) float64 {
	s := p.B2[k]
	if p.Units > 0 {
		s += floats.Dot(p.W2[k], a)
	}
	if p.Path {
		s += p.U[k] * p.pathFeature(k, best)
	}
	return 1 / (1 + math.Exp(-s))
}

// l2 is the regularisation weight of Yggdrasil's recipe (+0.01 * sum w^2).
const l2 = 0.01

// example is a training example: the standardised trunk input, the path
// input of each head it trains, and each head's label (-1: the head does
// not see this step, which ends before its level).
type example struct {
	x    []float64
	path []float64
	y    []float64
}

// grads accumulates the gradient of the squared error of the first heads
// heads for one example into g, and returns that error.
func (p *Predictor) grads(e example, heads int, g *Predictor, z, a, da []float64) float64 {
	if p.Units > 0 {
		p.trunk(e.x, z, a)
		clear(da)
	}
	loss := 0.0
	for k := 0; k < heads; k++ {
		if e.y[k] < 0 {
			continue
		}
		s := p.B2[k]
		if p.Units > 0 {
			s += floats.Dot(p.W2[k], a)
		}
		if p.Path {
			s += p.U[k] * e.path[k]
		}
		o := 1 / (1 + math.Exp(-s))
		d := o - e.y[k]
		loss += d * d
		dz := 2 * d * o * (1 - o)
		g.B2[k] += dz
		if p.Path {
			g.U[k] += dz * e.path[k]
		}
		if p.Units > 0 {
			floats.AddScaled(g.W2[k], dz, a)
			floats.AddScaled(da, dz, p.W2[k])
		}
	}
	for j := 0; j < p.Units; j++ {
		if z[j] <= 0 || da[j] == 0 {
			continue
		}
		g.B1[j] += da[j]
		floats.AddScaled(g.W1[j], da[j], e.x)
	}
	return loss
}

// zero is a predictor of p's shape with every parameter zero (a gradient).
func (p *Predictor) zero() *Predictor {
	z := &Predictor{In: p.In, Units: p.Units, Depth: p.Depth, Path: p.Path}
	z.W1 = make([][]float64, p.Units)
	for j := range z.W1 {
		z.W1[j] = make([]float64, p.In)
	}
	z.W2 = make([][]float64, len(p.B2))
	for k := range z.W2 {
		z.W2[k] = make([]float64, p.Units)
	}
	z.B1, z.B2, z.U = make([]float64, p.Units), make([]float64, len(p.B2)), make([]float64, len(p.B2))
	return z
}

// params lists every parameter slice in a fixed order, and which are
// weights (L2 applies to them, not to biases).
func (p *Predictor) params() (ps [][]float64, weight []bool) {
	for _, r := range p.W1 {
		ps, weight = append(ps, r), append(weight, true)
	}
	ps, weight = append(ps, p.B1), append(weight, false)
	for _, r := range p.W2 {
		ps, weight = append(ps, r), append(weight, true)
	}
	ps, weight = append(ps, p.B2), append(weight, false)
	return append(ps, p.U), append(weight, true)
}

// loss is the mean squared error of the first heads heads over data plus
// the L2 term (what training minimises).
func (p *Predictor) loss(data []example, heads int) float64 {
	g := p.zero()
	z, a, da := make([]float64, p.Units), make([]float64, p.Units), make([]float64, p.Units)
	total := 0.0
	for _, e := range data {
		total += p.grads(e, heads, g, z, a, da)
	}
	sq := 0.0
	ps, weight := p.params()
	for i, s := range ps {
		if weight[i] {
			sq += floats.Dot(s, s)
		}
	}
	return total/float64(len(data)) + l2*sq
}

// trainOptions control train.
type trainOptions struct {
	epochs, batch int
	lr            float64
	seed          uint64
	progress      func(epoch int, loss float64)
}

// train fits the predictor to data with Yggdrasil's recipe: Adam, squared
// error, a curriculum over the heads (the first epochs train the shallow
// head only, all heads by mid-training) and L2 0.01 on the weights.
func (p *Predictor) train(data []example, opt trainOptions) []float64 {
	heads := len(p.B2)
	if heads == 0 || len(data) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(opt.seed, opt.seed+11))
	ps, weight := p.params()
	mom, vel := make([][]float64, len(ps)), make([][]float64, len(ps))
	for i, s := range ps {
		mom[i], vel[i] = make([]float64, len(s)), make([]float64, len(s))
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	z, a, da := make([]float64, p.Units), make([]float64, p.Units), make([]float64, p.Units)
	order := make([]int, len(data))
	for i := range order {
		order[i] = i
	}
	var losses []float64
	step := 0
	g := p.zero()
	gs, _ := g.params()
	for ep := 0; ep < opt.epochs; ep++ {
		active := min(heads, 1+ep*heads*2/opt.epochs)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		total := 0.0
		for at := 0; at < len(order); at += opt.batch {
			batch := order[at:min(at+opt.batch, len(order))]
			for _, s := range gs {
				clear(s)
			}
			for _, k := range batch {
				total += p.grads(data[k], active, g, z, a, da)
			}
			step++
			inv := 1 / float64(len(batch))
			c1, c2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
			for i, s := range ps {
				gi, mi, vi := gs[i], mom[i], vel[i]
				for j := range s {
					gr := gi[j] * inv
					if weight[i] {
						gr += 2 * l2 * s[j]
					}
					mi[j] = b1*mi[j] + (1-b1)*gr
					vi[j] = b2*vi[j] + (1-b2)*gr*gr
					s[j] -= opt.lr * (mi[j] / c1) / (math.Sqrt(vi[j]/c2) + eps)
				}
			}
		}
		losses = append(losses, total/float64(len(data)))
		if opt.progress != nil {
			opt.progress(ep+1, total/float64(len(data)))
		}
	}
	return losses
}

// Marshal encodes the predictor (weights and stats) for the store.
func (p *Predictor) Marshal() ([]byte, error) { return json.Marshal(p) }

// Unmarshal decodes a stored predictor and checks its shapes.
func Unmarshal(b []byte) (*Predictor, error) {
	var p Predictor
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("profiles: stored predictor: %w", err)
	}
	if p.Version != Version {
		return nil, fmt.Errorf("profiles: the stored depth predictor is of an older format: train it again ('arborist train predictor')")
	}
	bad := fmt.Errorf("profiles: stored predictor has inconsistent shapes")
	heads := p.Depth - 1
	if p.Depth < 2 || p.Depth > 64 || p.In < 0 || p.Units < 0 || p.Dim < 0 || len(p.Mean) != p.In || len(p.Std) != p.In ||
		len(p.W1) != p.Units || len(p.B1) != p.Units || len(p.W2) != heads || len(p.B2) != heads || len(p.U) != heads ||
		len(p.PMean) != heads || len(p.PStd) != heads || !(p.EMA > 0 && p.EMA <= 1) || !(p.Cut > 0 && p.Cut < 1) {
		return nil, bad
	}
	in := 0
	for _, f := range p.Features {
		if !slices.Contains([]string{Confidence, Hidden, Embedding}, f) {
			return nil, fmt.Errorf("profiles: stored predictor reads an unknown feature %q", f)
		}
		in += groupSize(f, p.Dim)
	}
	if in != p.In || (p.In == 0) != (p.Units == 0) {
		return nil, bad
	}
	for _, r := range p.W1 {
		if len(r) != p.In {
			return nil, bad
		}
	}
	for _, r := range p.W2 {
		if len(r) != p.Units {
			return nil, bad
		}
	}
	for _, s := range [][]float64{p.Std, p.PStd} {
		for _, v := range s {
			if !(v > 0) {
				return nil, bad
			}
		}
	}
	if !p.Plan.Grows() || len(p.Plan.EGT) != p.Depth {
		return nil, fmt.Errorf("profiles: stored predictor's plan %s is not an Equal-Growth Tree of %d levels", p.Plan, p.Depth)
	}
	return &p, nil
}

// timeOf is the median time of n calls of f.
func timeOf(n int, f func()) time.Duration {
	ts := make([]time.Duration, n)
	for i := range ts {
		t0 := time.Now()
		f()
		ts[i] = time.Since(t0)
	}
	slices.Sort(ts)
	return ts[n/2]
}
