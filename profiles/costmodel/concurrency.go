package costmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/latency"
)

// Concurrency: a server's pass holds one step of every running request,
// so what a plan is worth depends on how many requests share the pass.
// Plans are priced at a concurrency C as C identical requests decoding
// together (the calibration's acceptance each), every pass of C sequences
// priced on the stored curve of that pass size.

// PassCurve is the target's curve of passes of Seqs sequences, each after
// Context cached tokens (0: the short context, as in Costs.Passes): point
// W is a pass of W rows in all (measure.SeqsCurve). Seqs 1 is the short
// context's own one-sequence curve.
type PassCurve struct {
	Seqs    int
	Context int `json:",omitempty"`
	Verify  []latency.Point
}

// DefaultConcurrency are the concurrencies tune prices a plan at unless
// told others.
var DefaultConcurrency = []int{1, 2, 4, 8}

// The policies a plan is priced under at a concurrency: engine/spec's
// Plain (no request drafts: plain batching), Fixed (every request its
// whole plan) and Goodput (each pass's budgets chosen for the most
// expected tokens a second of it).
const (
	PolicyPlain   = "plain"
	PolicyFixed   = "fixed"
	PolicyGoodput = "goodput"
)

// Requests is the shape of the requests a load is priced for: their
// prompts and the tokens each asks for, in tokens. A request's life is
// its prompt's prefill, then its tokens; with Tokens 0 a load is priced
// as requests that never end (every pass a decoding pass).
type Requests struct {
	Prompt, Tokens int
	// Together says the requests run in step: C clients each sending an
	// equal request when its last one ends (as loadtest drives a server)
	// start together and end together, so every wave's prompts are
	// prefilled in the same passes and a request's first token waits for
	// all of them. False: requests come one at a time (a deployment's
	// steady state), each after half a pass.
	Together bool
	// First and Last are the server's own time in a request beyond the
	// engine's passes (reading and tokenizing it, admitting it, streaming
	// its chunks, the client's next request): before its first token and
	// after its last. The load test times them on one-token requests
	// (profiles.serverOverhead); zero prices the engine alone.
	First, Last time.Duration
	// Stream is the server's own time a request adds to each pass it is
	// in: its streamed text of that pass written to its client (one write
	// a pass, whatever the tokens), the pass's workers losing their cores
	// to it on a machine whose cores they all take; StreamPass the part a
	// streamed pass pays once, however many requests stream in it (the
	// clients woken beside the workers at all). A pass of k requests costs
	// StreamPass + k*Stream more. The load test times the two at one
	// client and at its most (profiles.serverOverhead): on a 2-core Zen 3
	// streaming cost a plain server's pass 0.64 ms at one client and 1.8
	// ms at eight, where eight times the one client's had priced 5.3 ms
	// (plain batching at eight predicted 22% below its measure). Zero
	// prices the engine alone.
	Stream, StreamPass time.Duration
}

// LoadPrediction is a plan under a policy at a concurrency.
type LoadPrediction struct {
	Concurrency int
	Plan        Plan
	Policy      string
	// Budget is the draft nodes each request verifies a pass (the
	// policy's choice, averaged over the requests); Rows the pass's rows
	// in all.
	Budget float64
	Rows   int
	// Tokens is what a request emits a pass; Pass what a pass takes,
	// every request's drafting and bookkeeping included.
	Tokens float64
	Pass   time.Duration
	// TokensPerSec is the aggregate over the C requests; TPOT a request's
	// time per output token; TTFT its time to first token (its prompt's
	// prefill, then a pass).
	TokensPerSec float64
	TPOT, TTFT   time.Duration
	// Speedup is TokensPerSec over plain batching's at the same
	// concurrency; Low and High bound it as the plan's interval at one
	// request bounds its speedup there.
	Speedup, Low, High float64
	// Context is the range the verification passes were priced at.
	Context ContextRange `json:",omitzero"`
}

