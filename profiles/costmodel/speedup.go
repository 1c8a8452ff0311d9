package costmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/latency"
)

// LengthFactor is how far a run's generation length may be from its
// calibration's, either way, before a prediction is said not to hold for
// it: a plan predicted 3.68x measured 3.17x at 64 tokens a prompt and
// 1.92x at 1024, the context growing and the acceptance moving with it.
const LengthFactor = 2

// LengthNote says, when tokens (a run's generation length a prompt)
// differs from the calibration's by more than LengthFactor either way,
// that the prediction was made for generations of the calibration's
// length; "" when it does not, or when that length is not known.
func (a *Acceptance) LengthNote(tokens int) string {
	if a == nil || a.MaxTokens <= 0 || tokens <= 0 {
		return ""
	}
	if tokens <= LengthFactor*a.MaxTokens && LengthFactor*tokens >= a.MaxTokens {
		return ""
	}
	return fmt.Sprintf("the prediction was made for generations of %d tokens (its calibration's); this run generates up to %d a prompt, so its measured speedup may differ from it (calibrate at about %d tokens for a prediction that holds)",
		a.MaxTokens, tokens, tokens)
}

// Acceptance is what calibration learns about a target/drafter pair:
// Rank[d][r] is the probability that, once verification has reached depth d
// (0 = the root's children), the target's token is the drafter's rank-r
// candidate there. Greedy verification accepts at most one child per node,
// so a path's chance of acceptance is the product of its ranks' entries.
type Acceptance struct {
	Rank   [][]float64 `json:"rank"`
	Counts [][]int     `json:"counts"` // observations behind each entry
	// QBins[b] is the acceptance rate of draft tokens whose drafter
	// probability fell in [b/10, (b+1)/10).
	QBins   []float64 `json:"q_bins"`
	QCounts []int     `json:"q_counts"`
	Steps   int       `json:"steps"`
	Tokens  int       `json:"tokens"`
	// MaxTokens is the calibration's generation length: the tokens it
	// decoded a prompt at most (0 in older databases: not known). The
	// acceptance and the contexts the steps were priced at hold for
	// generations about that long (LengthNote).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Created is when the calibration ran (zero in older databases).
	Created time.Time `json:"created,omitzero"`
	// Sample is the sampling the pair decoded at, with the lossless
	// sampled verification when not greedy: the acceptance holds for runs
	// that sample so (zero: greedy; older databases are greedy too).
	Sample sample.Params `json:"sample,omitzero"`
	// Depths records every calibration step: the drafter's best path
	// probability at each depth and how many tokens the target accepted,
	// what a threshold depth policy is priced on (none in older
	// databases: such plans are then not searched).
	Depths []DepthSample `json:"depths,omitempty"`
	// Regular and Resampled split Rank by the kind of step, when the
	// source drafted some steps by re-sampling its last chain after a
	// rejection (the hidden-state drafter) rather than from the target's
	// true states: on the bench target its depth-1 proposals were
	// accepted 81% of the time after a step accepted in full and 60%
	// after a rejection, and the probe tree, deep enough to be rejected
	// almost every step, measured 58%, under-pricing every short chain.
	// Counts as Counts. Empty when no step was re-sampled.
	Regular         [][]float64 `json:"regular,omitempty"`
	Resampled       [][]float64 `json:"resampled,omitempty"`
	RegularCounts   [][]int     `json:"regular_counts,omitempty"`
	ResampledCounts [][]int     `json:"resampled_counts,omitempty"`
	// Window is the re-check's shape read before the first prompt and
	// after each (RecheckWindow): a tune soon after pools it with its own
	// re-check. Nil in older databases, or when the target's positions
	// are too few for the re-check's context.
	Window *RecheckWindow `json:"recheck_window,omitempty"`
	// Learned are the depth predictors trained on this calibration, as
	// they are priced (not stored with it: the store keeps them apart).
	Learned []Learned `json:"-"`
}

// minSplitSteps is how many steps of each kind (at depth 1) a calibration
// needs before Predict prices the regular and re-sampled steps apart.
const minSplitSteps = 20

// split reports whether the re-sampled and regular tables are both
// measured well enough to price apart.
func (a *Acceptance) split() bool {
	return a != nil && len(a.RegularCounts) > 0 && len(a.ResampledCounts) > 0 && len(a.RegularCounts[0]) > 0 && len(a.ResampledCounts[0]) > 0 &&
		a.RegularCounts[0][0] >= minSplitSteps && a.ResampledCounts[0][0] >= minSplitSteps
}

// tableAt is At over another rank table.
func tableAt(rank [][]float64) func(d, r int) float64 {
	return func(d, r int) float64 {
		if len(rank) == 0 {
			return 0
		}
		row := rank[min(d, len(rank)-1)]
		if r >= len(row) {
			return 0
		}
		return row[r]
	}
}

