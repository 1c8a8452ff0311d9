package predictor

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"arborist/profiles/costmodel"
)

// Costs are what a step of the predictor's shape costs on this machine.
type Costs struct {
	Step  []time.Duration // drafting L = 1..Depth levels (index L-1)
	Plain time.Duration   // plain decoding's time a token (speedups are over it)
}

// Mixer weighs steps as a depth policy that drafts levels[i] levels and
// keeps kept[i] draft tokens meets them, returning its tokens a step and
// the weight of the steps at each level count (costmodel.PolicyMix with the
// pair's calibration).
type Mixer func(resampled []bool, levels, kept []int) (aal float64, shares []float64)

// FitOptions control Fit.
type FitOptions struct {
	Epochs int // default 30
	Units  int // trunk units, default 128 (Yggdrasil's)
	Seed   uint64
	// Progress is told each stage's progress ("features hidden", epoch
	// done of total).
	Progress func(stage string, done, total int)
}

// Variant is one feature set of the ablation: its speedup over plain
// decoding on the validation prompts (where it was chosen) and on the
// held-out prompts.
type Variant struct {
	Name       string  `json:"name"`
	Validation float64 `json:"validation"`
	HeldOut    float64 `json:"held_out"`
}

// Stats are how the predictor was trained and how it fares against the
// policies it must beat, each figure a speedup over plain decoding of the
// shape's steps replayed with this machine's costs, on prompts training
// never saw.
type Stats struct {
	Shape     costmodel.Plan `json:"shape"` // the EGT it decides depth for
	Plan      string         `json:"plan"`
	Prompts   [3]int         `json:"prompts"` // training, validation, held-out
	Steps     [3]int         `json:"steps"`
	Epochs    int            `json:"epochs"`
	TrainLoss []float64      `json:"train_loss"`
	// Lambda is the tokens a second the labels weigh time at (the best
	// fixed depth's on the training steps), and Labels the share of
	// training steps whose best depth is L (index L).
	Lambda   float64   `json:"lambda"`
	Labels   []float64 `json:"labels"`
	Variants []Variant `json:"variants"`
	Chosen   string    `json:"chosen"`
	EMA      float64   `json:"ema"`
	Cut      float64   `json:"cut"`
	// Predictor is the chosen predictor's held-out speedup; Fixed each
	// fixed depth's (index L-1) and BestFixed the best of them; Common the
	// most common best depth of the training steps and its speedup;
	// Threshold the best threshold policy's minimum and speedup; Oracle
	// every step at its own best depth (a bound no policy reaches).
	Predictor        float64   `json:"predictor"`
	Fixed            []float64 `json:"fixed"`
	BestFixed        int       `json:"best_fixed"`
	Common           int       `json:"common"`
	CommonSpeedup    float64   `json:"common_speedup"`
	Threshold        float64   `json:"threshold"`
	ThresholdSpeedup float64   `json:"threshold_speedup"`
	Oracle           float64   `json:"oracle"`
	// Accuracy and Majority are, per decision (draft level k+2 after k+1),
	// the predictor's held-out accuracy against the steps' best depths and
	// that of always giving the most common answer.
	Accuracy []float64 `json:"accuracy"`
	Majority []float64 `json:"majority"`
	// Levels, Share and Infer are what the cost model prices the
	// predictor with (costmodel.Learned); Beats: it was at least as fast
	// as the best fixed depth and the best threshold policy.
	Levels []float64     `json:"levels"`
	Share  float64       `json:"share"`
	Infer  time.Duration `json:"infer_ns"`
	Beats  bool          `json:"beats"`
	Took   time.Duration `json:"took_ns"`
}

// Learned is the predictor as the cost model prices it, for id (false:
// the stats name no shape).
func (s *Stats) Learned(id int64) (costmodel.Learned, bool) {
	plan := s.Shape
	if !plan.Grows() || len(plan.EGT) < 2 {
		return costmodel.Learned{}, false
	}
	plan.DepthPolicy, plan.DepthMin, plan.PredictorID = "predictor", 0, id
	return costmodel.Learned{Plan: plan, Levels: s.Levels, Share: s.Share, Infer: s.Infer, Beats: s.Beats}, true
}

