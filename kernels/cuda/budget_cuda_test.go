//go:build cuda

package cuda_test

// The launch budget: what the CUDA backend asks of the driver per pass,
// counted on the stand-in driver (kernels/cuda/standin, make cuda-check),
// where kernels do not run and so only the host path is measured. The
// figures are fixed here as budgets so that none can grow unnoticed; a
// change that lowers one must lower its budget too (the test says which),
// and the table in docs/CUDA.md with it.
//
// Both paths are measured: the verified path (each primitive launched as
// it is called) and the fast path (a pass recorded, lowered to fused
// kernels and replayed as a CUDA graph), which meets the design's targets:
// at most 10 kernel launches a layer, one upload and one download a pass,
// and one wait for the device a pass (for the wanted rows, or their
// argmax); its passes after the first of a shape replay a graph.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"arborist/engine/model"
	"arborist/engine/synth"
	"arborist/kernels/cuda"
	"arborist/kernels/quant"
)

// budget is what one pass may cost: launches inside each layer and
// outside the layers, waits for the device (copies that wait for every
// launch before them, and synchronisations), copies each way, bytes each
// way, and thread blocks launched (the work asked of the GPU); and, on
// the fast path, the graphs captured in the measured passes (new room for
// a growing mask moves the staged inputs, and the arguments with them).
type budget struct {
	perLayer, outside, blocking int
	up, down                    int
	htod, dtoh, blocks          uint64
	captures                    int
}

// budgetShape is a synthetic model the budget is measured on: a real
// model's widths and vocabulary with two layers, which is all the per-layer
// count needs (launches of the first layer alone subtracted from both).
type budgetShape struct {
	name  string
	shape string
	typ   quant.Type
	// want is the budget per path and width W (1: a decode step; more: a
	// verification pass of W rows and its commit).
	want map[cuda.Path]map[int]budget
}

var budgetShapes = []budgetShape{
	{name: "llama-3.2-1b Q4_K", shape: "llama-3.2-1b", typ: quant.Q4_K, want: map[cuda.Path]map[int]budget{
		cuda.Verified: {
			1:  {perLayer: 20, outside: 4, blocking: 3, up: 2, down: 1, htod: 260, dtoh: 513024, blocks: 44980},
			8:  {perLayer: 20, outside: 6, blocking: 5, up: 4, down: 1, htod: 2508, dtoh: 4104192, blocks: 53056},
			64: {perLayer: 20, outside: 6, blocking: 5, up: 4, down: 1, htod: 29052, dtoh: 32833536, blocks: 424672},
		},
		cuda.Fast: {
			1:  {perLayer: 9, outside: 3, blocking: 1, up: 1, down: 1, htod: 292, dtoh: 513024, blocks: 44376},
			8:  {perLayer: 9, outside: 5, blocking: 1, up: 1, down: 1, htod: 3040, dtoh: 4104192, blocks: 48224, captures: 1},
			64: {perLayer: 9, outside: 5, blocking: 1, up: 1, down: 1, htod: 35104, dtoh: 32833536, blocks: 79136, captures: 3},
		},
	}},
	{name: "qwen3-0.6b F16", shape: "qwen3-0.6b", typ: quant.F16, want: map[cuda.Path]map[int]budget{
		cuda.Verified: {
			1:  {perLayer: 22, outside: 4, blocking: 3, up: 2, down: 1, htod: 516, dtoh: 607744, blocks: 12141},
			8:  {perLayer: 22, outside: 6, blocking: 5, up: 4, down: 1, htod: 4556, dtoh: 4861952, blocks: 13376},
			64: {perLayer: 22, outside: 6, blocking: 5, up: 4, down: 1, htod: 45436, dtoh: 38895616, blocks: 59488},
		},
		cuda.Fast: {
			1:  {perLayer: 9, outside: 3, blocking: 1, up: 1, down: 1, htod: 548, dtoh: 607744, blocks: 44179},
			8:  {perLayer: 9, outside: 5, blocking: 1, up: 1, down: 1, htod: 5088, dtoh: 4861952, blocks: 44728, captures: 1},
			64: {perLayer: 9, outside: 5, blocking: 1, up: 1, down: 1, htod: 51488, dtoh: 38895616, blocks: 93504, captures: 3},
		},
	}},
}

// budgetPaths are the paths measured.
var budgetPaths = []cuda.Path{cuda.Verified, cuda.Fast}

// budgetWidths are the pass widths measured: a decode step, and
// verification passes of a small and a large tree.
var budgetWidths = []int{1, 8, 64}