// LoadLevel is one concurrency's ranking: plain batching, every plan
// priced under Fixed and Goodput, by aggregate tokens/s; Left counts the
// plans left out because their passes hold more rows than the pass
// size's curve measured (never extrapolated), Err says why the level was
// not priced at all ("" when it was).
type LoadLevel struct {
	Concurrency int
	Ranked      []LoadPrediction
	Left        int    `json:",omitempty"`
	Err         string `json:",omitempty"`
}

// Best is the level's top-ranked entry (the zero value when none).
func (l LoadLevel) Best() LoadPrediction {
	if len(l.Ranked) == 0 {
		return LoadPrediction{}
	}
	return l.Ranked[0]
}

// errBeyond: a pass holds more rows than its pass size's curve measured.
var errBeyond = errors.New("past the widest pass measured")

// passCost prices passes of conc sequences at c's contexts.
type passCost struct {
	c    Costs
	conc int
	// lo and hi are the measured pass sizes around conc (equal when conc
	// was measured); short the one-sequence curve at the short context
	lo, hi PassCurve
	short  []latency.Point
}

func newPassCost(c Costs, conc int) (passCost, error) {
	pc := passCost{c: c, conc: conc, short: c.Short}
	if pc.short == nil {
		pc.short = c.Verify // priced at no other context: no sequence costs more than its curve
	}
	if conc == 1 {
		return pc, nil
	}
	curves := slices.Clone(c.Passes)
	slices.SortFunc(curves, func(a, b PassCurve) int { return a.Seqs - b.Seqs })
	if len(pc.short) > 0 && (len(curves) == 0 || curves[0].Seqs != 1) {
		curves = append([]PassCurve{{Seqs: 1, Verify: pc.short}}, curves...)
	}
	for i, p := range curves {
		if p.Seqs == conc {
			pc.lo, pc.hi = p, p
			return pc, nil
		}
		if p.Seqs > conc && i > 0 {
			pc.lo, pc.hi = curves[i-1], p
			return pc, nil
		}
	}
	most := 0
	if len(curves) > 0 {
		most = curves[len(curves)-1].Seqs
	}
	return pc, fmt.Errorf("passes of %d sequences not measured (the most measured: %d; profile --seqs %d)", conc, most, conc)
}

// at is a pass of rows rows, rows/conc of each sequence: at one request
// the context-priced verification curve; beyond, the pass size's curve
// (interpolated linearly between the measured pass sizes around conc;
// priced below the short context on its own curves there, AtContexts),
// plus, for each sequence, what its share of the rows costs more at the
// steps' contexts past the short one than at it (every sequence reads
// its own cache: Costs.Above). errBeyond past the widest pass measured.
func (pc passCost) at(rows int) (time.Duration, error) {
	if pc.conc == 1 {
		if rows > pc.c.Widest() && pc.c.Widest() > 0 {
			return 0, errBeyond
		}
		return Interp(pc.c.Verify, rows), nil
	}
	widest := func(p PassCurve) int { return p.Verify[len(p.Verify)-1].W }
	if rows > widest(pc.lo) || rows > widest(pc.hi) {
		return 0, errBeyond
	}
	t := float64(Interp(pc.lo.Verify, rows))
	if pc.hi.Seqs != pc.lo.Seqs {
		f := float64(pc.conc-pc.lo.Seqs) / float64(pc.hi.Seqs-pc.lo.Seqs)
		t += f * (float64(Interp(pc.hi.Verify, rows)) - t)
	}
	if len(pc.short) > 0 {
		each := (rows + pc.conc - 1) / pc.conc
		above := pc.c.Above
		if above == nil {
			above = pc.c.Verify
		}
		extra := Interp(above, each) - Interp(pc.short, each)
		t += float64(pc.conc) * float64(max(extra, 0))
	}
	return time.Duration(t), nil
}

// PassTimes prices passes of several sequences on c's curves, each pass
// size's pricing made once: a serving policy prices hundreds of passes
// before every step (eight requests' budgets grown node by node), and
// making a pass size's pricing (the curves sorted and bracketed) for each
// of them took half a millisecond of every step of eight requests on the
// bench pair.
type PassTimes struct {
	c  Costs
	mu sync.Mutex
	by map[int]pricedSize
}

// pricedSize is a pass size's pricing, or why there is none.
type pricedSize struct {
	pc  passCost
	err error
}

