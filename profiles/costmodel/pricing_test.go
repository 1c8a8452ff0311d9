package costmodel

import (
	"fmt"
	"slices"
	"testing"

	"arborist/engine/spec"
)

// needsPricing are the plan fields whose plans the general model (a
// plan's Expect tree on the curves) cannot price alone, with what a
// strategy that reads one must offer: its own price hook, and an offer of
// the search knob its candidates read.
var needsPricing = map[string]struct{ price, offer bool }{
	"depth_policy": {price: true, offer: true}, // stops on the drafter's confidence: Thresholds
	"max_seqs":     {price: true, offer: true}, // several sequences when unsure: Sequences
	"tail":         {offer: true},              // tail budgets: Tails
}

// unpriced names what each strategy of fields (strategy name -> the YAML
// names of the plan fields it reads) lacks of its pricing in ps.
func unpriced(fields map[string][]string, ps map[string]pricer) []string {
	var out []string
	for name, fs := range fields {
		p, ok := ps[name]
		for _, f := range fs {
			need, special := needsPricing[f]
			switch {
			case !special:
			case !ok:
				out = append(out, fmt.Sprintf("strategy %s lacks its pricing (it reads %s): add profiles/costmodel/price_%s.go", name, f, name))
			case need.price && p.price == nil:
				out = append(out, fmt.Sprintf("strategy %s lacks a price hook (it reads %s)", name, f))
			case need.offer && p.offer == nil:
				out = append(out, fmt.Sprintf("strategy %s lacks an offer hook (it reads %s)", name, f))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestEveryStrategyPriced: every registered strategy whose plans read a
// field the general model cannot price alone has its own pricing here,
// found by its name, and every pricing belongs to a registered strategy.
func TestEveryStrategyPriced(t *testing.T) {
	fields := map[string][]string{}
	for _, name := range spec.Strategies() {
		s, err := spec.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		fields[name] = nil
		for _, f := range s.Fields {
			fields[name] = append(fields[name], f.Name)
		}
	}
	if missing := unpriced(fields, pricers); len(missing) > 0 {
		t.Errorf("missing pricing:\n%v", missing)
	}
	for name := range pricers {
		if _, ok := fields[name]; !ok {
			t.Errorf("pricing for %s, which is no registered strategy", name)
		}
	}
	// the check fails a strategy that lacks what it needs
	fake := map[string][]string{"fake": {"gamma", "depth_policy"}, "duo": fields["duo"]}
	half := map[string]pricer{"duo": {offer: pricers["duo"].offer}}
	want := []string{
		"strategy duo lacks a price hook (it reads max_seqs)",
		"strategy fake lacks its pricing (it reads depth_policy): add profiles/costmodel/price_fake.go",
	}
	if got := unpriced(fake, half); !slices.Equal(got, want) {
		t.Errorf("an incomplete pricing reads as %q, want %q", got, want)
	}
}
