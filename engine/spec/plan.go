package spec

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"arborist/engine/tree"
)

// Plan is a speculation plan: a strategy and every shape parameter it
// reads. It is the one plan type of Arborist: the speedup model scores it,
// the search enumerates it, config.yaml stores it (speculation block), the
// run verb's flags fill it, the GUI edits it, and Config turns it into an
// engine configuration. Fields a strategy does not read are ignored (Trim
// clears them).
type Plan struct {
	Strategy string `json:"strategy" yaml:"strategy"`
	Gamma    int    `json:"gamma,omitempty" yaml:"gamma,omitempty"`     // chain: draft length; duo: largest budget
	Widths   []int  `json:"widths,omitempty" yaml:"widths,omitempty"`   // tree: children per node at each depth
	Parents  []int  `json:"parents,omitempty" yaml:"parents,omitempty"` // tree: a parent list instead of Widths (-1: depth 1)
	EGT      []int  `json:"egt_widths,omitempty" yaml:"egt_widths,omitempty"`
	Branch   int    `json:"branch,omitempty" yaml:"branch,omitempty"` // egt: children per expanded node
	WMax     int    `json:"w_max,omitempty" yaml:"w_max,omitempty"`   // egt: nodes kept after pruning
	Pad      bool   `json:"pad,omitempty" yaml:"pad,omitempty"`       // egt: pad to WMax nodes
	AOT      bool   `json:"aot,omitempty" yaml:"aot,omitempty"`       // egt: ahead-of-time head drafting
	// Tail (chain, egt, duo): how many end positions of a step's draft
	// (the root and each node: where verification may stop) get their
	// continuation drafted while the target verifies, most likely first,
	// so the next draft is ready whichever of them the verdict picks
	// (Yggdrasil's tail speculation); 0 drafts no tail (egt's aot alone
	// drafts the head after the most likely path).
	Tail int `json:"tail,omitempty" yaml:"tail,omitempty"`
	// DepthPolicy (egt): fixed (all of EGT), threshold (DepthMin) or
	// predictor (a trained depth predictor, PredictorID or the newest).
	DepthPolicy string  `json:"depth_policy,omitempty" yaml:"depth_policy,omitempty"`
	DepthMin    float64 `json:"depth_min,omitempty" yaml:"depth_min,omitempty"`
	PredictorID int64   `json:"predictor_id,omitempty" yaml:"predictor_id,omitempty"`
	// SampleChildren (tree, sampled runs): draw children from q.
	SampleChildren bool `json:"sample_children,omitempty" yaml:"sample_children,omitempty"`
	MaxSeqs        int  `json:"max_seqs,omitempty" yaml:"max_seqs,omitempty"` // duo: most draft sequences
}

// Expected is a plan's verified tree under an acceptance model: what the
// speedup model prices and the Speedup screen draws.
type Expected struct {
	Parents  []int     // verified nodes in order, each node's parent (-1: a child of the root)
	Values   []float64 // each node's chance of being accepted
	PerDepth []int     // the drafter passes of a step, as widths
	Overlap  bool      // drafting runs while the target verifies
	// Ahead is how many of PerDepth's passes (the first ones) are drafted
	// during the previous step's verification, on the drafter's own
	// threads; AheadHit is the chance that work is usable (the guessed
	// outcome of that verification came true). Misses redo the passes.
	Ahead    int
	AheadHit float64
	// AheadWidths, when set, are the drafter passes run during
	// verification, as widths, where they are not the next step's first
	// Ahead passes: tail drafting runs one pass for the guessed bonus
	// tokens after the prepared leaves (an inner end's distribution was
	// drafted with the tree) and one a level prepared, each as wide as
	// the end positions it prepares (tailAhead).
	AheadWidths []int
	// Verified, when above len(Values), is the number of nodes verified
	// per step (a padded tree verifies its padding too).
	Verified int
}

// AAL is the tokens a step the tree is expected to give: the target's own
// token and each node's chance of acceptance.
func (e Expected) AAL() float64 {
	t := 1.0
	for _, v := range e.Values {
		t += v
	}
	return t
}

// Depths returns each node's depth (1: a child of the root), in the order
// of Parents.
func (e Expected) Depths() []int {
	depth := make([]int, len(e.Parents))
	for i, par := range e.Parents {
		depth[i] = 1
		if par >= 0 {
			depth[i] = depth[par] + 1
		}
	}
	return depth
}