// NewPassTimes prices passes on c's curves.
func NewPassTimes(c Costs) *PassTimes { return &PassTimes{c: c, by: map[int]pricedSize{}} }

// At is a pass of seqs sequences holding rows rows in all (one sequence:
// c.Verify; more: the pass sizes' curves c.Passes, interpolated between
// the measured sizes around seqs), and false where the curves do not
// price it (a pass size past the measured ones, or more rows than
// measured).
func (p *PassTimes) At(seqs, rows int) (time.Duration, bool) {
	seqs = max(seqs, 1)
	p.mu.Lock()
	ps, ok := p.by[seqs]
	if !ok {
		ps.pc, ps.err = newPassCost(p.c, seqs)
		p.by[seqs] = ps
	}
	p.mu.Unlock()
	if ps.err != nil {
		return 0, false
	}
	t, err := ps.pc.at(rows)
	return t, err == nil && t > 0
}

// ContextPasses prices passes of several sequences at the context their
// sequences have cached, as a server's policy meets them pass by pass:
// c's curves (the short context base's, c.Passes and c.PassFamily) priced
// at that one context on the family fam (AtContexts, a context past the
// longest measured taken at it), each context's pricing made once for
// contexts close together (contextBucket). A pass of eight short requests
// costs relatively more than its rows at the short context than after 32
// tokens (the bench target on a 2-core AVX2 machine: eight one-row
// sequences 11.9 ms after 128 tokens, 8.0 after 32; 24 rows 2.3x and
// 2.5x that), so a policy pricing at the short context drafts where
// plain batching pays more.
type ContextPasses struct {
	c    Costs
	base int
	fam  []ContextCurve
	mu   sync.Mutex
	by   map[int]*PassTimes
}

// NewContextPasses prices passes on c's curves at the contexts of fam.
func NewContextPasses(c Costs, base int, fam []ContextCurve) *ContextPasses {
	return &ContextPasses{c: c, base: base, fam: sortedFamily(fam), by: map[int]*PassTimes{}}
}

// At is a pass of seqs sequences holding rows rows in all, each sequence
// after about n cached tokens (PassTimes.At at that context; n < 1: the
// short context).
func (p *ContextPasses) At(seqs, rows, n int) (time.Duration, bool) {
	if len(p.fam) < 2 || n < 1 {
		n = p.base // no curves over context (none at all: no longest to take)
	} else {
		n = min(contextBucket(n), p.fam[len(p.fam)-1].Context)
	}
	p.mu.Lock()
	pt, ok := p.by[n]
	if !ok {
		c := p.c
		if n != p.base {
			c = atSteps(c, p.base, p.fam, []int{n})
		}
		pt = NewPassTimes(c)
		p.by[n] = pt
	}
	p.mu.Unlock()
	return pt.At(seqs, rows)
}

// contextBucket rounds n up to one of a few contexts an eighth of its
// power of two apart (16 at least): passes priced at n and at its bucket
// differ by at most that share of what the context adds.
func contextBucket(n int) int {
	step := 16
	for step*16 <= n {
		step *= 2
	}
	return (n + step - 1) / step * step
}

// prefill is a prompt of n tokens prefilled alone, in chunks of the
// widest one-sequence pass measured (never a pass wider than that).
func (pc passCost) prefill(n int) time.Duration {
	w := pc.c.Widest()
	if n <= 0 || w <= 0 {
		return 0
	}
	chunks := (n + w - 1) / w
	last := n - (chunks-1)*w
	return time.Duration(chunks-1)*Interp(pc.c.Verify, w) + Interp(pc.c.Verify, last)
}

