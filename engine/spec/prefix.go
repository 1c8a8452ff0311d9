package spec

import (
	"context"
	"fmt"
	"slices"

	"arborist/engine/drafter"
	"arborist/engine/model"
)

// Prefix is a prompt prefilled once into a cache of the target's, from
// which many generations start (RunFrom): each copies the cache instead
// of prefilling the prompt again. A long prompt shared by many seeded
// generations (a system prompt, a statistical test's thousands of runs)
// then pays for its prefill once. A generation from a Prefix emits what
// Run emits after the same prompt, token for token: the copied slots are
// the ones Run's prefill computes, by the same pass.
type Prefix struct {
	target *model.Model
	prompt []int
	cache  *model.Cache // nil for a prompt of one token (nothing to prefill)
	// hidden holds the prefilled rows' hidden states: every row's where
	// the engine's source reads them (drafter.HiddenSource), else the
	// last row's (what a depth policy or Config.RecordHidden reads)
	hidden  []float32
	allRows bool
}

// Prefill prefills prompt (all but its last token, the first step's root,
// as Run does) for the generations e runs from it.
func (e *Engine) Prefill(ctx context.Context, prompt []int) (*Prefix, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("spec: empty prompt")
	}
	m := e.Target
	if err := m.CheckFile(); err != nil {
		return nil, err
	}
	_, all := e.Source.(drafter.HiddenSource)
	p := &Prefix{target: m, prompt: slices.Clone(prompt), allRows: all}
	n := len(prompt) - 1
	if n == 0 {
		return p, nil
	}
	if err := m.CheckCache(n); err != nil {
		return nil, err
	}
	p.cache = m.NewCache(n)
	b := model.Batch{Tokens: prompt[:n], Want: []int{n - 1}, Hidden: true}
	if all {
		b.Want = nil
	}
	var res model.Result
	if err := m.Forward(ctx, p.cache, b, &res); err != nil {
		p.Free()
		return nil, err
	}
	p.hidden = slices.Clone(res.Hidden)
	return p, nil
}

// Free releases the prefix's cache; it must not be used afterwards.
func (p *Prefix) Free() {
	if p.cache != nil {
		p.cache.Free()
		p.cache = nil
	}
}

// RunFrom is Run after p's prompt, starting from its prefilled cache.
func (e *Engine) RunFrom(ctx context.Context, p *Prefix, cfg Config) (*Result, error) {
	if err := p.fits(e, p.prompt); err != nil {
		return nil, err
	}
	r, err := e.newRun(p.prompt, cfg)
	if err != nil {
		return nil, err
	}
	r.from = p
	return r.res, r.loop(ctx, p.prompt)
}

// fits says why p cannot start a generation of prompt on e (nil: it can).
func (p *Prefix) fits(e *Engine, prompt []int) error {
	if p.target != e.Target {
		return fmt.Errorf("spec: a prefix prefilled on another target")
	}
	if !slices.Equal(p.prompt, prompt) {
		return fmt.Errorf("spec: a prefix of another prompt (%d tokens, the request's %d)", len(p.prompt), len(prompt))
	}
	if _, hs := e.Source.(drafter.HiddenSource); hs && !p.allRows {
		return fmt.Errorf("spec: the source reads every prompt row's hidden state; the prefix kept the last row's only (prefill it on an engine with this source)")
	}
	if p.cache != nil && p.cache.Type() != e.Target.KVType {
		return fmt.Errorf("spec: a prefix of a %s cache for a target of a %s cache", p.cache.Type(), e.Target.KVType)
	}
	return nil
}

// openFrom opens the run on a cache of the run's capacity holding a copy
// of its prefix's, and returns the prefilled rows' hidden states as the
// prefill pass would have.
func (r *run) openFrom(capacity int) ([]float32, error) {
	r.open(r.e.Target.NewCache(capacity))
	return r.loadPrefix(r.from)
}

// loadPrefix copies p's prefilled slots into the run's open cache (a
// batch's, taken from its budget, or openFrom's) and returns the prefill's
// hidden states, the last row's kept for the run where it reads it.
func (r *run) loadPrefix(p *Prefix) ([]float32, error) {
	if p.cache == nil { // a prompt of one token: nothing prefilled
		return nil, nil
	}
	if err := r.cache.Load(p.cache, p.cache.Len()); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if r.needHidden {
		dim := r.e.Target.Dim
		r.hidden = append(r.hidden[:0], p.hidden[len(p.hidden)-dim:]...)
	}
	return p.hidden, nil
}