// aheadHit is the chance that ahead-of-time drafting guessed right: the
// most likely path through e's tree is accepted in full and the bonus
// token after it is the drafter's top candidate (the guess aotHead makes).
func (e *Expected) aheadHit(at func(d, r int) float64) float64 {
	// children lists, then follow the most valuable child from the root
	best := map[int]int{}
	for i, p := range e.Parents {
		if b, ok := best[p]; !ok || e.Values[i] > e.Values[b] {
			best[p] = i
		}
	}
	v, depth := 1.0, 0
	for node := -1; ; depth++ {
		c, ok := best[node]
		if !ok {
			break
		}
		v, node = e.Values[c], c
	}
	return v * at(depth, 0)
}

// tailAhead prices tail drafting with budget tail on e's tree, the
// continuation prepared levels passes deep. The end positions where
// verification may stop are the root and every node; a node v of depth
// d with b children is where it stops with chance value(v) * (1 - the
// chance one of its children is accepted, at(d, 0..b-1)), and the engine
// prepares the tail most likely of them (it ranks them by the drafter's
// own probabilities, which calibration finds track acceptance). A
// prepared end is of use when verification stops there and the target's
// bonus token is the drafter's guess, its best token that is none of v's
// children (rank b): value(v) * at(d, b), summed over the prepared ends,
// is AheadHit (for the single most likely leaf, aheadHit's figure). The
// work: a pass for the bonus guesses after the prepared leaves (an inner
// end's distribution was drafted with the tree), then levels passes as
// wide as the ends prepared, all while the target verifies.
func (e *Expected) tailAhead(tail, levels int, at func(d, r int) float64) {
	depth := e.Depths()
	kids := make([]int, 1+len(e.Parents)) // children per end: [0] the root, [1+i] node i
	for _, par := range e.Parents {
		kids[1+par]++
	}
	type end struct {
		stop, hit float64
		leaf      bool
	}
	ends := make([]end, len(kids))
	for i := range ends {
		v, d := 1.0, 0
		if i > 0 {
			v, d = e.Values[i-1], depth[i-1]
		}
		taken := 0.0
		for r := 0; r < kids[i]; r++ {
			taken += at(d, r)
		}
		ends[i] = end{stop: v * max(0, 1-taken), hit: v * at(d, kids[i]), leaf: kids[i] == 0}
	}
	sort.SliceStable(ends, func(a, b int) bool { return ends[a].stop > ends[b].stop })
	n := min(tail, len(ends))
	hit, leaves := 0.0, 0
	for _, x := range ends[:n] {
		hit += x.hit
		if x.leaf {
			leaves++
		}
	}
	e.AheadHit = min(1, hit)
	e.AheadWidths = nil
	if leaves > 0 {
		e.AheadWidths = append(e.AheadWidths, leaves)
	}
	for range levels {
		e.AheadWidths = append(e.AheadWidths, n)
	}
}

// Space bounds the plans a search enumerates.
type Space struct {
	MaxGamma int // chains up to this length (default 12)
	MaxDepth int // trees up to this depth (default 6)
	MaxNodes int // trees up to this many nodes (default 48)
	// Accept is the acceptance model, at(depth, rank), for plan families
	// built from it (sequoia: the DP-optimal tree of each size); nil leaves
	// them out.
	Accept func(depth, rank int) float64
	// OptimalNodes is the largest DP-optimal tree (default MaxNodes); the
	// search sets it from the largest profiled verification width.
	OptimalNodes int
	// The knobs below are offered by the strategies whose plans read
	// them, each where the calibration can price it (the speedup model's
	// pricing of each strategy sets them: profiles/costmodel/price_*.go);
	// a knob left empty offers nothing.
	//
	// Thresholds are the minimum path probabilities EGT plans are also
	// offered with as a threshold depth policy (none: fixed depth only).
	Thresholds []float64
	// Sequences are the most draft sequences (max_seqs) duo plans are also
	// offered with (none: one sequence only).
	Sequences []int
	// Tails are the tail budgets chain and duo plans are also offered
	// with (none: no tail drafting); chains also get a tail of one and
	// one at every end position, EGT plans with aot the largest (a level
	// ahead at each end costs little, and each budget there is thousands
	// of plans).
	Tails []int
}

