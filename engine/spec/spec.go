// Package spec runs speculative decoding: a draft source proposes a chain or
// a tree of tokens, the target verifies all of them in ONE batched forward
// pass with a tree attention mask, and lossless rules decide which tokens are
// kept (see verify.go). Strategies differ only in how they grow the tree:
//
//   - ar: no draft; one token per pass (the 1.00x baseline).
//   - chain: gamma tokens drawn one after another from the drafter.
//   - tree: a static shape (widths per depth, or a parent list), children
//     ranked by drafter probability.
//   - egt: Yggdrasil's Equal-Growth Tree: a fixed number of frontier nodes
//     expanded per depth, chosen by path probability; pruned by a dynamic
//     programme to W_max nodes; padded to a fixed shape; depth chosen per
//     step by a DepthPolicy; optionally ahead-of-time drafting.
//   - duo: DuoDecoding: the drafter runs concurrently on its own threads,
//     gamma follows T_target / T_draft, several sequences when unsure.
//   - sequoia: the static tree Sequoia's dynamic programme builds from
//     the calibrated acceptance.
//
// Each strategy lives in its own file, strategy_NAME.go, which registers it
// with all its hooks (see Strategy in plan.go): its drafting, checks and
// budget, its cost model and the plans a search tries, its canonical form
// and conversions, its config.yaml mapping and its examples. Adding a
// strategy means adding such a file (and, where its fields need the
// speedup model's own pricing, profiles/costmodel/price_NAME.go); flags,
// config.yaml, the GUI's choices, tune and the suites find it in the
// registry. Plan is the one plan type that all of them share; Config is a
// plan and what one run adds to it.
//
// Every step is recorded (Step) for the profiler and the GUI.
//
// A step is two halves around the target's verification pass: prepare
// (draft the tree, build its rows) and finish (the lossless rules,
// compaction, commit, emission). Engine.Run runs them for one generation,
// each step with a pass of its own; Batch runs them for many requests at
// once, every running request's step (and new requests' prompt chunks) in
// ONE multi-sequence pass (model.Pass), requests joining and leaving
// between passes, each with a draft source of its own (drafter.Fork). A
// Policy sizes each request's draft to the load before each pass (Fixed,
// Plain, Goodput), the step running its plan shrunk to it (Plan.Shrink).
// docs/ARCHITECTURE.md ("Many sequences in one pass") describes the API a
// server uses.
package spec

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/tree"
)

// Config is what one generation runs: a plan and what the run adds to it.
// The plan is embedded as it is (its fields read as the Config's own);
// the rest is either derived from it when the configuration is validated
// (the static tree a tree or Sequoia plan verifies, an EGT's threshold
// depth policy) or the run's own (sampling, token budget, context,
// callbacks). Build one with Plan.Config, or as a literal whose Validate
// (Engine.Run calls it) derives the rest.
type Config struct {
	Plan
	// Depth is an EGT's depth policy (nil: all of its widths): Validate
	// sets the plan's threshold policy where none is given; a predictor
	// policy is the caller's, built from the trained predictor the plan
	// names.
	Depth DepthPolicy
	// static is the tree a static shape's plan verifies (tree.FromWidths
	// or FromParents of the plan's shape), derived by Validate.
	static tree.Static

	Sample    sample.Params
	MaxTokens int
	StopAtEOS bool
	// RecordHidden copies the target's hidden state before each step into
	// Step.Hidden (training data for depth predictors).
	RecordHidden bool
	// Ctx, when positive, caps the target's context (KV cache slots); the
	// generation ends when it is full, exactly where plain decoding would.
	Ctx int
	// OnToken, when set, receives each emitted token and whether it was a
	// draft token the target accepted (false: the target's bonus token).
	OnToken func(id int, drafted bool) `json:"-"`
	// OnStep, when set, receives each step's record as it completes.
	OnStep func(Step) `json:"-"`
}

