package hidden

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/spec"
)

// BenchmarkTrainAndServe trains a drafter with the default settings (plus
// the JSON overrides in ARBORIST_TRAIN_SETTINGS) for ARBORIST_TRAIN_TARGET
// (stories260K.gguf, or a model under ../shared/models) on the story
// prompts and the built-in corpus, then decodes greedily on the story
// prompts and on
// testdata/prompts-unseen.txt: plain decoding and several chains and trees
// interleaved in one process, so the speedups are ratios measured under
// the same load. ARBORIST_TRAIN_OUT saves the drafter.
//
//	ARBORIST_TRAIN_TARGET=stories260K.gguf go test -run - -bench TrainAndServe -benchtime 1x -timeout 2h ./engine/hidden
func BenchmarkTrainAndServe(b *testing.B) {
	name := os.Getenv("ARBORIST_TRAIN_TARGET")
	if name == "" {
		b.Skip("set ARBORIST_TRAIN_TARGET (stories260K.gguf or bench/target-60m-q8_0.gguf)")
	}
	target := loadTarget(b, name)
	set := DefaultSettings()
	if js := os.Getenv("ARBORIST_TRAIN_SETTINGS"); js != "" {
		if err := json.Unmarshal([]byte(js), &set); err != nil {
			b.Fatal(err)
		}
	}
	if err := set.Validate(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	seen := storyPrompts(b, target)
	unseen := promptFile(b, target.Tok, filepath.Join("..", "..", "testdata", "prompts-unseen.txt"))
	logf := func(format string, args ...any) { // progress as it happens, not after the benchmark
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
	var d *Drafter
	for b.Loop() {
		t0 := time.Now()
		tr := &Trainer{Target: target, Prompts: append([][]int(nil), seen...), Settings: set, Fingerprint: name}
		last := time.Now()
		tr.Progress = func(p Progress) {
			if p.Record != nil {
				r := p.Record
				logf("epoch %d depth %d: train %.4f held-out %.4f (MSE %.3f of %.3f, KL %.4f) agreement %v accept %.3f lr %.2g %.0fs",
					r.Epoch, r.Depth, r.Train, r.HeldOut, r.MSE, r.StateMS, r.KL, r.AgreeAt, r.Accept, r.LR, r.Seconds)
			} else if p.Phase == "data" && time.Since(last) > 30*time.Second {
				last = time.Now()
				logf("data %d/%d tokens, %.0fs", p.Done, p.Total, time.Since(t0).Seconds())
			}
		}
		if err := tr.Generate(ctx); err != nil {
			b.Fatal(err)
		}
		tt, th := tr.Tokens()
		logf("data: %d training tokens, %d held out, %d sequences, %.0fs", tt, th, len(tr.data)+len(tr.heldOut), time.Since(t0).Seconds())
		t1 := time.Now()
		var err error
		init := set.InitLayer
		if init == -2 {
			if init, err = MiddleLayer(target); err != nil {
				b.Fatal(err)
			}
		}
		if d, err = New(target, set.D, init, set.Seed); err != nil {
			b.Fatal(err)
		}
		if err := tr.Train(ctx, d, nil); err != nil {
			b.Fatal(err)
		}
		logf("trained in %.0fs (data %.0fs); drafter %d parameters, %.1f%% of the target's %d",
			time.Since(t1).Seconds(), t1.Sub(t0).Seconds(), d.Params(), 100*float64(d.Params())/float64(target.File.Params()), target.File.Params())
	}
	if out := os.Getenv("ARBORIST_TRAIN_OUT"); out != "" {
		if err := d.Save(out, nil); err != nil {
			b.Fatal(err)
		}
	}
	confs := []struct {
		name  string
		cfg   spec.Config
		noisy bool // draft with the bench's noisy draft model instead
	}{
		{"ar", spec.Config{Plan: spec.Plan{Strategy: "ar"}}, false},
		{"chain-1", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 1}}, false},
		{"chain-2", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 2}}, false},
		{"chain-3", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 3}}, false},
		{"chain-4", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 4}}, false},
		{"egt-122", spec.Config{Plan: spec.Plan{Strategy: "egt", EGT: []int{1, 2, 2}, Branch: 2, WMax: 6}}, false},
		{"egt-2222", spec.Config{Plan: spec.Plan{Strategy: "egt", EGT: []int{2, 2, 2, 2}, Branch: 2, WMax: 8}}, false},
		{"noisy-chain-4", spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: 4}}, true},
	}
	if only := os.Getenv("ARBORIST_SERVE"); only != "" { // e.g. "chain-2,egt-122"
		keep := confs[:0]
		for _, c := range confs {
			if c.name == "ar" || strings.Contains(","+only+",", ","+c.name+",") {
				keep = append(keep, c)
			}
		}
		confs = keep
	}
	var noisy *model.Model // the bench pair's draft model, beside the bench target
	if name == "bench/target-60m-q8_0.gguf" {
		noisy = loadTarget(b, "bench/draft-noisy-0.05.gguf")
	}
	maxTokens := 128
	if v, err := strconv.Atoi(os.Getenv("ARBORIST_SERVE_TOKENS")); err == nil && v > 0 {
		maxTokens = v
	}
	for _, set := range []struct {
		name    string
		prompts [][]int
	}{{"shared prompts", seen}, {"unseen prompts", unseen}} {
		type tally struct {
			dec                         time.Duration
			tokens, steps, drafted, acc int
		}
		res := make([]tally, len(confs))
		for round := 0; round < 2; round++ {
			for ci, c := range confs {
				var src drafter.Source
				if c.noisy {
					if noisy == nil {
						continue
					}
					src = drafter.NewModel(noisy, 0, target.CtxLen, "noisy")
				} else if c.cfg.Strategy != "ar" {
					s, err := NewSource(d, target, Options{})
					if err != nil {
						b.Fatal(err)
					}
					src = s
				}
				e := &spec.Engine{Target: target, Source: src}
				for _, p := range set.prompts {
					cfg := c.cfg
					cfg.MaxTokens, cfg.StopAtEOS = maxTokens, true
					r, err := e.Run(ctx, p, cfg)
					if err != nil {
						b.Fatal(err)
					}
					t := &res[ci]
					t.dec += r.Decode
					t.tokens += len(r.Tokens)
					t.steps += len(r.Steps)
					for _, s := range r.Steps {
						t.drafted += s.Drafted
						t.acc += s.Accepted
					}
				}
			}
		}
		arTPS := float64(res[0].tokens) / res[0].dec.Seconds()
		for ci, c := range confs {
			t := res[ci]
			tps := float64(t.tokens) / t.dec.Seconds()
			logf("%s %-12s %8.1f tokens/s %.2fx ar; acceptance %.1f%%; tokens per step %.2f", set.name, c.name, tps, tps/arTPS,
				100*float64(t.acc)/float64(max(1, t.drafted)), float64(t.tokens)/float64(max(1, t.steps)))
		}
	}
}

