package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// lacks names every hook a registered strategy must provide and s does
// not (a strategy is one file: whatever the engine, the speedup model,
// config.yaml, the faces and the model-level suite need of it is a hook
// of its registration). The speedup model's own pricing of a strategy is
// required by profiles/costmodel's TestEveryStrategyPriced, the layer
// that holds it.
func lacks(s *Strategy) []string {
	var out []string
	need := func(ok bool, hook, why string) {
		if !ok {
			out = append(out, fmt.Sprintf("strategy %s lacks %s (%s)", s.Name, hook, why))
		}
	}
	reads := func(field string) bool {
		return slices.ContainsFunc(s.Fields, func(f Field) bool { return f.Name == field })
	}
	need(s.Summary != "", "Summary", "the faces list it")
	need(s.describe != nil, "describe", "a plan's name")
	need(s.budget != nil, "budget", "sizes bounded before a run allocates")
	need(s.maxTree != nil, "maxTree", "the cache a run reserves")
	need(s.draft != nil, "draft", "the engine's drafting")
	need(s.Expect != nil, "Expect", "the speedup model's tree")
	need(s.Candidates != nil, "Candidates", "the plans tune searches")
	need(s.shrink != nil, "shrink", "a step the load leaves less room runs the plan shrunk")
	need(s.Examples != nil && len(s.Examples()) > 0, "Examples", "the model-level suite's plans")
	if s.Examples != nil {
		for _, p := range s.Examples() {
			if p.Strategy != s.Name {
				out = append(out, fmt.Sprintf("strategy %s has an example of %s", s.Name, p.Strategy))
			} else if err := p.Validate(); err != nil {
				out = append(out, fmt.Sprintf("strategy %s has an example that does not run: %s: %v", s.Name, p, err))
			}
		}
	}
	if s.NeedsSource {
		need(len(s.Fields) > 0, "Fields", "the shape a plan sets")
		need(s.check != nil, "check", "impossible shapes refused")
		need(s.canonical != nil, "canonical", "plans doing its work ranked once")
	}
	for _, f := range []string{"tail", "aot"} {
		if reads(f) {
			need(s.Concurrent != nil, "Concurrent", f+" drafts while the target verifies")
			need(s.ahead != nil, "ahead", f+" drafts the next step's levels")
			need(s.oneChain != nil, "oneChain", f+" is what a one-chain runtime cannot express")
		}
	}
	if reads("tail") {
		need(s.tailWork != nil, "tailWork", "the drafter cache a tail reserves")
	}
	if reads("max_seqs") {
		need(s.Sequences != nil, "Sequences", "how many sequences a plan may draft")
		need(s.withSequences != nil, "withSequences", "config.yaml's max_sequences read back")
		need(s.oneChain != nil, "oneChain", "several sequences are what a one-chain runtime cannot express")
	}
	if reads("depth_policy") || reads("egt_widths") {
		need(s.Grows, "Grows", "a grown tree the speedup model replays")
	}
	if reads("depth_policy") || reads("sample_children") || s.Adapt != nil {
		need(s.oneChain != nil, "oneChain", "what a one-chain runtime cannot express")
	}
	if s.WhatIfDefault {
		need(s.WhatIf != nil, "WhatIf", "the what-if screen starts with it")
	}
	return out
}

// rolesLack names what a registry lacks of the roles the faces ask it
// for: one strategy they start with, one for plain decoding, one the
// what-if screen starts with.
func rolesLack(reg map[string]*Strategy) []string {
	var def, plain, whatIf []string
	for name, s := range reg {
		if s.Default {
			def = append(def, name)
		}
		if !s.NeedsSource {
			plain = append(plain, name)
		}
		if s.WhatIfDefault {
			whatIf = append(whatIf, name)
		}
	}
	var out []string
	for _, r := range []struct {
		role  string
		names []string
	}{{"Default", def}, {"plain decoding (NeedsSource false)", plain}, {"WhatIfDefault", whatIf}} {
		if len(r.names) != 1 {
			slices.Sort(r.names)
			out = append(out, fmt.Sprintf("the registry needs exactly one strategy with %s, has %v", r.role, r.names))
		}
	}
	return out
}

// TestRegistryComplete: every registered strategy provides every hook
// its fields call for, the registry has each role exactly once, and the
// checks fail a strategy or registry that lacks them.
func TestRegistryComplete(t *testing.T) {
	for _, name := range Strategies() {
		for _, l := range lacks(registry[name]) {
			t.Error(l)
		}
	}
	for _, l := range rolesLack(registry) {
		t.Error(l)
	}
	// controls: an incomplete strategy and registry are named as such
	foo := &Strategy{Name: "foo", Summary: "half a strategy", NeedsSource: true, Fields: []Field{{Name: "tail"}},
		describe: func(Plan) string { return "foo" }, Expect: registry["chain"].Expect}
	got := strings.Join(lacks(foo), "\n")
	for _, want := range []string{"strategy foo lacks budget", "strategy foo lacks draft", "strategy foo lacks Examples",
		"strategy foo lacks check", "strategy foo lacks tailWork", "strategy foo lacks Concurrent", "strategy foo lacks shrink"} {
		if !strings.Contains(got, want) {
			t.Errorf("an incomplete strategy: %q not named in\n%s", want, got)
		}
	}
	if strings.Contains(got, "lacks Expect") || strings.Contains(got, "lacks describe") {
		t.Errorf("hooks it has are named missing:\n%s", got)
	}
	scratch := map[string]*Strategy{"ar": registry["ar"], "chain": registry["chain"], "tree": registry["tree"], "also": {Name: "also", Default: true}}
	if got := rolesLack(scratch); len(got) != 3 {
		t.Errorf("a registry with two defaults, two plain strategies and no what-if start: %q", got)
	} else if !strings.Contains(got[0], "[also chain]") {
		t.Errorf("two defaults named as %q", got[0])
	}
}
