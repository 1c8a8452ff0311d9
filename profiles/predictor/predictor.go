// Package predictor is Yggdrasil's depth predictor: a small network that,
// from the target's state at a step, estimates how deep the draft will be
// accepted, trained on a calibration's steps and used as an EGT depth
// policy (Policy).
package predictor

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"arborist/profiles/costmodel"
)

// Predictor is Yggdrasil's depth predictor: from the target's last hidden
// state, an MLP (hidden -> 128 relu -> one sigmoid head per depth) estimates
// the probability that the draft token at each depth d = 1..Depth will be
// accepted. Inputs are standardised with the training set's mean and spread.
type Predictor struct {
	In, Hidden, Depth int
	Mean, Std         []float64   // input standardisation
	W1                [][]float64 // Hidden x In
	B1                []float64
	W2                [][]float64 // Depth x Hidden
	B2                []float64
	Stats             Stats
}

// Stats records how training went.
type Stats struct {
	Samples, HeldOut int
	Epochs           int
	TrainLoss        []float64 // per epoch
	Accuracy         []float64 // held-out accuracy per depth (threshold 0.5)
	BaseRate         []float64 // held-out fraction of accepted labels per depth
	Took             time.Duration
}

// Sample is one training example: the hidden state before a step and how
// many draft tokens the target then accepted.
type Sample struct {
	Hidden   []float32
	Accepted int
}

// New makes an untrained predictor with small random weights.
func New(in, hidden, depth int, seed uint64) *Predictor {
	rng := rand.New(rand.NewPCG(seed, seed+7))
	p := &Predictor{In: in, Hidden: hidden, Depth: depth, Mean: make([]float64, in), Std: make([]float64, in)}
	for i := range p.Std {
		p.Std[i] = 1
	}
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
	p.W1, p.B1 = mat(hidden, in, math.Sqrt(2/float64(in))), make([]float64, hidden)
	p.W2, p.B2 = mat(depth, hidden, math.Sqrt(1/float64(hidden))), make([]float64, depth)
	return p
}

// forward returns the standardised input, pre-activations, activations and
// output probabilities.
func (p *Predictor) forward(h []float32) (x, z1, a1, out []float64) {
	x = make([]float64, p.In)
	for i := range x {
		x[i] = (float64(h[i]) - p.Mean[i]) / p.Std[i]
	}
	z1, a1 = make([]float64, p.Hidden), make([]float64, p.Hidden)
	for j := range z1 {
		s := p.B1[j]
		for i, v := range x {
			s += p.W1[j][i] * v
		}
		z1[j] = s
		a1[j] = math.Max(0, s)
	}
	out = make([]float64, p.Depth)
	for d := range out {
		s := p.B2[d]
		for j, v := range a1 {
			s += p.W2[d][j] * v
		}
		out[d] = 1 / (1 + math.Exp(-s))
	}
	return
}

// Predict returns the acceptance probability at each depth.
func (p *Predictor) Predict(h []float32) []float64 {
	_, _, _, out := p.forward(h)
	return out
}

// grads accumulates the gradient of the mean binary cross-entropy over the
// first `heads` heads (plus L2 on the weights) for one sample into g.
func (p *Predictor) grads(s Sample, heads int, g *Predictor) float64 {
	x, z1, a1, out := p.forward(s.Hidden)
	dz2 := make([]float64, p.Depth)
	loss := 0.0
	for d := 0; d < heads; d++ {
		y := 0.0
		if s.Accepted > d {
			y = 1
		}
		o := math.Min(math.Max(out[d], 1e-12), 1-1e-12)
		loss -= y*math.Log(o) + (1-y)*math.Log(1-o)
		dz2[d] = out[d] - y
	}
	da1 := make([]float64, p.Hidden)
	for d := 0; d < heads; d++ {
		g.B2[d] += dz2[d]
		for j := range a1 {
			g.W2[d][j] += dz2[d] * a1[j]
			da1[j] += p.W2[d][j] * dz2[d]
		}
	}
	for j := range z1 {
		if z1[j] <= 0 {
			continue
		}
		g.B1[j] += da1[j]
		for i, v := range x {
			g.W1[j][i] += da1[j] * v
		}
	}
	return loss
}

// l2 is the regularisation weight of Yggdrasil's recipe (+0.01 * sum w^2).
const l2 = 0.01

