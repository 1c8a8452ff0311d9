package measure

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/tree"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
)

// CurveOptions control a latency-curve measurement.
type CurveOptions struct {
	Context int // cached tokens each pass attends to (default ShortContext)
	Warmup  int // untimed passes per width (default 2)
	MinReps int // timed passes per width at least (default 5)
	MaxReps int // at most (default 15); stops early once every spread is small
	// Cache, when set, is VerifyCurve's cache, already holding Context
	// positions and room for the widest pass: a long context is prefilled
	// once for the decode runs and the passes on it (nil: VerifyCurve
	// makes and prefills one of its own)
	Cache *model.Cache
	// Progress, when set, is called after each round (or width) with the
	// rounds done, the most there can be, and the latest point.
	Progress func(done, total int, p latency.Point)
}

// ShortContext is the context a curve is measured at unless another is
// asked for: a mid-length generation's, the one every curve was measured
// at before curves over context. Plans are priced on the verification
// curve at it where nothing says at what context they run; curves at
// longer contexts are measured beside it.
const ShortContext = 128

func (o *CurveOptions) defaults() {
	if o.Context <= 0 {
		o.Context = ShortContext
	}
	if o.Warmup <= 0 {
		o.Warmup = 2
	}
	if o.MinReps <= 0 {
		o.MinReps = 5
	}
	if o.MaxReps < o.MinReps {
		o.MaxReps = max(o.MinReps, 15)
	}
}

// DefaultWidths is W = 1..32 and a geometric grid up to 512.
func DefaultWidths(maxW int) []int {
	var ws []int
	for w := 1; w <= 32 && w <= maxW; w++ {
		ws = append(ws, w)
	}
	for w := 48; w <= maxW && w <= 512; w = w * 3 / 2 {
		ws = append(ws, w)
	}
	return ws
}

// ContextWidths are the widths a verification curve at a longer context
// is timed at, up to maxW: a sparse grid of doublings, each from 4 on
// with the width one past it, and maxW (a pass there takes longer, and
// the model interpolates between widths as it does on the short
// context's curve), so a profile at several contexts stays within
// minutes. The widths one past a doubling are where the kernels' blocks
// of rows step (on the bench target after 1,900 tokens a pass of 9 rows
// took 1.28x one of 8), and where a tree of a doubling's nodes and its
// root verifies: interpolated from 8 to 16, such a tree's pass was priced
// 13% under what its steps measured.
func ContextWidths(maxW int) []int {
	if maxW < 1 {
		return nil
	}
	var ws []int
	for w := 1; w <= maxW; w *= 2 {
		ws = append(ws, w)
		if w >= 4 && w+1 <= maxW {
			ws = append(ws, w+1)
		}
	}
	if ws[len(ws)-1] < maxW {
		ws = append(ws, maxW) // the widest plans verify there
	}
	return ws
}

// SeqsWidths are the widths (rows in all) a curve of passes of seqs
// sequences is timed at, up to maxW: seqs times 1, 2, 4, ... rows each,
// every sequence verifying as many; nil when even one row each is past
// maxW.
func SeqsWidths(seqs, maxW int) []int {
	var ws []int
	for each := 1; seqs*each <= maxW; each *= 2 {
		ws = append(ws, seqs*each)
	}
	return ws
}

// settlePasses is how many untimed passes of its narrowest width a round
// of VerifyCurve starts with, after the last round's widest pass.
const settlePasses = 4

// CheckContext refuses a context of n cached tokens (a pass's rows
// beyond them included) that m cannot hold, before anything is
// allocated: past the positions it was trained for, a KV cache larger
// than the machine's memory, or larger than the memory left on it now (a
// cache filled to n positions takes every byte of it: past what is free
// the machine swaps, or the process is killed, minutes into a prefill);
// the error names both figures.
func CheckContext(m *model.Model, n int) error {
	if n > m.CtxLen {
		return fmt.Errorf("profiles: a context of %d tokens is past the %d positions %s was trained for", n, m.CtxLen, filepath.Base(m.Path))
	}
	if err := m.CheckCache(n); err != nil {
		return err
	}
	return checkLeft(filepath.Base(m.Path), n, m.KVBytesAs(n, m.KVType), m.KVBytesAs(1, m.KVType), hardware.MemAvailable())
}

