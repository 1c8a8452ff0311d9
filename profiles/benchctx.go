package profiles

import (
	"context"
	"fmt"
	"sort"
	"time"

	"arborist/engine/model"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
)

// depthReport is a model's speed after Context cached positions: decode
// tokens/s and the verification passes there, against the roofline that
// counts the KV cache bytes a step reads beside the weights. Users' prompts
// put thousands of tokens before the first generated one, and there the
// cache a step streams is a large part of its bytes (4K positions of a
// Llama-3.2-1B shape in float32: 256 MiB beside 663 MiB of weights).
type depthReport struct {
	Context int `json:"context"`
	// Decode is each run's tokens/s (sorted), Median their median
	Decode []float64 `json:"decode_tokens_per_s"`
	Median float64   `json:"decode_median_tokens_per_s"`
	// KVRead is the KV cache bytes a decode step reads, the mean over a
	// run's steps; Roofline the tokens/s of reading the weights and those
	// at the bandwidth; Share is Median / Roofline
	KVRead   float64 `json:"kv_read_bytes_per_token"`
	Roofline float64 `json:"roofline_tokens_per_s"`
	Share    float64 `json:"roofline_share"`
	// Passes is T_verify(W) over the widths, each pass on top of Context
	// cached positions
	Passes []latency.Point `json:"verify_curve"`
	// Prefill is the tokens/s of filling the Context positions, in
	// passes of at most prefillChunk tokens: what a long prompt costs
	// before its first generated token
	Prefill float64 `json:"prefill_tokens_per_s"`
}

// prefillChunk is the most tokens one prefill pass of a depth takes: a
// pass's activations grow with its rows (a 1B shape's feed-forward holds
// 64 KiB a row), the cache's bytes do not.
const prefillChunk = 512

// checkDepths refuses, before anything is allocated, a depth whose
// decode run and widest pass do not fit the model's context.
func checkDepths(depths []int, tokens, maxW, ctxLen int) error {
	for _, d := range depths {
		if d < 1 {
			return fmt.Errorf("--ctx: %d is not a context depth (want positions >= 1)", d)
		}
		need := d + max(tokens, maxW)
		if need > ctxLen {
			return fmt.Errorf("--ctx %d: the depth and %d positions after it (%d) exceed the model's context of %d", d, max(tokens, maxW), need, ctxLen)
		}
	}
	return nil
}

// benchDepth prefills depth synthetic tokens once, then times reps decode
// runs of tokens steps on top of them (the cache cut back to the depth
// before each) and the verification passes over widths there.
func benchDepth(ctx context.Context, m *model.Model, lim hardware.Limits, depth, reps, tokens int, widths []int) (depthReport, error) {
	maxW := 0
	for _, w := range widths {
		maxW = max(maxW, w)
	}
	dr := depthReport{Context: depth}
	cache := m.NewCache(depth + max(tokens, maxW))
	defer cache.Free()
	toks := make([]int, depth+max(tokens, maxW))
	for i := range toks {
		toks[i] = (i*7 + 3) % m.Vocab
	}
	var res model.Result
	t0 := time.Now()
	for at := 0; at < depth; at += prefillChunk {
		end := min(depth, at+prefillChunk)
		if err := m.Forward(ctx, cache, model.Batch{Tokens: toks[at:end], Want: []int{end - at - 1}, Output: model.OutArgmax}, &res); err != nil {
			return dr, err
		}
	}
	dr.Prefill = float64(depth) / time.Since(t0).Seconds()
	steps := tokens - 1 // as a decode run counts them: the first token comes out of the prefill
	for k := 1; k <= steps; k++ {
		dr.KVRead += float64(m.KVReadBytes(depth+k, m.KVType))
	}
	dr.KVRead /= float64(steps)
	next := res.Argmax[0]
	for r := 0; r < reps; r++ {
		cache.Truncate(depth)
		tok := next
		t0 := time.Now()
		for k := 0; k < steps; k++ {
			if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{tok}, Output: model.OutArgmax}, &res); err != nil {
				return dr, err
			}
			tok = res.Argmax[0]
		}
		dr.Decode = append(dr.Decode, float64(steps)/time.Since(t0).Seconds())
	}
	sort.Float64s(dr.Decode)
	dr.Median = dr.Decode[len(dr.Decode)/2]
	lim.KVRead = dr.KVRead
	dr.Roofline = 1 / lim.Roofline().Seconds()
	dr.Share = dr.Median / dr.Roofline
	if len(widths) > 0 {
		cache.Truncate(depth)
		pts, err := measure.VerifyCurve(ctx, m, widths, measure.CurveOptions{Context: depth, Cache: cache})
		if err != nil {
			return dr, err
		}
		dr.Passes = pts
	}
	return dr, nil
}