// steadyAAL is a plan's expected tokens a step when its source re-samples
// after a rejection: a regular step accepted to its full depth (chance
// full) is followed by another regular one, any other by one re-sampled
// step, and a re-sampled step by a regular one, so regular steps are a
// share 1 / (2 - full) of all; the AAL is the mix of the two kinds'.
func steadyAAL(p Plan, acc *Acceptance) (float64, error) {
	reg, err := p.Expect(tableAt(acc.Regular))
	if err != nil {
		return 0, err
	}
	res, err := p.Expect(tableAt(acc.Resampled))
	if err != nil {
		return 0, err
	}
	depth := reg.Depths()
	deepest := 0
	for _, d := range depth {
		deepest = max(deepest, d)
	}
	full := 0.0
	for i, v := range reg.Values {
		if depth[i] == deepest {
			full += v
		}
	}
	share := 1 / (2 - math.Min(1, full))
	return share*reg.AAL() + (1-share)*res.AAL(), nil
}

// steadyMix prices p, whose source re-samples after a rejection
// (Costs.Resample), as the steady mix of its two kinds of step. A regular
// step drafts p's tree as the Regular table accepts it, D levels deep;
// when it accepts m <= D-2 tokens, the next step re-samples (as often as
// the calibration saw the source find it worth doing, resampleRate): it
// drafts the same shape from the chain the last step cached, accepted as
// the Resampled table says, min(Resample, D-1-m) levels deep, each level
// costing ResampleLevel and no layer pass, and verifies only those nodes;
// the step after it is regular again. Tokens and time are mixed apart, as
// throughput is. Pricing every step as a regular one charged a chain of
// two levels the second level's pass on the 15% of steps that re-sample
// (45 µs where a regular step drafted 1.65 ms on the bench target) and
// the width of three where they verify two, and mixing only the tokens
// let a chain of one, which never re-samples, take the re-sampled steps'
// lower acceptance: chain gamma 2 was predicted 7-12% low, chain gamma 1
// chosen at 87-89% of the best.
func steadyMix(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (Prediction, error) {
	reg, err := p.Expect(tableAt(acc.Regular))
	if err != nil {
		return Prediction{Plan: p}, fmt.Errorf("profiles: cannot model %s: %w", p.Strategy, err)
	}
	res, err := p.Expect(tableAt(acc.Resampled))
	if err != nil {
		return Prediction{Plan: p}, fmt.Errorf("profiles: cannot model %s: %w", p.Strategy, err)
	}
	pr := priceExpected(p, reg, c, cv)
	depth, rdepth := reg.Depths(), res.Depths()
	D := 0
	for _, d := range depth {
		D = max(D, d)
	}
	// at[k]: the chance a regular step accepts k tokens or more
	at := make([]float64, D+2)
	at[0] = 1
	for i, v := range reg.Values {
		at[depth[i]] += v
	}
	worth := m.resampleRate(acc)
	var pRes, aal, draft, verify float64
	for m := 0; m <= D-2; m++ {
		pm := (at[m] - at[m+1]) * worth
		t := min(c.Resample, D-1-m)
		if pm <= 0 || t < 1 {
			continue
		}
		tok, nodes := 1.0, 0
		for i, v := range res.Values {
			if rdepth[i] <= t {
				tok += v
				nodes++
			}
		}
		pRes += pm
		aal += pm * tok
		draft += pm * float64(time.Duration(t)*c.ResampleLevel)
		verify += pm * float64(Interp(cv.verify, 1+nodes))
	}
	if pRes <= 0 {
		return pr, nil
	}
	aal, draft, verify = aal/pRes, draft/pRes, verify/pRes
	share := 1 / (1 + pRes) // regular steps: each is followed by a re-sampled one with chance pRes
	mix := func(regular, resampled float64) float64 { return share*regular + (1-share)*resampled }
	pr.AAL = mix(pr.AAL, aal)
	pr.Draft = time.Duration(mix(float64(pr.Draft), draft))
	pr.Verify = time.Duration(mix(float64(pr.Verify), verify))
	pr.Step = time.Duration(mix(float64(pr.Step), draft+verify+float64(c.Overhead)))
	pr.setSpeedup(c)
	return pr, nil
}

// resampleRate is the share of the calibration's regular steps that could
// be followed by a re-sampled one (a rejection two levels or more above
// the probe tree's deepest) and were: the source re-samples only when the
// bonus token's best child is likely enough. 1 when the calibration
// recorded no steps.
func (a *Acceptance) resampleRate() float64 {
	var could, did int
	deepest := len(a.Rank)
	for _, s := range a.Depths {
		switch {
		case s.Resampled:
			did++
		case s.Accepted <= deepest-2:
			could++
		}
	}
	if could == 0 {
		return 1
	}
	return math.Min(1, float64(did)/float64(could))
}

// DepthSample is one calibration step as a depth policy sees it.
type DepthSample struct {
	Best     []float64 `json:"best"`     // per depth (index 0 = depth 1), the highest path probability
	Accepted int       `json:"accepted"` // draft tokens accepted on the probe tree
	// Top are the drafter's probabilities of its first-position
	// candidates, best first, and P21 its top probability after the best
	// of them: duo's rule for several sequences reads them (spec.DuoSeqs).
	Top []float64 `json:"top,omitempty"`
	P21 float64   `json:"p21,omitempty"`
	// Resampled: the source drafted this step by re-sampling after a
	// rejection (the hidden-state drafter), as Acceptance.Resampled counts.
	Resampled bool `json:"resampled,omitempty"`
	// Parents and PathP are the step's probe tree (each node's parent, -1
	// the root, and path probability, in tree order, siblings most likely
	// first) and Path its accepted nodes: EGT plans are replayed on them
	// (replay.go). Recorded for the first MaxProbeSamples steps of a
	// calibration (none in older ones).
	Parents []int16   `json:"parents,omitempty"`
	PathP   []float32 `json:"pathp,omitempty"`
	Path    []int16   `json:"path,omitempty"`
	// Context is the cached tokens the step's verification attended to:
	// its prompt and the tokens decoded before it (0 in older
	// calibrations). Passes are priced at it (AtContexts).
	Context int `json:"context,omitempty"`
}

// At returns Rank[d][r], extending the table with its last depth (deeper
// levels behave like the deepest measured one) and 0 for unmeasured ranks.
func (a *Acceptance) At(d, r int) float64 {
	if a == nil || len(a.Rank) == 0 {
		return 0
	}
	row := a.Rank[min(d, len(a.Rank)-1)]
	if r >= len(row) {
		return 0
	}
	return row[r]
}

// Uniform is an assumed acceptance: alpha for the top candidate at every
// depth, and decay times the previous rank's chance for each further rank.
func Uniform(alpha, decay float64, depth, ranks int) *Acceptance {
	a := &Acceptance{}
	for d := 0; d < depth; d++ {
		row := make([]float64, ranks)
		p, left := alpha, 1.0
		for r := range row {
			row[r] = math.Min(p, left)
			left -= row[r]
			p *= decay
		}
		a.Rank = append(a.Rank, row)
	}
	return a
}

// Costs are the measured latencies the speedup model reasons with.
type Costs struct {
	Verify   []latency.Point // target T_verify(W)
	Draft    []latency.Point // drafter forward over W tokens (nil: drafting is free, e.g. n-gram)
	Overhead time.Duration   // per-step bookkeeping (sampling, masks, compaction)
	// DraftPerChild says Draft is indexed by the nodes a level adds (the
	// hidden-state drafter: each new node's token is mixed into the
	// drafter's state, DraftStepCosts), not by the nodes a pass expands,
	// as a draft model's passes are: a tree of two first tokens costs it
	// one further node more than a chain of one (on the bench target
	// 1.17 against 0.75 ms a step), which pricing by expanded nodes missed.
	DraftPerChild bool
	// OneDevice says the drafter shares the target's device (a draft
	// source not placed on another backend). A plan that drafts while the
	// target verifies then splits that device's threads, and is priced
	// only on curves measured so (Split): without them Predict refuses it,
	// since the full-thread curves with free overlap over-predicted it by
	// 40-50% (a hidden-state drafter on 2 cores: duo predicted 1.52x,
	// measured 1.06x).
	OneDevice bool
	// Resample is how deep the draft source re-samples after a rejection
	// (the hidden-state drafter; 0: it never does), and ResampleLevel what
	// drafting a level of such a step costs (no layer pass: the bonus token
	// is mixed into the chain the source cached). With both, and a
	// calibration that measured the two kinds of step apart, a plan is
	// priced as its steady mix of regular and re-sampled steps, in tokens
	// and in time (steadyMix).
	Resample      int
	ResampleLevel time.Duration
	// DraftAfter is what the k-th drafter pass after a target pass costs
	// beyond Draft (point W=k, the last point for later passes;
	// DraftAfterTarget): evicted caches and the draft source's own work. Plans
	// that draft while the target verifies do not pay it.
	DraftAfter []latency.Point
	// Splits, when measured, hold the curves of a concurrent pair, one
	// entry per split of the threads: the target on its share and the
	// drafter on the rest, as plans that draft while the target verifies
	// run them. Predict prices such a plan on every split and keeps the
	// best, so the search chooses the split too (SplitChoices).
	Splits []SplitCosts
	// Forgets says the draft source keeps nothing it drafted beyond a
	// step (the hidden-state drafter rebuilds its chain from the target's
	// states after every verification): what a plan drafts while the
	// target verifies never shortens the next step, so it is priced as
	// work that never hits.
	Forgets bool
	// Plain is plain decoding's time a token as the re-check timed it now
	// (single-token passes back to back, RecheckCosts; 0: not measured,
	// and T_verify(1) stands in): the baseline of every speedup.
	Plain time.Duration
	// Long is what the re-check timed after a long context beside the
	// short one (zero: nothing), which AtContexts prices by.
	Long LongContext
	// Context is what context the verification curves were priced at
	// (AtContexts; zero: the one stored curve, at the short context).
	Context ContextRange
	// Passes are the curves of passes of several sequences, at the short
	// context (nil: none measured), which price a plan at a concurrency
	// (PredictLoad); AtContexts prices them at the steps' contexts below
	// it on PassFamily.
	Passes []PassCurve
	// PassFamily are the stored curves of passes of several sequences at
	// every context measured, the short one's included (nil: none but
	// Passes), whose ratios to the short context's price Passes there.
	PassFamily []PassCurve
	// Above is Verify priced with every step before the short context
	// taken at it (AtContexts; nil: Verify): what a sequence's rows cost
	// more than at the short context, which a pass of several sequences
	// adds to its curve past it.
	Above []latency.Point
	// Short is the short context's verification curve that AtContexts
	// priced Verify from (nil: Verify is it, unpriced). A pass of several
	// sequences adds to its curve what each sequence's rows cost more at
	// the steps' contexts, Verify's minus Short's: the curve as the
	// re-check left it, not as stored (the stored one beside a re-checked
	// Verify x1.23 priced that as every sequence's extra, and plain
	// batching at eight was predicted at 770 tokens/s against 1,283
	// measured).
	Short []latency.Point
}

// LongContext is what the re-check timed after At cached tokens, the
// longest context a prediction's steps are priced at: plain decoding's
// token there, and the drafter's passes after a target pass there over
// the same passes at the short context (DraftScale; 0: not timed). The
// stored curves carry a short context's time to a long one by their
// ratio, which misprices a machine that is slower in part: with the
// bandwidth 25% below the profile's, plain decoding's token after 1,900
// tokens was priced at 10.0 ms and measured at 6.0; and the drafter's
// curves, measured at the short context, priced a step's drafting there
// at 1.0 ms where it took 6.
type LongContext struct {
	At         int
	Plain      time.Duration
	DraftScale float64
}

// PlainToken is what every speedup is set against: plain decoding's time
// a token, Plain where the re-check measured it, else T_verify(1).
func (c Costs) PlainToken() time.Duration {
	if c.Plain > 0 {
		return c.Plain
	}
	return Interp(c.Verify, 1)
}

// SplitCosts are the latency curves with the threads split between a
// concurrent drafter and the target.
type SplitCosts struct {
	TargetThreads, DraftThreads int
	Verify, Draft               []latency.Point
	// Beside is Verify measured with the drafter drafting on its threads
	// the whole time, and DraftBeside Draft measured with the target
	// verifying on its threads the whole time (nil: not measured): what
	// each costs while a plan drafts beside verification. The drafting
	// beside a pass is priced on DraftBeside, and the pass pays the share
	// of the difference Beside - Verify that drafting runs through.
	Beside, DraftBeside []latency.Point
}

// Interp returns the latency at W, interpolating linearly between measured
// widths and extrapolating from the last two beyond the curve, never below
// the widest measured: a pass of more rows costs no less than one of
// fewer, and a last segment that slopes down (two passes timed in a noisy
// minute) must not price a wider one at less, or below zero.
func Interp(pts []latency.Point, w int) time.Duration {
	if len(pts) == 0 {
		return 0
	}
	if w <= pts[0].W {
		return pts[0].Median
	}
	for i := 1; i < len(pts); i++ {
		if w <= pts[i].W {
			a, b := pts[i-1], pts[i]
			f := float64(w-a.W) / float64(b.W-a.W)
			return a.Median + time.Duration(f*float64(b.Median-a.Median))
		}
	}
	if len(pts) == 1 {
		return time.Duration(float64(pts[0].Median) * float64(w) / float64(pts[0].W))
	}
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	slope := max(float64(b.Median-a.Median)/float64(b.W-a.W), 0)
	return b.Median + time.Duration(slope*float64(w-b.W))
}

// Plan is the engine's plan type (strategy and shape parameters).
type Plan = spec.Plan

// Prediction is the latency-aware model's verdict on a plan.
type Prediction struct {
	Plan     Plan
	AAL      float64       // expected tokens per step, bonus included
	Nodes    int           // draft tokens verified per step
	Draft    time.Duration // sum of drafter passes
	Verify   time.Duration // T_verify(1 + Nodes)
	Step     time.Duration // Draft + Verify + Overhead
	Speedup  float64       // AAL * plain decoding's token (Costs.PlainToken) / Step
	PerDepth []int         // drafter pass widths
	// Backend and DraftBackend place the plan's models where the search
	// placed them (a tune with placements): the target's device and the
	// drafter's ("" = the target's). Both empty: wherever the pair was
	// opened. Speedup is then over plain decoding where the user asked
	// the target to run, so placements compare.
	Backend, DraftBackend string `json:",omitempty"`
	// DraftThreads is the drafter's share of the threads the plan was
	// priced on (0: the plan does not draft while the target verifies, or
	// no split curves were measured): runs and config.yaml use it.
	DraftThreads int `json:",omitempty"`
	// Low and High bound Speedup: tokens a step two standard errors of the
	// calibration either way, the verification pass one spread of its
	// curve either way (an assumed acceptance gives the curve's alone).
	Low, High float64 `json:",omitempty"`
	// Bounded says the curves priced a step cheaper than plain decoding's
	// token, which no step can be, and the step was raised to it.
	Bounded bool `json:",omitempty"`
	// Context names the contexts the verification passes were priced at
	// (Costs.Context): the range the prediction rests on.
	Context ContextRange `json:",omitzero"`
	// Concurrency is the requests a server runs at once that the plan
	// was tuned for (0 or 1: one; RankLoads prices it there).
	Concurrency int `json:",omitempty"`
	// Adaptive says the goodput policy served the plan best at
	// Concurrency; StopsAt is the first concurrency ranked where plain
	// batching beat every plan (0: none ranked did).
	Adaptive bool `json:",omitempty"`
	StopsAt  int  `json:",omitempty"`
}

// SplitChoices are the drafter's thread counts the search tries for a
// plan that drafts while the target verifies on one device of total
// threads: one thread, a quarter and a half (the target keeps the rest),
// or just pinned when the user fixed it. A drafter is a small fraction of
// the target, so giving it more than half never pays.
func SplitChoices(total, pinned int) []int {
	if pinned > 0 {
		return []int{pinned}
	}
	var out []int
	for _, d := range []int{1, total / 4, total / 2} {
		if d >= 1 && d < total && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// Where says where a plan runs when the search chose it: its placement
// and its split of the threads ("" for neither).
func (p Prediction) Where() string {
	pl, th := p.Placed(), p.Threads()
	if pl != "" && th != "" {
		return pl + ", " + th
	}
	return pl + th
}

// Threads says how a concurrent plan splits the threads ("" otherwise).
func (p Prediction) Threads() string {
	if p.DraftThreads <= 0 {
		return ""
	}
	if p.DraftThreads == 1 {
		return "drafter on 1 thread"
	}
	return fmt.Sprintf("drafter on %d threads", p.DraftThreads)
}

// Placed names a placed plan's devices ("" when it was not placed).
func (p Prediction) Placed() string {
	switch {
	case p.Backend == "":
		return ""
	case p.DraftBackend == "":
		return "both on " + p.Backend
	}
	return "target on " + p.Backend + ", drafter on " + p.DraftBackend
}

// Predict scores a plan:
// speedup = AAL * T_plain / (sum T_draft + T_verify(W) + T_overhead), T_plain
// being plain decoding's token (Costs.PlainToken: as the re-check timed it,
// else T_verify(1)).
// The nodes a plan verifies and their chance of acceptance come from its
// strategy's cost model (spec.Strategy.Expect). A plan that drafts while
// the target verifies (duo, egt with AOT) is priced on the split curves
// (c.Splits: target and drafter on their own threads) when they were
// measured, on each split of the threads, and keeps the best: its first Ahead drafter passes overlap the verification and
// are redone when the guess behind them missed, so a step costs
// (1 - hit) * ahead + rest + max(T_verify(W), ahead) + overhead (with a
// tail, the tail's own passes run beside verification instead of ahead;
// with the split's beside curves, that drafting is priced as the drafter
// drafts beside a verifying target, and the pass pays the share of its
// slowdown beside a busy drafter that the drafting runs through). Plain
// decoding, the baseline, always runs on every thread (c.Verify), and
// its own plan (spec.PlainPlan) is priced as exactly that baseline: 1x.
func Predict(p Plan, acc *Acceptance, c Costs) (Prediction, error) {
	return predict(p, acc, c.monotone(), nil)
}

// predict is Predict with a memo of priced plans (nil: none) that a
// search shares between the threshold plans built on one fixed plan.
func predict(p Plan, acc *Acceptance, c Costs, m *memo) (Prediction, error) {
	if !p.Concurrent() || len(c.Splits) == 0 {
		if p.Concurrent() && c.OneDevice && c.Draft != nil {
			return Prediction{Plan: p}, fmt.Errorf("profiles: %s drafts while the target verifies on the same device, and no curves with the threads split between them were measured", p.Strategy)
		}
		return predictBounded(p, acc, c, curves{verify: c.Verify, draft: c.Draft, split: -1}, m)
	}
	var best Prediction
	var err error
	for i, sc := range c.Splits {
		pr, e := predictBounded(p, acc, c, curves{verify: sc.Verify, draft: sc.Draft, split: i, beside: sc.Beside, draftBeside: sc.DraftBeside}, m)
		if e != nil {
			err = e
			continue
		}
		pr.DraftThreads = sc.DraftThreads
		if best.Step == 0 || pr.Speedup > best.Speedup {
			best = pr
		}
	}
	if best.Step == 0 && err != nil {
		return best, err
	}
	return best, nil
}

// predictBounded is predictOn held to the model's guards (bound) and given
// its interval.
func predictBounded(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (Prediction, error) {
	pr, err := predictOn(p, acc, c, cv, m)
	if err != nil {
		return pr, err
	}
	if err := bound(&pr, c, cv); err != nil {
		return pr, err
	}
	interval(&pr, m.aalError(acc), cv)
	pr.Context = c.Context
	return pr, nil
}

// curves are the latency curves a plan is priced on: the full-thread
// ones (split -1) or split number split's, with its verification beside
// the drafter where it was measured (SplitCosts.Beside).
type curves struct {
	verify, draft       []latency.Point
	split               int
	beside, draftBeside []latency.Point
}

// memo holds what one search works out once and reuses (nil: nothing):
// plans already priced, by description and the curves they were priced
// on; threshold policies' stopping mixes, by depth and minimum (every
// plan of that depth and minimum weighs the calibration's steps alike:
// weighed again for each of the search's thousands of threshold plans, a
// calibration of 8192 steps took a search 2.3-2.4 s, now 0.15-0.19 s,
// BenchmarkSearchResampling); and the calibration's re-sampling rate.
type memo struct {
	preds      map[memoKey]Prediction
	stopMixes  map[stopKey]stopMix
	growths    map[replayKey]replayed
	probes     []probeStep // the calibration's probe trees, indexed once
	probesSeen bool
	rate       float64
	rateSeen   bool
	aalErr     float64
	aalErrSeen bool
}

func newMemo() *memo {
	return &memo{preds: map[memoKey]Prediction{}, stopMixes: map[stopKey]stopMix{}, growths: map[replayKey]replayed{}}
}

// growth is the EGT shape (widths, branch) grown on the calibration's
// probe trees under a threshold depth policy of minimum least (0: its
// fixed depth), with those probe steps: indexed once and grown once a
// search for every plan of that shape and minimum (their w-max differs;
// without a memo, every time).
func (m *memo) growth(acc *Acceptance, widths []int, branch int, least float64) ([]probeStep, replayed) {
	if m == nil {
		probes := probesOf(acc.Depths)
		g, levels := replayGrowthUntil(probes, widths, branch, least)
		return probes, replayed{g, levels}
	}
	if !m.probesSeen {
		m.probes, m.probesSeen = probesOf(acc.Depths), true
	}
	k := replayKey{spec.Ints(widths), branch, least}
	r, ok := m.growths[k]
	if !ok {
		r.g, r.levels = replayGrowthUntil(m.probes, widths, branch, least)
		m.growths[k] = r
	}
	return m.probes, r
}

type memoKey struct {
	plan  string
	split int
}

type stopKey struct {
	depth int
	least float64
}

// stops is stopsOf, once a search for each depth and minimum.
func (m *memo) stops(samples []DepthSample, depth int, least float64) stopMix {
	if m == nil {
		return stopsOf(samples, depth, least)
	}
	k := stopKey{depth, least}
	st, ok := m.stopMixes[k]
	if !ok {
		st = stopsOf(samples, depth, least)
		m.stopMixes[k] = st
	}
	return st
}

// aalError is acc.aalError, once a search.
func (m *memo) aalError(acc *Acceptance) float64 {
	if m == nil {
		return acc.aalError()
	}
	if !m.aalErrSeen {
		m.aalErr, m.aalErrSeen = acc.aalError(), true
	}
	return m.aalErr
}

// resampleRate is acc.resampleRate, once a search.
func (m *memo) resampleRate(acc *Acceptance) float64 {
	if m == nil {
		return acc.resampleRate()
	}
	if !m.rateSeen {
		m.rate, m.rateSeen = acc.resampleRate(), true
	}
	return m.rate
}

// predictOn prices p on the curves cv (the full-thread ones, or one
// split's).
func predictOn(p Plan, acc *Acceptance, c Costs, cv curves, m *memo) (Prediction, error) {
	secs := func(pts []latency.Point) func(int) float64 {
		return func(w int) float64 { return Interp(pts, w).Seconds() }
	}
	p = p.Adapted(secs(cv.verify), secs(cv.draft))
	if own := pricers[p.Strategy].price; own != nil {
		if pr, ok, err := own(p, acc, c, cv, m); ok {
			return pr, err
		}
	}
	if acc.split() && p.NeedsSource() && c.Resample > 0 && !p.Concurrent() {
		return steadyMix(p, acc, c, cv, m)
	}
	ex, err := p.Expect(acc.At)
	if err != nil {
		return Prediction{Plan: p}, fmt.Errorf("profiles: cannot model %s: %w", p.Strategy, err)
	}
	pr := priceExpected(p, ex, c, cv)
	switch {
	case acc.split() && p.NeedsSource():
		if pr.AAL, err = steadyAAL(p, acc); err != nil {
			return pr, fmt.Errorf("profiles: cannot model %s: %w", p.Strategy, err)
		}
		pr.setSpeedup(c)
	case !acc.split():
		// an EGT: its tokens a step as the engine would have grown, pruned
		// and verified it on each recorded step (replay.go), not the
		// tables' best tree
		if aal, ok := replayedAAL(p, pr.AAL, acc, m); ok {
			pr.AAL = aal
			pr.setSpeedup(c)
		}
	}
	return pr, nil
}

// passWidths is what p's drafting passes cost by, pass by pass: with
// perChild (Costs.DraftPerChild) the nodes each adds, as its strategy
// counts them (spec.Plan.PassWidths), else the nodes each expands
// (ex.PerDepth).
func passWidths(p Plan, ex spec.Expected, perChild bool) []int {
	if !perChild {
		return ex.PerDepth
	}
	return p.PassWidths(ex)
}

// priceExpected prices p's expected tree ex on the curves cv: its
// tokens a step and the time of a step.
func priceExpected(p Plan, ex spec.Expected, c Costs, cv curves) Prediction {
	verify, draft := cv.verify, cv.draft
	pr := Prediction{Plan: p, PerDepth: ex.PerDepth, AAL: ex.AAL()}
	pr.Nodes = max(len(ex.Values), ex.Verified)
	var ahead time.Duration
	for i, w := range passWidths(p, ex, c.DraftPerChild) {
		t := Interp(draft, w)
		if i < ex.Ahead {
			ahead += t
		} else {
			pr.Draft += t
		}
	}
	if !p.Concurrent() {
		for i := 0; i < len(pr.PerDepth) && len(c.DraftAfter) > 0; i++ {
			pr.Draft += c.DraftAfter[min(i, len(c.DraftAfter)-1)].Median // later passes: the last point
		}
	}
	pr.Verify = Interp(verify, 1+pr.Nodes)
	hit := ex.AheadHit
	if c.Forgets {
		hit = 0 // the source keeps nothing it drafted ahead
	}
	miss := time.Duration((1 - hit) * float64(ahead))
	// what runs beside the verification: the next step's first passes,
	// or the tail's passes at every end it prepares
	work := ahead
	if ex.AheadWidths != nil || len(cv.draftBeside) > 0 {
		work = 0
		widths := ex.AheadWidths
		if widths == nil {
			widths = passWidths(p, ex, c.DraftPerChild)[:min(ex.Ahead, len(ex.PerDepth))]
		}
		on := draft
		if len(cv.draftBeside) > 0 {
			on = cv.draftBeside // the drafter's passes beside a verifying target
		}
		for _, w := range widths {
			work += Interp(on, w)
		}
	}
	if ex.Overlap && len(cv.beside) > 0 && work > 0 {
		// the drafter drafting beside the pass slows it (memory
		// bandwidth, caches, and CPU where no core is spare): the share
		// of the pass it runs through pays that share of the difference
		// measured with it drafting throughout
		if busy := Interp(cv.beside, 1+pr.Nodes); busy > pr.Verify {
			share := math.Min(1, float64(work)/float64(busy))
			pr.Verify += time.Duration(share * float64(busy-pr.Verify))
		}
	}
	pr.Draft += ahead
	pr.Step = pr.Draft - ahead + miss + max(pr.Verify, work) + c.Overhead
	if ex.Ahead == 0 && ex.Overlap && pr.Draft < pr.Verify {
		// a strategy that overlaps without saying how much: only the longer side counts
		pr.Step = pr.Verify + c.Overhead
	}
	if !p.NeedsSource() {
		// plain decoding is the baseline itself: one pass of one token and
		// no tree to build, sample or compact (pricing it with the
		// speculative steps' bookkeeping put it below 1x, 0.83x on a GPU)
		pr.Step = c.PlainToken()
	}
	pr.setSpeedup(c)
	return pr
}

// setSpeedup sets Speedup from AAL and Step: AAL * plain decoding's token
// (Costs.PlainToken) / step.
func (pr *Prediction) setSpeedup(c Costs) {
	pr.Speedup = 0
	if pr.Step > 0 {
		pr.Speedup = pr.AAL * float64(c.PlainToken()) / float64(pr.Step)
	}
}

// SearchTails are the tail budgets the search tries on the plans that
// can draft a tail (chains and duo; chains also at one end and at every
// end; AOT EGTs the largest): each prepares the next draft at that many
// of the most likely end positions while the target verifies.
var SearchTails = []int{2, 4}

// SearchSpace bounds the plans Search enumerates.
type SearchSpace = spec.Space

// Search scores every registered strategy's candidate plans (plain
// decoding, chains, static trees, Equal-Growth Trees, the DP-optimal
// Sequoia tree of each size: a few hundred) with Predict and returns them
// best first. The Sequoia trees are built from acc, one per size up to the
// largest profiled verification width (one row is the root), unless sp
// says otherwise.
func Search(acc *Acceptance, c Costs, sp SearchSpace) []Prediction {
	return SearchAll(acc, c, sp).Ranked
}

// Searched is a whole search: the plans it ranked, best first, and how
// many candidates it left out because they verify more tokens a pass than
// the profile measured (Widest: the widest pass it did).
type Searched struct {
	Ranked []Prediction
	Beyond int
	Widest int
}

// SearchAll is Search with what it left out.
func SearchAll(acc *Acceptance, c Costs, sp SearchSpace) Searched {
	c = c.monotone()
	if sp.Accept == nil && acc != nil && len(acc.Rank) > 0 {
		sp.Accept = acc.At
	}
	for _, name := range spec.Strategies() { // the knobs each strategy's plans read
		if offer := pricers[name].offer; offer != nil {
			offer(&sp, acc)
		}
	}
	if sp.OptimalNodes <= 0 && len(c.Verify) > 0 {
		sp.OptimalNodes = c.Verify[len(c.Verify)-1].W - 1
	}
	res := Searched{Widest: c.Widest()}
	m := newMemo()
	seen := map[string]bool{}
	canonical := map[string]bool{}
	for _, p := range spec.Candidates(sp) {
		// plans doing the same work (chain gamma=3, tree 1,1,1, an EGT of
		// branch 1) are one plan, ranked and counted once by its
		// canonical form
		p = p.Canonical()
		if k := p.Key(); canonical[k] {
			continue
		} else {
			canonical[k] = true
		}
		pr, err := predict(p, acc, c, m)
		if errors.Is(err, ErrBeyondProfile) {
			res.Beyond++
			continue
		}
		if err != nil {
			continue
		}
		// plans that adapt to the same plan (duo budgets the run-time
		// rule settles on alike) are scored once
		if pr.Plan.Adapts() {
			k := fmt.Sprintf("%s/%v/%d", pr.Plan, pr.Plan.Values(), pr.DraftThreads)
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		res.Ranked = append(res.Ranked, pr)
	}
	// the depth predictors trained on this calibration, each for its own
	// shape, where they beat that shape's fixed depths and threshold
	// policies on the steps they never saw
	for _, l := range learned(acc) {
		if !l.Beats {
			continue
		}
		pr, err := predict(l.Plan, acc, c, m)
		if errors.Is(err, ErrBeyondProfile) {
			res.Beyond++
			continue
		}
		if err == nil {
			res.Ranked = append(res.Ranked, pr)
		}
	}
	sort.SliceStable(res.Ranked, func(i, j int) bool { return res.Ranked[i].Speedup > res.Ranked[j].Speedup })
	return res
}

// Distinct returns up to n of preds (best first), skipping any plan whose
// prediction equals an earlier one's in every figure (tokens per step,
// nodes, drafter passes, drafting and verification time): such plans do the
// same work under different names (chain gamma=5, tree 1,1,1,1,1, a chain
// built by the Sequoia DP), and measuring both tells nothing new.
func Distinct(preds []Prediction, n int) []Prediction {
	var out []Prediction
	for _, p := range preds {
		if len(out) >= n {
			break
		}
		dup := false
		for _, q := range out {
			if p.AAL == q.AAL && p.Nodes == q.Nodes && p.Draft == q.Draft && p.Verify == q.Verify && p.Step == q.Step && slices.Equal(p.PerDepth, q.PerDepth) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}

// Shape returns the tree a plan verifies, as a parent list (-1 for depth 1),
// for drawing: chains are paths, trees follow their shape, and EGT keeps
// the nodes its pruning would keep under the acceptance model.
func Shape(p Plan, acc *Acceptance) []int {
	ex, err := p.Expect(acc.At)
	if err != nil {
		return nil
	}
	return ex.Parents
}