func (s *Space) defaults() {
	if s.MaxGamma <= 0 {
		s.MaxGamma = 12
	}
	if s.MaxDepth <= 0 {
		s.MaxDepth = 6
	}
	if s.MaxNodes <= 0 {
		s.MaxNodes = 48
	}
	if s.OptimalNodes <= 0 {
		s.OptimalNodes = s.MaxNodes
	}
}

// Strategy is one way of growing the draft tree. Each lives in its own
// file (strategy_NAME.go) that registers it with every hook the rest of
// Arborist needs of it: its fields, drafting, checks and budget, its cost
// model (Expect) and the plans a search tries, its canonical form and
// conversions, what config.yaml maps of it, its roles for the faces and
// its examples for the model-level suite (TestRegistryComplete names any
// a strategy lacks; the speedup model's own pricing of it, where its
// fields need one, is profiles/costmodel/price_NAME.go). Flags, config
// validation, the GUI's choices, the search and the suites find it in
// this registry; nothing else lists strategies.
type Strategy struct {
	Name    string
	Summary string
	order   int     // position in Strategies
	Fields  []Field // the plan fields it reads, with what the faces show of them
	// NeedsSource is false only for plain decoding (PlainStrategy).
	NeedsSource bool
	// Default marks the strategy the faces start with (DefaultStrategy):
	// exactly one strategy has it.
	Default bool
	// WhatIf, when set, builds a plan of the strategy from a list of
	// numbers and a node budget, as the speedup model screen's "your
	// plan" reads one (WhatIfPlan); WhatIfDefault marks the one that
	// screen starts with.
	WhatIf        func(numbers []int, nodes int) Plan
	WhatIfDefault bool
	// Concurrent says whether a plan drafts while the target verifies, so
	// the drafter needs its own backend and threads.
	Concurrent func(p Plan) bool
	// Expect is the cost model's view of a plan: the nodes it verifies and
	// their chance of acceptance, given at(depth, rank) (depth 0 = the
	// root's children).
	Expect func(p Plan, at func(depth, rank int) float64) (Expected, error)
	// Candidates lists the plans a search scores (nil: not searched).
	Candidates func(sp Space) []Plan
	// Examples are plans of the strategy that the model-level suite
	// (engine/model/modeltest's Strategies) runs on every device, each
	// checked token for token against plain decoding: its variants
	// (tails, drafting ahead, shapes) each once.
	Examples func() []Plan
	// Adapt, for strategies that tune a parameter while running (duo's
	// gamma follows T_target / T_draft), returns the plan as it settles
	// under the given costs (seconds for a verification of w tokens and a
	// drafter pass of w tokens), so the cost model prices what runs.
	Adapt func(p Plan, verify, draft func(w int) float64) Plan
	// The speedup model's pricing hooks beyond Expect, so that it prices
	// every strategy without knowing its name (nil or false: none):
	//
	// PassWidths is what a step's drafter passes cost by when a pass costs
	// by the nodes it adds (Costs.DraftPerChild), from the expected tree
	// ex; without it, the nodes each pass expands (ex.PerDepth).
	PassWidths func(p Plan, ex Expected) []int
	// Grows marks a tree grown level by level by path probability from
	// EGT's fields (egt_widths, branch, w_max, and a depth policy that may
	// stop early): the model replays such plans on a calibration's
	// recorded probe trees, the way the engine grows and prunes them.
	Grows bool
	// Sequences is the most draft sequences a plan lets DuoDecoding's
	// uncertainty rule start in a step (0 or 1: one): the model then mixes
	// the trees of the counts the rule picks on the calibration's steps.
	Sequences func(p Plan) int
	describe  func(p Plan) string
	// growing, for a strategy whose plans an EGT can grow as well (a
	// chain: an EGT of branch 1), is that EGT (AsGrowing).
	growing func(p Plan) Plan
	// oneChain, when set, says what of a plan a runtime that drafts one
	// chain after each verification cannot express beyond its tree's
	// branching (OneChainLimits); depth is the chain such a runtime
	// drafts.
	oneChain func(p Plan, depth int) []Unexpressed
	// withSequences, for a strategy whose plans read a number of draft
	// sequences, is the plan with n of them where it sets none
	// (WithSequences).
	withSequences func(p Plan, n int) Plan
	// canonical, when set, is the plan in its canonical form (Canonical):
	// the same work under one description.
	canonical func(p Plan) Plan
	// shrink is the plan of the same shape verifying at most nodes draft
	// nodes a step (nodes >= 1; Plan.Shrink): what a step runs when the
	// load leaves it less than its plan's budget (Goodput). A chain or
	// duo drafts fewer tokens, a static tree keeps its most valuable
	// nodes (closed under parents and elder siblings), an Equal-Growth
	// Tree is pruned to fewer nodes and levels.
	shrink  func(p Plan, nodes int) Plan
	check   func(c *Config) error
	maxTree func(c *Config) int
	// maxDraft, when set, bounds the nodes a step passes through the
	// drafter when that is more than it verifies (maxTree): an EGT expands
	// its widths per level before pruning, and drafts a head ahead.
	maxDraft func(c *Config) int
	// budget checks every size the strategy derives from its plan
	// (check(name, n) refuses n beyond what one verification pass or the
	// context takes) before the run allocates for it (checkBudget).
	budget func(c *Config, check func(name string, n int) error) error
	// tailWork, for a strategy that drafts a tail (Config.Tail), is the
	// drafter-cache slots it adds a step (tailSlots), which checkBudget
	// bounds before a run reserves them.
	tailWork func(c *Config) int
	draft    func(r *run, ctx context.Context, st *Step, nodes, depth int) (*tree.Tree, error)
	// ahead is how many levels of the next step are drafted while the
	// target verifies (nil: none).
	ahead func(r *run) int
}