const (
	budgetLayers = 2  // layers of each synthetic model
	budgetPrompt = 32 // tokens in the cache before the first measured pass
	budgetSteps  = 24 // passes of each kind measured, after two warm-up ones
)

// pass is one measured pass: its counts, launches in order, host time.
type pass struct {
	c        cuda.StandInCounts
	launches []string
	dt       time.Duration
}

// TestLaunchBudget runs decode steps and verification passes through the
// CUDA backend on the stand-in driver and holds their launches, blocking
// copies and bytes to the budgets above; it prints them with the host
// time per pass, per token and per layer. Skipped under a real driver,
// whose launches the stand-in does not see.
func TestLaunchBudget(t *testing.T) {
	if !cuda.StandIn() {
		t.Skip("counts launches on the stand-in driver only (make cuda-check loads it)")
	}
	var table, layers strings.Builder
	fmt.Fprintf(&table, "%-18s %-8s %3s %8s %7s %8s %8s %4s %4s %9s %9s %9s %5s %5s %9s %8s %8s\n",
		"shape", "path", "W", "launch/L", "outside", "launch/p", "blocking", "HtoD", "DtoH", "HtoD B/p", "DtoH B/p", "blocks/p", "grows", "capt", "host us/p", "us/token", "us/layer")
	for _, bs := range budgetShapes {
		for _, path := range budgetPaths {
			t.Run(strings.ReplaceAll(bs.name, " ", "_")+"/"+path.String(), func(t *testing.T) {
				m := budgetModel(t, bs, path)
				for _, w := range budgetWidths {
					measureWidth(t, bs, path, m, w, &table, &layers)
				}
			})
		}
	}
	t.Logf("per pass on the stand-in driver (%d layers, %d tokens cached before the first measured pass; "+
		"W = 1 a decode step, more a verification pass and its commit; blocking: copies and synchronisations the host waits for; "+
		"grows: buffers reallocated in %d passes; capt: graphs captured in them; "+
		"host time: the fastest of %d, the stand-in's memcpy of each copy included; us/layer: a pass bringing one row home less the same pass through one layer):\n%s\none layer's launches:\n%s",
		budgetLayers, budgetPrompt, budgetSteps, budgetSteps, table.String(), layers.String())
}