// Validate checks the configuration for its strategy (see the strategy
// files, strategy_NAME.go) and derives what follows from the plan.
func (c *Config) Validate() error {
	if err := c.derive(); err != nil {
		return err
	}
	if c.MaxTokens < 1 {
		return fmt.Errorf("spec: max tokens %d must be >= 1", c.MaxTokens)
	}
	if err := c.checkBudget(); err != nil {
		return err
	}
	return c.Sample.Validate()
}

// Step is one draft-and-verify iteration.
type Step struct {
	Index    int
	Drafted  int           // draft tokens proposed (pads excluded)
	Width    int           // rows in the verification pass (root + nodes + pads)
	Depth    int           // deepest draft level
	Seqs     int           // duo: draft sequences
	Accepted int           // draft tokens accepted
	Emitted  int           // tokens emitted this step (accepted + bonus, after stops)
	Bonus    int           // the target's token after the accepted path
	Draft    time.Duration // drafting on the critical path
	Verify   time.Duration // the target's forward pass
	Overhead time.Duration // verification rules, cache compaction, bookkeeping
	Overlap  time.Duration // drafting done concurrently with verification (and compaction)
	Wait     time.Duration // waiting, after verification, for that drafting to finish (part of Overhead)
	Strategy string        // the strategy that ran the step
	// Ahead is how many end positions of this step's draft had their
	// continuation drafted during its verification (1: the head after
	// the most likely path, AOT and duo; more: tail drafting), and
	// AheadHit whether the verdict ended at one of them with the guessed
	// bonus token, so the next step found those levels drafted: its Draft
	// is then the time it took to find them.
	Ahead    int  `json:",omitempty"`
	AheadHit bool `json:",omitempty"`
	// Ranks and Offered, per level the verifier visited: the sibling rank
	// of the accepted child (-1: none) and how many children there were.
	Ranks, Offered []int `json:",omitempty"`
	// Hidden is the target's last hidden state before the step (only with
	// Config.RecordHidden), and Last the last committed token.
	Hidden []float32 `json:"-"`
	Last   int       `json:"-"`
	// RootTop1 and RootEntropy describe the drafter's distribution at the
	// root (highest probability; entropy in nats), with Config.RecordHidden
	// or a depth policy: what a learned depth policy reads.
	RootTop1    float64 `json:",omitempty"`
	RootEntropy float64 `json:",omitempty"`
	// Tried lists the drafter probability of each child the verifier
	// tried and whether it was accepted (for calibration by confidence).
	Tried []Try `json:",omitempty"`
	// Resampled says the source drafted this step by re-sampling the last
	// step's chain after a rejection (the hidden-state drafter), not from
	// the target's true states: its proposals are accepted less often, so
	// calibration counts such steps apart.
	Resampled bool `json:",omitempty"`
	// Best is, per depth of the drafted tree (index 0 = depth 1), the
	// highest path probability among its nodes: what a threshold depth
	// policy compares with its minimum, so calibration can price one.
	Best []float64 `json:",omitempty"`
	// First are the drafter's probabilities of the root's children, best
	// first, and P21 its highest probability among the children of the
	// best of them: what duo's rule for several sequences reads
	// (DuoSeqs), so calibration can price it.
	First []float64 `json:",omitempty"`
	P21   float64   `json:",omitempty"`
	// Tree is the drafted tree (each node's parent, token and path
	// probability, in tree order, a node's children in the order they were
	// drafted, most likely first) and Path its accepted nodes, depth 1
	// first: a plan that grows and prunes by path probability (EGT) can
	// then be replayed on the step, as calibration does with its probe
	// tree.
	Tree []TreeNode `json:",omitempty"`
	Path []int      `json:",omitempty"`
}

// TreeNode is one node of Step.Tree.
type TreeNode struct {
	Parent int     // tree.Root or an earlier node
	Token  int     // the drafted token
	PathP  float64 // the drafter's product of probabilities along the path
}

// resampler is a source that may draft a step by re-sampling (after its
// first Expand of the step, until Commit).
type resampler interface{ Resampling() bool }

// Try is one draft token the verifier examined.
type Try struct {
	Q        float32
	Depth    int
	Accepted bool
}