// checkLeft refuses a cache of need bytes for n positions (perPos a
// position) where the memory left, avail, is smaller (0: not known, not
// refused), naming both and the positions that fit.
func checkLeft(name string, n int, need, perPos, avail uint64) error {
	if avail == 0 || need <= avail {
		return nil
	}
	return fmt.Errorf("profiles: a context of %d tokens takes a KV cache of %d MiB for %s, more than the %d MiB of memory left on this machine (about %d tokens fit); free memory or ask for a shorter context",
		n, need>>20, name, avail>>20, avail/max(perPos, 1))
}

// DepthCache makes a cache of m, for up to n+extra positions, whose
// first n slots are in use and hold keys and values a pass reads as it
// reads a prompt's: a pass on it costs what it costs after n tokens of
// context. A prefill of n tokens would take minutes at a long context on
// a CPU (a 4K-token prompt, prefilled at 25 tokens/s), and attention
// reads every slot whatever it holds, so only the first ShortContext are
// computed and copied over the rest (Cache.Compact): every slot is then
// written memory, never pages the system has not backed yet, which a
// cache only marked used (Cache.Fill) would be read from, all of them
// one page of zeros in the processor's cache, timing a long context as
// a short one.
func DepthCache(ctx context.Context, m *model.Model, n, extra int) (*model.Cache, error) {
	if n < 1 || extra < 0 {
		return nil, fmt.Errorf("profiles: a cache of %d tokens and %d more", n, extra)
	}
	if err := CheckContext(m, n+extra); err != nil {
		return nil, err
	}
	cache := m.NewCache(n + extra)
	k := min(n, ShortContext)
	toks := make([]int, k)
	for i := range toks {
		toks[i] = (i*7 + 3) % m.Vocab
	}
	var res model.Result
	if err := m.Forward(ctx, cache, model.Batch{Tokens: toks, Want: []int{k - 1}, Output: model.OutArgmax}, &res); err != nil {
		cache.Free()
		return nil, err
	}
	if n == k {
		return cache, nil
	}
	keep := make([]int, n)
	for i := range keep {
		keep[i] = i % k
	}
	// Fill marks the slots used; Compact then writes slot i%k into each
	// slot i; Fill again gives every slot its own position back (a
	// sliding window decides visibility by position)
	if err := cache.Fill(n); err != nil {
		cache.Free()
		return nil, err
	}
	if err := cache.Compact(keep); err != nil {
		cache.Free()
		return nil, err
	}
	if err := cache.Fill(n); err != nil {
		cache.Free()
		return nil, err
	}
	return cache, nil
}

// VerifyCurve measures one target forward pass over W tokens (causal, on top
// of a cached context of opt.Context tokens, DepthCache) for each width:
// T_verify(W).
func VerifyCurve(ctx context.Context, m *model.Model, widths []int, opt CurveOptions) ([]latency.Point, error) {
	opt.defaults()
	maxW := 0
	for _, w := range widths {
		if w < 1 {
			return nil, fmt.Errorf("profiles: width %d must be >= 1", w)
		}
		maxW = max(maxW, w)
	}
	if opt.Context+maxW > m.CtxLen {
		return nil, fmt.Errorf("profiles: context %d + width %d exceed the model's %d positions", opt.Context, maxW, m.CtxLen)
	}
	cache := opt.Cache
	if cache == nil {
		c, err := DepthCache(ctx, m, opt.Context, maxW)
		if err != nil {
			return nil, err
		}
		defer c.Free()
		cache = c
	} else if cache.Len() < opt.Context || cache.Cap() < opt.Context+maxW {
		return nil, fmt.Errorf("profiles: a cache of %d positions (%d held) for passes of up to %d after %d", cache.Cap(), cache.Len(), maxW, opt.Context)
	}
	var res model.Result
	toks := make([]int, maxW)
	for i := range toks {
		toks[i] = (opt.Context + i*7 + 3) % m.Vocab
	}
	return timeRounds(ctx, widths, func(w int) (time.Duration, error) {
		cache.Truncate(opt.Context)
		t0 := time.Now()
		err := m.Forward(ctx, cache, model.Batch{Tokens: toks[:w]}, &res)
		return time.Since(t0), err
	}, opt)
}