// cuts are the probabilities a level may need before it is drafted.
var cuts = []float64{0.3, 0.4, 0.5, 0.6, 0.7}

// variants is the ablation: the path alone (a learned threshold), the
// drafter's confidence, Yggdrasil's inputs alone (the target's state, the
// last token's embedding), and the combinations.
var variants = []struct {
	features []string
	path     bool
}{
	{nil, true},
	{[]string{Confidence}, true},
	{[]string{Hidden}, false},
	{[]string{Embedding}, false},
	{[]string{Confidence, Hidden}, true},
	{[]string{Confidence, Embedding}, true},
	{[]string{Confidence, Hidden, Embedding}, true},
}

func variantName(features []string, path bool) string {
	parts := slices.Clone(features)
	if path {
		parts = append([]string{"path"}, parts...)
	}
	return strings.Join(parts, "+")
}

// Fit trains a depth predictor for the EGT plan on recorded steps. Each
// step's label is the depth the speedup model rewards there: the L that
// maximises tokens(L) - lambda * time(L), lambda the tokens a second of the
// best fixed depth (a policy that picks so on every step is faster than
// lambda). Prompts are split three ways: training, validation (which
// feature set and smoothing) and held out (the figures reported). The
// chosen predictor is trained again on training and validation prompts.
func Fit(steps []Step, plan costmodel.Plan, c Costs, mix Mixer, opt FitOptions) (*Predictor, error) {
	start := time.Now()
	depth := len(plan.EGT)
	if !plan.Grows() || depth < 2 {
		return nil, fmt.Errorf("profiles: a depth predictor decides the depth of an Equal-Growth Tree of at least 2 levels, not %s", plan)
	}
	if len(c.Step) != depth || c.Plain <= 0 {
		return nil, fmt.Errorf("profiles: a depth predictor needs the step time of every depth of %s", plan)
	}
	for _, t := range c.Step {
		if t <= 0 {
			return nil, fmt.Errorf("profiles: a depth predictor needs positive step times, got %v", c.Step)
		}
	}
	if opt.Epochs <= 0 {
		opt.Epochs = 30
	}
	if opt.Units <= 0 {
		opt.Units = 128
	}
	progress := func(stage string, done, total int) {
		if opt.Progress != nil {
			opt.Progress(stage, done, total)
		}
	}
	train, val, test, counts, err := split(steps, depth)
	if err != nil {
		return nil, err
	}
	f := &fitter{depth: depth, c: c, mix: mix}
	// labels, at the best fixed depth's rate on the training steps
	best := 0.0
	for l := 1; l <= depth; l++ {
		aal, t := f.throughput(train, fixed(train, l, depth), 0)
		best = max(best, aal/t.Seconds())
	}
	f.lambda = best
	st := Stats{Shape: plan, Plan: plan.String(), Prompts: counts, Steps: [3]int{len(train), len(val), len(test)}, Epochs: opt.Epochs, Lambda: best, Labels: make([]float64, depth+1)}
	for _, s := range train {
		st.Labels[f.label(s)] += 1 / float64(len(train))
	}
	dim := 0
	for _, s := range steps {
		dim = max(dim, len(s.Hidden), len(s.Embedding))
	}
	// the ablation: each feature set trained on the training prompts,
	// chosen on the validation prompts
	type choice struct {
		features []string
		path     bool
		ema, cut float64
		val      float64
	}
	var chosen *choice
	for i, v := range variants {
		if dim == 0 && len(v.features) > 0 && v.features[len(v.features)-1] != Confidence {
			continue // no states recorded
		}
		name := variantName(v.features, v.path)
		p := newPredictor(v.features, v.path, dim, opt.Units, depth, opt.Seed+uint64(i))
		p.standardise(train)
		p.train(f.examples(p, train), trainOptions{epochs: opt.Epochs, batch: 32, lr: 1e-3, seed: opt.Seed + uint64(i),
			progress: func(ep int, _ float64) { progress("features "+name, ep, opt.Epochs) }})
		bestVal, bestEMA, bestCut := 0.0, 1.0, 0.5
		for _, ema := range []float64{1, 0.5} {
			for _, cut := range cuts {
				p.EMA, p.Cut = ema, cut
				if sp := f.speedup(val, p.decide(val), 0); sp > bestVal+1e-12 {
					bestVal, bestEMA, bestCut = sp, ema, cut
				}
			}
		}
		p.EMA, p.Cut = bestEMA, bestCut
		st.Variants = append(st.Variants, Variant{Name: name, Validation: bestVal, HeldOut: f.speedup(test, p.decide(test), 0)})
		if chosen == nil || bestVal > chosen.val+1e-12 {
			chosen = &choice{v.features, v.path, bestEMA, bestCut, bestVal}
		}
	}
	// the chosen set, trained on training and validation prompts
	both := append(slices.Clone(train), val...)
	p := newPredictor(chosen.features, chosen.path, dim, opt.Units, depth, opt.Seed+100)
	p.standardise(both)
	st.TrainLoss = p.train(f.examples(p, both), trainOptions{epochs: opt.Epochs, batch: 32, lr: 1e-3, seed: opt.Seed + 100,
		progress: func(ep int, _ float64) { progress("training", ep, opt.Epochs) }})
	p.EMA, p.Cut, p.Plan = chosen.ema, chosen.cut, plan
	st.Chosen, st.EMA, st.Cut = variantName(chosen.features, chosen.path), chosen.ema, chosen.cut
	st.Infer = p.inferTime(test)
	levels := p.decide(test)
	st.Predictor = f.speedup(test, levels, st.Infer)
	var aal float64
	aal, st.Levels = f.mixed(test, levels)
	full, _ := f.mixed(test, fixed(test, depth, depth))
	st.Share = 1
	if full > 1 {
		st.Share = (aal - 1) / (full - 1)
	}
	// the policies it must beat, on the same held-out steps
	st.Fixed = make([]float64, depth)
	for l := 1; l <= depth; l++ {
		st.Fixed[l-1] = f.speedup(test, fixed(test, l, depth), 0)
		if st.Fixed[l-1] > st.Fixed[max(0, st.BestFixed-1)] || st.BestFixed == 0 {
			st.BestFixed = l
		}
	}
	for l := range st.Labels {
		if st.Labels[l] > st.Labels[st.Common] {
			st.Common = l
		}
	}
	st.CommonSpeedup = f.speedup(test, fixed(test, max(1, st.Common), depth), 0)
	for _, th := range costmodel.SearchThresholds {
		if sp := f.speedup(test, threshold(test, th, depth), 0); sp > st.ThresholdSpeedup {
			st.Threshold, st.ThresholdSpeedup = th, sp
		}
	}
	oracle := make([]int, len(test))
	for i, s := range test {
		oracle[i] = f.label(s)
	}
	st.Oracle = f.speedup(test, oracle, 0)
	st.Accuracy, st.Majority = f.accuracy(p, test)
	st.Beats = st.Predictor >= st.Fixed[st.BestFixed-1] && st.Predictor >= st.ThresholdSpeedup
	st.Took = time.Since(start)
	p.Stats = st
	return p, nil
}

