package hidden

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/engine/synth"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// storyPrompts are the six story prompts (the greedy references'), with BOS.
func storyPrompts(t testing.TB, m *model.Model) [][]int {
	t.Helper()
	var out [][]int
	for _, p := range testfiles.StoryPrompts(t) {
		out = append(out, m.Tok.Encode(p, true, false))
	}
	return out
}

// perturbed is an untrained drafter whose token-info is not zero.
func perturbed(t testing.TB, m *model.Model, seed uint64) *Drafter {
	d, err := New(m, 32, m.Layers/2, seed)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range d.Block(bW2) {
		d.Block(bW2)[i] = float32(0.2 * rng.NormFloat64())
	}
	d.Hot = []int{1, 2, 3}
	return d
}

// TestDecoderMatchesTraining: the decoder (float32, the engine's kernels,
// one layer pass per depth) computes the same hidden chain and the same
// distributions as the training network's unrolled levels.
func TestDecoderMatchesTraining(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	d := perturbed(t, m, 5)
	tr := &Trainer{Target: m, Prompts: storyPrompts(t, m)[:2], Settings: DefaultSettings()}
	tr.Settings.Tokens = 24
	tr.Settings.HeldOut = 0
	tr.Settings.Corpus = false
	if err := tr.Generate(context.Background()); err != nil {
		t.Fatal(err)
	}
	decoderMatches(t, m, d, tr.data[0])
}