// registry holds the strategies; it is filled by the strategy files' init
// functions and only read afterwards.
var registry = map[string]*Strategy{}

func register(s *Strategy) {
	if _, dup := registry[s.Name]; dup {
		panic("spec: strategy " + s.Name + " registered twice")
	}
	checkFields(s)
	registry[s.Name] = s
}

// Lookup returns the named strategy, or an error listing the known ones.
func Lookup(name string) (*Strategy, error) {
	if s, ok := registry[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("spec: unknown strategy %q (one of %s)", name, strings.Join(Strategies(), ", "))
}

// Strategies lists the strategy names in their usual order.
func Strategies() []string {
	all := make([]*Strategy, 0, len(registry))
	for _, s := range registry {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].order < all[j].order })
	names := make([]string, len(all))
	for i, s := range all {
		names[i] = s.Name
	}
	return names
}

// byRole is the first registered strategy, in order, that has the role.
func byRole(has func(*Strategy) bool) string {
	for _, name := range Strategies() {
		if has(registry[name]) {
			return name
		}
	}
	return ""
}

// DefaultStrategy is the strategy the faces start with (Strategy.Default).
func DefaultStrategy() string { return byRole(func(s *Strategy) bool { return s.Default }) }

// PlainStrategy is plain decoding: the strategy that drafts nothing, the
// baseline every speedup is measured against.
func PlainStrategy() string { return byRole(func(s *Strategy) bool { return !s.NeedsSource }) }

// PlainPlan is plain decoding's plan.
func PlainPlan() Plan { return Plan{Strategy: PlainStrategy()} }

// IsPlain says whether the named strategy is plain decoding.
func IsPlain(strategy string) bool {
	s, ok := registry[strategy]
	return ok && !s.NeedsSource
}

// WhatIfStrategies lists the strategies the speedup model screen's "your
// plan" offers (those with a WhatIf hook), in order, and the one it
// starts with.
func WhatIfStrategies() (names []string, start string) {
	for _, name := range Strategies() {
		if s := registry[name]; s.WhatIf != nil {
			names = append(names, name)
			if s.WhatIfDefault {
				start = name
			}
		}
	}
	return names, start
}

// WhatIfPlan builds the named strategy's plan from numbers and a node
// budget (Strategy.WhatIf); a strategy without a WhatIf hook reads them
// as the screen's starting one does.
func WhatIfPlan(strategy string, numbers []int, nodes int) Plan {
	s := registry[strategy]
	if s == nil || s.WhatIf == nil {
		_, start := WhatIfStrategies()
		s = registry[start]
	}
	return s.WhatIf(numbers, nodes)
}