// measureWidth measures passes of width w on m, adds their row to table
// (and, for w = 1, one layer's launches to layers) and holds them to bs's
// budget.
func measureWidth(t *testing.T, bs budgetShape, path cuda.Path, m *model.Model, w int, table, layers *strings.Builder) {
	t.Helper()
	full, lean, one := measure(t, m, w)
	first := full[0]
	launches := len(first.launches)
	// layers 2..L launch what layer 1 does
	perLayer := (len(lean[0].launches) - len(one[0].launches)) / (budgetLayers - 1)
	got := budget{
		perLayer: perLayer,
		outside:  launches - budgetLayers*perLayer,
		blocking: int(first.c.Blocking + first.c.Syncs),
		up:       int(first.c.HtoD + first.c.AsyncHtoD),
		down:     int(first.c.DtoH + first.c.AsyncDtoH),
		htod:     first.c.HtoDBytes + first.c.AsyncHtoDBytes,
		dtoh:     first.c.DtoHBytes + first.c.AsyncDtoHBytes,
		blocks:   first.c.Blocks,
	}
	var grows uint64
	for _, p := range full {
		grows += p.c.Allocs
		got.captures += int(p.c.Instantiates)
	}
	if path == cuda.Fast {
		// every pass launches graphs, and a pass that captures none
		// replays graphs captured before: the same launches as pass 0
		// (same() checks the order) issued without a capture
		for i, p := range append(append(full, lean...), one...) {
			if p.c.GraphLaunches == 0 {
				t.Errorf("%s W=%d: pass %d launched no graph", bs.name, w, i)
			}
			if p.c.Instantiates == 0 && p.c.Captured != 0 {
				t.Errorf("%s W=%d: pass %d captured %d launches without instantiating a graph", bs.name, w, i, p.c.Captured)
			}
		}
	}
	// the fastest of each: what the host path costs with the least
	// interference from whatever else the machine runs
	tFull := fastest(full)
	tLayer := fastest(lean) - fastest(one)
	fmt.Fprintf(table, "%-18s %-8s %3d %8d %7d %8d %8d %4d %4d %9d %9d %9d %5d %5d %9.0f %8.1f %8.1f\n",
		bs.name, path, w, got.perLayer, got.outside, launches, got.blocking, got.up, got.down,
		got.htod, got.dtoh, got.blocks, grows, got.captures, us(tFull), us(tFull)/float64(w), us(tLayer)/float64(budgetLayers-1))
	if w == 1 {
		fmt.Fprintf(layers, "%s, %s path: %s\n", bs.name, path, strings.Join(layerLaunches(first.launches, perLayer), " "))
	}
	checkBudget(t, bs, path, w, got)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// fastest is the shortest time of ps.
func fastest(ps []pass) time.Duration {
	t := ps[0].dt
	for _, p := range ps[1:] {
		t = min(t, p.dt)
	}
	return t
}

// layerLaunches finds one layer's launches in a pass's: the first run of
// perLayer launches that the next perLayer repeat.
func layerLaunches(ls []string, perLayer int) []string {
	for k := 0; k+2*perLayer <= len(ls); k++ {
		if slices.Equal(ls[k:k+perLayer], ls[k+perLayer:k+2*perLayer]) {
			return ls[k : k+perLayer]
		}
	}
	return nil
}

// budgetModel writes bs's synthetic model (two layers) and loads it on a
// new CUDA device on path; both go at the end of the test.
func budgetModel(t *testing.T, bs budgetShape, p cuda.Path) *model.Model {
	t.Helper()
	s, err := synth.ParseShape(bs.shape)
	if err != nil {
		t.Fatal(err)
	}
	s.Layers = budgetLayers
	s.CtxLen = 8192
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.WriteFile(context.Background(), path, s, synth.Options{Type: bs.typ, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	d, err := cuda.NewPath(0, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	m, err := model.Load(path, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// measure runs a warm-up pass of width w, then budgetSteps measured ones
// token after token, each followed by the same pass bringing only its
// last row home (lean, so that the time of what differs between the layers
// is not lost in the logits' copy) and by that pass through the first
// layer only; it checks that every measured pass of each kind issued the
// same launches in the same order and the same copies.
func measure(t *testing.T, m *model.Model, w int) (full, lean, one []pass) {
	t.Helper()
	ctx := context.Background()
	c := m.NewCache(budgetPrompt + (3*budgetSteps+2)*w + 1)
	defer c.Free()
	prompt := make([]int, budgetPrompt)
	for i := range prompt {
		prompt[i] = tokenAt(m, i)
	}
	var res model.Result
	if err := m.Forward(ctx, c, model.Batch{Tokens: prompt, Want: []int{budgetPrompt - 1}}, &res); err != nil {
		t.Fatal(err)
	}
	step := func(layers int, want []int) pass {
		cuda.StandInReset()
		t0 := time.Now()
		if err := budgetStep(ctx, m, c, w, layers, want, &res); err != nil {
			t.Fatal(err)
		}
		p := pass{dt: time.Since(t0), c: cuda.StandInRead(), launches: cuda.StandInLaunches()}
		if p.c.Unsupported > 0 || p.c.LogDropped > 0 {
			t.Fatalf("W=%d: %d calls the stand-in lacks (the last %s), %d launches not logged",
				w, p.c.Unsupported, p.c.LastUnsupported, p.c.LogDropped)
		}
		return p
	}
	last := []int{w - 1}
	// the first pass of each kind grows the scratch buffers and, on the
	// fast path, captures its graph
	step(0, nil)
	step(0, last)
	step(1, last)
	for range budgetSteps {
		full = append(full, step(0, nil))
		lean = append(lean, step(0, last))
		one = append(one, step(1, last))
	}
	same(t, w, "", full)
	same(t, w, " bringing one row home", lean)
	same(t, w, " through one layer", one)
	return full, lean, one
}

// same checks that passes issued the same launches in the same order and
// the same copies. A tree mask's bytes grow with the context, as may a
// commit's work, and a buffer outgrown is reallocated (after a
// synchronisation), so verification passes may differ in those.
func same(t *testing.T, w int, what string, ps []pass) {
	t.Helper()
	a := ps[0]
	for i, b := range ps[1:] {
		if !slices.Equal(a.launches, b.launches) {
			t.Errorf("W=%d%s: pass %d launched %d kernels, not the %d of pass 0 in the same order: %v, then %v",
				w, what, i+1, len(b.launches), len(a.launches), a.launches, b.launches)
		}
		if a.c.HtoD != b.c.HtoD || a.c.DtoH != b.c.DtoH || a.c.DtoD != b.c.DtoD || a.c.Blocking != b.c.Blocking ||
			a.c.DtoHBytes != b.c.DtoHBytes || a.c.AsyncHtoD != b.c.AsyncHtoD || a.c.AsyncDtoH != b.c.AsyncDtoH ||
			a.c.AsyncDtoHBytes != b.c.AsyncDtoHBytes || a.c.GraphLaunches != b.c.GraphLaunches ||
			(w == 1 && (a.c.HtoDBytes != b.c.HtoDBytes || a.c.AsyncHtoDBytes != b.c.AsyncHtoDBytes || a.c.Blocks != b.c.Blocks ||
				a.c.Syncs != b.c.Syncs || a.c.Allocs != b.c.Allocs || a.c.Instantiates != b.c.Instantiates)) {
			t.Errorf("W=%d%s: pass %d copied %+v, pass 0 %+v", w, what, i+1, b.c, a.c)
		}
	}
}

// tokenAt is an arbitrary valid token id for position i.
func tokenAt(m *model.Model, i int) int { return 3 + (i*7919)%(m.Vocab-3) }

// budgetStep is one pass of width w as the engine issues it: a decode
// step (w = 1, the logits row brought home, as plain decoding samples from
// it), or a verification pass of w rows under a tree mask (a chain's),
// every row's logits brought home, then the commit of the root and every
// other row, as a path through a tree would be kept. layers limits the
// blocks run (0: all), want the rows brought home (nil: all).
func budgetStep(ctx context.Context, m *model.Model, c *model.Cache, w, layers int, want []int, res *model.Result) error {
	past := c.Len()
	if w == 1 {
		return m.Forward(ctx, c, model.Batch{Tokens: []int{tokenAt(m, past)}, Want: want, Layers: layers}, res)
	}
	toks, pos := make([]int, w), make([]int, w)
	mask := make([]bool, w*(past+w))
	for i := range toks {
		toks[i], pos[i] = tokenAt(m, past+i), past+i
		for j := 0; j <= past+i; j++ {
			mask[i*(past+w)+j] = true
		}
	}
	if err := m.Forward(ctx, c, model.Batch{Tokens: toks, Pos: pos, Mask: mask, Want: want, Layers: layers}, res); err != nil {
		return err
	}
	keep := make([]int, past+1, past+w)
	for i := range keep {
		keep[i] = i
	}
	for r := 2; r < w; r += 2 {
		keep = append(keep, past+r)
	}
	return c.Compact(keep)
}

// checkBudget holds got to bs's budget for width w: more is a regression,
// less an improvement whose budget (and docs/CUDA.md's table) should be
// lowered to keep it.
func checkBudget(t *testing.T, bs budgetShape, path cuda.Path, w int, got budget) {
	t.Helper()
	want, ok := bs.want[path][w]
	if !ok {
		t.Errorf("%s %s path W=%d: no budget; measured %+v", bs.name, path, w, got)
		return
	}
	check := func(what string, g, b uint64) {
		switch {
		case g > b:
			t.Errorf("%s %s path W=%d: %s %d, over the budget of %d", bs.name, path, w, what, g, b)
		case g < b:
			t.Errorf("%s %s path W=%d: %s %d, under the budget of %d: lower the budget (and docs/CUDA.md's table) to keep it", bs.name, path, w, what, g, b)
		}
	}
	if path == cuda.Fast {
		// the design's targets, whatever the budget says
		if got.perLayer > 10 || got.blocking > 1 || got.up > 1 || got.down > 1 {
			t.Errorf("%s fast path W=%d: %d launches a layer, %d waits, %d uploads and %d downloads a pass: the targets are 10, 1, 1, 1",
				bs.name, w, got.perLayer, got.blocking, got.up, got.down)
		}
	}
	check("launches a layer", uint64(got.perLayer), uint64(want.perLayer))
	check("launches outside the layers", uint64(got.outside), uint64(want.outside))
	check("waits for the device a pass", uint64(got.blocking), uint64(want.blocking))
	check("copies to the device a pass", uint64(got.up), uint64(want.up))
	check("copies to the host a pass", uint64(got.down), uint64(want.down))
	// graphs are keyed by their launches' arguments, device addresses
	// among them, and whether a regrown buffer lands where a freed one
	// was is the allocator's choice (the stand-in's malloc, a thread's
	// arena): fewer captures than the budget is no improvement to pin
	if got.captures > want.captures {
		t.Errorf("%s %s path W=%d: graphs captured in the measured passes %d, over the budget of %d", bs.name, path, w, got.captures, want.captures)
	}
	check("bytes to the device a pass", got.htod, want.htod)
	check("bytes to the host a pass", got.dtoh, want.dtoh)
	check("thread blocks a pass", got.blocks, want.blocks)
}