// Loss is the mean BCE over the first heads heads plus the L2 term.
func (p *Predictor) Loss(data []Sample, heads int) float64 {
	g := p.zero()
	total := 0.0
	for _, s := range data {
		total += p.grads(s, heads, g)
	}
	return total/float64(len(data)) + l2*p.sqWeights()
}

func (p *Predictor) sqWeights() float64 {
	s := 0.0
	for _, m := range [][][]float64{p.W1, p.W2} {
		for _, row := range m {
			for _, v := range row {
				s += v * v
			}
		}
	}
	return s
}

func (p *Predictor) zero() *Predictor {
	z := &Predictor{In: p.In, Hidden: p.Hidden, Depth: p.Depth}
	z.W1, z.W2 = make([][]float64, p.Hidden), make([][]float64, p.Depth)
	for j := range z.W1 {
		z.W1[j] = make([]float64, p.In)
	}
	for d := range z.W2 {
		z.W2[d] = make([]float64, p.Hidden)
	}
	z.B1, z.B2 = make([]float64, p.Hidden), make([]float64, p.Depth)
	return z
}

// params lists every parameter slice, in a fixed order, for the optimiser.
func (p *Predictor) params() [][]float64 {
	out := append([][]float64{}, p.W1...)
	out = append(out, p.B1)
	out = append(out, p.W2...)
	return append(out, p.B2)
}

// TrainOptions control Train.
type TrainOptions struct {
	Epochs   int     // default 40
	Batch    int     // default 32
	LR       float64 // Adam step, default 1e-3
	HeldOut  float64 // fraction held out for accuracy, default 0.25
	Seed     uint64
	Progress func(epoch, epochs int, loss float64)
}

// Train fits the predictor with Adam, a curriculum over depth (the first
// epochs train head 1 only, then heads are added one by one) and L2 0.01,
// and measures accuracy on a held-out tail of the data.
func (p *Predictor) Train(data []Sample, opt TrainOptions) error {
	if len(data) < 8 {
		return fmt.Errorf("profiles: %d samples are too few to train a depth predictor", len(data))
	}
	if opt.Epochs <= 0 {
		opt.Epochs = 40
	}
	if opt.Batch <= 0 {
		opt.Batch = 32
	}
	if opt.LR <= 0 {
		opt.LR = 1e-3
	}
	if opt.HeldOut <= 0 || opt.HeldOut >= 1 {
		opt.HeldOut = 0.25
	}
	start := time.Now()
	cut := len(data) - max(1, int(float64(len(data))*opt.HeldOut))
	train, held := data[:cut], data[cut:]
	// standardise inputs with the training set's statistics
	for i := 0; i < p.In; i++ {
		var m, v float64
		for _, s := range train {
			m += float64(s.Hidden[i])
		}
		m /= float64(len(train))
		for _, s := range train {
			d := float64(s.Hidden[i]) - m
			v += d * d
		}
		p.Mean[i], p.Std[i] = m, math.Sqrt(v/float64(len(train)))+1e-6
	}
	rng := rand.New(rand.NewPCG(opt.Seed, opt.Seed+11))
	ps := p.params()
	mom, vel := make([][]float64, len(ps)), make([][]float64, len(ps))
	for i, s := range ps {
		mom[i], vel[i] = make([]float64, len(s)), make([]float64, len(s))
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	step := 0
	order := make([]int, len(train))
	for i := range order {
		order[i] = i
	}
	p.Stats = Stats{Samples: len(train), HeldOut: len(held), Epochs: opt.Epochs}
	for ep := 0; ep < opt.Epochs; ep++ {
		heads := min(p.Depth, 1+ep*p.Depth*2/opt.Epochs) // curriculum: all heads by mid-training
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		epochLoss := 0.0
		for at := 0; at < len(order); at += opt.Batch {
			batch := order[at:min(at+opt.Batch, len(order))]
			g := p.zero()
			for _, k := range batch {
				epochLoss += p.grads(train[k], heads, g)
			}
			gs := g.params()
			step++
			inv := 1 / float64(len(batch))
			for i, s := range ps {
				isWeight := i < p.Hidden || (i > p.Hidden && i < len(ps)-1)
				for j := range s {
					gr := gs[i][j] * inv
					if isWeight {
						gr += 2 * l2 * s[j]
					}
					mom[i][j] = b1*mom[i][j] + (1-b1)*gr
					vel[i][j] = b2*vel[i][j] + (1-b2)*gr*gr
					mh := mom[i][j] / (1 - math.Pow(b1, float64(step)))
					vh := vel[i][j] / (1 - math.Pow(b2, float64(step)))
					s[j] -= opt.LR * mh / (math.Sqrt(vh) + eps)
				}
			}
		}
		p.Stats.TrainLoss = append(p.Stats.TrainLoss, epochLoss/float64(len(train)))
		if opt.Progress != nil {
			opt.Progress(ep+1, opt.Epochs, epochLoss/float64(len(train)))
		}
	}
	p.Stats.Accuracy, p.Stats.BaseRate = make([]float64, p.Depth), make([]float64, p.Depth)
	for _, s := range held {
		out := p.Predict(s.Hidden)
		for d := 0; d < p.Depth; d++ {
			y := s.Accepted > d
			if (out[d] >= 0.5) == y {
				p.Stats.Accuracy[d]++
			}
			if y {
				p.Stats.BaseRate[d]++
			}
		}
	}
	for d := range p.Stats.Accuracy {
		p.Stats.Accuracy[d] /= float64(len(held))
		p.Stats.BaseRate[d] /= float64(len(held))
	}
	p.Stats.Took = time.Since(start)
	return nil
}

// Marshal encodes the predictor (weights and stats) for the store.
func (p *Predictor) Marshal() ([]byte, error) { return json.Marshal(p) }

// Unmarshal decodes a stored predictor and checks its shapes.
func Unmarshal(b []byte) (*Predictor, error) {
	var p Predictor
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("profiles: stored predictor: %w", err)
	}
	if len(p.W1) != p.Hidden || len(p.W2) != p.Depth || len(p.Mean) != p.In || len(p.B1) != p.Hidden || len(p.B2) != p.Depth {
		return nil, fmt.Errorf("profiles: stored predictor has inconsistent shapes")
	}
	for _, r := range p.W1 {
		if len(r) != p.In {
			return nil, fmt.Errorf("profiles: stored predictor has inconsistent shapes")
		}
	}
	for _, r := range p.W2 {
		if len(r) != p.Hidden {
			return nil, fmt.Errorf("profiles: stored predictor has inconsistent shapes")
		}
	}
	return &p, nil
}