// AsGrowing is the plan as a tree grown level by level by path
// probability (Grows), the kind a depth predictor decides the depth of:
// the plan itself where it grows so, its strategy's equivalent (a chain:
// the EGT of branch 1 and its depth) where it has one; false otherwise.
func (p Plan) AsGrowing() (Plan, bool) {
	s, err := Lookup(p.Strategy)
	switch {
	case err != nil:
		return p, false
	case s.Grows:
		return p, true
	case s.growing != nil:
		return s.growing(p), true
	}
	return p, false
}

// Reads says whether the plan's strategy reads the field (YAML name).
func (p Plan) Reads(field string) bool {
	s, err := Lookup(p.Strategy)
	if err != nil {
		return false
	}
	for _, f := range s.Fields {
		if f.Name == field {
			return true
		}
	}
	return false
}

// Trim returns the plan with the fields its strategy does not read cleared,
// so stored and exported plans carry only what matters.
func (p Plan) Trim() Plan {
	out := Plan{Strategy: p.Strategy}
	if s, err := Lookup(p.Strategy); err == nil {
		from, to := reflect.ValueOf(p), reflect.ValueOf(&out).Elem()
		for _, f := range s.Fields {
			i := planIndex[f.Name]
			to.Field(i).Set(from.Field(i))
		}
	}
	if len(out.Widths) > 0 {
		out.Parents = nil // widths win, as in Config
	}
	if out.DepthPolicy != "threshold" {
		out.DepthMin = 0
	}
	if out.DepthPolicy != "predictor" {
		out.PredictorID = 0
	}
	return out
}

// String is a compact description, e.g. "chain gamma=4" or "tree 3,2,1".
func (p Plan) String() string {
	s, err := Lookup(p.Strategy)
	if err != nil || s.describe == nil {
		return p.Strategy
	}
	return s.describe(p)
}

// NeedsSource says whether the plan drafts (everything but ar).
func (p Plan) NeedsSource() bool {
	s, err := Lookup(p.Strategy)
	return err != nil || s.NeedsSource
}

// Adapted returns the plan as its strategy's run-time adaptation settles
// under the given costs (the plan itself for strategies that adapt
// nothing).
func (p Plan) Adapted(verify, draft func(w int) float64) Plan {
	if s, err := Lookup(p.Strategy); err == nil && s.Adapt != nil {
		return s.Adapt(p, verify, draft)
	}
	return p
}

// Adapts says whether the plan's strategy adapts it while running (Adapt).
func (p Plan) Adapts() bool {
	s, err := Lookup(p.Strategy)
	return err == nil && s.Adapt != nil
}

// PassWidths is what a step's drafter passes cost by when a pass costs by
// the nodes it adds (Strategy.PassWidths; ex.PerDepth where the strategy
// says nothing).
func (p Plan) PassWidths(ex Expected) []int {
	if s, err := Lookup(p.Strategy); err == nil && s.PassWidths != nil {
		return s.PassWidths(p, ex)
	}
	return ex.PerDepth
}

// Grows says whether the plan's tree grows level by level from EGT's
// fields (Strategy.Grows).
func (p Plan) Grows() bool {
	s, err := Lookup(p.Strategy)
	return err == nil && s.Grows
}

// Sequences is the most draft sequences the plan lets a step start
// (Strategy.Sequences; 1 where the strategy drafts one).
func (p Plan) Sequences() int {
	if s, err := Lookup(p.Strategy); err == nil && s.Sequences != nil {
		return max(1, s.Sequences(p))
	}
	return 1
}

// DraftBudget is what the plan drafts a step as one draft budget, as
// DuoDecoding's optimization block in config.yaml states it: its drafter
// passes a step (a chain's gamma, a tree's depth), or adapts where its
// strategy adapts the budget while running (Adapt).
func (p Plan) DraftBudget() (passes int, adapts bool) {
	if p.Adapts() {
		return 0, true
	}
	ex, err := p.Expect(func(int, int) float64 { return 1 })
	if err != nil {
		return 0, false
	}
	return len(ex.PerDepth), false
}

// WithSequences is the plan drafting at most n sequences a step where its
// strategy reads a number of sequences and the plan sets none (as
// config.yaml's optimization block may state it); the plan itself
// otherwise.
func (p Plan) WithSequences(n int) Plan {
	if s, err := Lookup(p.Strategy); err == nil && s.withSequences != nil {
		return s.withSequences(p, n)
	}
	return p
}

