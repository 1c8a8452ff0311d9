package profiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/loadtest"
	"arborist/profiles/loadtest/loadtesttest"
)

// TestMain runs the stand-in OpenAI server when this test binary is
// started as one (Arborist's serve or llama-server in the load tests).
func TestMain(m *testing.M) {
	if os.Getenv("ARBORIST_STANDIN_SERVER") != "" {
		os.Setenv("ARBORIST_STANDIN", os.Getenv("ARBORIST_STANDIN_SERVER"))
		loadtesttest.Main(os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// loadStandIns writes a config.yaml of a chain plan with a draft model,
// a stand-in for `arborist serve` and a llama.cpp folder holding a
// stand-in llama-server (each runs this test binary as the stand-in
// server, logging its role, pid and arguments to log).
func loadStandIns(t *testing.T) (cfg, arborist, llamaDir, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "servers.log")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := func(path, role string) {
		s := fmt.Sprintf("#!/bin/sh\nARBORIST_STANDIN_SERVER=%s ARBORIST_STANDIN_LOG=%q exec %q \"$@\"\n", role, log, exe)
		if err := os.WriteFile(path, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	arborist = filepath.Join(dir, "arborist")
	script(arborist, "arborist")
	llamaDir = filepath.Join(dir, "llama")
	os.Mkdir(llamaDir, 0o755)
	script(filepath.Join(llamaDir, "llama-server"), "llama")
	model := modeltest.Stories260K(t)
	c := &config.Config{Speculation: spec.Plan{Strategy: "chain", Gamma: 3}, Sampling: config.Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = config.Target{Path: model, Device: "cpu", Threads: 1, MaxSeqLen: 256}
	c.Models.Draft = config.Draft{Kind: "model", Path: modeltest.NoisyDraft(t), Device: "cpu", Threads: 1}
	c.Serving = config.Serving{Concurrency: 1, Policy: config.PolicyPlan}
	y, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, y, 0o644)
	return
}

// TestLoadTestInterleavedAndStored: a load test starts every server for
// every level of every round, in turn (Arborist's serve with the plan,
// adaptively and plainly, llama-server with the exported settings and
// plainly), each sized for its level (--max-seqs, -np and -c), drives it,
// reports each server's figures at each level and stores them as runs.
func TestLoadTestInterleavedAndStored(t *testing.T) {
	cfg, arborist, llamaDir, log := loadStandIns(t)
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opt := loadtest.Options{Config: cfg, Concurrency: []int{3, 1, 3}, Rounds: 2, MaxTokens: 6, PerClient: 1, Arborist: arborist, LlamaCpp: llamaDir,
		Prompts: []string{"Once upon a time", "The cat"}}
	plan, err := b.LoadTestPlan(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	servers := []string{loadtest.ArboristPlan, loadtest.ArboristAdaptive, loadtest.ArboristPlain, loadtest.LlamaServer, loadtest.LlamaServerPlain}
	// every level sends every prompt: one client sends both, three one each
	if opt.RequestsAt(1) != 2 || opt.RequestsAt(3) != 1 {
		t.Errorf("requests a client: %d at 1, %d at 3, want 2 and 1", opt.RequestsAt(1), opt.RequestsAt(3))
	}
	if fmt.Sprint(plan.Servers) != fmt.Sprint(servers) || fmt.Sprint(plan.Concurrency) != "[1 3]" || plan.Requests != 2*5*(2+3) || plan.Tokens != 6*plan.Requests || plan.Starts != 20 {
		t.Fatalf("plan: %+v", plan)
	}
	var events []Event
	res, err := b.LoadTest(ctx, opt, func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Levels) != 10 {
		t.Fatalf("%d levels, want 2 levels x 5 servers", len(res.Levels))
	}
	for i, l := range res.Levels {
		n := []int{1, 3}[i/5]
		k := opt.RequestsAt(n)
		if l.Server != servers[i%5] || l.Concurrency != n || l.Rounds != 2 || l.Requests != 2*n*k || l.Tokens != 2*n*k*6 || l.TPS <= 0 || l.TTFT <= 0 || l.RunID == 0 {
			t.Errorf("level %d: %+v", i, l)
		}
	}
	if last := events[len(events)-1]; last.Done != 20 || last.Total != 20 || !strings.Contains(last.Detail, "left") {
		t.Errorf("last progress: %+v", last)
	}
	// interleaved: round by round, level by level, every server in turn
	b2, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b2)), "\n")
	if len(lines) != 20 {
		t.Fatalf("%d servers started, want 20:\n%s", len(lines), b2)
	}
	for i, l := range lines {
		n := []int{1, 3}[(i/5)%2]
		var want []string
		switch servers[i%5] {
		case loadtest.ArboristPlan:
			want = []string{"arborist ", " serve --config " + cfg, " --policy plan ", fmt.Sprintf(" --max-seqs %d ", n)}
		case loadtest.ArboristAdaptive:
			want = []string{"arborist ", " --policy adaptive ", fmt.Sprintf(" --max-seqs %d ", n)}
		case loadtest.ArboristPlain:
			want = []string{"arborist ", " --policy plain ", fmt.Sprintf(" --max-seqs %d ", n)}
		case loadtest.LlamaServer:
			want = []string{"llama ", " -md ", fmt.Sprintf(" -c %d ", 256*n), fmt.Sprintf(" -np %d ", n), " --draft-max 3 "}
		case loadtest.LlamaServerPlain:
			want = []string{"llama ", fmt.Sprintf(" -c %d ", 256*n), fmt.Sprintf(" -np %d ", n)}
		}
		for _, w := range want {
			if !strings.Contains(l+" ", w) {
				t.Errorf("start %d (%s at %d): %q lacks %q", i, servers[i%5], n, l, w)
			}
		}
		if servers[i%5] == loadtest.LlamaServerPlain && strings.Contains(l, "-md") {
			t.Errorf("plain llama-server drafts: %q", l)
		}
	}
	for _, l := range lines {
		if pid := pidOf(t, l); !gone(pid) {
			t.Errorf("server %d left running after the test", pid)
		}
	}
	runs, err := b.Runs(ctx, 0)
	if err != nil || len(runs) != 10 {
		t.Fatalf("%d runs stored (%v), want 10", len(runs), err)
	}
	for _, r := range runs {
		if r.Load == nil || r.Status != "done" || r.Load.Rounds != 2 || r.TokensPerSecond <= 0 {
			t.Errorf("stored run: %+v load %+v", r, r.Load)
		}
		if plain := strings.HasSuffix(r.Load.Server, "plain"); plain != r.Plain() {
			t.Errorf("run of %s stored as strategy %s", r.Load.Server, r.Strategy)
		}
	}
}

// TestLoadTestCancelEndsServers: a load test cancelled while it runs
// returns the cancellation and leaves no server running.
func TestLoadTestCancelEndsServers(t *testing.T) {
	cfg, arborist, _, log := loadStandIns(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	opt := loadtest.Options{Config: cfg, Concurrency: []int{2}, Rounds: 3, MaxTokens: 4, PerClient: 1, Arborist: arborist}
	_, err = b.LoadTest(ctx, opt, func(e Event) {
		if e.Done == 2 {
			cancel() // while the third server starts
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the cancellation", err)
	}
	data, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 2 {
		t.Fatalf("servers started: %q", data)
	}
	for _, l := range lines {
		if pid := pidOf(t, l); !gone(pid) {
			t.Errorf("server %d outlived the cancelled test", pid)
		}
	}
	if runs, _ := b.Runs(ctx, 0); len(runs) != 0 {
		t.Errorf("a cancelled test stored %d runs", len(runs))
	}
}

// TestLoadTestRefusesBadOptions: levels, rounds and tokens out of bounds
// are refused before anything starts, naming the bound.
func TestLoadTestRefusesBadOptions(t *testing.T) {
	cfg, arborist, _, _ := loadStandIns(t)
	ctx := context.Background()
	b, _ := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	defer b.Close()
	for _, tc := range []struct {
		opt  loadtest.Options
		want string
	}{
		{loadtest.Options{Config: cfg, Arborist: arborist, Concurrency: []int{0}}, "concurrency 0: want 1 to 256"},
		{loadtest.Options{Config: cfg, Arborist: arborist, Concurrency: []int{1, 300}}, "concurrency 300"},
		{loadtest.Options{Config: cfg, Arborist: arborist, Rounds: -1}, "rounds -1"},
		{loadtest.Options{Config: cfg, Arborist: arborist, MaxTokens: loadtest.MaxTokens + 1}, "max tokens"},
		{loadtest.Options{Config: cfg}, "no arborist program"},
		{loadtest.Options{Config: cfg, Arborist: arborist, LlamaCpp: t.TempDir()}, "llama-server"},
	} {
		if _, err := b.LoadTest(ctx, tc.opt, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.opt, err, tc.want)
		}
	}
}

// pidOf reads the pid a stand-in logged ("role pid args...").
func pidOf(t *testing.T, line string) int {
	t.Helper()
	var role string
	var pid int
	if _, err := fmt.Sscan(line, &role, &pid); err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	return pid
}

// TestLoadTestConfigText: a load test of a config's text (the Export
// screen's, as edited) serves it from a temporary file, removed after;
// a text that does not parse is refused before anything starts.
func TestLoadTestConfigText(t *testing.T) {
	cfg, arborist, _, log := loadStandIns(t)
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, _ := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	defer b.Close()
	opt := loadtest.Options{ConfigYAML: text, Concurrency: []int{1}, Rounds: 1, MaxTokens: 4, PerClient: 1, Arborist: arborist}
	res, err := b.LoadTest(ctx, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Levels) != 3 {
		t.Fatalf("%d levels, want serve with the plan, adaptively and plainly", len(res.Levels))
	}
	data, _ := os.ReadFile(log)
	var served string
	for _, f := range strings.Fields(strings.Split(string(data), "\n")[0]) {
		if strings.HasSuffix(f, "config.yaml") {
			served = f
		}
	}
	if served == "" || served == cfg {
		t.Fatalf("served %q: %s", served, data)
	}
	if _, err := os.Stat(served); !os.IsNotExist(err) {
		t.Errorf("the temporary config %s outlived the test: %v", served, err)
	}
	opt.ConfigYAML = []byte("speculation: {strategy: chain}\n")
	if _, err := b.LoadTest(ctx, opt, nil); err == nil || !strings.Contains(err.Error(), "invalid config") {
		t.Errorf("a text that does not parse: %v", err)
	}
}

// TestLoadTestServerFails: a server that fails at a level (here every
// llama-server, which exits before it serves) is out of that level from
// then on and reported with why, nothing of it stored, while the other
// servers are measured and stored as usual.
func TestLoadTestServerFails(t *testing.T) {
	cfg, arborist, llamaDir, log := loadStandIns(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("#!/bin/sh\nARBORIST_STANDIN_SERVER=fail ARBORIST_STANDIN_LOG=%q exec %q \"$@\"\n", log, exe)
	if err := os.WriteFile(filepath.Join(llamaDir, "llama-server"), []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.LoadTest(ctx, loadtest.Options{Config: cfg, Concurrency: []int{1}, Rounds: 2, MaxTokens: 4, PerClient: 1, Arborist: arborist, LlamaCpp: llamaDir,
		Prompts: []string{"Once upon a time"}}, nil)
	if err != nil {
		t.Fatalf("one server failing ended the load test: %v", err)
	}
	failed := 0
	for _, l := range res.Levels {
		llama := l.Server == loadtest.LlamaServer || l.Server == loadtest.LlamaServerPlain
		switch {
		case llama && (l.Err == "" || l.RunID != 0 || !strings.Contains(l.Err, "exited")):
			t.Errorf("the failing %s: %+v", l.Server, l)
		case llama:
			failed++
		case l.Err != "" || l.RunID == 0 || l.Rounds != 2:
			t.Errorf("%s beside a failing server: %+v", l.Server, l)
		}
	}
	if failed != 2 {
		t.Errorf("%d failed levels, want both llama-servers'", failed)
	}
	data, _ := os.ReadFile(log)
	if n := strings.Count(string(data), "fail "); n != 2 {
		t.Errorf("the failing servers were started %d times over 2 rounds, want once each", n)
	}
}

// TestLoadTestPredicts: where the config's pair is profiled and
// calibrated, each of Arborist's servers at each level carries the cost
// model's aggregate tokens/s for the test's own requests (its prompts'
// median tokens, its max tokens) under its policy; llama-server's carry
// none, and before anything is stored neither does Arborist's.
func TestLoadTestPredicts(t *testing.T) {
	cfg, arborist, llamaDir, _ := loadStandIns(t)
	ctx := context.Background()
	b := openBench(t)
	prompts := []string{"Once upon a time", "The cat sat on the mat and looked at the", "Tom"}
	opt := loadtest.Options{Config: cfg, Concurrency: []int{1, 2}, Rounds: 1, MaxTokens: 6, PerClient: 1, Arborist: arborist, LlamaCpp: llamaDir, Prompts: prompts, NoStore: true}
	res, err := b.LoadTest(ctx, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Levels {
		if l.Predicted != 0 {
			t.Errorf("nothing stored, yet %s at %d predicted %.1f tokens/s", l.Server, l.Concurrency, l.Predicted)
		}
	}
	if !strings.HasPrefix(res.PredictedOn, "no prediction: ") {
		t.Errorf("nothing stored, and the report says the predictions rest on %q", res.PredictedOn)
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := replayConfig(ctx, c, b.path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Profile(ctx, r.Pair, ProfileOptions{Seqs: []int{1, 2}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Calibrate(ctx, r.Pair, modeltest.StoryPrompts(t)[:2], "stories", 16, SampleParams{}, nil); err != nil {
		t.Fatal(err)
	}
	opt.NoRecheck = true // priced on the stored curves, as the figures below
	res, err = b.LoadTest(ctx, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.PredictedOn, "stored curves as they are") {
		t.Errorf("priced without the re-check, the report says %q", res.PredictedOn)
	}
	in, err := b.Inputs(ctx, r.Pair, InputsOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the prompts' mean length, in the target's tokens
	lens := []int{}
	for _, p := range prompts {
		ids, err := Tokenize(r.Pair.Target, p, true, false)
		if err != nil {
			t.Fatal(err)
		}
		lens = append(lens, len(ids))
	}
	req := costmodel.Requests{Prompt: meanLength(lens), Tokens: 6, Together: true} // its clients run in step
	// and the server's own time, timed on one-token requests to the
	// plain server before the rounds, on every level's requests
	if !strings.Contains(res.PredictedOn, "\nserver overhead: ") || res.OverheadFirst < 0 || res.OverheadLast <= 0 {
		t.Errorf("the server's own time not timed (%v, %v): the report says %q", res.OverheadFirst, res.OverheadLast, res.PredictedOn)
	}
	// and a streamed token's, on requests of the test's length streamed
	// and whole in turn, at one client and at the most
	if !strings.Contains(res.PredictedOn, " for each request's streamed text in it (10 requests streamed and 10 whole, in turn, at one client; ") ||
		!strings.Contains(res.PredictedOn, " pairs of rounds at 2 at once)") || res.OverheadStream < 0 || res.OverheadStreamPass < 0 {
		t.Errorf("a streamed token's cost not timed (%v, %v): the report says %q", res.OverheadStream, res.OverheadStreamPass, res.PredictedOn)
	}
	req.First, req.Last, req.Stream, req.StreamPass = res.OverheadFirst, res.OverheadLast, res.OverheadStream, res.OverheadStreamPass
	price := func(p costmodel.Plan) (costmodel.Prediction, error) { return costmodel.Predict(p, in.Acc, in.Costs) }
	pr, err := price(r.Plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Levels {
		var want float64
		var ttft time.Duration
		switch l.Server {
		case loadtest.ArboristPlan, loadtest.ArboristAdaptive, loadtest.ArboristPlain:
			at, pol := pr, map[string]string{loadtest.ArboristPlan: costmodel.PolicyFixed, loadtest.ArboristAdaptive: costmodel.PolicyGoodput, loadtest.ArboristPlain: costmodel.PolicyPlain}[l.Server]
			if pol == costmodel.PolicyPlain {
				at = costmodel.Prediction{Plan: spec.PlainPlan()}
			}
			lp, err := costmodel.PredictLoad(at, in.Acc, in.Costs, l.Concurrency, pol, req, price)
			if err != nil {
				t.Fatalf("%s at %d: %v", l.Server, l.Concurrency, err)
			}
			want, ttft = lp.TokensPerSec, lp.TTFT
			if want <= 0 {
				t.Fatalf("%s at %d priced at %.1f tokens/s", l.Server, l.Concurrency, want)
			}
		}
		if l.Predicted != want || l.PredictedTTFT != ttft || (want > 0) != (l.PredictedTTFT > 0 && l.PredictedTPOT > 0) {
			t.Errorf("%s at %d: predicted %.1f tokens/s, TTFT %v, want %.1f, %v", l.Server, l.Concurrency, l.Predicted, l.PredictedTTFT, want, ttft)
		}
	}
	// by default the prediction re-times the curve first (this minute's
	// machine): every level of Arborist's servers is still priced
	opt.NoRecheck = false
	res, err = b.LoadTest(ctx, opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.PredictedOn, "T_verify re-check: W=1 stored") {
		t.Errorf("re-checked, the report says the predictions rest on %q", res.PredictedOn)
	}
	// and each level is priced at the machine's pace read beside it,
	// against plain decoding's token at the re-check the prices rest on
	if !strings.Contains(res.PredictedOn, "\npriced at the machine's pace beside each level: ") ||
		!strings.Contains(res.PredictedOn, "against the re-check's own ") {
		t.Errorf("re-checked, the report says nothing of the machine's pace: %q", res.PredictedOn)
	}
	for _, l := range res.Levels {
		switch l.Server {
		case loadtest.ArboristPlan, loadtest.ArboristAdaptive, loadtest.ArboristPlain:
			if l.Predicted <= 0 || l.PredictedTTFT <= 0 || !(l.Pace > 0) {
				t.Errorf("re-checked, %s at %d predicted %.1f tokens/s, TTFT %v, at a pace of %.2f", l.Server, l.Concurrency, l.Predicted, l.PredictedTTFT, l.Pace)
			}
		}
	}
}

// TestPaceApply: a level's predictions are brought to the pace read
// beside its rounds (the median of its readings over its reference: a
// pass of its size's at the re-check, else plain decoding's token's):
// tokens/s divided by it, the times multiplied; a level with no
// reading, or a level nothing predicts, keeps its figures.
func TestPaceApply(t *testing.T) {
	ms := time.Millisecond
	p := &pace{plain: 2 * ms, refAt: true, ref: map[int]time.Duration{8: 4 * ms},
		at: map[int][]time.Duration{1: {2 * ms, 2200 * time.Microsecond, 2400 * time.Microsecond}, 8: {2 * ms, 3 * ms}, 2: {3 * ms}}}
	levels := []loadtest.Level{
		{Server: loadtest.ArboristPlan, Concurrency: 1, Predicted: 1100, PredictedTTFT: 10 * ms, PredictedTPOT: ms},
		{Server: loadtest.ArboristPlan, Concurrency: 8, Predicted: 1000, PredictedTTFT: 10 * ms, PredictedTPOT: ms},
		{Server: loadtest.ArboristPlan, Concurrency: 4, Predicted: 1000, PredictedTTFT: 10 * ms, PredictedTPOT: ms},
		{Server: loadtest.ArboristPlan, Concurrency: 2, Predicted: 1500, PredictedTTFT: 10 * ms, PredictedTPOT: ms},
		{Server: loadtest.LlamaServerPlain, Concurrency: 8},
	}
	note := p.apply(levels)
	want := []loadtest.Level{
		{Server: loadtest.ArboristPlan, Concurrency: 1, Predicted: 1000, PredictedTTFT: 11 * ms, PredictedTPOT: 1100 * time.Microsecond, Pace: 1.1},
		// 2.5 ms, the median of its passes of eight, against 4 ms at the re-check
		{Server: loadtest.ArboristPlan, Concurrency: 8, Predicted: 1600, PredictedTTFT: 6250 * time.Microsecond, PredictedTPOT: 625 * time.Microsecond, Pace: 0.625},
		{Server: loadtest.ArboristPlan, Concurrency: 4, Predicted: 1000, PredictedTTFT: 10 * ms, PredictedTPOT: ms, Pace: 1},
		// no pass of two at the re-check: plain decoding's token
		{Server: loadtest.ArboristPlan, Concurrency: 2, Predicted: 1000, PredictedTTFT: 15 * ms, PredictedTPOT: 1500 * time.Microsecond, Pace: 1.5},
		{Server: loadtest.LlamaServerPlain, Concurrency: 8},
	}
	for i := range want {
		g, w := levels[i], want[i]
		if math.Abs(g.Predicted-w.Predicted) > 1e-6 || math.Abs(g.Pace-w.Pace) > 1e-9 || (g.PredictedTTFT-w.PredictedTTFT).Abs() > time.Microsecond ||
			(g.PredictedTPOT-w.PredictedTPOT).Abs() > time.Microsecond {
			t.Errorf("level %d: %+v, want %+v", i, g, w)
		}
	}
	for _, w := range []string{"x1.10 at 1, x0.62 at 8, x1.00 at 4, x1.50 at 2", "the re-check's (8: 4.00 ms), else plain decoding's token, against the re-check's own 2.00 ms"} {
		if !strings.Contains(note, w) {
			t.Errorf("the report says %q, not %q", note, w)
		}
	}
	p.err = errors.New("probe failed")
	before := levels[0].Predicted
	if note := p.apply(levels[:1]); !strings.Contains(note, "not followed: probe failed") || levels[0].Predicted != before {
		t.Errorf("a pace that failed to be read: %q, predicted %.1f", note, levels[0].Predicted)
	}
}

// TestSplitStream: what streaming costs a pass at one client and at
// several splits into a part a request and a part a pass that add up to
// the one client's; a reading at several below the one client's puts it
// all on the pass, one above several times it all on the requests.
func TestSplitStream(t *testing.T) {
	us := time.Microsecond
	for _, c := range []struct {
		one, at       time.Duration
		most          int
		request, pass time.Duration
	}{
		{640 * us, 1800 * us, 8, 1160 * us / 7, 640*us - 1160*us/7}, // a 2-core Zen 3's plain server
		{640 * us, 500 * us, 8, 0, 640 * us},
		{640 * us, 9 * time.Millisecond, 8, 640 * us, 0},
		{0, 0, 4, 0, 0},
	} {
		r, p := splitStream(c.one, c.at, c.most)
		if r != c.request || p != c.pass || r+p != c.one {
			t.Errorf("splitStream(%v, %v, %d) = %v a request, %v a pass; want %v, %v", c.one, c.at, c.most, r, p, c.request, c.pass)
		}
	}
}

// TestOverheadString: the server overhead's line names streaming's two
// parts where both were timed, and why only the one client's where the
// rounds at the most clients failed.
func TestOverheadString(t *testing.T) {
	us := time.Microsecond
	both := overhead{Requests: 8, Stream: 80 * us, StreamPass: 490 * us, StreamPairs: 10, StreamAt: 8, StreamAtPairs: 5}
	if s := both.String(); !strings.Contains(s, ", 0.49 ms a streamed pass and 0.08 ms for each request's streamed text in it (10 requests streamed and 10 whole, in turn, at one client; 5 pairs of rounds at 8 at once)") {
		t.Errorf("both parts timed: %q", s)
	}
	one := overhead{Requests: 8, Stream: 640 * us, StreamPairs: 10, StreamErr: "at 8 at once: a refusal"}
	if s := one.String(); !strings.Contains(s, ", 0.64 ms a pass for each request's streamed text (10 requests streamed and 10 whole, in turn) (not timed at 8 at once: a refusal)") {
		t.Errorf("timed at one client only: %q", s)
	}
}

// TestMeanLength: a load test's requests are priced at its prompts' mean
// length, rounded to a token: every prompt is sent as often as the
// others, so a wave's rows and the tokens/s add up the mean.
func TestMeanLength(t *testing.T) {
	for _, c := range []struct {
		lens []int
		want int
	}{{[]int{15, 17, 18, 21, 23, 24, 26, 30}, 22}, {[]int{2, 5, 12}, 6}, {[]int{3}, 3}, {[]int{1, 2}, 2}} {
		if got := meanLength(c.lens); got != c.want {
			t.Errorf("meanLength(%v) = %d, want %d", c.lens, got, c.want)
		}
	}
}