// SeqsCurve measures one pass of seqs sequences through model.Pass, each
// sequence on a cache of its own holding opt.Context tokens (DepthCache),
// for each width: point W is a pass of W rows in all, W/seqs of each
// sequence (W a multiple of seqs), what a server's pass costs when seqs
// requests each verify W/seqs tokens. The rounds are VerifyCurve's.
func SeqsCurve(ctx context.Context, m *model.Model, seqs int, widths []int, opt CurveOptions) ([]latency.Point, error) {
	opt.defaults()
	if seqs < 1 {
		return nil, fmt.Errorf("profiles: a pass of %d sequences", seqs)
	}
	maxW := 0
	for _, w := range widths {
		if w < seqs || w%seqs != 0 {
			return nil, fmt.Errorf("profiles: a pass of %d rows is not %d sequences of equal rows", w, seqs)
		}
		maxW = max(maxW, w)
	}
	if maxW > model.MaxRows {
		return nil, fmt.Errorf("profiles: a pass of %d rows is more than one pass takes (%d)", maxW, model.MaxRows)
	}
	each := maxW / seqs
	if opt.Context+each > m.CtxLen {
		return nil, fmt.Errorf("profiles: context %d + width %d exceed the model's %d positions", opt.Context, each, m.CtxLen)
	}
	first, err := DepthCache(ctx, m, opt.Context, each)
	if err != nil {
		return nil, err
	}
	caches := []*model.Cache{first}
	defer func() {
		for _, c := range caches {
			c.Free()
		}
	}()
	for len(caches) < seqs {
		c, err := first.CopyPrefix(opt.Context)
		if err != nil {
			return nil, err
		}
		caches = append(caches, c)
	}
	toks := make([]int, each)
	for i := range toks {
		toks[i] = (opt.Context + i*7 + 3) % m.Vocab
	}
	pass := m.NewPass()
	results := make([]model.Result, seqs)
	batch := make([]model.Seq, seqs)
	return timeRounds(ctx, widths, func(w int) (time.Duration, error) {
		for i, c := range caches {
			c.Truncate(opt.Context)
			batch[i] = model.Seq{Cache: c, Batch: model.Batch{Tokens: toks[:w/seqs]}, Result: &results[i]}
		}
		t0 := time.Now()
		err := pass.Forward(ctx, batch)
		return time.Since(t0), err
	}, opt)
}

// timeRounds times pass(w) for every width, warmed up, in interleaved
// rounds: the curves' protocol, which returns each width's median and
// spread over the rounds.
func timeRounds(ctx context.Context, widths []int, pass func(w int) (time.Duration, error), opt CurveOptions) ([]latency.Point, error) {
	// Rounds go through every width in turn, so a slow spell of a shared
	// machine slows all widths alike and the ratios T(W)/T(1), which the
	// speedup model lives on, stay sound.
	for _, w := range widths {
		for i := 0; i < opt.Warmup; i++ {
			if _, err := pass(w); err != nil {
				return nil, err
			}
		}
	}
	times := make([][]time.Duration, len(widths))
	for round := 0; round < opt.MaxReps; round++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// untimed passes of the first width first: right after the last
		// round's widest pass the narrow passes are slow for a while (on
		// the bench target, 2 Zen 4 cores, W = 1 passes after a W = 48
		// one took 2.85, 2.67, 2.50, 2.41, 2.40 ms), and the curve had
		// read T_verify(1) 20-28% above the re-check's W = 1 pass a
		// moment later and T_verify(2) no higher than it, bending every
		// ratio T(W)/T(1) the speedup model prices with
		for k := 0; k < settlePasses; k++ {
			if _, err := pass(widths[0]); err != nil {
				return nil, err
			}
		}
		for i, w := range widths {
			d, err := pass(w)
			if err != nil {
				return nil, err
			}
			times[i] = append(times[i], d)
		}
		settled := round+1 >= opt.MinReps && allSettled(times)
		if opt.Progress != nil {
			last := len(widths) - 1
			med, _ := medianSpread(times[last])
			done := round + 1
			if settled {
				done = opt.MaxReps
			}
			opt.Progress(done, opt.MaxReps, latency.Point{W: widths[last], Median: med})
		}
		if settled {
			break
		}
	}
	out := make([]latency.Point, len(widths))
	for i, w := range widths {
		med, spread := medianSpread(times[i])
		out[i] = latency.Point{W: w, Median: med, Spread: spread, Reps: len(times[i])}
	}
	return out, nil
}

