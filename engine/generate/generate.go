// Package generate runs plain autoregressive decoding: prefill the prompt in
// one batch, then one token per forward pass. It is the 1.00x baseline every
// speculative strategy is measured against, and the reference its greedy
// output must equal.
package generate

import (
	"context"
	"fmt"
	"time"

	"arborist/engine/model"
	"arborist/engine/sample"
)

// Options control a generation.
type Options struct {
	MaxTokens int           // tokens to generate
	Sample    sample.Params // greedy when Temp is 0
	StopAtEOS bool          // stop at the vocabulary's end-of-generation token
	// OnToken, when set, is called with each generated token as it comes.
	OnToken func(id int)
}

// Stats are the timings of one generation.
type Stats struct {
	PromptTokens int
	Tokens       int
	Prefill      time.Duration
	Decode       time.Duration
}

// PrefillTPS is prompt tokens per second.
func (s Stats) PrefillTPS() float64 { return rate(s.PromptTokens, s.Prefill) }

// DecodeTPS is generated tokens per second, excluding prefill. The first
// token comes out of the prefill pass, so decode time covers Tokens-1 passes.
func (s Stats) DecodeTPS() float64 { return rate(s.Tokens-1, s.Decode) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 || n <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Run generates up to opt.MaxTokens tokens after prompt (which should already
// carry BOS if the model wants it) and returns them.
func Run(ctx context.Context, m *model.Model, prompt []int, opt Options) ([]int, Stats, error) {
	st := Stats{PromptTokens: len(prompt)}
	if len(prompt) == 0 || opt.MaxTokens <= 0 {
		return nil, st, nil
	}
	// sizes checked before the cache is allocated (no overflow), and the
	// mapped file before the first pass reads it
	if opt.MaxTokens > m.CtxLen || len(prompt) > m.CtxLen-opt.MaxTokens {
		return nil, st, fmt.Errorf("generate: prompt (%d tokens) + %d new tokens exceed the model's context of %d", len(prompt), opt.MaxTokens, m.CtxLen)
	}
	if err := m.CheckFile(); err != nil {
		return nil, st, err
	}
	if err := m.CheckCache(len(prompt) + opt.MaxTokens); err != nil {
		return nil, st, err
	}
	cache := m.NewCache(len(prompt) + opt.MaxTokens)
	smp := sample.New(opt.Sample)
	var res model.Result
	scratch := make([]float32, m.Vocab)
	t0 := time.Now()
	if err := m.Forward(ctx, cache, model.Batch{Tokens: prompt, Want: []int{len(prompt) - 1}}, &res); err != nil {
		return nil, st, err
	}
	st.Prefill = time.Since(t0)
	var out []int
	t1 := time.Now()
	for {
		if err := m.CheckLogits(res.Logits); err != nil {
			st.Tokens, st.Decode = len(out), time.Since(t1)
			return out, st, err
		}
		tok := smp.Sample(res.Logits, scratch)
		out = append(out, tok)
		if opt.OnToken != nil {
			opt.OnToken(tok)
		}
		if len(out) >= opt.MaxTokens || (opt.StopAtEOS && m.Tok.IsEOG(tok)) {
			break
		}
		if err := m.CheckFile(); err != nil {
			st.Tokens, st.Decode = len(out), time.Since(t1)
			return out, st, err
		}
		if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{tok}}, &res); err != nil {
			st.Tokens, st.Decode = len(out), time.Since(t1)
			return out, st, err
		}
	}
	st.Tokens, st.Decode = len(out), time.Since(t1)
	return out, st, nil
}