// DepthThreshold is the minimum path probability below which the plan
// stops drafting deeper (a threshold depth policy); 0 where it drafts to
// its full depth.
func (p Plan) DepthThreshold() float64 {
	if p.Reads("depth_policy") && p.DepthPolicy == "threshold" {
		return p.DepthMin
	}
	return 0
}

// LearnedDepth says whether a trained depth predictor decides the plan's
// depth (a predictor depth policy): the caller then supplies it as
// Config.Depth, built from the predictor the plan names.
func (p Plan) LearnedDepth() bool {
	return p.Reads("depth_policy") && p.DepthPolicy == "predictor"
}

// Unexpressed is a part of a plan another runtime cannot express: What
// the plan does, and what the runtime does Instead (a phrase after the
// runtime's name: "llama.cpp drafts only after a verification...").
type Unexpressed struct{ What, Instead string }

// OneChainLimits says what of the plan a runtime that drafts one chain
// after each verification cannot express, beyond its tree's branching
// (drafting ahead or beside the target, adapting its budget, several
// sequences, a learned depth, sampled children): each strategy states its
// own (Strategy.oneChain). depth is the chain such a runtime drafts.
func (p Plan) OneChainLimits(depth int) []Unexpressed {
	if s, err := Lookup(p.Strategy); err == nil && s.oneChain != nil {
		return s.oneChain(p, depth)
	}
	return nil
}

// Nodes is the most draft nodes the plan verifies a step (its padding
// included): the rows a step adds to a pass beside the root's, what a
// load-adaptive policy may shrink (0 for plain decoding, or a plan that
// does not run).
func (p Plan) Nodes() int {
	ex, err := p.Expect(func(int, int) float64 { return 1 })
	if err != nil {
		return 0
	}
	return max(len(ex.Values), ex.Verified)
}

// Shrink is the plan of the same shape verifying at most nodes draft
// nodes a step (its strategy's shrink): the plan itself where it verifies
// no more; plain decoding where nodes is 0 or less.
func (p Plan) Shrink(nodes int) Plan {
	if nodes <= 0 {
		return PlainPlan()
	}
	s, err := Lookup(p.Strategy)
	if err != nil || s.shrink == nil || nodes >= p.Nodes() {
		return p
	}
	return s.shrink(p, nodes)
}

// Concurrent says whether the plan drafts while the target verifies.
func (p Plan) Concurrent() bool {
	s, err := Lookup(p.Strategy)
	return err == nil && s.Concurrent != nil && s.Concurrent(p)
}

// Expect is the plan's verified tree under the acceptance model at.
func (p Plan) Expect(at func(depth, rank int) float64) (Expected, error) {
	s, err := Lookup(p.Strategy)
	if err != nil {
		return Expected{}, err
	}
	if s.Expect == nil {
		return Expected{}, fmt.Errorf("spec: strategy %s has no cost model", p.Strategy)
	}
	return s.Expect(p, at)
}

// Validate checks the plan can run: its strategy is known and its shape
// parameters are possible.
func (p Plan) Validate() error {
	_, err := p.Config()
	return err
}

// Config turns the plan into an engine configuration (without sampling,
// token budget or callbacks, which the caller sets), with what follows
// from the plan derived and checked. A predictor depth policy is left
// nil: the caller supplies the trained predictor.
func (p Plan) Config() (Config, error) {
	c := Config{Plan: p}
	err := c.derive()
	return c, err
}

