package spec

import (
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// examplePlans are every strategy's examples and the engine tests' plans.
func examplePlans() []Plan {
	var out []Plan
	for _, name := range Strategies() {
		out = append(out, registry[name].Examples()...)
	}
	for _, c := range configs() {
		out = append(out, c.Plan)
	}
	return out
}

// TestShrink: every plan shrunk to n draft nodes keeps its strategy and
// runs, verifies at most n nodes (exactly n where its shape has them: a
// chain's or duo's tokens, a static tree's nodes), is the plan itself at
// its own size or more, and plain decoding at none; a static tree keeps
// its most valuable nodes, closed under parents.
func TestShrink(t *testing.T) {
	for _, p := range examplePlans() {
		full := p.Nodes()
		if !p.NeedsSource() {
			if full != 0 || !reflect.DeepEqual(p.Shrink(3), p) {
				t.Errorf("%s: %d nodes, shrunk to %v", p, full, p.Shrink(3))
			}
			continue
		}
		if full < 2 {
			t.Fatalf("%s verifies %d nodes", p, full)
		}
		if got := p.Shrink(0); !IsPlain(got.Strategy) {
			t.Errorf("%s shrunk to none is %s", p, got)
		}
		for _, n := range []int{full, full + 5} {
			if got := p.Shrink(n); !reflect.DeepEqual(got, p) {
				t.Errorf("%s shrunk to %d (its size %d) is %s", p, n, full, got)
			}
		}
		for n := 1; n < full; n++ {
			s := p.Shrink(n)
			if s.Strategy != p.Strategy {
				t.Fatalf("%s shrunk to %d is a %s", p, n, s.Strategy)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("%s shrunk to %d (%s) does not run: %v", p, n, s, err)
			}
			got := s.Nodes()
			exact := p.Strategy != EGTName // an EGT may grow fewer than it may keep
			if got > n || (exact && got != n) || got < 1 {
				t.Fatalf("%s shrunk to %d (%s) verifies %d nodes", p, n, s, got)
			}
			if p.Reads("parents") {
				// the kept nodes, in the shape's order: each node's parent
				// comes before it
				for i, par := range s.Parents {
					if par >= i {
						t.Fatalf("%s shrunk to %d: node %d's parent is %d", p, n, i, par)
					}
				}
				if len(s.Parents) != n {
					t.Fatalf("%s shrunk to %d keeps %d nodes", p, n, len(s.Parents))
				}
			}
		}
	}
	// a tree of widths 3,2: shrunk to 4 nodes it keeps the root's first
	// two children and the first one's two (worth 0.6, 0.24, 0.36 and
	// 0.144 under the ranking's prior, against 0.096 for the root's third)
	s := TreePlan([]int{3, 2}).Shrink(4)
	if !slices.Equal(s.Parents, []int{-1, -1, 0, 0}) {
		t.Errorf("tree 3,2 shrunk to 4 nodes: parents %v", s.Parents)
	}
}

// at returns a constant acceptance.
func at(v float64) func(d, r int) float64 { return func(int, int) float64 { return v } }

// goodputOf is the expected tokens per second of a pass with the given
// budgets.
func goodputOf(latency func(int) time.Duration, fixed int, loads []Load, budgets []int) float64 {
	tokens, rows := 0.0, fixed
	for i, l := range loads {
		tokens++
		rows++
		if budgets[i] > 0 {
			ex, err := l.Plan.Shrink(budgets[i]).Expect(l.Accept)
			if err != nil {
				panic(err)
			}
			tokens += ex.AAL() - 1
			rows += max(len(ex.Values), ex.Verified)
		}
	}
	return tokens / max(latency(rows).Seconds(), 1e-12)
}

// TestGoodputBudgets: with a scripted latency of the pass's rows and
// scripted acceptance, the policy gives every request its whole plan when
// the latency is flat, none when every row costs as much as the pass and
// drafts are seldom accepted, drafts to the requests whose drafts pay,
// never more than a request's room, fewer as prompt rows fill the pass,
// and never less goodput than the fixed plans or plain decoding.
func TestGoodputBudgets(t *testing.T) {
	egt := Plan{Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12, Pad: true}
	plans := []Plan{ChainPlan(4), TreePlan([]int{3, 2, 1}), egt, {Strategy: "duo", Gamma: 6, MaxSeqs: 4}}
	loads := func(accept ...float64) []Load {
		out := make([]Load, len(plans))
		for i, p := range plans {
			out[i] = Load{Plan: p, Nodes: p.Nodes(), Accept: at(accept[i%len(accept)])}
		}
		return out
	}
	ms := func(f func(rows int) float64) func(int) time.Duration {
		return func(rows int) time.Duration { return time.Duration(f(rows) * float64(time.Millisecond)) }
	}
	flat := ms(func(int) float64 { return 5 })
	linear := ms(func(r int) float64 { return float64(r) })
	based := ms(func(r int) float64 { return 10 + float64(r) })
	knee := ms(func(r int) float64 { return max(8, float64(r)) / 8 }) // flat to 8 rows, then linear
	budgets := func(lat func(int) time.Duration, fixed int, ls []Load) []int {
		out := make([]int, len(ls))
		Goodput{Latency: lat}.Budgets(fixed, ls, out)
		for i, l := range ls {
			if out[i] < 0 || out[i] > l.Nodes {
				t.Fatalf("budget %d for a request of %d nodes", out[i], l.Nodes)
			}
		}
		return out
	}
	ls := loads(0.7)
	if got := budgets(flat, 0, ls); !slices.Equal(got, []int{4, 15, 12, 6}) {
		t.Errorf("a flat latency: budgets %v, want every plan whole", got)
	}
	if got := budgets(linear, 0, loads(0.1)); !slices.Equal(got, []int{0, 0, 0, 0}) {
		t.Errorf("a latency growing with every row, acceptance 0.1: budgets %v, want none", got)
	}
	// drafts that pay beside drafts that do not: a pass of 10 ms and 1 ms
	// a row, one request accepting 95% of its drafts, one 5%
	mixed := loads(0.95, 0.05)
	got := budgets(based, 0, mixed)
	if got[0] == 0 || got[2] == 0 || got[1] != 0 || got[3] != 0 {
		t.Errorf("acceptance 0.95 and 0.05 alternating: budgets %v, want drafts for the first and third only", got)
	}
	// room: a request's cache with room for 2 nodes gets at most 2
	roomy := loads(0.7)
	roomy[1].Nodes = 2
	if got := budgets(flat, 0, roomy); got[1] != 2 {
		t.Errorf("a request with room for 2 nodes got %d", got[1])
	}
	// prompt rows in the pass count in its latency: rows are free up to 8
	// and a thousand times dearer each after (up to a day, within a
	// Duration)
	wall := ms(func(r int) float64 { return min(math.Pow(1000, float64(max(0, r-8))), 864e5) })
	for fixed, want := range []int{4, 3, 2, 1, 0, 0} {
		got := budgets(wall, fixed, loads(0.5))
		n := 0
		for _, x := range got {
			n += x
		}
		if n != want {
			t.Errorf("%d prompt rows beside 4 requests, free up to 8 rows: budgets %v, want %d nodes in all", fixed, got, want)
		}
	}
	// a step in the curve: passes of up to 4 rows cost 10 ms, up to 8
	// rows 12 ms; a chain's fifth row does not pay for itself, the whole
	// chain of 7 does (AAL 5.70 in 12 ms against 3.44 in 10 ms)
	tile := ms(func(r int) float64 {
		if r <= 4 {
			return 10
		}
		return 12
	})
	if got := budgets(tile, 0, []Load{{Plan: ChainPlan(7), Nodes: 7, Accept: at(0.9)}}); got[0] != 7 {
		t.Errorf("a curve with a step the whole chain is worth crossing: budget %d, want the plan's 7", got[0])
	}
	// never worse than either baseline
	for _, lat := range []func(int) time.Duration{flat, linear, based, knee} {
		for _, acc := range [][]float64{{0.1}, {0.5}, {0.9}, {0.95, 0.05}, {0.3, 0.8, 0.6}} {
			for _, fixed := range []int{0, 5} {
				ls := loads(acc...)
				g := goodputOf(lat, fixed, ls, budgets(lat, fixed, ls))
				whole, none := make([]int, len(ls)), make([]int, len(ls))
				Fixed{}.Budgets(fixed, ls, whole)
				Plain{}.Budgets(fixed, ls, none)
				if gw, gn := goodputOf(lat, fixed, ls, whole), goodputOf(lat, fixed, ls, none); g < gw*(1-1e-9) || g < gn*(1-1e-9) {
					t.Errorf("acceptance %v, %d prompt rows: goodput %.1f, below the fixed plans' %.1f or plain decoding's %.1f", acc, fixed, g, gw, gn)
				}
			}
		}
	}
}

// TestGoodputStepCosts: a step's own time (drafting, sampling, verifying
// beside the pass) is learned from the passes a batch reports, as a
// fixed part and a part a node, with the curve's scale on this machine;
// priced with it, a chain whose last nodes the pass alone would not pay
// for is drafted whole, since its own time makes every step dearer and a
// pass's extra rows relatively cheaper. Without passes seen, the policy
// prices the pass alone.
func TestGoodputStepCosts(t *testing.T) {
	// a pass: 1 ms and 0.25 ms a row; a request's own step: 2 ms and
	// 0.1 ms a draft node; the machine 1.5x slower than the curve
	curve := func(rows int) time.Duration { return time.Millisecond + time.Duration(rows)*250*time.Microsecond }
	const fixedOwn, nodeOwn, slower = 2e-3, 1e-4, 1.5
	lc := &StepCosts{}
	g := Goodput{Latency: curve, Learn: lc}
	plan := ChainPlan(6)
	loads := make([]Load, 8)
	for i := range loads {
		loads[i] = Load{Plan: plan, Nodes: plan.Nodes(), Accept: at(0.8)}
	}
	before := make([]int, len(loads))
	g.Budgets(0, loads, before)
	passOnly := make([]int, len(loads))
	Goodput{Latency: curve}.Budgets(0, loads, passOnly)
	if !slices.Equal(before, passOnly) {
		t.Fatalf("before any pass: budgets %v, the pass alone gives %v", before, passOnly)
	}
	for i := 0; i < 400; i++ {
		k := 1 + i%8
		drafted := (i * 7) % (6*k + 1) // budgets that vary
		rows := k + drafted
		pass := time.Duration(slower * float64(curve(rows)))
		own := time.Duration((float64(k)*fixedOwn + float64(drafted)*nodeOwn) * float64(time.Second))
		g.Observe(PassStats{Decoding: k, Rows: rows, Drafted: drafted, Time: pass, Step: pass + own})
	}
	scale, fixed, node := lc.costs()
	if math.Abs(scale-slower) > 1e-6 || math.Abs(fixed-fixedOwn) > 1e-9 || math.Abs(node-nodeOwn) > 1e-9 {
		t.Fatalf("learned scale %.4f, own %.6fs + %.6fs a node; want %.1f, %.6f + %.6f", scale, fixed, node, slower, fixedOwn, nodeOwn)
	}
	after := make([]int, len(loads))
	g.Budgets(0, loads, after)
	sum := func(b []int) (n int) {
		for _, x := range b {
			n += x
		}
		return n
	}
	if sum(after) <= sum(passOnly) {
		t.Errorf("budgets %v after learning the steps' own time, %v on the pass alone: want more drafted", after, passOnly)
	}
	// the learned pricing is the goodput the steps really have: no other
	// budget of the requests beats it (the best of every request at one
	// budget: a chain of 4 here)
	real := func(b []int) float64 {
		tokens, rows, own := 0.0, 0, 0.0
		for i, n := range b {
			ex, err := plan.Shrink(n).Expect(loads[i].Accept)
			if n == 0 || err != nil {
				ex = Expected{}
			}
			tokens++
			rows++
			if n > 0 {
				tokens += ex.AAL() - 1
				rows += max(len(ex.Values), ex.Verified)
			}
			own += fixedOwn + nodeOwn*float64(n)
		}
		return tokens / (slower*curve(rows).Seconds() + own)
	}
	for n := 0; n <= 6; n++ {
		same := make([]int, len(loads))
		for i := range same {
			same[i] = n
		}
		if real(after) < real(same)*(1-1e-9) {
			t.Errorf("learned budgets %v give %.1f tokens/s, every request at %d %.1f", after, real(after), n, real(same))
		}
	}
	// a fixed plan's passes (every budget the same) cannot tell the node's
	// part from the fixed one: all of it is fixed, none negative
	fx := &StepCosts{}
	for i := 0; i < 50; i++ {
		fx.observe(PassStats{Decoding: 4, Rows: 28, Drafted: 24, Time: time.Millisecond, Step: 3 * time.Millisecond}, time.Millisecond)
	}
	if _, f, n := fx.costs(); n != 0 || math.Abs(f-0.5e-3) > 1e-12 {
		t.Errorf("constant budgets: own %.6fs + %.6fs a node, want 0.0005 + 0", f, n)
	}
	// the prompts a pass finishes (their sources started: a draft
	// model's prefill) are not the steps' own time: a pass of one step
	// of 7 nodes beside seven finished prompts, counted, made every node
	// dear; left out, the fit is the steps' alone
	pf, counted := &StepCosts{}, &StepCosts{}
	for i := 0; i < 200; i++ {
		k, drafted := 8, (i%4)*8
		st := PassStats{Decoding: k, Drafted: drafted, Time: time.Millisecond,
			Step: time.Millisecond + time.Duration((float64(k)*fixedOwn+float64(drafted)*nodeOwn)*float64(time.Second))}
		if i%10 == 0 { // now and then a pass that finishes prompts
			st.Decoding, st.Drafted = 1, 7
			st.Step = time.Millisecond + time.Duration((fixedOwn+7*nodeOwn)*float64(time.Second))
			st.Prefilled = 8 * time.Millisecond
			st.Step += st.Prefilled
		}
		pf.observe(st, time.Millisecond)
		counted.observe(PassStats{Decoding: st.Decoding, Drafted: st.Drafted, Time: st.Time, Step: st.Step}, time.Millisecond)
	}
	if _, f, n := pf.costs(); math.Abs(f-fixedOwn) > 1e-9 || math.Abs(n-nodeOwn) > 1e-9 {
		t.Errorf("with prompts finished: own %.6fs + %.6fs a node, want %.6f + %.6f", f, n, fixedOwn, nodeOwn)
	}
	if _, _, n := counted.costs(); n < 2*nodeOwn {
		t.Errorf("the control, prompts counted as the steps': %.6fs a node, want it far above %.6f", n, nodeOwn)
	}
}

// TestGoodputPassOfSequences: with Pass set, a pass is priced as one of
// its requests' sequences (one more where prompt rows ride along), as
// Latency would price it for that many sequences; what the sequences
// add beside their rows then shrinks no draft, where pricing the pass
// on one sequence's curve scaled to the observed passes does.
func TestGoodputPassOfSequences(t *testing.T) {
	pass := func(seqs, rows, _ int) time.Duration {
		return time.Duration(seqs)*time.Millisecond + time.Duration(rows)*100*time.Microsecond
	}
	plan := ChainPlan(6)
	loads := make([]Load, 8)
	for i := range loads {
		loads[i] = Load{Plan: plan, Nodes: plan.Nodes(), Accept: at(0.8)}
	}
	for _, fixed := range []int{0, 5} {
		seqs := len(loads)
		if fixed > 0 {
			seqs++
		}
		got, want := make([]int, len(loads)), make([]int, len(loads))
		Goodput{Pass: pass, Latency: func(int) time.Duration { panic("Latency used beside Pass") }}.Budgets(fixed, loads, got)
		Goodput{Latency: func(rows int) time.Duration { return pass(seqs, rows, 0) }}.Budgets(fixed, loads, want)
		if !slices.Equal(got, want) {
			t.Errorf("%d prompt rows: budgets %v, want %v (a pass of %d sequences)", fixed, got, want, seqs)
		}
	}
	// learned from passes of 8 sequences of 7 rows each: on the pass
	// sizes' curve the scale stays 1 and every chain is whole; on one
	// sequence's curve the scale takes in what 8 sequences add and the
	// drafts shrink
	one := func(rows int) time.Duration { return pass(1, rows, 0) }
	on := Goodput{Pass: pass, Latency: one, Learn: &StepCosts{}}
	scaled := Goodput{Latency: one, Learn: &StepCosts{}}
	for i := 0; i < 50; i++ {
		st := PassStats{Seqs: 8, Decoding: 8, Rows: 56, Drafted: 48, Time: pass(8, 56, 0)}
		st.Step = st.Time
		on.Observe(st)
		scaled.Observe(st)
	}
	whole, shrunk := make([]int, len(loads)), make([]int, len(loads))
	on.Budgets(0, loads, whole)
	scaled.Budgets(0, loads, shrunk)
	sum := func(b []int) (n int) {
		for _, x := range b {
			n += x
		}
		return n
	}
	if sum(whole) != 48 || sum(shrunk) >= sum(whole) {
		t.Errorf("on the pass sizes' curve budgets %v (want every chain whole), on one sequence's scaled %v (want fewer)", whole, shrunk)
	}
}

// TestGoodputPricesAtTheContext: the pass is priced at the requests' mean
// context (Load.Context), and where what each sequence adds grows with
// it, a drafted row costs less beside it: eight requests after 32 tokens
// decode plainly where after 512 they draft, and the pass they observe is
// priced at its own context (the learned scale stays 1).
func TestGoodputPricesAtTheContext(t *testing.T) {
	var asked []int
	pass := func(seqs, rows, context int) time.Duration {
		asked = append(asked, context)
		return time.Duration(seqs)*time.Duration(context)*20*time.Microsecond + time.Duration(rows)*time.Millisecond
	}
	plan := ChainPlan(4)
	budgets := func(ctxs ...int) []int {
		loads := make([]Load, 8)
		for i := range loads {
			loads[i] = Load{Plan: plan, Nodes: plan.Nodes(), Accept: at(0.5), Context: ctxs[i%len(ctxs)]}
		}
		out := make([]int, len(loads))
		asked = asked[:0]
		Goodput{Pass: pass}.Budgets(0, loads, out)
		return out
	}
	short := budgets(32)
	if slices.Max(short) != 0 {
		t.Errorf("after 32 tokens: budgets %v, want plain decoding", short)
	}
	long := budgets(500, 524)
	if slices.Min(long) == 0 {
		t.Errorf("after 500-524 tokens: budgets %v, want every request drafting", long)
	}
	for _, c := range asked {
		if c != 512 {
			t.Fatalf("priced at context %d, want the mean 512", c)
		}
	}
	g := Goodput{Pass: pass, Learn: &StepCosts{}}
	for i := 0; i < 20; i++ {
		st := PassStats{Seqs: 8, Decoding: 8, Rows: 8, Context: 700, Time: pass(8, 8, 700)}
		st.Step = st.Time
		g.Observe(st)
	}
	if scale, _, _ := g.Learn.costs(); math.Abs(scale-1) > 1e-9 {
		t.Errorf("learned scale %v from passes priced at their own context, want 1", scale)
	}
}

// TestGoodputPricesPassesOnce: choosing eight requests' budgets asks the
// curve for each pass size once (the allocation weighs every request's
// next node against the same few row counts at every step), and the
// budgets are those of a curve asked every time.
func TestGoodputPricesPassesOnce(t *testing.T) {
	plan := ChainPlan(6)
	loads := make([]Load, 8)
	for i := range loads {
		loads[i] = Load{Plan: plan, Nodes: plan.Nodes(), Accept: at(0.55 + 0.05*float64(i%4))}
	}
	asked := map[int]int{}
	pass := func(seqs, rows, _ int) time.Duration {
		return time.Duration(seqs)*time.Millisecond + time.Duration(rows)*150*time.Microsecond
	}
	counted := Goodput{Pass: func(seqs, rows, c int) time.Duration { asked[rows]++; return pass(seqs, rows, c) }}
	got, want := make([]int, len(loads)), make([]int, len(loads))
	counted.Budgets(3, loads, got)
	for rows, n := range asked {
		if n > 1 {
			t.Errorf("a pass of %d rows priced %d times", rows, n)
		}
	}
	if len(asked) < 2 {
		t.Errorf("%d pass sizes priced: the budgets %v were not weighed", len(asked), got)
	}
	Goodput{Pass: pass}.Budgets(3, loads, want)
	if !slices.Equal(got, want) {
		t.Errorf("budgets %v, want %v", got, want)
	}
}

// TestGoodputMargin: with a margin, the plans stay whole where shrinking
// them is priced to gain less than it, and shrink where it gains more;
// without one, the first gain shrinks them. Likewise the requests draft
// only where that gains the margin over plain batching.
func TestGoodputMargin(t *testing.T) {
	plan := ChainPlan(6)
	loads := make([]Load, 8)
	for i := range loads {
		loads[i] = Load{Plan: plan, Nodes: plan.Nodes(), Accept: at(0.7)}
	}
	whole := func(b []int) bool {
		for i, n := range b {
			if n != loads[i].Nodes {
				return false
			}
		}
		return true
	}
	at := func(perRow time.Duration, margin float64) []int {
		g := Goodput{Latency: func(rows int) time.Duration { return 4*time.Millisecond + time.Duration(rows)*perRow }, Margin: margin}
		out := make([]int, len(loads))
		g.Budgets(0, loads, out)
		return out
	}
	// the first per-row cost at which the plans shrink without a margin
	first := time.Duration(0)
	for r := 10 * time.Microsecond; r <= 2*time.Millisecond; r += 10 * time.Microsecond {
		if !whole(at(r, 0)) {
			first = r
			break
		}
	}
	if first == 0 {
		t.Fatal("the plans never shrink")
	}
	if b := at(first, ShrinkMargin); !whole(b) {
		t.Errorf("at %v a row, where shrinking first pays, the margin shrank them: %v", first, b)
	}
	if b := at(4*first, ShrinkMargin); whole(b) {
		t.Errorf("at %v a row, four times that, the plans stayed whole beside the margin", 4*first)
	}
	// the last per-row cost at which drafting pays at all without a
	// margin: with one, plain batching
	last := time.Duration(0)
	for r := first; r <= 40*time.Millisecond; r += 10 * time.Microsecond {
		if slices.Max(at(r, 0)) == 0 {
			break
		}
		last = r
	}
	if last == 0 || last == first && slices.Max(at(first, 0)) == 0 {
		t.Fatal("drafting never pays")
	}
	if b := at(last, ShrinkMargin); slices.Max(b) != 0 {
		t.Errorf("at %v a row, where drafting last pays, the margin kept drafts: %v", last, b)
	}
	if b := at(last/2, ShrinkMargin); slices.Max(b) == 0 {
		t.Errorf("at %v a row, half that, the margin left plain batching", last/2)
	}
}

// BenchmarkGoodputBudgets: the adaptive policy's choice before a pass of
// eight requests of a chain of six, learned costs and running acceptance
// in place, as serve makes it before every step.
func BenchmarkGoodputBudgets(b *testing.B) {
	plan := ChainPlan(6)
	g := Goodput{Pass: func(seqs, rows, _ int) time.Duration {
		return time.Duration(seqs)*500*time.Microsecond + time.Duration(rows)*150*time.Microsecond
	}, Learn: &StepCosts{}}
	for i := 0; i < 50; i++ {
		st := PassStats{Seqs: 8, Decoding: 8, Rows: 48 + i%8, Drafted: 40 + i%8, Time: 12 * time.Millisecond}
		st.Step = st.Time + time.Duration(4000+100*(i%8))*time.Microsecond
		g.Observe(st)
	}
	loads := make([]Load, 8)
	for i := range loads {
		var rs rankStats
		for k := 0; k < 6; k++ {
			rs.add([]int{0, 0, 0, 0, -1}, []int{1, 1, 1, 1, 1})
		}
		loads[i] = Load{Plan: plan, Nodes: plan.Nodes(), Accept: func(d, r int) float64 { return rs.at(DefaultPrior, d, r) }}
	}
	out := make([]int, len(loads))
	for b.Loop() {
		g.Budgets(0, loads, out)
	}
}

// TestRankStats: a request's running acceptance is the prior's until it
// has steps, then moves to what its verdicts show, per depth and rank,
// counting only the ranks a step offered.
func TestRankStats(t *testing.T) {
	var a rankStats
	prior := at(0.5)
	if got := a.at(prior, 2, 1); got != 0.5 {
		t.Fatalf("no steps: %g, want the prior's 0.5", got)
	}
	for range 96 {
		a.add([]int{0, -1}, []int{2, 1}) // depth 1: the first of two accepted; depth 2: its only child rejected
	}
	if got, want := a.at(prior, 0, 0), (96+PriorWeight*0.5)/(96+PriorWeight); got != want {
		t.Errorf("depth 0 rank 0: %g, want %g", got, want)
	}
	if got, want := a.at(prior, 0, 1), PriorWeight*0.5/(96+PriorWeight); got != want {
		t.Errorf("depth 0 rank 1 (offered, never accepted): %g, want %g", got, want)
	}
	if got, want := a.at(prior, 1, 0), PriorWeight*0.5/(96+PriorWeight); got != want {
		t.Errorf("depth 1 rank 0: %g, want %g", got, want)
	}
	if got := a.at(prior, 1, 1); got != 0.5 {
		t.Errorf("depth 1 rank 1, never offered: %g, want the prior's", got)
	}
}