// wave is a wave of conc prompts, n rows in all, prefilled together as a
// server joins them: passes of conc sequences (at, the pass size's
// curve), in chunks of the widest such pass measured; at one sequence,
// or where the pass size's curves do not price it, prefill. The wave is
// one pass of conc sequences, so its price rests on their curve: on the
// one-sequence curve the eight default prompts of the load test (166
// rows) came to 1.16 ms a row where the bench target's pass of eight
// sequences prefilling them took 0.95-1.0 (2-core Zen 3), and the
// one-sequence curve after 32 tokens, measured at another moment than
// the one after 128, read its 48-row pass 1.18x dearer than there,
// where side by side it is 0.7-0.75x.
func (pc passCost) wave(n int) time.Duration {
	if pc.conc == 1 || n <= 0 || len(pc.lo.Verify) == 0 || len(pc.hi.Verify) == 0 {
		return pc.prefill(n)
	}
	w := min(pc.lo.Verify[len(pc.lo.Verify)-1].W, pc.hi.Verify[len(pc.hi.Verify)-1].W)
	if w < pc.conc {
		return pc.prefill(n)
	}
	chunks := (n + w - 1) / w
	full, err := pc.at(w)
	if err != nil {
		return pc.prefill(n)
	}
	last, err := pc.at(max(n-(chunks-1)*w, pc.conc)) // a pass holds a row of each sequence at least
	if err != nil {
		return pc.prefill(n)
	}
	return time.Duration(chunks-1)*full + last
}

// draftPrefill is what a plan's draft model takes to read n prompt
// tokens (all but each prompt's last) before the first step (a pass over
// them, on the drafter's curve; a wave's prompts are read in one pass:
// spec.Batch's beginDrafters): nothing for plain decoding, a source with
// no measured passes (n-grams), or the hidden-state drafter, which takes
// the target's states of the prompt instead.
func draftPrefill(p Plan, c Costs, n int) time.Duration {
	if !p.NeedsSource() || len(c.Draft) == 0 || c.DraftPerChild || n <= 0 {
		return 0
	}
	return Interp(c.Draft, n)
}