func promptFile(t testing.TB, m interface {
	Encode(string, bool, bool) []int
}, path string) [][]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var out [][]int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, m.Encode(sc.Text(), true, false))
		}
	}
	return out
}

// fileCache is a DataCache in a folder, one file a key, so experiments
// generate a target's data once.
type fileCache string

func (c fileCache) LoadData(_ context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(string(c), key))
	if os.IsNotExist(err) {
		return nil, nil
	}
	return b, err
}

func (c fileCache) SaveData(_ context.Context, key string, data []byte) error {
	return os.WriteFile(filepath.Join(string(c), key), data, 0o644)
}

// evalOptions are a source's options and the prompts to decode.
type evalOptions struct {
	Options
	Prompts string // a prompt file; testdata/prompts-unseen.txt when empty
}

// unseenAcceptance decodes testdata/prompts-unseen.txt (or the file
// o.Prompts names) greedily, 128 tokens each, with chains of draft length
// 1..5 and returns each one's acceptance (accepted over drafted tokens).
func unseenAcceptance(b testing.TB, target *model.Model, d *Drafter, o evalOptions) []float64 {
	path := filepath.Join("..", "..", "testdata", "prompts-unseen.txt")
	if o.Prompts != "" {
		path = o.Prompts
	}
	unseen := promptFile(b, target.Tok, path)
	var out []float64
	for g := 1; g <= 5; g++ {
		src, err := NewSource(d, target, o.Options)
		if err != nil {
			b.Fatal(err)
		}
		e := &spec.Engine{Target: target, Source: src}
		var drafted, acc int
		for _, p := range unseen {
			r, err := e.Run(context.Background(), p, spec.Config{Plan: spec.Plan{Strategy: "chain", Gamma: g}, MaxTokens: 128, StopAtEOS: true})
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range r.Steps {
				drafted += s.Drafted
				acc += s.Accepted
			}
		}
		out = append(out, float64(acc)/float64(max(1, drafted)))
	}
	return out
}

