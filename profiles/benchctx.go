package profiles

import (
	"context"
	"fmt"
	"sort"
	"time"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
	"arborist/profiles/trainsize"
)

// DepthReport is a model's speed after Context cached positions: decode
// tokens/s and the verification passes there, against the roofline that
// counts the KV cache bytes a step reads beside the weights. Users' prompts
// put thousands of tokens before the first generated one, and there the
// cache a step streams is a large part of its bytes (4K positions of a
// Llama-3.2-1B shape in float32: 256 MiB beside 663 MiB of weights).
type DepthReport struct {
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

// BenchDefaults is bench's work when nothing else is asked, the command
// line's and the workbench's: five decode runs of 128 tokens (the
// median reported) and the passes of 1 to 64 rows, in float16 keys and
// values where the backend holds them (KV "": the backend's default).
func BenchDefaults() BenchOptions {
	return BenchOptions{Reps: 5, Tokens: 128, Widths: []int{1, 2, 4, 8, 16, 32, 64}}
}

// BenchDepths are the context depths bench measures the model at path
// at when none are asked for: 1024 and 4096 positions, those that leave
// room in its context for a decode run of tokens or a pass of maxW rows
// after them (users' prompts put 1-8K tokens before the first generated
// one); where neither does, half of the context that is left (a small
// model's, 2048 positions: 1024 fits; one of 512: 192). An error where
// the model's shape cannot be read, or no position is left at all.
func BenchDepths(path string, tokens, maxW int) ([]int, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	return depthsFor(cfg.CtxLen, max(tokens, maxW))
}

// depthsFor is BenchDepths for a context of ctxLen positions with room
// positions after each depth.
func depthsFor(ctxLen, room int) ([]int, error) {
	var out []int
	for _, d := range []int{1024, 4096} {
		if d+room <= ctxLen {
			out = append(out, d)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	if left := (ctxLen - room) / 2; left >= 1 {
		return []int{left}, nil
	}
	return nil, fmt.Errorf("the model's context of %d positions leaves no depth before %d positions of runs and passes", ctxLen, room)
}

// BenchStage is one stage of a bench, named as its progress names it,
// with its rough share of the bench's time.
type BenchStage struct {
	Name   string
	Weight float64
}

// BenchStages are opt's stages in the order BenchModel runs them, each
// weighted by the rows its passes take: a decode step as four rows (on
// the 1B Q4_K shape a step streams the weights in about four prefill
// rows' time), the short context's decode runs twice over (each is
// followed by a read of the memory as long as itself; a device with
// memory of its own reads none, and its first stage is then weighed
// double), a verification curve as 22 rows for each row of each width,
// four at least (its rounds, its warm-up, and its narrow passes
// streaming the weights), and a pass after D cached positions dearer by
// D/8192 (a decode step after 4096 took 1.5x a short one's time), a
// prefill of D rows by half that on average. bench's defaults at 1024
// and 4096 on that shape, 298 s in all, put each stage's weight within
// 16% of its time (the probes before the first stage aside); equal
// shares had put the 4096-token prefill, 18% of the time, at 12%, and
// the short decode runs, 16%, at 12%.
func BenchStages(opt BenchOptions) []BenchStage {
	rows := 0.0
	for _, w := range opt.Widths {
		rows += float64(max(w, 4))
	}
	decode := float64(opt.Reps*opt.Tokens) * 4
	passes := 22 * rows
	st := []BenchStage{{"decode runs", 2 * decode}, {"verify passes", passes}}
	for _, d := range opt.Ctx {
		at := 1 + float64(d)/8192
		st = append(st,
			BenchStage{fmt.Sprintf("context %d: prefill", d), float64(d) * (1 + float64(d)/16384)},
			BenchStage{fmt.Sprintf("context %d: decode runs", d), decode * at},
			BenchStage{fmt.Sprintf("context %d: verify passes", d), passes * at})
	}
	return st
}

// BenchDone is how far a bench of stages (BenchStages) is once e is
// heard, as a share of its weighed work: -1 for a stage not among them.
func BenchDone(stages []BenchStage, e Event) float64 {
	var before, total float64
	at := -1
	for i, s := range stages {
		if s.Name == e.Stage && at < 0 {
			at = i
		}
		if at < 0 {
			before += s.Weight
		}
		total += s.Weight
	}
	if at < 0 || e.Total <= 0 || total <= 0 {
		return -1
	}
	return (before + stages[at].Weight*float64(min(e.Done, e.Total))/float64(e.Total)) / total
}

// checkDepths refuses, before anything is allocated, a depth whose
// decode run and widest pass do not fit m's context, or whose cache (a
// depth's is filled: every byte of it taken) does not fit the memory
// (measure.CheckContext).
func checkDepths(m *model.Model, depths []int, tokens, maxW int) error {
	for _, d := range depths {
		if d < 1 {
			return fmt.Errorf("--ctx: %d is not a context depth (want positions >= 1)", d)
		}
		need := d + max(tokens, maxW)
		if need > m.CtxLen {
			return fmt.Errorf("--ctx %d: the depth and %d positions after it (%d) exceed the model's context of %d", d, max(tokens, maxW), need, m.CtxLen)
		}
		if err := measure.CheckContext(m, need); err != nil {
			return fmt.Errorf("--ctx %d: %w", d, err)
		}
	}
	return nil
}

// benchDepth prefills depth synthetic tokens once, then times reps decode
// runs of tokens steps on top of them (the cache cut back to the depth
// before each) and the verification passes over widths there, telling
// progress each chunk, run and round with what is left.
func benchDepth(ctx context.Context, m *model.Model, lim hardware.Limits, depth, reps, tokens int, widths []int, progress Progress) (DepthReport, error) {
	maxW := 0
	for _, w := range widths {
		maxW = max(maxW, w)
	}
	dr := DepthReport{Context: depth}
	cache := m.NewCache(depth + max(tokens, maxW))
	defer cache.Free()
	toks := make([]int, depth+max(tokens, maxW))
	for i := range toks {
		toks[i] = (i*7 + 3) % m.Vocab
	}
	var res model.Result
	t0 := time.Now()
	chunks := (depth + prefillChunk - 1) / prefillChunk
	var first time.Duration // the first chunk's time
	for k := 0; k < chunks; k++ {
		at, c0 := k*prefillChunk, time.Now()
		end := min(depth, at+prefillChunk)
		if err := m.Forward(ctx, cache, model.Batch{Tokens: toks[at:end], Want: []int{end - at - 1}, Output: model.OutArgmax}, &res); err != nil {
			return dr, err
		}
		took := time.Since(c0)
		if k == 0 {
			first = took
		}
		left := ""
		if k+1 < chunks {
			left = fmt.Sprintf("; about %s left", trainsize.Minutes(prefillLeft(first, took, k, chunks)))
		}
		progress.send(fmt.Sprintf("context %d: prefill", depth), k+1, chunks, fmt.Sprintf("%.1f tokens/s%s", float64(end)/time.Since(t0).Seconds(), left))
	}
	dr.Prefill = float64(depth) / time.Since(t0).Seconds()
	steps := tokens - 1 // as a decode run counts them: the first token comes out of the prefill
	for k := 1; k <= steps; k++ {
		dr.KVRead += float64(m.KVReadBytes(depth+k, m.KVType))
	}
	dr.KVRead /= float64(steps)
	next := res.Argmax[0]
	runs := time.Now()
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
		progress.send(fmt.Sprintf("context %d: decode runs", depth), r+1, reps, fmt.Sprintf("%.1f tokens/s%s", dr.Decode[r], leftOf(time.Since(runs), r+1, reps)))
	}
	sort.Float64s(dr.Decode)
	dr.Median = dr.Decode[len(dr.Decode)/2]
	lim.KVRead = dr.KVRead
	dr.Roofline = 1 / lim.Roofline().Seconds()
	dr.Share = dr.Median / dr.Roofline
	if len(widths) > 0 {
		cache.Truncate(depth)
		pts, err := measure.VerifyCurve(ctx, m, widths, measure.CurveOptions{Context: depth, Cache: cache, Progress: progress.rounds(fmt.Sprintf("context %d: verify passes", depth), time.Now())})
		if err != nil {
			return dr, err
		}
		dr.Passes = pts
	}
	return dr, nil
}

// prefillLeft is what is left of a prefill of chunks chunks after chunk k
// (0-based) took last and the first took first: each chunk's attention
// reads every position before it, so a chunk's time grows about linearly
// with where it starts, and the chunks to come are priced on the line
// through the first and the latest.
func prefillLeft(first, last time.Duration, k, chunks int) time.Duration {
	if k+1 >= chunks {
		return 0
	}
	slope := 0.0
	if k > 0 {
		slope = max(0, float64(last-first)/float64(k))
	}
	var left float64
	for j := k + 1; j < chunks; j++ {
		left += float64(first) + slope*float64(j)
	}
	return time.Duration(left)
}

// leftOf says what is left of a stage of total equal parts once done of
// them took elapsed ("" once all are done).
func leftOf(elapsed time.Duration, done, total int) string {
	if done >= total {
		return ""
	}
	return "; about " + trainsize.Minutes(trainsize.ETA(elapsed, float64(done), float64(total))) + " left"
}

// rounds adapts Progress to VerifyCurve's rounds under stage, with the
// longest what is left can be from the rounds' pace since start.
func (p Progress) rounds(stage string, start time.Time) func(done, total int, pt latency.Point) {
	if p == nil {
		return nil
	}
	return func(done, total int, pt latency.Point) {
		p.send(stage, done, total, roundDetail(pt, start, done, total))
	}
}

// roundDetail says how a curve's round left its widest point, and the
// longest what is left of the curve can be (it stops early once its
// spreads settle) at the pace since start: "W=64: 50.134ms; at most
// about 12 s left".
func roundDetail(pt latency.Point, start time.Time, done, total int) string {
	left := ""
	if done < total {
		left = "; at most about " + trainsize.Minutes(trainsize.ETA(time.Since(start), float64(done), float64(total))) + " left"
	}
	return fmt.Sprintf("W=%d: %v%s", pt.W, pt.Median.Round(time.Microsecond), left)
}