// split divides steps by prompt: the last quarter of the prompts held out,
// a fifth of the rest for validation, the rest for training.
func split(steps []Step, depth int) (train, val, test []Step, counts [3]int, err error) {
	var prompts []int
	for _, s := range steps {
		if len(s.Kept) != depth {
			return nil, nil, nil, counts, fmt.Errorf("profiles: a recorded step kept tokens for %d depths, the plan has %d", len(s.Kept), depth)
		}
		if !slices.Contains(prompts, s.Prompt) {
			prompts = append(prompts, s.Prompt)
		}
	}
	if len(prompts) < 3 {
		return nil, nil, nil, counts, fmt.Errorf("profiles: a depth predictor needs steps of at least 3 prompts (training, validation and held-out ones), got %d", len(prompts))
	}
	slices.Sort(prompts)
	nTest := max(1, len(prompts)/4)
	nVal := max(1, (len(prompts)-nTest)/5)
	nTrain := len(prompts) - nTest - nVal
	counts = [3]int{nTrain, nVal, nTest}
	for _, s := range steps {
		switch at, _ := slices.BinarySearch(prompts, s.Prompt); {
		case at < nTrain:
			train = append(train, s)
		case at < nTrain+nVal:
			val = append(val, s)
		default:
			test = append(test, s)
		}
	}
	return train, val, test, counts, nil
}