// allSettled reports whether every width's spread is within 5% of its median.
func allSettled(times [][]time.Duration) bool {
	for _, ts := range times {
		med, spread := medianSpread(ts)
		if spread > med/20 {
			return false
		}
	}
	return true
}

// measure times fn after warmup runs, at least minReps and at most maxReps
// times, stopping once the spread is within 5% of the median.
func measure(ctx context.Context, fn func() (time.Duration, error), warmup, minReps, maxReps int) (latency.Point, error) {
	for i := 0; i < warmup; i++ {
		if _, err := fn(); err != nil {
			return latency.Point{}, err
		}
	}
	var ts []time.Duration
	for len(ts) < maxReps {
		if err := ctx.Err(); err != nil {
			return latency.Point{}, err
		}
		d, err := fn()
		if err != nil {
			return latency.Point{}, err
		}
		ts = append(ts, d)
		if len(ts) >= minReps {
			med, spread := medianSpread(ts)
			if spread <= med/20 {
				break
			}
		}
	}
	med, spread := medianSpread(ts)
	return latency.Point{Median: med, Spread: spread, Reps: len(ts)}, nil
}

func medianSpread(ts []time.Duration) (time.Duration, time.Duration) {
	s := append([]time.Duration(nil), ts...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	med := s[len(s)/2]
	dev := make([]time.Duration, len(s))
	for i, t := range s {
		d := t - med
		if d < 0 {
			d = -d
		}
		dev[i] = d
	}
	sort.Slice(dev, func(a, b int) bool { return dev[a] < dev[b] })
	return med, dev[len(dev)/2]
}

// OverheadCurve measures the per-step bookkeeping of verifying W draft
// tokens outside the forward pass: building the tree's mask and positions,
// choosing a token from each row's logits, and compacting the KV cache to
// the accepted path. Points are medians like VerifyCurve's.
func OverheadCurve(ctx context.Context, m *model.Model, widths []int, opt CurveOptions) ([]latency.Point, error) {
	opt.defaults()
	maxW := 0
	for _, w := range widths {
		maxW = max(maxW, w)
	}
	cache := m.NewCache(opt.Context + maxW + 1)
	logits := make([]float32, (maxW+1)*m.Vocab)
	for i := range logits {
		logits[i] = float32(i%97) * 0.01
	}
	var out []latency.Point
	for i, w := range widths {
		tr := &tree.Tree{}
		for k := 0; k < w; k++ {
			tr.Add(k-1, k%m.Vocab, 0.5) // a chain: the accepted path keeps every slot
		}
		pass := func() (time.Duration, error) {
			cache.Truncate(0)
			if err := cache.Fill(opt.Context + w + 1); err != nil {
				return 0, err
			}
			t0 := time.Now()
			tr.Batch(1, opt.Context)
			keep := make([]int, 0, opt.Context+w+1)
			for r := 0; r <= w; r++ {
				sample.Argmax(logits[r*m.Vocab : (r+1)*m.Vocab])
			}
			// keep the prefix and the root, and half of the drafted path
			// (every other node), as a rejection midway would
			for s := 0; s <= opt.Context; s++ {
				keep = append(keep, s)
			}
			for s := opt.Context + 1; s < opt.Context+w+1; s += 2 {
				keep = append(keep, s)
			}
			err := cache.Compact(keep)
			return time.Since(t0), err
		}
		p, err := measure(ctx, pass, opt.Warmup, opt.MinReps, opt.MaxReps)
		if err != nil {
			return out, err
		}
		p.W = w
		out = append(out, p)
		if opt.Progress != nil {
			opt.Progress(i+1, len(widths), p)
		}
	}
	return out, nil
}

// DraftAfterPasses are the drafter passes after a target pass whose cost
// DraftAfterTarget measures (the points of the "draft-after" curve); the
// speedup model charges later passes the last point.
var DraftAfterPasses = []int{1, 2, 3, 4, 5, 6}

// primeSource caches committed (but its last token) in src before a
// target pass, as a step finds it: the source's first pass afterwards adds
// that last token, the step's bonus.
func primeSource(ctx context.Context, src *drafter.Model, committed []int, dist [][]float32) error {
	if err := src.Begin(ctx, committed[:len(committed)-1]); err != nil {
		return err
	}
	if err := src.Expand(ctx, [][]int{{}}, dist); err != nil {
		return err
	}
	return src.Commit(nil, committed[len(committed)-1])
}

// DraftAfterTarget measures what a drafter's passes cost in a speculative
// step beyond its back-to-back curve. Two things are missing from that
// curve. The target's pass streams its weights through the caches (and
// lets the workers sleep), so the drafter's next passes find their own
// weights evicted: on the bench pair (2 cores) a single-token drafter pass
// took 68 µs back to back, 250 µs right after a target pass and about 110
// µs for the pass after that. And the engine drafts through the draft
// source, which builds each pass's positions and tree mask, keeps its
// slots and turns the logits into a distribution: on the bench pair 40
// µs a pass more than the bare forward pass (a chain-5 step's
// drafting measured 0.96 ms where the model charged 0.69). Point W=k is
// the k-th pass of a chain drafted through the source after a target
// pass, as the median over rounds of its time less the drafter's steady
// bare pass in the same round (the median of three further passes),
// never below zero.
func DraftAfterTarget(ctx context.Context, target, draft *model.Model, passes int, opt CurveOptions) ([]latency.Point, error) {
	opt.defaults()
	if passes < 1 || passes > 16 {
		return nil, fmt.Errorf("profiles: %d drafter passes after a target pass (1..16)", passes)
	}
	steadyN := 3
	if opt.Context+1 > target.CtxLen || opt.Context+passes+steadyN > draft.CtxLen {
		return nil, fmt.Errorf("profiles: context %d does not fit the models' %d and %d positions", opt.Context, target.CtxLen, draft.CtxLen)
	}
	vocab := min(target.Vocab, draft.Vocab)
	toks := make([]int, opt.Context)
	for i := range toks {
		toks[i] = (i*7 + 3) % vocab
	}
	tc, dc := target.NewCache(opt.Context+1), draft.NewCache(opt.Context+steadyN)
	var res model.Result
	prefill := func(m *model.Model, c *model.Cache) error {
		return m.Forward(ctx, c, model.Batch{Tokens: toks, Want: []int{opt.Context - 1}, Output: model.OutArgmax}, &res)
	}
	if err := prefill(target, tc); err != nil {
		return nil, err
	}
	if err := prefill(draft, dc); err != nil {
		return nil, err
	}
	src := drafter.NewModel(draft, 0, opt.Context+passes+1, "probe")
	dist := [][]float32{make([]float32, draft.Vocab)}
	one := []int{5 % vocab}
	ds := make([]time.Duration, passes+steadyN)
	round := func() error {
		if err := primeSource(ctx, src, toks[:opt.Context], dist); err != nil {
			return err
		}
		tc.Truncate(opt.Context)
		dc.Truncate(opt.Context)
		if err := target.Forward(ctx, tc, model.Batch{Tokens: one, Output: model.OutArgmax}, &res); err != nil {
			return err
		}
		path := make([]int, 0, passes)
		for k := 0; k < passes; k++ {
			t0 := time.Now()
			if err := src.Expand(ctx, [][]int{path}, dist); err != nil {
				return err
			}
			ds[k] = time.Since(t0)
			path = append(path, (k*11+5)%vocab)
		}
		for k := passes; k < len(ds); k++ {
			t0 := time.Now()
			if err := draft.Forward(ctx, dc, model.Batch{Tokens: one, Output: model.OutArgmax}, &res); err != nil {
				return err
			}
			ds[k] = time.Since(t0)
		}
		return nil
	}
	for i := 0; i < opt.Warmup; i++ {
		if err := round(); err != nil {
			return nil, err
		}
	}
	extra := make([][]time.Duration, passes)
	for r := 0; r < opt.MaxReps; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := round(); err != nil {
			return nil, err
		}
		steady := append([]time.Duration(nil), ds[passes:]...)
		slices.Sort(steady)
		for k := 0; k < passes; k++ {
			extra[k] = append(extra[k], ds[k]-steady[len(steady)/2])
		}
	}
	var out []latency.Point
	for k, xs := range extra {
		slices.Sort(xs)
		p := latency.Point{W: k + 1, Median: max(0, xs[len(xs)/2]), Spread: xs[len(xs)*3/4] - xs[len(xs)/4], Reps: len(xs)}
		out = append(out, p)
		if opt.Progress != nil {
			opt.Progress(k+1, passes, p)
		}
	}
	return out, nil
}