// BenchmarkAblation generates the data once (defaults plus
// ARBORIST_TRAIN_SETTINGS) for ARBORIST_TRAIN_TARGET and trains one drafter
// per variant in ARBORIST_ABLATION (JSON setting overrides separated by
// ';'), reporting each one's best held-out agreement and state MSE at
// depths 1..5 (the states' mean square and variance beside it) and its
// chain acceptance on testdata/prompts-unseen.txt at draft lengths 1..5.
// ARBORIST_DATA_DIR keeps the generated data in a folder between runs;
// ARBORIST_EVAL_PROMPTS adds the acceptance on another prompt file;
// ARBORIST_TRAIN_OUT, a folder, keeps each variant's drafter there.
//
//	ARBORIST_TRAIN_TARGET=stories260K.gguf ARBORIST_ABLATION='{"d":16};{"d":64}' go test -run - -bench Ablation -benchtime 1x ./engine/hidden
func BenchmarkAblation(b *testing.B) {
	name, variants := os.Getenv("ARBORIST_TRAIN_TARGET"), os.Getenv("ARBORIST_ABLATION")
	if name == "" || variants == "" {
		b.Skip("set ARBORIST_TRAIN_TARGET and ARBORIST_ABLATION")
	}
	target := loadTarget(b, name)
	base := DefaultSettings()
	if js := os.Getenv("ARBORIST_TRAIN_SETTINGS"); js != "" {
		if err := json.Unmarshal([]byte(js), &base); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	data := &Trainer{Target: target, Prompts: storyPrompts(b, target), Settings: base, Fingerprint: name}
	if dir := os.Getenv("ARBORIST_DATA_DIR"); dir != "" {
		data.Cache = fileCache(dir)
	}
	t0 := time.Now()
	if err := data.Generate(ctx); err != nil {
		b.Fatal(err)
	}
	tt, th := data.Tokens()
	fmt.Fprintf(os.Stderr, "data: %d training tokens, %d held out (cached %v, %.0fs)\n", tt, th, data.Cached, time.Since(t0).Seconds())
	for b.Loop() {
		for vi, v := range strings.Split(variants, ";") {
			set := base
			if err := json.Unmarshal([]byte(v), &set); err != nil {
				b.Fatal(err)
			}
			tr := *data
			tr.Settings = set
			tr.Progress = func(p Progress) {
				if r := p.Record; r != nil && os.Getenv("ARBORIST_VERBOSE") != "" {
					fmt.Fprintf(os.Stderr, "  epoch %d depth %d: train %.4f held-out %.4f agreement %.3v MSE %.3v accept %.3f %.0fs\n",
						r.Epoch, r.Depth, r.Train, r.HeldOut, r.AgreeAt, r.MSEAt, r.Accept, r.Seconds)
				}
			}
			init := set.InitLayer
			if init == -2 {
				var err error
				if init, err = MiddleLayer(target); err != nil {
					b.Fatal(err)
				}
			}
			d, err := New(target, set.D, init, set.Seed)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := tr.Train(ctx, d, nil); err != nil {
				b.Fatal(err)
			}
			secs := time.Since(t0).Seconds()
			best := d.Losses[0]
			for _, r := range d.Losses {
				if r.Accept > best.Accept {
					best = r
				}
			}
			deep, err := tr.Evaluate(ctx, d, max(5, set.Depth))
			if err != nil {
				b.Fatal(err)
			}
			acc := unseenAcceptance(b, target, d, evalOptions{})
			fmt.Fprintf(os.Stderr, "variant %s: best epoch %d of %d (%.0fs), held-out agreement %.3v, MSE %.3v (mean square %.3f, variance %.3f), KL %.3f; unseen chain acceptance %.3v\n",
				v, best.Epoch, len(d.Losses), secs, deep.AgreeAt, deep.MSEAt, deep.StateMS, deep.StateVar, deep.KL, acc)
			if p := os.Getenv("ARBORIST_EVAL_PROMPTS"); p != "" {
				fmt.Fprintf(os.Stderr, "variant %s: %s chain acceptance %.3v\n", v, filepath.Base(p), unseenAcceptance(b, target, d, evalOptions{Prompts: p}))
			}
			if dir := os.Getenv("ARBORIST_TRAIN_OUT"); dir != "" {
				if err := d.Save(filepath.Join(dir, fmt.Sprintf("variant-%d.gguf", vi)), nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