// Result is a whole speculative generation.
type Result struct {
	Tokens  []int
	Steps   []Step
	Prefill time.Duration
	Decode  time.Duration
}

// TokensPerSecond is decode throughput (tokens emitted per second after prefill).
func (r *Result) TokensPerSecond() float64 {
	if r.Decode <= 0 {
		return 0
	}
	return float64(len(r.Tokens)) / r.Decode.Seconds()
}

// AAL is the average number of tokens emitted per target pass.
func (r *Result) AAL() float64 {
	if len(r.Steps) == 0 {
		return 0
	}
	return float64(len(r.Tokens)) / float64(len(r.Steps))
}

// Acceptance is the fraction of drafted tokens the target accepted.
func (r *Result) Acceptance() float64 {
	d, a := 0, 0
	for _, s := range r.Steps {
		d += s.Drafted
		a += s.Accepted
	}
	if d == 0 {
		return 0
	}
	return float64(a) / float64(d)
}

// Totals sums the step timings.
func (r *Result) Totals() (draft, verify, overhead, overlap time.Duration) {
	for _, s := range r.Steps {
		draft += s.Draft
		verify += s.Verify
		overhead += s.Overhead
		overlap += s.Overlap
	}
	return
}

// DepthPolicy decides how deep an Equal-Growth Tree grows this step.
type DepthPolicy interface {
	// Next reports whether to draft level s.Depth+1.
	Next(s DepthState) bool
}

// DepthState is what a depth policy knows before each level: what the
// step has drafted so far and, for learned policies, the step's context.
type DepthState struct {
	Depth int     // the deepest level drafted so far (0 before any)
	Best  float64 // the best path probability on its frontier (1 before any)
	// Hidden is the target's last hidden state before the step and Last
	// the last committed token (the root).
	Hidden []float32
	Last   int
	// Top1 and Entropy describe the drafter's distribution at the root
	// (its highest probability, and its entropy in nats), from depth 1 on.
	Top1, Entropy float64
}

// FixedDepth drafts exactly D levels.
type FixedDepth struct{ D int }

// Next implements DepthPolicy.
func (f FixedDepth) Next(s DepthState) bool { return s.Depth < f.D }

// Threshold keeps growing while the best frontier path is at least Min
// likely to be accepted, up to Max levels.
type Threshold struct {
	Max int
	Min float64
}

// Next implements DepthPolicy.
func (t Threshold) Next(s DepthState) bool {
	return s.Depth < t.Max && (s.Depth == 0 || s.Best >= t.Min)
}

// Engine runs speculative generations of one target with one draft source.
type Engine struct {
	Target *model.Model
	Source drafter.Source // nil for ar
	// Concurrent, for duo and AOT: a source that runs on its own backend
	// and may be called from another goroutine while the target computes.
	Concurrent bool

	faults faults // test-only: see verify
}

// Run generates up to cfg.MaxTokens tokens after prompt (which should carry
// BOS if the model wants it). It is the stepper's one-sequence use: the
// prompt in one prefill pass, then steps (prepare, the target's pass,
// finish) until the generation ends; Batch runs the same steps for many
// generations, one pass for all of them.
func (e *Engine) Run(ctx context.Context, prompt []int, cfg Config) (*Result, error) {
	r, err := e.newRun(prompt, cfg)
	if err != nil {
		return nil, err
	}
	return r.res, r.loop(ctx, prompt)
}

// newRun checks a generation before anything is allocated for it.
func (e *Engine) newRun(prompt []int, cfg Config) (*run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("spec: empty prompt")
	}
	if err := e.Target.CheckFile(); err != nil { // before the prefill reads the mapping
		return nil, err
	}
	if registry[cfg.Strategy].NeedsSource && e.Source == nil {
		return nil, fmt.Errorf("spec: strategy %s needs a draft source", cfg.Strategy)
	}
	if e.Source != nil && e.Source.Vocab() != e.Target.Vocab {
		return nil, fmt.Errorf("spec: drafter vocabulary of %d tokens differs from the target's %d", e.Source.Vocab(), e.Target.Vocab)
	}
	return &run{e: e, cfg: cfg, res: &Result{}, vocab: e.Target.Vocab}, nil
}