// fixed drafts l levels on every step (as far as each can go).
func fixed(steps []Step, l, depth int) []int {
	out := make([]int, len(steps))
	for i := range steps {
		out[i] = min(l, steps[i].reach(depth))
	}
	return out
}

// threshold drafts as the threshold policy of minimum th does: another
// level while the frontier's best path is at least th likely.
func threshold(steps []Step, th float64, depth int) []int {
	out := make([]int, len(steps))
	for i, s := range steps {
		l := 1
		for l < s.reach(depth) && s.Best[l-1] >= th {
			l++
		}
		out[i] = l
	}
	return out
}

// fitter holds what evaluating depth choices needs.
type fitter struct {
	depth  int
	c      Costs
	mix    Mixer
	lambda float64
}

// mixed is the tokens a step and the weight of each level count when the
// steps draft levels[i] levels.
func (f *fitter) mixed(steps []Step, levels []int) (float64, []float64) {
	resampled, kept := make([]bool, len(steps)), make([]int, len(steps))
	for i, s := range steps {
		resampled[i], kept[i] = s.Resampled, s.Kept[levels[i]-1]
	}
	aal, shares := f.mix(resampled, levels, kept)
	for len(shares) < f.depth+1 {
		shares = append(shares, 0)
	}
	return aal, shares
}

// throughput is the tokens a step and the time a step of the steps
// drafting levels[i] levels, plus extra a step.
func (f *fitter) throughput(steps []Step, levels []int, extra time.Duration) (float64, time.Duration) {
	aal, shares := f.mixed(steps, levels)
	var t float64
	for l, w := range shares {
		if l > 0 {
			t += w * float64(f.c.Step[l-1])
		}
	}
	return aal, time.Duration(t) + extra
}

// speedup is the steps' speedup over plain decoding drafting levels[i]
// levels (0 without steps).
func (f *fitter) speedup(steps []Step, levels []int, extra time.Duration) float64 {
	if len(steps) == 0 {
		return 0
	}
	aal, t := f.throughput(steps, levels, extra)
	return aal * float64(f.c.Plain) / float64(t)
}

// label is the step's best depth: the L maximising tokens(L) -
// lambda * time(L), the shallowest on ties.
func (f *fitter) label(s Step) int {
	best, bestL := math.Inf(-1), 1
	for l := 1; l <= s.reach(f.depth); l++ {
		if v := float64(1+s.Kept[l-1]) - f.lambda*f.c.Step[l-1].Seconds(); v > best+1e-12 {
			best, bestL = v, l
		}
	}
	return bestL
}

// examples are the steps as training examples for p: head k's label is
// whether the step's best depth is beyond k+1 levels.
func (f *fitter) examples(p *Predictor, steps []Step) []example {
	heads := f.depth - 1
	out := make([]example, len(steps))
	for i, s := range steps {
		e := example{x: make([]float64, p.In), path: make([]float64, heads), y: make([]float64, heads)}
		p.input(s.Hidden, s.Embedding, s.Top1, s.Entropy, e.x)
		l := f.label(s)
		for k := range heads {
			if k+2 > s.reach(f.depth) || k >= len(s.Best) {
				e.y[k] = -1
				continue
			}
			e.path[k] = p.pathFeature(k, s.Best[k])
			if l >= k+2 {
				e.y[k] = 1
			}
		}
		out[i] = e
	}
	return out
}