// VerifyBeside is VerifyCurve with draft, on a backend of its own,
// running single-token passes back to back the whole time: T_verify(W)
// while a concurrent drafter drafts beside the target (duo, AOT and tail
// drafting). The curve of the target alone on its share of the threads
// misses what the two take from each other (memory bandwidth, caches,
// and on a machine with no core to spare, the CPU itself): on the bench
// pair, 2 cores under other programs' load, chain gamma=4 with a tail
// at every end verified in 19.5 ms a step where the target alone on its
// thread had been timed at 7-8 ms, and measured 0.61x the same chain
// drafted in turn. Timing starts once the drafter has run a pass, so
// every point was measured beside it; the drafter's passes are returned
// too.
func VerifyBeside(ctx context.Context, target, draft *model.Model, widths []int, opt CurveOptions) ([]latency.Point, int, error) {
	return beside(ctx, target, draft, 1, widths, opt)
}

// DraftBeside is the drafter's curve (single passes over W tokens on a
// cached context, as VerifyCurve times them) while the target, on a
// backend of its own, verifies 4 tokens a pass back to back: what the
// drafting that runs beside verification costs.
func DraftBeside(ctx context.Context, draft, target *model.Model, widths []int, opt CurveOptions) ([]latency.Point, int, error) {
	return beside(ctx, draft, target, besideTargetWidth, widths, opt)
}