// run is the state of one generation.
type run struct {
	e          *Engine
	cfg        Config
	res        *Result
	vocab      int
	cache      *model.Cache
	fwd        model.Result
	smp        *sample.Sampler // verification stream
	dsmp       *sample.Sampler // drafting stream
	root       int
	hidden     []float32            // target's hidden state at the last committed token
	hs         drafter.HiddenSource // the source, when it reads the target's hidden states
	needHidden bool                 // the passes return hidden states (hs, a depth policy or RecordHidden reads them)
	rows       []float32            // scratch: the hidden states handed to hs
	// readRoot: a depth policy or RecordHidden reads the drafter's root
	// distribution, summarised in rootTop1 and rootEntropy when the root
	// is expanded
	readRoot              bool
	rootTop1, rootEntropy float64
	duo                   duoState
	aot                   *aotHead
	accept                acceptStats // how often draft tokens are accepted, for ranking tail ends
	// the load-adaptive budget (Batch): full is the configuration of the
	// plan as given, while a step runs a shrunk one (shrunk, by nodes);
	// nodes is the plan's size and depthAcc the acceptance its steps saw
	full     Config
	shrunk   map[int]Config
	nodes    int
	depthAcc rankStats
	// aheadMu, when set, is held while drafting ahead (a batch's requests
	// draft on their sources' device one at a time)
	aheadMu *sync.Mutex
	// from, when set, is the prefilled prompt the run starts from
	// (RunFrom) instead of prefilling its prompt
	from *Prefix
}

// capacity is the cache a generation of prompt takes: the prompt, the
// tokens to generate and a step's tree, at most the model's context (and
// the configured one). It refuses a prompt that leaves no room.
func (r *run) capacity(prompt []int) (int, error) {
	cfg := &r.cfg
	m := r.e.Target
	capacity := min(m.CtxLen, len(prompt)+min(cfg.MaxTokens, m.CtxLen)+r.maxTree()+1) // MaxTokens clamped first: no overflow
	if cfg.Ctx > 0 {
		capacity = min(capacity, cfg.Ctx)
	}
	if len(prompt) >= capacity {
		return 0, fmt.Errorf("spec: prompt of %d tokens leaves no room in a context of %d", len(prompt), m.CtxLen)
	}
	return capacity, nil
}

// open readies the run on its cache: the samplers, and what its passes
// return.
func (r *run) open(c *model.Cache) {
	cfg := &r.cfg
	r.cache = c
	r.smp = sample.New(cfg.Sample)
	dp := cfg.Sample
	dp.Seed ^= 0x5bd1e995
	r.dsmp = sample.New(dp)
	r.hs, _ = r.e.Source.(drafter.HiddenSource)
	// the target's hidden states are read by a hidden-state source, a
	// depth policy and RecordHidden; otherwise they stay on the device
	r.needHidden = r.hs != nil || cfg.RecordHidden || cfg.Depth != nil
	r.readRoot = cfg.RecordHidden || cfg.Depth != nil
	r.full, r.nodes = r.cfg, r.cfg.Plan.Nodes()
}

// prefillBatch is the prefill pass of prompt rows [from, to) of a prompt
// of n tokens (its last token is the first step's root, not prefilled).
func (r *run) prefillBatch(prompt []int, from, to int) model.Batch {
	b := model.Batch{Tokens: prompt[from:to], Want: []int{to - from - 1}, Hidden: r.needHidden}
	if r.hs != nil {
		b.Want = nil // the source wants every position's hidden state
	}
	return b
}

// afterPrefill starts the source once the prompt is in the cache: the
// first root, the source's sampling, room and sequence, and the prompt's hidden
// states for a source that reads them (hidden: rows of them).
func (r *run) afterPrefill(ctx context.Context, prompt []int, capacity int, hidden []float32, rows int) error {
	r.root = prompt[len(prompt)-1]
	if src := r.e.Source; src != nil {
		if err := r.readySource(capacity); err != nil {
			return err
		}
		if err := src.Begin(ctx, prompt); err != nil {
			return err
		}
	}
	if r.hs != nil && rows > 0 {
		if err := r.hs.ObserveHidden(hidden, rows); err != nil {
			return err
		}
	}
	return nil
}