// TestDecoderMatchesTrainingNeox repeats the check on a Qwen2-shaped target
// (NeoX rotation, biased Q/K/V in the target, tied embeddings).
func TestDecoderMatchesTrainingNeox(t *testing.T) {
	sh, err := synth.ParseShape("custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300,arch=qwen2,tied=1")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "q.gguf")
	if err := synth.WriteFile(context.Background(), p, sh, synth.Options{Type: quant.F32, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(p, be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.RopeNeox {
		t.Fatal("the synthetic qwen2 target does not use NeoX rotation")
	}
	d := perturbed(t, m, 8)
	decoderMatches(t, m, d, randomSeq(rand.New(rand.NewPCG(5, 6)), 20, d.Dim, d.Vocab))
}

func decoderMatches(t *testing.T, m *model.Model, d *Drafter, sq *seq) {
	t.Helper()
	n, err := newNet(d, m, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	const K = 3
	lvs, _ := n.forward(sq, sq.tokens, K)
	// float32 weights compute what training computed; Q8_0 ones (the
	// default) stay within quantisation's error of it (hidden states
	// within a few percent of their largest value)
	for _, c := range []struct {
		f32    bool
		dh, dp float64
	}{{true, 1e-3, 1e-4}, {false, 0.05, 0.1}} {
		src, err := NewSource(d, m, Options{F32: c.f32})
		if err != nil {
			t.Fatal(err)
		}
		decoderAgrees(t, src, lvs, sq, K, c.dh, c.dp)
	}
}

// decoderAgrees checks src's hidden chain and distributions against the
// training network's levels lvs at a few roots: hidden states within dh
// of the largest state value (at least 1), distributions within dp.
func decoderAgrees(t *testing.T, src *Source, lvs []*level, sq *seq, K int, dh, dp float64) {
	t.Helper()
	d := src.D
	ctx := context.Background()
	for _, P := range []int{3, 9, len(sq.tokens) - K - 1} {
		if err := src.Begin(ctx, sq.tokens[:P+1]); err != nil {
			t.Fatal(err)
		}
		if err := src.ObserveHidden(sq.h[:P*d.Dim], P); err != nil {
			t.Fatal(err)
		}
		dst := make([]float32, d.Vocab)
		for k := 0; k < K; k++ {
			path := sq.tokens[P+1 : P+1+k]
			if err := src.Expand(ctx, [][]int{path}, [][]float32{dst}); err != nil {
				t.Fatal(err)
			}
			row := P - 1 // level k row t predicts position t+k+1 = P+k
			var eh, ep float64
			top := 1.0
			for i := 0; i < d.Dim; i++ {
				eh = math.Max(eh, math.Abs(float64(src.chainH[k][i])-lvs[k].y[row*d.Dim+i]))
				top = math.Max(top, math.Abs(lvs[k].y[row*d.Dim+i]))
			}
			eh /= top
			for i := 0; i < d.Vocab; i++ {
				ep = math.Max(ep, math.Abs(float64(dst[i])-lvs[k].pd[row*d.Vocab+i]))
			}
			if eh > dh || ep > dp {
				t.Errorf("root %d depth %d, float32 weights %v: decoder differs from training (hidden %.2g, distribution %.2g)", P, k, src.f32, eh, ep)
			}
		}
	}
}

// TestResampleAfterRejection: after a rejection the next step's subtree
// starts from the cached logits at the bonus token's position plus E(bonus),
// with no drafter layer pass.
func TestResampleAfterRejection(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	d := perturbed(t, m, 9)
	src, err := NewSource(d, m, Options{ResampleMin: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prompt, hidden := promptStates(t, m)
	P := len(prompt) - 1
	if err := src.Begin(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	if err := src.ObserveHidden(hidden[:P*d.Dim], P); err != nil {
		t.Fatal(err)
	}
	// a regular step drafting four levels
	dst := make([]float32, d.Vocab)
	path := []int{}
	for k := 0; k < 4; k++ {
		if err := src.Expand(ctx, [][]int{path}, [][]float32{dst}); err != nil {
			t.Fatal(err)
		}
		path = append(path, sample.Argmax(dst))
	}
	cached := append([]float32(nil), src.chain[2]...)
	before := src.Stats()
	// the target accepts one token and rejects at depth 2 with bonus b
	b := (path[1] + 7) % d.Vocab
	if err := src.ObserveHidden(hidden[:2*d.Dim], 2); err != nil { // any two states: not read while re-sampling
		t.Fatal(err)
	}
	if err := src.Commit(path[:1], b); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, d.Vocab)
	if err := src.Expand(ctx, [][]int{{}}, [][]float32{got}); err != nil {
		t.Fatal(err)
	}
	after := src.Stats()
	if after.LayerRows != before.LayerRows || after.ChainPasses != before.ChainPasses {
		t.Errorf("re-sampling ran the drafter layer: %d rows before, %d after", before.LayerRows, after.LayerRows)
	}
	if after.Resampled != before.Resampled+1 {
		t.Errorf("the step after a rejection was not counted as re-sampled")
	}
	want := make([]float32, d.Vocab)
	src.mix(cached, b, want)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("re-sampled root distribution differs from softmax(cached logits + E(bonus)) at %d: %g vs %g", i, got[i], want[i])
		}
	}
	// deeper levels follow the cached chain, up to the re-sampling depth
	if err := src.Expand(ctx, [][]int{{sample.Argmax(got)}}, [][]float32{got}); err != nil {
		t.Fatal(err)
	}
	if s := src.Stats(); s.LayerRows != before.LayerRows {
		t.Errorf("the re-sampled subtree's second level ran the layer")
	}
	// the step after the re-sampled one is regular again
	if err := src.ObserveHidden(hidden[:d.Dim], 1); err != nil {
		t.Fatal(err)
	}
	if err := src.Commit(nil, 5); err != nil {
		t.Fatal(err)
	}
	if err := src.Expand(ctx, [][]int{{}}, [][]float32{got}); err != nil {
		t.Fatal(err)
	}
	if s := src.Stats(); s.LayerRows == before.LayerRows {
		t.Errorf("the regular step after re-sampling fed no true states")
	}
}

// TestTrainingHelps trains briefly on stories260K: held-out loss falls and
// the trained drafter's acceptance beats the untrained one's, with greedy
// output identical to plain decoding either way; with float32 products,
// and with bfloat16 ones where the CPU has them.
func TestTrainingHelps(t *testing.T) {
	t.Run("f32", func(t *testing.T) { testTrainingHelps(t, "f32") })
	t.Run("bf16", func(t *testing.T) {
		if !cpu.BF16Products() {
			t.Skip("no AVX-512 BF16 here (or ARBORIST_SIMD caps it)")
		}
		testTrainingHelps(t, "bf16")
	})
}

func testTrainingHelps(t *testing.T, precision string) {
	m := loadTarget(t, "stories260K.gguf")
	ps := storyPrompts(t, m)
	set := DefaultSettings()
	set.Precision = precision
	set.D, set.Tokens, set.Samples, set.Epochs, set.Depth, set.Batch = 32, 96, 2, 6, 2, 2
	set.HeldOut = 0.34
	set.Corpus, set.Patience = false, 0
	tr := &Trainer{Target: m, Prompts: ps, Settings: set}
	ctx := context.Background()
	d, err := New(m, set.D, m.Layers/2, 1)
	if err != nil {
		t.Fatal(err)
	}
	untrained := *d
	untrained.P = append([]float32(nil), d.P...)
	before, err := tr.Evaluate(ctx, d, set.Depth)
	if err != nil {
		t.Fatal(err)
	}
	var evals []float64
	tr.Progress = func(p Progress) {
		if p.Record != nil {
			evals = append(evals, p.Record.HeldOut)
		}
	}
	if err := tr.Train(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	after := d.Losses[len(d.Losses)-1]
	t.Logf("held-out loss %.4f -> %.4f (MSE %.4f -> %.4f, agreement %.2f -> %.2f); per epoch %v", before.HeldOut, after.HeldOut, before.MSE, after.MSE, before.Agree, after.Agree, evals)
	if !(after.HeldOut < 0.8*before.HeldOut) {
		t.Errorf("training did not lower the held-out loss enough: %.4f -> %.4f", before.HeldOut, after.HeldOut)
	}
	accept := func(d *Drafter) float64 {
		src, err := NewSource(d, m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := &spec.Engine{Target: m, Source: src}
		var drafted, acc int
		for _, p := range ps {
			res, err := e.Run(ctx, p, spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 3}, MaxTokens: 48, StopAtEOS: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Steps {
				drafted += s.Drafted
				acc += s.Accepted
			}
		}
		return float64(acc) / float64(max(1, drafted))
	}
	a0, a1 := accept(&untrained), accept(d)
	t.Logf("chain acceptance: untrained %.2f, trained %.2f", a0, a1)
	if a1 <= a0 {
		t.Errorf("trained acceptance %.2f does not beat the untrained %.2f", a1, a0)
	}
}

// TestFileRoundTrip: a drafter with its training state survives GGUF, and
// damaged files are refused with an error.
func TestFileRoundTrip(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	d := perturbed(t, m, 3)
	d.Losses = []Epoch{{Epoch: 1, Depth: 1, Train: 0.5, HeldOut: 0.6}}
	d.Settings = DefaultSettings()
	st := &State{Epoch: 1, Step: 10, M: make([]float32, len(d.P)), V: make([]float32, len(d.P))}
	st.M[7], st.V[9] = 0.25, 0.5
	p := filepath.Join(t.TempDir(), "d.gguf")
	if err := d.Save(p, st); err != nil {
		t.Fatal(err)
	}
	got, gst, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Shape != d.Shape || len(got.P) != len(d.P) || got.P[100] != d.P[100] || len(got.Hot) != 3 || got.Losses[0].HeldOut != 0.6 || got.InitLayer != d.InitLayer {
		t.Fatalf("round trip changed the drafter: %+v", got.Shape)
	}
	if gst == nil || gst.Step != 10 || gst.M[7] != 0.25 || gst.V[9] != 0.5 {
		t.Fatalf("round trip lost the training state: %+v", gst)
	}
	data, _ := os.ReadFile(p)
	if _, _, err := Decode("cut", data[:len(data)/2]); err == nil {
		t.Error("a truncated drafter file was accepted")
	}
	if _, _, err := Load(testfiles.Stories260K(t)); err == nil {
		t.Error("a model file was accepted as a drafter")
	}
	// a target of another width (stories260K's heads and vocabulary)
	sh, err := synth.ParseShape("custom:dim=32,layers=1,heads=8,kv=4,ffn=64,vocab=512")
	if err != nil {
		t.Fatal(err)
	}
	op := filepath.Join(t.TempDir(), "other.gguf")
	if err := synth.WriteFile(context.Background(), op, sh, synth.Options{Type: quant.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	other, err := model.Load(op, m.Backend)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := NewSource(got, other, Options{}); err == nil {
		t.Error("a drafter was accepted for a target of another shape")
	}
}

// TestHotTokenInfo: precomputed (hot) and on-demand token-info rows agree,
// and only tokens outside the hot table are computed on demand; a budget
// that holds the whole vocabulary precomputes every row.
func TestHotTokenInfo(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	d := perturbed(t, m, 11)
	d.Hot = []int{5, 9}
	budget := int64(4 * d.Vocab * 10) // ten rows: less than the vocabulary
	src, err := NewSource(d, m, Options{HotBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	cold := &Drafter{Shape: d.Shape, P: d.P}
	plain, err := NewSource(cold, m, Options{HotBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int{5, 9, 77} {
		a := append([]float32(nil), src.info.row(tok)...)
		b := plain.info.row(tok)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("token %d: hot row differs from the on-demand one at %d", tok, i)
			}
		}
	}
	if src.Hot() != 2 || src.info.onDemand != 1 || plain.info.onDemand != 3 {
		t.Errorf("hot %d, on demand %d and %d; want 2, 1 and 3", src.Hot(), src.info.onDemand, plain.info.onDemand)
	}
	small, err := NewSource(d, m, Options{HotBytes: int64(4 * d.Vocab)})
	if err != nil {
		t.Fatal(err)
	}
	if small.Hot() != 1 {
		t.Errorf("a one-row memory budget precomputed %d rows", small.Hot())
	}
	all, err := NewSource(cold, m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int{5, 9, 77} {
		a, b := all.info.row(tok), plain.info.row(tok)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("token %d: the whole-vocabulary table differs from the on-demand row at %d", tok, i)
			}
		}
	}
	if all.Hot() != d.Vocab || all.info.onDemand != 0 {
		t.Errorf("the default budget holds %d of %d rows (on demand %d)", all.Hot(), d.Vocab, all.info.onDemand)
	}
}

// TestSparseDrafterFileRefused: a drafter file that was a sparse file of
// gigabytes was read whole (up to a 16 GiB cap). Its header is read first
// now: a file of zeros is refused as not GGUF, and a real drafter with a
// hole of gigabytes after it is refused because its header does not
// account for the size; neither is read.
func TestSparseDrafterFileRefused(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	d := perturbed(t, m, 3)
	dir := t.TempDir()
	holed := filepath.Join(dir, "holed.gguf")
	if err := d.Save(holed, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(holed); err != nil {
		t.Fatalf("the drafter itself: %v", err) // the negative control
	}
	zeros := filepath.Join(dir, "zeros.gguf")
	f, _ := os.Create(zeros)
	f.Close()
	for p, want := range map[string]error{holed: gguf.ErrCorrupt, zeros: gguf.ErrBadMagic} {
		st, _ := os.Stat(p)
		if err := os.Truncate(p, st.Size()+6<<30); err != nil {
			t.Skip(err)
		}
		if _, _, err := Load(p); !errors.Is(err, want) {
			t.Errorf("%s with 6 GiB of hole: %v; want %v", filepath.Base(p), err, want)
		}
	}
}

// TestBeginKeepsAgreeingStates: begun again on a sequence whose hidden
// states agree with the last one's (the same prompt), the source keeps
// its layer's slots and feeds only the last state again; where a state
// differs it feeds from there on; either way it proposes exactly what a
// fresh source proposes from those states, also at the step after, whose
// states agree with the last sequence's too (the same tokens generated
// again) but whose slots the first step's chain took.
func TestBeginKeepsAgreeingStates(t *testing.T) {
	m := loadTarget(t, "stories260K.gguf")
	d := perturbed(t, m, 9)
	ctx := context.Background()
	prompt, hidden := promptStates(t, m)
	P := len(prompt) - 1
	states, later := hidden[:P*d.Dim], hidden[:2*d.Dim] // later: any two states
	newSource := func() *Source {
		src, err := NewSource(d, m, Options{NoResample: true})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	// generate drafts a three-level chain after states, commits its first
	// token and a bonus, and drafts again after two more states; it
	// returns the distributions and the layer rows the first step computed
	generate := func(src *Source, states []float32) ([][]float32, int) {
		t.Helper()
		before := src.Stats().LayerRows
		if err := src.Begin(ctx, prompt); err != nil {
			t.Fatal(err)
		}
		if err := src.ObserveHidden(states, P); err != nil {
			t.Fatal(err)
		}
		var out [][]float32
		rows := 0
		for step := 0; step < 2; step++ {
			path := []int{}
			for k := 0; k < 3; k++ {
				dst := make([]float32, d.Vocab)
				if err := src.Expand(ctx, [][]int{path}, [][]float32{dst}); err != nil {
					t.Fatal(err)
				}
				out = append(out, dst)
				path = append(path, sample.Argmax(dst))
			}
			if step == 0 {
				rows = src.Stats().LayerRows - before
				if err := src.ObserveHidden(later, 2); err != nil {
					t.Fatal(err)
				}
				if err := src.Commit(path[:1], (path[1]+7)%d.Vocab); err != nil {
					t.Fatal(err)
				}
			}
		}
		return out, rows
	}
	changed := append([]float32(nil), states...)
	changed[3*d.Dim+1] += 0.25 // the fourth position's state
	for _, tc := range []struct {
		name   string
		states []float32
		rows   int // the layer rows the first step computes: the states fed, then the chain
	}{
		{"the same states", states, 1 + 2},
		{"the fourth state differs", changed, P - 3 + 2},
	} {
		src := newSource()
		generate(src, states)
		got, rows := generate(src, tc.states)
		if rows != tc.rows {
			t.Errorf("%s: the step computed %d layer rows, want %d", tc.name, rows, tc.rows)
		}
		want, fresh := generate(newSource(), tc.states)
		if fresh != P+2 {
			t.Fatalf("a fresh source computed %d layer rows, want %d", fresh, P+2)
		}
		for k := range want {
			for i := range want[k] {
				if got[k][i] != want[k][i] {
					t.Fatalf("%s: step %d, depth %d, token %d: %g after the kept slots, %g from a fresh source", tc.name, k/3+1, k%3, i, got[k][i], want[k][i])
				}
			}
		}
	}
}

// promptStates is the first story prompt and the target's hidden states
// at each of its positions, as a run's prefill gives a source.
func promptStates(t *testing.T, m *model.Model) ([]int, []float32) {
	t.Helper()
	prompt := storyPrompts(t, m)[0]
	var res model.Result
	if err := m.Forward(context.Background(), m.NewCache(64), model.Batch{Tokens: prompt, Hidden: true}, &res); err != nil {
		t.Fatal(err)
	}
	return prompt, res.Hidden
}