// besideTargetWidth is the target's pass while DraftBeside times the
// drafter: about what a concurrent plan verifies.
const besideTargetWidth = 4

// beside times timed's curve over widths while other, on a backend of its
// own, runs passes of otherWidth tokens back to back; it returns the
// curve and other's passes.
func beside(ctx context.Context, timed, other *model.Model, otherWidth int, widths []int, opt CurveOptions) ([]latency.Point, int, error) {
	opt.defaults()
	if other.Backend == timed.Backend {
		return nil, 0, fmt.Errorf("profiles: the two models share a backend: one cannot run beside the other")
	}
	if opt.Context+otherWidth > other.CtxLen {
		return nil, 0, fmt.Errorf("profiles: context %d does not fit %d positions", opt.Context, other.CtxLen)
	}
	toks := make([]int, opt.Context+otherWidth)
	for i := range toks {
		toks[i] = (i*7 + 3) % other.Vocab
	}
	oc := other.NewCache(opt.Context + otherWidth)
	var ores model.Result
	if err := other.Forward(ctx, oc, model.Batch{Tokens: toks[:opt.Context], Want: []int{opt.Context - 1}, Output: model.OutArgmax}, &ores); err != nil {
		return nil, 0, err
	}
	octx, stop := context.WithCancel(ctx)
	defer stop()
	started := make(chan struct{}) // other's first pass is done (firstErr says how)
	done := make(chan struct{})
	passes := 0
	var firstErr, oerr error
	go func() {
		defer close(done)
		for first := true; octx.Err() == nil; first = false {
			oc.Truncate(opt.Context)
			err := other.Forward(octx, oc, model.Batch{Tokens: toks[opt.Context:], Want: []int{otherWidth - 1}, Output: model.OutArgmax}, &ores)
			if first {
				firstErr = err
				close(started)
			}
			if err != nil {
				if octx.Err() == nil {
					oerr = err
				}
				return
			}
			passes++
		}
	}()
	select {
	case <-started:
		if firstErr != nil {
			stop()
			<-done
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			return nil, 0, firstErr
		}
	case <-done: // cancelled before its first pass
		return nil, 0, ctx.Err()
	}
	pts, err := VerifyCurve(ctx, timed, widths, opt)
	stop()
	<-done
	if err == nil {
		err = oerr
	}
	return pts, passes, err
}