// PredictLoad prices a plan at concurrency conc under policy, from its
// prediction at one request (pr: its tokens a step, drafting and
// interval), the acceptance, and c's pass curves (c.Passes) and
// context-priced verification curve. A pass of C requests costs
//
//	T_pass = C * (Step_1 - T_verify(1 + nodes)) + T_C(rows)
//
// each request's drafting and bookkeeping (its step at one request less
// its verification) running one request after another before the one
// shared pass of all their rows, T_C being the curve of passes of C
// sequences. C clients each sending their next request when the last
// ends keep C requests running; a request of n tokens after a prompt of
// P lives
//
//	life = wait + prefill(P - 1) + max(1, n / AAL) * T_pass + (C - 1) * prefill(P - 1)
//
// its prompt but the last token prefilled (under load after the pass
// running when it came: wait, half a pass; with a draft model,
// prefill(P - 1) counts its pass over the prompt too, draftPrefill(P - 1)), then its steps, the first
// of which verifies the prompt's last token and gives its first tokens
// (TTFT = wait + prefill(P - 1) + T_pass), AAL a step; and the other
// requests' prompts, one each in its life, lengthen the passes it waits
// on. Requests that run in step (req.Together) wait for no pass but have
// every prompt of their wave prefilled, in passes of all their rows,
// before their first step: TTFT = wave(C * (P - 1)) + draftPrefill(C * (P - 1)) + T_pass
// (wave: passes of C sequences on T_C, in chunks of its widest), life =
// TTFT + (max(1, n / AAL) - 1) * T_pass. The server's own time in a
// request (req.First before its first token, req.Last after its last)
// adds to its TTFT and its life once, whatever the level: the clients'
// requests wait on it side by side. (Priced as C prefills, eight
// prompts of 19 tokens on the bench pair came to 54 ms against the 39
// measured: the server prefills them in one pass.) Then tokens/s = C * n
// / life and TPOT = (life - TTFT) / (n - 1); with req.Tokens 0, requests
// that never end: tokens/s = C * AAL / T_pass, TPOT = T_pass / AAL. Plain
// batching
// is the plan spec.PlainPlan (one row a request, AAL 1); Goodput's
// budgets are spec.Goodput's on T_C, each request's plan shrunk to its
// budget and priced by price (Predict with the caller's inputs).
func PredictLoad(pr Prediction, acc *Acceptance, c Costs, conc int, policy string, req Requests, price func(Plan) (Prediction, error)) (LoadPrediction, error) {
	lp := LoadPrediction{Concurrency: conc, Plan: pr.Plan, Policy: policy, Context: c.Context}
	if conc < 1 {
		return lp, fmt.Errorf("a concurrency of %d", conc)
	}
	pc, err := newPassCost(c, conc)
	if err != nil {
		return lp, err
	}
	// each request's step at its budget: tokens, rows, its own time
	type step struct {
		tokens float64
		rows   int
		own    time.Duration
		nodes  int
	}
	of := func(p Prediction) step {
		return step{tokens: p.AAL, rows: 1 + p.Nodes, own: max(p.Step-p.Verify, 0), nodes: p.Nodes}
	}
	// plain decoding's step beyond its pass, as the baseline of every
	// speedup at one request has it (Costs.PlainToken)
	plain := step{tokens: 1, rows: 1, own: max(c.PlainToken()-Interp(c.Verify, 1), 0)}
	steps := make([]step, conc)
	switch policy {
	case PolicyPlain:
		lp.Plan = spec.PlainPlan()
		for i := range steps {
			steps[i] = plain
		}
	case PolicyFixed:
		for i := range steps {
			steps[i] = of(pr)
		}
	case PolicyGoodput:
		loads := make([]spec.Load, conc)
		for i := range loads {
			loads[i] = spec.Load{Plan: pr.Plan, Nodes: pr.Plan.Nodes(), Accept: acc.At}
		}
		budgets := make([]int, conc)
		priced := map[int]step{}
		var priceErr error
		stepAt := func(n int) step {
			s, ok := priced[n]
			if !ok {
				s = plain
				if n > 0 {
					sp, err := price(pr.Plan.Shrink(n))
					if err != nil {
						priceErr = err
					}
					s = of(sp)
				}
				priced[n] = s
			}
			return s
		}
		spec.Goodput{Latency: func(rows int) time.Duration {
			t, err := pc.at(rows)
			if err != nil {
				return time.Duration(math.MaxInt64 / 4) // past the curve: never chosen
			}
			return t
		}, Own: func(n int) time.Duration { return stepAt(n).own }, Margin: spec.ShrinkMargin}.Budgets(0, loads, budgets)
		for i, n := range budgets {
			steps[i] = stepAt(n)
		}
		if priceErr != nil {
			return lp, priceErr
		}
	default:
		return lp, fmt.Errorf("unknown policy %q", policy)
	}
	var own time.Duration
	nodes := 0
	for _, s := range steps {
		lp.Tokens += s.tokens / float64(conc)
		lp.Rows += s.rows
		own += s.own
		nodes += s.nodes
	}
	lp.Budget = float64(nodes) / float64(conc)
	pass, err := pc.at(lp.Rows)
	if err != nil {
		return lp, err
	}
	lp.Pass = own + pass + req.StreamPass + time.Duration(conc)*req.Stream
	if lp.Pass <= 0 || lp.Tokens <= 0 {
		return lp, fmt.Errorf("a pass priced at %v", lp.Pass)
	}
	// a drafting request's draft model reads its prompt once the target
	// has it, in the step after that pass; a wave's, in one drafter pass
	// (lp.Plan is plain decoding's under PolicyPlain)
	pre, wait := pc.prefill(req.Prompt-1)+draftPrefill(lp.Plan, c, req.Prompt-1), time.Duration(0)
	first, others := pre, time.Duration(conc-1)*pre // the prompts before a request's first step, and in the rest of its life
	switch {
	case req.Together:
		// its wave's prompts, all before any first step, in the passes
		// that prefill them together (the server joins them into one
		// pass of all their rows): priced as passes of conc sequences
		// holding all their tokens (wave)
		first, others = pc.wave(conc*(req.Prompt-1))+draftPrefill(lp.Plan, c, conc*(req.Prompt-1)), 0
	case conc > 1:
		wait = lp.Pass / 2
	}
	lp.TTFT = wait + first + lp.Pass + req.First
	lp.TokensPerSec = float64(conc) * lp.Tokens / lp.Pass.Seconds()
	lp.TPOT = time.Duration(float64(lp.Pass) / lp.Tokens)
	if req.Tokens > 1 {
		steps := max(1, float64(req.Tokens)/lp.Tokens) // the first step runs whole
		life := float64(wait+first+req.First+req.Last) + steps*float64(lp.Pass) + float64(others)
		lp.TokensPerSec = float64(conc) * float64(req.Tokens) / (life / float64(time.Second))
		lp.TPOT = time.Duration((life - float64(lp.TTFT)) / float64(req.Tokens-1))
	}
	lp.Speedup, lp.Low, lp.High = 1, 1, 1
	if policy != PolicyPlain && pr.Speedup > 0 && pr.Low > 0 {
		lp.Low, lp.High = pr.Low/pr.Speedup, pr.High/pr.Speedup // relative, set against plain below
	}
	return lp, nil
}