// accuracy is p's held-out accuracy per decision and that of always giving
// each decision's most common answer.
func (f *fitter) accuracy(p *Predictor, steps []Step) (acc, majority []float64) {
	heads := f.depth - 1
	acc, majority = make([]float64, heads), make([]float64, heads)
	n := make([]float64, heads)
	a := make([]float64, p.Units)
	x := make([]float64, p.In)
	for _, s := range steps {
		if p.Units > 0 {
			p.input(s.Hidden, s.Embedding, s.Top1, s.Entropy, x)
			p.trunk(x, nil, a)
		}
		l := f.label(s)
		for k := range heads {
			if k+2 > s.reach(f.depth) || k >= len(s.Best) {
				continue
			}
			y := l >= k+2
			n[k]++
			if (p.head(k, a, s.Best[k]) >= 0.5) == y {
				acc[k]++
			}
			if y {
				majority[k]++
			}
		}
	}
	for k := range acc {
		if n[k] > 0 {
			acc[k] /= n[k]
			majority[k] = math.Max(majority[k], n[k]-majority[k]) / n[k]
		}
	}
	return acc, majority
}

// standardise sets p's input statistics from steps.
func (p *Predictor) standardise(steps []Step) {
	x := make([]float64, p.In)
	sum, sq := make([]float64, p.In), make([]float64, p.In)
	p.Mean, p.Std = make([]float64, p.In), ones(p.In)
	for _, s := range steps {
		p.input(s.Hidden, s.Embedding, s.Top1, s.Entropy, x)
		for i, v := range x {
			sum[i] += v
			sq[i] += v * v
		}
	}
	n := float64(max(1, len(steps)))
	for i := range x {
		m := sum[i] / n
		p.Mean[i], p.Std[i] = m, math.Sqrt(math.Max(0, sq[i]/n-m*m))+1e-6
	}
	heads := len(p.B2)
	for k := range heads {
		var s1, s2, c float64
		for _, s := range steps {
			if k < len(s.Best) {
				v := math.Log(math.Max(s.Best[k], 1e-4))
				s1, s2, c = s1+v, s2+v*v, c+1
			}
		}
		if c > 0 {
			m := s1 / c
			p.PMean[k], p.PStd[k] = m, math.Sqrt(math.Max(0, s2/c-m*m))+1e-6
		}
	}
}

// decide is the depth p drafts on each step, the steps taken in order (its
// smoothing carries from one to the next, as when decoding).
func (p *Predictor) decide(steps []Step) []int {
	out := make([]int, len(steps))
	d := p.decider()
	for i, s := range steps {
		d.begin(s.Hidden, s.Embedding, s.Top1, s.Entropy)
		l := 1
		for l < s.reach(p.Depth) && d.deeper(l, s.Best[l-1]) {
			l++
		}
		out[i] = l
	}
	return out
}

// inferTime is the median time of one step's decisions on steps.
func (p *Predictor) inferTime(steps []Step) time.Duration {
	if len(steps) == 0 {
		return 0
	}
	d := p.decider()
	i := 0
	return timeOf(101, func() {
		s := steps[i%len(steps)]
		i++
		d.begin(s.Hidden, s.Embedding, s.Top1, s.Entropy)
		for l := 1; l < s.reach(p.Depth) && d.deeper(l, s.Best[l-1]); l++ {
		}
	})
}

// decider runs p's decisions step by step, with its smoothing.
type decider struct {
	p      *Predictor
	x, a   []float64
	smooth []float64
	seen   []bool
}

func (p *Predictor) decider() *decider {
	return &decider{p: p, x: make([]float64, p.In), a: make([]float64, p.Units), smooth: make([]float64, len(p.B2)), seen: make([]bool, len(p.B2))}
}

// begin reads a step's features.
func (d *decider) begin(hidden, emb []float32, top1, entropy float64) {
	if d.p.Units > 0 {
		d.p.input(hidden, emb, top1, entropy, d.x)
		d.p.trunk(d.x, nil, d.a)
	}
}

// deeper decides whether to draft level l+1 once l levels are drafted and
// the frontier's best path is best likely.
func (d *decider) deeper(l int, best float64) bool {
	k := l - 1
	if k < 0 || k >= len(d.p.B2) {
		return false
	}
	pr := d.p.head(k, d.a, best)
	if !d.seen[k] {
		d.smooth[k], d.seen[k] = pr, true
	} else {
		d.smooth[k] = (1-d.p.EMA)*d.smooth[k] + d.p.EMA*pr
	}
	return d.smooth[k] >= d.p.Cut
}