// readySource readies the run's draft source for its Begin: it proposes
// at this generation's sampling, whoever opened it and whatever it
// drafted for before, and holds the run's room, not the file's context.
func (r *run) readySource(capacity int) error {
	src := r.e.Source
	drafter.SetSample(src, r.cfg.Sample)
	if rs, ok := src.(interface{ Reserve(n int) error }); ok {
		return rs.Reserve(capacity + r.maxDraft())
	}
	return nil
}

func (r *run) loop(ctx context.Context, prompt []int) error {
	cfg := &r.cfg
	m := r.e.Target
	capacity, err := r.capacity(prompt)
	if err != nil {
		return err
	}
	if err := m.CheckCache(capacity); err != nil {
		return err
	}
	t0 := time.Now()
	hidden := r.fwd.Hidden
	if r.from != nil {
		if hidden, err = r.openFrom(capacity); err != nil {
			return err
		}
	} else {
		r.open(m.NewCache(capacity))
		if len(prompt) > 1 {
			if err := m.Forward(ctx, r.cache, r.prefillBatch(prompt, 0, len(prompt)-1), &r.fwd); err != nil {
				return err
			}
			hidden = r.fwd.Hidden
			if r.needHidden {
				r.hidden = append(r.hidden[:0], hidden[len(hidden)-m.Dim:]...)
			}
		}
	}
	if err := r.afterPrefill(ctx, prompt, capacity, hidden, len(prompt)-1); err != nil {
		return err
	}
	r.res.Prefill = time.Since(t0)
	defer r.stopAOT()
	start := time.Now()
	defer func() { r.res.Decode = time.Since(start) }()
	for len(r.res.Tokens) < cfg.MaxTokens {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.e.Target.CheckFile(); err != nil {
			return err
		}
		done, err := r.step(ctx)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	return nil
}

// maxTree bounds the nodes of one step's tree, for sizing the cache.
func (r *run) maxTree() int {
	return registry[r.cfg.Strategy].maxTree(&r.cfg)
}

// maxDraft bounds the nodes a step passes through the drafter.
func (r *run) maxDraft() int {
	n := r.maxTree()
	if f := registry[r.cfg.Strategy].maxDraft; f != nil {
		n = max(n, f(&r.cfg))
	}
	return n
}

// room is how many draft nodes this step may verify: what the cache can
// hold and what is still useful before MaxTokens.
func (r *run) room() (nodes, depth int) {
	left := r.cfg.MaxTokens - len(r.res.Tokens)
	free := r.cache.Cap() - r.cache.Len() - 1
	return max(0, free), max(0, left-1)
}

// step is one step of a generation run alone: prepared, verified by a
// pass of its own (drafting ahead meanwhile, where the plan does), and
// finished.
func (r *run) step(ctx context.Context) (bool, error) {
	p, err := r.prepare(ctx, -1)
	if err != nil {
		return false, err
	}
	t1 := time.Now()
	r.startAOT(ctx, p.tr)
	if err := r.e.Target.Forward(ctx, r.cache, p.batch, &r.fwd); err != nil {
		return false, err
	}
	if err := r.e.Target.CheckLogits(r.fwd.Logits); err != nil {
		return false, err
	}
	p.st.Verify = time.Since(t1)
	return r.finish(ctx, p)
}

// pending is a step prepared for its verification pass: the drafted tree
// and the rows the target verifies it with (the root, then the nodes).
type pending struct {
	st    Step
	tr    *tree.Tree
	past  int
	batch model.Batch
}

// prepare drafts a step's tree and builds its verification rows. budget
// is the draft nodes the step may verify: -1 (or the plan's size or
// more) the plan as given, 0 none (a plain decode step), in between the
// plan shrunk to it (Plan.Shrink), which the step then runs until finish.
func (r *run) prepare(ctx context.Context, budget int) (*pending, error) {
	st := Step{Index: len(r.res.Steps)}
	if r.cfg.RecordHidden && r.hidden != nil {
		st.Hidden = append([]float32(nil), r.hidden...)
	}
	st.Last = r.root
	r.rootTop1, r.rootEntropy = 0, 0
	if budget > 0 && budget < r.nodes {
		c, err := r.shrink(budget)
		if err != nil {
			return nil, err
		}
		r.cfg = c
	}
	t0 := time.Now()
	tr, err := r.draft(ctx, &st, budget != 0)
	if err != nil {
		return nil, err
	}
	st.Draft += time.Since(t0)
	if r.readRoot {
		st.RootTop1, st.RootEntropy = r.rootTop1, r.rootEntropy
	}
	for _, n := range tr.Nodes {
		if !n.Pad {
			st.Drafted++
		}
	}
	st.Depth = tr.MaxDepth()
	if rs, ok := r.e.Source.(resampler); ok {
		st.Resampled = rs.Resampling()
	}
	past := r.cache.Len()
	toks, pos, mask := tr.Batch(r.root, past)
	st.Width = len(toks)
	return &pending{st: st, tr: tr, past: past, batch: model.Batch{Tokens: toks, Pos: pos, Mask: mask, Hidden: r.needHidden}}, nil
}

// shrink is the run's configuration with its plan shrunk to nodes draft
// nodes, derived once per size.
func (r *run) shrink(nodes int) (Config, error) {
	if c, ok := r.shrunk[nodes]; ok {
		return c, nil
	}
	c := r.full
	c.Plan = r.full.Plan.Shrink(nodes)
	if err := c.derive(); err != nil {
		return c, fmt.Errorf("spec: %s shrunk to %d nodes: %w", r.full.Plan, nodes, err)
	}
	if r.shrunk == nil {
		r.shrunk = map[int]Config{}
	}
	r.shrunk[nodes] = c
	return c, nil
}

// finish reads the target's rows of a prepared step (in r.fwd), applies
// the lossless rules, keeps the accepted path in the cache, commits it to
// the source and emits it. It reports whether the generation is done.
func (r *run) finish(ctx context.Context, p *pending) (bool, error) {
	r.cfg = r.full // a shrunk step's configuration ends with its drafting
	st, tr, past := &p.st, p.tr, p.past
	t2 := time.Now()
	v := r.verdict(tr)
	// commit: keep the prefix, the root and the accepted path
	keep := make([]int, 0, past+1+len(v.Path))
	for i := 0; i <= past; i++ {
		keep = append(keep, i)
	}
	accepted := make([]int, len(v.Path))
	lastRow := 0
	for i, n := range v.Path {
		keep = append(keep, past+1+n)
		accepted[i] = tr.Nodes[n].Token
		lastRow = 1 + n
	}
	if err := r.cache.Compact(keep); err != nil {
		return false, err
	}
	d := r.e.Target.Dim
	if r.needHidden {
		r.hidden = append(r.hidden[:0], r.fwd.Hidden[lastRow*d:(lastRow+1)*d]...)
	}
	st.Overhead = time.Since(t2)
	t3 := time.Now()
	ahead, err := r.finishAOT(ctx, accepted, v.Bonus)
	if err != nil {
		return false, err
	}
	st.Wait = time.Since(t3)
	st.Overlap = max(0, ahead.elapsed-st.Wait)
	st.Ahead, st.AheadHit = ahead.ends, ahead.hit
	if hs := r.hs; hs != nil {
		// the target's states of the root and the accepted path, in order
		rows := append(r.rows[:0], r.fwd.Hidden[:d]...)
		for _, n := range v.Path {
			rows = append(rows, r.fwd.Hidden[(1+n)*d:(2+n)*d]...)
		}
		r.rows = rows
		if err := hs.ObserveHidden(rows, 1+len(v.Path)); err != nil {
			return false, err
		}
	}
	if src := r.e.Source; src != nil {
		if err := src.Commit(accepted, v.Bonus); err != nil {
			return false, err
		}
	}
	r.root = v.Bonus
	st.Accepted, st.Bonus = len(accepted), v.Bonus
	st.Strategy, st.Ranks, st.Offered = r.cfg.Strategy, v.Ranks, v.Offered
	r.depthAcc.add(v.Ranks, v.Offered)
	var tries []Try
	if r.cfg.Tail > 0 || r.cfg.OnStep != nil {
		tries = tried(tr, v)
		r.accept.add(tries)
	}
	if r.cfg.OnStep != nil { // only step consumers (calibration) read them
		st.Tried, st.Best = tries, bestByDepth(tr)
		st.First, st.P21 = firstLevel(tr)
		st.Tree, st.Path = make([]TreeNode, len(tr.Nodes)), append([]int(nil), v.Path...)
		for i, n := range tr.Nodes {
			st.Tree[i] = TreeNode{Parent: n.Parent, Token: n.Token, PathP: n.PathP}
		}
	}
	// emit, stopping at EOS and MaxTokens
	done := false
	emit := append(accepted, v.Bonus)
	for i, tok := range emit {
		if len(r.res.Tokens) >= r.cfg.MaxTokens {
			done = true
			break
		}
		r.res.Tokens = append(r.res.Tokens, tok)
		st.Emitted++
		if r.cfg.OnToken != nil {
			r.cfg.OnToken(tok, i < len(accepted))
		}
		if r.cfg.StopAtEOS && r.e.Target.Tok.IsEOG(tok) {
			done = true
			break
		}
	}
	if r.cache.Len() >= r.cache.Cap() {
		done = true // the root has no slot left
	}
	st.Overhead += time.Since(t3)
	r.res.Steps = append(r.res.Steps, *st)
	if r.cfg.OnStep != nil {
		r.cfg.OnStep(*st)
	}
	return done || len(r.res.Tokens) >= r.cfg.MaxTokens, nil
}

// tried lists the children the verifier examined along the accepted path:
// at each level, the children up to and including the accepted one (all of
// them where none was accepted).
func tried(tr *tree.Tree, v Verdict) []Try {
	var out []Try
	node := tree.Root
	for lvl := range v.Ranks {
		kids := tr.Children(node)
		for i, c := range kids {
			acc := i == v.Ranks[lvl]
			out = append(out, Try{Q: tr.Nodes[c].Q, Depth: tr.Nodes[c].Depth, Accepted: acc})
			if acc {
				break
			}
		}
		if v.Ranks[lvl] < 0 || lvl >= len(v.Path) {
			break
		}
		node = v.Path[lvl]
	}
	return out
}

// bestByDepth is the highest path probability at each depth of tr (pads
// excluded).
func bestByDepth(tr *tree.Tree) []float64 {
	out := make([]float64, tr.MaxDepth())
	for _, n := range tr.Nodes {
		if !n.Pad && n.Depth >= 1 && n.PathP > out[n.Depth-1] {
			out[n.Depth-1] = n.PathP
		}
	}
	return out
}

// firstLevel returns the probabilities of tr's depth-1 nodes, best first,
// and the highest among the children of the best of them.
func firstLevel(tr *tree.Tree) ([]float64, float64) {
	var first []float64
	best, bq := -1, -1.0
	for i, n := range tr.Nodes {
		if n.Depth == 1 && !n.Pad {
			first = append(first, float64(n.Q))
			if float64(n.Q) > bq {
				best, bq = i, float64(n.Q)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(first)))
	p21 := 0.0
	for _, n := range tr.Nodes {
		if n.Parent == best && best >= 0 && !n.Pad {
			p21 = max(p21, float64(n.Q))
		}
	}
	return first, p21
}

// verdict applies the lossless rules to the target's logits for tr.
func (r *run) verdict(tr *tree.Tree) Verdict {
	v := r.vocab
	logits := func(row int) []float32 { return r.fwd.Logits[row*v : (row+1)*v] }
	dist := func(row int, dst []float32) { r.smp.Probs(logits(row), dst) }
	return verify(tr, r.smp, r.cfg.Sample.Greedy(), logits, dist, v, r.e.faults)
}