// RankLoads ranks, at each concurrency of levels, plain batching and the
// plans of preds (a tune's ranking at one request, best first; the first
// top of them that do different work, Distinct) under the Fixed and
// Goodput policies by aggregate tokens/s, each with its speedup over
// plain batching at that concurrency. req is the requests' shape (the
// calibration's: Acceptance.Requests); price prices a plan at one
// request with the caller's inputs.
func RankLoads(preds []Prediction, acc *Acceptance, c Costs, levels []int, req Requests, top int, price func(Plan) (Prediction, error)) []LoadLevel {
	plans := Distinct(preds, top)
	var out []LoadLevel
	for _, conc := range levels {
		lv := LoadLevel{Concurrency: conc}
		base, err := PredictLoad(Prediction{Plan: spec.PlainPlan()}, acc, c, conc, PolicyPlain, req, price)
		if err != nil {
			lv.Err = err.Error()
			out = append(out, lv)
			continue
		}
		lv.Ranked = append(lv.Ranked, base)
		for _, pr := range plans {
			if !pr.Plan.NeedsSource() {
				continue // plain decoding is the baseline
			}
			for _, pol := range []string{PolicyFixed, PolicyGoodput} {
				lp, err := PredictLoad(pr, acc, c, conc, pol, req, price)
				if err != nil {
					lv.Left++
					continue
				}
				r := lp.TokensPerSec / base.TokensPerSec
				lp.Low, lp.High = r*lp.Low, r*lp.High
				lp.Speedup = r
				lv.Ranked = append(lv.Ranked, lp)
			}
		}
		sort.SliceStable(lv.Ranked, func(i, j int) bool { return lv.Ranked[i].TokensPerSec > lv.Ranked[j].TokensPerSec })
		out = append(out, lv)
	}
	return out
}

// PromptLength is the calibration's median prompt, in tokens: the
// context of each prompt's first step (0 when the calibration recorded no
// contexts). Time to first token is priced for it.
func (a *Acceptance) PromptLength() int { return a.Requests().Prompt }

// Requests is the shape of the calibration's requests: the median
// prompt (the context of each prompt's first step) and its tokens a
// prompt (MaxTokens; in older calibrations the median generated, to the
// end of each prompt's last step); zeros when the calibration recorded no
// contexts.
func (a *Acceptance) Requests() Requests {
	if a == nil {
		return Requests{}
	}
	var firsts, gens []int
	last, most := 0, 0 // the step before and the most it could emit
	for _, d := range a.Depths {
		// a step that does not follow on from the one before (its
		// context is not the one before's plus what that one emitted at
		// most) starts a prompt
		if d.Context > 0 && (len(firsts) == 0 || d.Context <= last || d.Context > last+most) {
			if len(firsts) > 0 {
				gens = append(gens, last+most-firsts[len(firsts)-1]+1)
			}
			firsts = append(firsts, d.Context)
		}
		if d.Context > 0 {
			last, most = d.Context, d.Accepted+1
		}
	}
	if len(firsts) == 0 {
		return Requests{}
	}
	gens = append(gens, last+most-firsts[len(firsts)-1]+1)
	slices.Sort(firsts)
	slices.Sort(gens)
	r := Requests{Prompt: firsts[len(firsts)/2], Tokens: gens[len(gens)/2]}
	if a.MaxTokens > 0 { // the length it was asked for, where stored
		r.Tokens = a.MaxTokens
	}
	return r
}