// derive checks the configuration's plan and derives what the run reads
// from it: the static tree of a plan with a shape (widths per depth win
// over a parent list), and the threshold depth policy where the plan has
// one and no policy is given. Its strategy's check may settle defaults
// (duo's sequences).
func (c *Config) derive() error {
	p := c.Plan
	s, err := Lookup(p.Strategy)
	if err != nil {
		return err
	}
	if err := p.bounded(); err != nil {
		return err
	}
	c.static = tree.Static{}
	if p.Reads("widths") || p.Reads("parents") {
		switch {
		case len(p.Widths) > 0 && p.Reads("widths"):
			if c.static, err = tree.FromWidths(p.Widths); err != nil {
				return fmt.Errorf("spec: tree widths: %w", err)
			}
		case len(p.Parents) > 0:
			if c.static, err = tree.FromParents(p.Parents); err != nil {
				return fmt.Errorf("spec: tree parents: %w", err)
			}
		}
	}
	if p.Reads("depth_policy") {
		switch p.DepthPolicy {
		case "", "fixed", "predictor":
		case "threshold":
			if !(p.DepthMin >= 0 && p.DepthMin <= 1) {
				return fmt.Errorf("spec: depth-min %g must be in [0, 1]", p.DepthMin)
			}
			if c.Depth == nil {
				c.Depth = Threshold{Max: len(p.EGT), Min: p.DepthMin}
			}
		default:
			return fmt.Errorf("spec: depth policy %q: want fixed, threshold or predictor", p.DepthPolicy)
		}
	}
	if s.check != nil {
		return s.check(c)
	}
	return nil
}

// MaxTreeNodes bounds every size in a plan (draft length, widths, tree
// nodes): plans come from files and flags, and the engine sizes its cache
// and trees from them. It is the most one verification pass takes
// (tree.MaxNodes).
const MaxTreeNodes = tree.MaxNodes

// bounded refuses sizes beyond MaxTreeNodes before anything is allocated.
func (p Plan) bounded() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"gamma", p.Gamma}, {"branch", p.Branch}, {"w-max", p.WMax}, {"max-seqs", p.MaxSeqs}, {"tail", p.Tail}, {"egt depth", len(p.EGT)},
		{"tree depth", len(p.Widths)}, {"parent list", len(p.Parents)}} {
		if v.n > MaxTreeNodes {
			return fmt.Errorf("spec: %s %d is above the limit of %d", v.name, v.n, MaxTreeNodes)
		}
	}
	for _, w := range p.EGT {
		if w > MaxTreeNodes {
			return fmt.Errorf("spec: egt width %d is above the limit of %d", w, MaxTreeNodes)
		}
	}
	// an Equal-Growth Tree grows up to this many nodes before pruning
	grown, frontier := 0, 1
	for _, w := range p.EGT {
		frontier = min(max(w, 0), frontier) * max(p.Branch, 0)
		grown += frontier
		if grown > 16*MaxTreeNodes {
			return fmt.Errorf("spec: egt widths %s with branch %d grow more than %d nodes a step", Excerpt(Ints(p.EGT)), p.Branch, 16*MaxTreeNodes)
		}
	}
	nodes, level := 0, 1
	for _, w := range p.Widths {
		if w > MaxTreeNodes {
			return fmt.Errorf("spec: tree width %d is above the limit of %d", w, MaxTreeNodes)
		}
		level *= max(w, 0)
		nodes += level
		if nodes > MaxTreeNodes {
			return fmt.Errorf("spec: tree widths %s make more than %d nodes", Excerpt(Ints(p.Widths)), MaxTreeNodes)
		}
	}
	return nil
}

// ParseInts reads a comma-separated integer list such as "3,2,1"
// (spaces around the items allowed); an empty or blank string is an
// empty list, and an empty item ("1,,2", "3,") an error: a value lost
// in typing is said, not skipped.
func ParseInts(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("%q is not an integer list: an empty item", Excerpt(s))
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer list", Excerpt(s))
		}
		out = append(out, v)
	}
	return out, nil
}

// Excerpt bounds a value quoted in a message: its first 64 bytes and how
// long it was (a widths list of five megabytes used to print in full).
func Excerpt(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:64], len(s))
}

// Ints writes an integer list as ParseInts reads it.
func Ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// Candidates lists every registered strategy's candidate plans, in
// strategy order, for the speedup model to rank.
func Candidates(sp Space) []Plan {
	sp.defaults()
	var out []Plan
	for _, name := range Strategies() {
		if s := registry[name]; s.Candidates != nil {
			out = append(out, s.Candidates(sp)...)
		}
	}
	return out
}

// chainExpect is a chain's (and duo's) tree: one node per depth, each
// accepted if every node above it was.
func chainExpect(gamma int, at func(d, r int) float64) Expected {
	var e Expected
	v := 1.0
	for d := 0; d < gamma; d++ {
		v *= at(d, 0)
		e.Values = append(e.Values, v)
		e.Parents = append(e.Parents, d-1)
		e.PerDepth = append(e.PerDepth, 1)
	}
	return e
}