// Policy is the egt depth policy driven by a predictor: at the start
// of each step it predicts the acceptance at every depth (smoothed by an EMA
// across steps), and drafts down to the depth that maximises the
// latency-aware speedup AAL(D) * T_verify(1) / (D * T_draft + T_verify(W(D))).
type Policy struct {
	P      *Predictor
	Costs  costmodel.Costs
	Widths []int   // the egt plan's nodes expanded per depth
	Branch int     // children per expanded node
	EMA    float64 // smoothing weight of the new prediction (default 0.5)
	smooth []float64
	depth  int
}

// Next implements spec.DepthPolicy.
func (pp *Policy) Next(depth int, _ float64, hidden []float32) bool {
	if depth == 0 {
		pp.depth = pp.choose(hidden)
	}
	return depth < pp.depth
}

func (pp *Policy) choose(hidden []float32) int {
	if hidden == nil || len(hidden) != pp.P.In {
		return len(pp.Widths)
	}
	pred := pp.P.Predict(hidden)
	a := pp.EMA
	if a <= 0 || a > 1 {
		a = 0.5
	}
	if pp.smooth == nil {
		pp.smooth = append([]float64(nil), pred...)
	} else {
		for d := range pred {
			pp.smooth[d] = (1-a)*pp.smooth[d] + a*pred[d]
		}
	}
	best, bestD := 0.0, 1
	t1 := float64(pp.Costs.PlainToken())
	aal, nodes := 1.0, 0
	var draft time.Duration
	level := 1
	for d := 0; d < len(pp.Widths) && d < len(pp.smooth); d++ {
		aal += pp.smooth[d] // chance the depth-d token is accepted
		draft += costmodel.Interp(pp.Costs.Draft, min(pp.Widths[d], level))
		level = min(pp.Widths[d], level) * max(1, pp.Branch)
		nodes += level
		step := float64(draft + costmodel.Interp(pp.Costs.Verify, 1+nodes) + pp.Costs.Overhead)
		if sp := aal * t1 / step; sp > best {
			best, bestD = sp, d+1
		}
	}
	return bestD
}
