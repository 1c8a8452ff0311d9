package config

import (
	"fmt"
	"slices"
	"strconv"
)

// Serving is how the plan is served: how many requests at once it was
// tuned for and the policy `arborist serve` replays (its --policy where
// the command line names none). A plan tuned at one request can be wrong
// at eight, where every drafted token of one request is a row of a pass
// all of them wait for; the exported lines of other runtimes are sized for
// Concurrency.
type Serving struct {
	// Concurrency is the number of requests decoded at once the plan was
	// tuned for (1: one at a time; 0 in configs written before reads as 1).
	Concurrency int `yaml:"concurrency"`
	// Policy is plan (every request drafts as the plan says), plain (no
	// drafting) or adaptive (each pass shrinks every request's drafting,
	// down to none, to what pays at the load; the plan's shape is kept).
	Policy string `yaml:"policy"`
	// SpeculationStopsAt is the concurrency from which Arborist's cost
	// model says speculation stops paying (tune --concurrency: the first
	// level where plain batching ranks first); 0 where it was not priced.
	SpeculationStopsAt int `yaml:"speculation_stops_at,omitempty"`
}

// The serving policies serve replays: how the server sizes each running
// request's draft before each pass.
const (
	// PolicyPlan verifies every request's plan at its full size, as
	// tuned at one request, whatever the load.
	PolicyPlan = "plan"
	// PolicyPlain never drafts: plain batched decoding.
	PolicyPlain = "plain"
	// PolicyAdaptive chooses every running request's draft budget each
	// pass, from none up to its plan's, for the most expected tokens a
	// second of the whole pass (spec.Goodput), priced on the target's
	// stored latency curve and each request's running acceptance.
	PolicyAdaptive = "adaptive"
)

// Policies are the serving policies, in the order the faces offer them.
func Policies() []string { return []string{PolicyPlan, PolicyAdaptive, PolicyPlain} }

// MaxConcurrency bounds serving.concurrency (and a load test's levels):
// far past what one machine batches for a local model, low enough that
// llama.cpp's -c (the context times the sequences) stays an int.
const MaxConcurrency = 256

// CheckConcurrency refuses a concurrency outside 1..MaxConcurrency,
// naming the field (or flag) it came from.
func CheckConcurrency(name string, n int) error {
	if n < 1 || n > MaxConcurrency {
		return fmt.Errorf("%s %d: want 1 to %d requests at once", name, n, MaxConcurrency)
	}
	return nil
}

// validate checks the serving block against the plan it serves.
func (s Serving) validate(speculates bool) error {
	if s.Concurrency != 0 {
		if err := CheckConcurrency("serving.concurrency", s.Concurrency); err != nil {
			return err
		}
	}
	if s.SpeculationStopsAt != 0 {
		if err := CheckConcurrency("serving.speculation_stops_at", s.SpeculationStopsAt); err != nil {
			return err
		}
	}
	switch s.Policy {
	case "", PolicyPlan, PolicyPlain:
	case PolicyAdaptive:
		if !speculates {
			return fmt.Errorf("serving.policy adaptive shrinks the plan's drafting under load, and this plan does not draft: use plan or plain")
		}
	default:
		return fmt.Errorf("serving.policy %q: want plan, adaptive or plain", s.Policy)
	}
	return nil
}

// Concurrency is the number of requests at once the plan was tuned for
// (1 where the config names none).
func (c *Config) Concurrency() int { return max(1, c.Serving.Concurrency) }

// Policy is the serving policy serve replays (plan where the config names
// none).
func (c *Config) Policy() string {
	if c.Serving.Policy == "" {
		return PolicyPlan
	}
	return c.Serving.Policy
}

// SpeculationStopsAt is the concurrency from which a runtime that can turn
// speculation off by load should: serving.speculation_stops_at where the
// cost model priced it, otherwise the level after the tuned concurrency in
// the doubling list tune ranks (1, 2, 4, 8, ...), twice the concurrency:
// the plan is known to pay at the load it was tuned for and is not trusted
// past the next level. 0 for a plan that does not speculate.
func (c *Config) SpeculationStopsAt() int {
	switch {
	case c.plain() || c.Policy() == PolicyPlain:
		return 0
	case c.Serving.SpeculationStopsAt > 0:
		return c.Serving.SpeculationStopsAt
	}
	return 2 * c.Concurrency()
}

// speculatesAt says whether the plan still pays at the tuned concurrency
// (false where the model said speculation stops paying at or below it).
func (c *Config) speculatesAt() bool {
	s := c.SpeculationStopsAt()
	return s == 0 || s > c.Concurrency()
}

// LlamaServer is llama-server's argument list for the plan serving
// concurrency sequences at once: -np sequences and -c sized for that many
// sequences of the plan's context (llama-server splits -c among its
// slots), the draft model where speculate and the plan drafts with one,
// the placement and the sampling. A load test starts llama-server with it,
// so what is measured is what is exported.
func (c *Config) LlamaServer(concurrency int, speculate bool) []string {
	a := c.LlamaCpp()
	model := slices.Clone(a.Model)
	if i := slices.Index(model, "-c"); i >= 0 && i+1 < len(model) {
		model[i+1] = strconv.Itoa(concurrency * c.Models.Target.MaxSeqLen)
	}
	np := []string{"-np", strconv.Itoa(concurrency)}
	if !speculate || len(a.Draft) == 0 {
		return slices.Concat(model, np, a.Layers, a.Sampling)
	}
	return slices.Concat(model, a.Draft, np, a.Layers, a.DraftLayers, a.Sampling)
}
