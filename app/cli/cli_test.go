package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), Env{Stdout: &out, Stderr: &errb}, args)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage: arborist"},
		{[]string{"frobnicate"}, 2, `unknown verb "frobnicate"`},
		{[]string{"generate", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"generate", "--prompt", "x"}, 2, "--model is required"},
		{[]string{"generate", "--model", "m.gguf", "-n", "0"}, 2, "-n 0 must be positive"},
		{[]string{"generate", "--model", "m.gguf", "--temp", "-1"}, 2, "temperature"},
		{[]string{"generate", "--model", "/nonexistent/m.gguf"}, 1, "/nonexistent/m.gguf"},
		{[]string{"inspect"}, 2, "want exactly one model file"},
		{[]string{"tokenize", "--model", "x.gguf"}, 2, "want exactly one TEXT"},
		{[]string{"synth", "--shape", "llama-9z", "-o", "x"}, 2, `unknown shape "llama-9z"`},
		{[]string{"synth", "--shape", "stories15m", "--type", "Q3_Q", "-o", "x"}, 2, "not a supported weight type"},
		{[]string{"generate", "--model", "m.gguf", "--kv", "f8"}, 2, `unknown KV cache type "f8"`},
		{[]string{"bench", "--model", "m.gguf", "--kv", "q8"}, 2, `unknown KV cache type "q8"`},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("arborist %v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}

func TestGenerateStories(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	code, out, stderr := run(t, "generate", "--model", filepath.Join(dir, "stories260K.gguf"), "--prompt", "Once upon a time", "--temp", "0", "-n", "64")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := ", there was a little girl named Lily. She loved to play outside in the park."
	if !strings.HasPrefix(out, want) {
		t.Errorf("output %q does not start with %q", out, want)
	}
	if !strings.Contains(out, "prefill:") || !strings.Contains(out, "decode:") || !strings.Contains(out, "tokens/s") {
		t.Errorf("no speed report in %q", out)
	}
}

// TestGenerateBench: the Q8_0 bench target writes the same story as the F32
// stories260K it was built from (allowing for Q8_0 rounding: the first
// sentence must agree).
func TestGenerateBench(t *testing.T) {
	code, out, stderr := run(t, "generate", "--model", modeltest.Shared(t, "models/bench/target-60m-q8_0.gguf"), "--prompt", "Once upon a time", "--temp", "0", "-n", "24")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := ", there was a little girl named Lily."; !strings.HasPrefix(out, want) {
		t.Errorf("output %q does not start with %q", out, want)
	}
}

// TestGenerateKVF16: an F16 KV cache writes the same greedy story (the
// first sentence; its accuracy is measured in engine/model/modeltest).
func TestGenerateKVF16(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	code, out, stderr := run(t, "generate", "--model", filepath.Join(dir, "stories260K.gguf"), "--prompt", "Once upon a time", "--temp", "0", "-n", "24", "--kv", "f16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := ", there was a little girl named Lily."; !strings.HasPrefix(out, want) {
		t.Errorf("output %q does not start with %q", out, want)
	}
}

// TestBackends: the registry is listed with each backend's availability.
func TestBackends(t *testing.T) {
	code, out, stderr := run(t, "backends")
	if code != 0 || !strings.Contains(out, "cpu    available: kernels ") {
		t.Fatalf("exit %d, out %q, err %s", code, out, stderr)
	}
	code, out, _ = run(t, "backends", "--json")
	if code != 0 || !strings.Contains(out, `"name": "cpu"`) {
		t.Fatalf("--json: exit %d, out %q", code, out)
	}
}

func TestGenerateRandomF16(t *testing.T) {
	code, out, stderr := run(t, "generate", "--model", modeltest.Shared(t, "models/llama-2-tiny-random.gguf"), "--prompt", "Hello", "-n", "8", "--temp", "0.8", "--seed", "3")
	if code != 0 || !strings.Contains(out, "decode:  8 tokens") {
		t.Fatalf("exit %d, out %q, err %s", code, out, stderr)
	}
}

func TestTokenizeAndInspect(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	code, out, _ := run(t, "tokenize", "--model", filepath.Join(dir, "stories260K.gguf"), "Once upon a time")
	if code != 0 || strings.TrimSpace(out) != "1 403 407 261 378" {
		t.Errorf("tokenize: exit %d, %q", code, out)
	}
	code, out, _ = run(t, "inspect", modeltest.Shared(t, "models/bench/target-60m-q8_0.gguf"))
	for _, want := range []string{"architecture:  llama", "Q8_0", "58.54M", "20 layers", "SentencePiece", "memory:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

func TestSynthThenInspectAndGenerate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.gguf")
	code, _, stderr := run(t, "synth", "--shape", "custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300", "--type", "Q4_K", "-o", p)
	if code == 0 {
		t.Fatalf("Q4_K with width 64 should be refused (rows must be multiples of 256); stderr %s", stderr)
	}
	code, _, stderr = run(t, "synth", "--shape", "custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=300", "--type", "Q4_K", "-o", p)
	if code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	code, out, _ := run(t, "inspect", p)
	if code != 0 || !strings.Contains(out, "SYNTHETIC") || !strings.Contains(out, "Q4_K") {
		t.Errorf("inspect synthetic: %q", out)
	}
	code, out, stderr = run(t, "generate", "--model", p, "--prompt", "hi", "-n", "5")
	if code != 0 || !strings.Contains(out, "decode:  5 tokens") {
		t.Errorf("generate synthetic: exit %d %q %s", code, out, stderr)
	}
	// llama.cpp's Q4_K_M mix: Q6_K in the last layer's attn_v and
	// ffn_down and the output matrix, Q4_K elsewhere; it loads and runs
	m := filepath.Join(t.TempDir(), "m.gguf")
	code, out, stderr = run(t, "synth", "--shape", "custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=300", "--type", "Q4_K_M", "-o", m)
	if code != 0 || !strings.Contains(out, "Q4_K_M") {
		t.Fatalf("synth Q4_K_M: exit %d %q %s", code, out, stderr)
	}
	if code, out, _ = run(t, "inspect", m); code != 0 || !strings.Contains(out, "Q4_K") || !strings.Contains(out, "Q6_K") {
		t.Errorf("inspect Q4_K_M: %q", out)
	}
	if code, out, stderr = run(t, "generate", "--model", m, "--prompt", "hi", "-n", "5"); code != 0 || !strings.Contains(out, "decode:  5 tokens") {
		t.Errorf("generate Q4_K_M: exit %d %q %s", code, out, stderr)
	}
	if code, _, stderr = run(t, "synth", "--shape", "stories15m", "-o", p); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Errorf("overwrite without --force: exit %d %s", code, stderr)
	}
}

func TestRunVerb(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	draft := modeltest.NoisyDraft(t)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	db := filepath.Join(t.TempDir(), "a.db")
	code, out, stderr := run(t, "run", "--target", target, "--draft", draft, "--strategy", "chain", "--gamma", "4",
		"--prompt", "Once upon a time", "-n", "32", "--temp", "0", "--baseline", "--trace", trace, "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Once upon a time, there was a little girl named Lily", "AAL", "acceptance", "per step: draft", "ar (baseline)",
		"speedup:", "over plain decoding, the median of 3 interleaved rounds"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], `"Accepted"`) || !strings.Contains(lines[0], `"Verify"`) {
		t.Errorf("trace: %d lines, first %q", len(lines), lines[0])
	}
	for _, args := range [][]string{
		{"--draft-ngram", "3", "--strategy", "egt"},
		{"--draft-layers", "2", "--strategy", "tree", "--widths", "2,1"},
		{"--draft", draft, "--strategy", "duo", "--gamma", "4"},
	} {
		a := append([]string{"run", "--target", target, "--prompt", "Once upon a time", "-n", "16", "--temp", "0", "--baseline", "--quiet", "--db", db}, args...)
		if code, _, stderr := run(t, a...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
	// --rounds sets the rounds of the measured speedup, within 1..100
	code, out, stderr = run(t, "run", "--target", target, "--draft", draft, "--strategy", "chain", "--gamma", "4",
		"--prompt", "Once upon a time", "-n", "16", "--temp", "0", "--baseline", "--rounds", "1", "--quiet", "--no-store", "--db", db)
	if code != 0 || !strings.Contains(out, "tokens/s, one round)") {
		t.Errorf("--rounds 1: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, _, stderr := run(t, "run", "--target", target, "--draft", draft, "--strategy", "chain",
		"--prompt", "Once upon a time", "--baseline", "--rounds", "101", "--db", db); code != 2 || !strings.Contains(stderr, "--rounds") {
		t.Errorf("--rounds 101: exit %d: %s", code, stderr)
	}
	// a plan that drafts ahead says how often that drafting was of use
	code, out, stderr = run(t, "run", "--target", target, "--draft", draft, "--strategy", "duo", "--gamma", "4", "--tail", "2",
		"--prompt", "Once upon a time", "-n", "32", "--temp", "0", "--quiet", "--db", db)
	if code != 0 || !strings.Contains(out, "drafted ahead on") || !strings.Contains(out, "the verdict met what was prepared on") {
		t.Errorf("duo with a tail: exit %d\n%s\n%s", code, out, stderr)
	}
	// every run was stored, with its steps
	code, out, _ = run(t, "runs", "--db", db)
	if code != 0 || strings.Count(out, "done") != 5 || !strings.Contains(out, "chain") || !strings.Contains(out, "duo") {
		t.Errorf("runs:\n%s", out)
	}
	code, out, _ = run(t, "runs", "--db", db, "--show", "1")
	if code != 0 || !strings.Contains(out, "run 1:") || !strings.Contains(out, "accepted") {
		t.Errorf("runs --show 1:\n%s", out)
	}
}

// TestTuningWorkflow walks the user's path: profile, calibrate, tune with
// export, then replay the exported config.yaml.
func TestTuningWorkflow(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	draft := modeltest.NoisyDraft(t)
	prompts := filepath.Join(dir, "..", "prompts", "stories.txt")
	tmp := t.TempDir()
	db := filepath.Join(tmp, "t.db")
	code, out, stderr := run(t, "profile", "--target", target, "--draft", draft, "--max-w", "8", "--db", db)
	if code != 0 || !strings.Contains(out, "measured now") || !strings.Contains(out, "W=8") || !strings.Contains(out, "of the roofline") {
		t.Fatalf("profile: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = run(t, "profile", "--target", target, "--max-w", "8", "--db", db)
	if code != 0 || !strings.Contains(out, "from the database") {
		t.Errorf("second profile should reuse the stored curve:\n%s", out)
	}
	code, out, stderr = run(t, "tune", "--target", target, "--draft", draft, "--db", db)
	if code != 1 || !strings.Contains(stderr, "arborist calibrate") {
		t.Errorf("tune without calibration: exit %d, %s", code, stderr)
	}
	code, out, stderr = run(t, "run", "--target", target, "--draft", draft, "--strategy", "egt", "--depth-policy", "predictor", "--prompt", "x", "--db", db)
	if code != 1 || !strings.Contains(stderr, "arborist train predictor") {
		t.Errorf("predictor policy without a predictor: exit %d, %s", code, stderr)
	}
	code, out, stderr = run(t, "train", "predictor", "--target", target, "--draft", draft, "--prompts", prompts, "--db", db)
	if code != 1 || !strings.Contains(stderr, "run 'arborist calibrate' first") {
		t.Errorf("train predictor before calibrate: exit %d, %s", code, stderr)
	}
	code, out, stderr = run(t, "calibrate", "--target", target, "--draft", draft, "--prompts", prompts, "-n", "48", "--db", db)
	if code != 0 || !strings.Contains(out, "depth 1:") || !strings.Contains(out, "between prompts, T_verify(4) read") {
		t.Fatalf("calibrate: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(t, "train", "predictor", "--target", target, "--draft", draft, "--prompts", prompts, "-n", "48", "--corpus=false",
		"--strategy", "egt", "--egt-widths", "1,2,2,2", "--branch", "2", "--w-max", "8", "--epochs", "10", "--db", db)
	for _, want := range []string{"depth predictor data (size small): about 6 prompts x 48 tokens (0.8x the default's work), estimated ", "(the pair's latency curve and calibration)\n", "depth predictor 1 for egt widths=1,2,2,2 branch=2 w-max=8", "best fixed depth (", "best threshold (", "most common best depth", "features (speedup on validation", "held-out accuracy", "tune "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("train predictor: exit %d, no %q\n%s\n%s", code, want, out, stderr)
		}
	}
	code, out, stderr = run(t, "run", "--target", target, "--draft", draft, "--strategy", "egt", "--egt-widths", "1,2,2", "--branch", "2", "--w-max", "8", "--depth-policy", "predictor",
		"--prompt", "Once upon a time", "-n", "32", "--db", db)
	if code != 1 || !strings.Contains(stderr, "decides the depth of egt widths=1,2,2,2") {
		t.Errorf("a shape the predictor was not trained for: exit %d, %s", code, stderr)
	}
	code, out, stderr = run(t, "run", "--target", target, "--draft", draft, "--strategy", "egt", "--egt-widths", "1,2,2,2", "--branch", "2", "--w-max", "8", "--depth-policy", "predictor", "--predictor-id", "1",
		"--prompt", "Once upon a time", "-n", "32", "--temp", "0", "--baseline", "--db", db)
	if code != 0 || !strings.Contains(out, "speedup:") {
		t.Fatalf("run with the predictor policy: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = run(t, "export", "--target", target, "--draft", draft, "--db", db, "-o", filepath.Join(tmp, "none.yaml"))
	if code != 1 || !strings.Contains(stderr, "run 'arborist tune' first") {
		t.Errorf("export before tune: exit %d, %s", code, stderr)
	}
	code, out, stderr = run(t, "tune", "--target", target, "--draft", draft, "--db", db, "--validate", "--prompts", prompts, "-n", "24")
	if code != 0 || !strings.Contains(out, "best:") || !strings.Contains(out, "predicted by the plan") || !strings.Contains(out, "speedup:") {
		t.Fatalf("tune --validate: exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(out, "T_verify re-check: W=1 stored") {
		t.Errorf("tune did not re-check the stored T_verify curve:\n%s", out)
	}
	if !strings.Contains(out, "verification priced at context") {
		t.Errorf("tune did not name the contexts its prices rest on:\n%s", out)
	}
	for _, want := range []string{"at concurrency C", "  C=1:", "  C=8:", "plain "} {
		if !strings.Contains(out, want) {
			t.Errorf("tune's ranking per concurrency has no %q:\n%s", want, out)
		}
	}
	cfgPath := filepath.Join(tmp, "config.yaml")
	code, out, stderr = run(t, "export", "--target", target, "--draft", draft, "--db", db, "-o", cfgPath)
	if code != 0 || !strings.Contains(out, "llama-server") || !strings.Contains(out, "vllm serve") {
		t.Fatalf("export: exit %d\n%s\n%s", code, out, stderr)
	}
	b, err := os.ReadFile(cfgPath)
	for _, want := range []string{"speculation:", "strategy:", "arborist_version:", "sha256:", "measured_on:"} {
		if err != nil || !strings.Contains(string(b), want) {
			t.Fatalf("config.yaml lacks %q: %v\n%s", want, err, b)
		}
	}
	code, out, stderr = run(t, "run", "--config", cfgPath, "--prompt", "Once upon a time", "-n", "32", "--baseline", "--db", db)
	if code != 0 || !strings.Contains(out, "speedup:") {
		t.Fatalf("run --config: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = run(t, "runs", "compare", "1", "2", "--db", db)
	if code != 0 || !strings.Contains(out, "predicted speedup") || !strings.Contains(out, "#1") || !strings.Contains(out, "#2") {
		t.Errorf("runs compare:\n%s", out)
	}
	if code, _, stderr := run(t, "runs", "compare", "1", "--db", db); code != 2 || !strings.Contains(stderr, "two or more") {
		t.Errorf("runs compare with one id: %d %s", code, stderr)
	}
	// the top plans measured interleaved with plain decoding, the best marked
	code, out, stderr = run(t, "tune", "--target", target, "--draft", draft, "--db", db, "--validate", "--top", "3", "--prompts", prompts, "-n", "12")
	if code != 0 || strings.Count(out, "<- measured best") != 1 || !strings.Contains(out, "measured best:") || !strings.Contains(out, "plain decoding:") ||
		!strings.Contains(out, "where each prediction's error comes from") || strings.Count(out, "plain decoding's token") != 3 {
		t.Fatalf("tune --validate --top 3: exit %d\n%s\n%s", code, out, stderr)
	}
	// the same as JSON: each plan with its error split
	code, out, stderr = run(t, "tune", "--target", target, "--draft", draft, "--db", db, "--validate", "--top", "2", "--prompts", prompts, "-n", "12", "--json")
	var doc struct {
		Recheck *struct {
			Now1    int64 `json:"now_verify1_ns"`
			Plain   int64 `json:"plain_token_ns"`
			Moments int   `json:"window_moments"`
		} `json:"recheck"`
		Validation struct {
			Plans []struct {
				Split *struct {
					AALMeasured  float64 `json:"aal_measured"`
					StepMeasured int64   `json:"step_measured_ns"`
					BasePred     int64   `json:"baseline_token_predicted_ns"`
				} `json:"split"`
			} `json:"plans"`
		} `json:"validation"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Validation.Plans) != 2 {
		t.Fatalf("tune --validate --top 2 --json: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	// the re-check's plain decoding token, the baseline of every speedup
	// pooled with the calibration's window, read minutes ago
	if doc.Recheck == nil || doc.Recheck.Now1 <= 0 || doc.Recheck.Plain <= 0 || doc.Recheck.Moments < 3 {
		t.Errorf("tune --json's recheck: %+v", doc.Recheck)
	}
	for i, p := range doc.Validation.Plans {
		if p.Split == nil || p.Split.AALMeasured < 1 || p.Split.StepMeasured <= 0 || p.Split.BasePred <= 0 {
			t.Errorf("plan %d's split in JSON: %+v", i+1, p.Split)
		}
	}
	if code, _, stderr := run(t, "tune", "--target", target, "--draft", draft, "--db", db, "--validate", "--prompts", prompts, "--rounds", "0"); code != 2 || !strings.Contains(stderr, "--rounds") {
		t.Errorf("tune --rounds 0: %d %s", code, stderr)
	}
	// a broken config is refused with its path
	bad := filepath.Join(tmp, "bad.yaml")
	os.WriteFile(bad, []byte("speculation:\n  strategy: warp\n"), 0o644)
	if code, _, stderr := run(t, "run", "--config", bad, "--prompt", "x", "--no-store"); code != 1 || !strings.Contains(stderr, bad) {
		t.Errorf("bad config: exit %d, %s", code, stderr)
	}
}

func TestRunErrors(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run", "--target", target, "--prompt", "x", "--strategy", "chain"}, 2, "needs a draft source"},
		{[]string{"run", "--target", target, "--prompt", "x", "--strategy", "warp", "--draft-ngram", "2"}, 2, "unknown strategy"},
		{[]string{"run", "--target", target, "--strategy", "ar"}, 2, "exactly one of --prompt and --prompts"},
		{[]string{"run", "--target", target, "--prompt", "x", "--draft", modeltest.Shared(t, "models/llama-2-tiny-random.gguf")}, 1, "vocabulary mismatch"},
		{[]string{"run", "--target", target, "--prompt", "x", "--draft-layers", "9"}, 1, "must be below the target's 5 layers"},
		{[]string{"run", "--target", target, "--prompt", "x", "--strategy", "duo", "--max-seqs", "5", "--draft-ngram", "2"}, 2, "max sequences"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args[3:], code, stderr, c.code, c.msg)
		}
	}
}

// TestBench: the bench verb reports bandwidth, the compute ceiling, decode
// speed against the roofline, the T_verify curve against the ceiling, and
// T_verify(8) over T_verify(1); bad widths are a usage error.
func TestBench(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	code, out, stderr := run(t, "bench", "--model", filepath.Join(dir, "stories260K.gguf"), "--reps", "1", "--widths", "1,8", "-n", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"memory read bandwidth:", "compute ceiling:", "float32 FMA", "% of the bandwidth roofline",
		"reads as long as a decode run", "each run against the reads just before and after it", "T_verify(W)", "of peak", "T_verify(8)/T_verify(1): "} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 7 && (f[0] == "1" || f[0] == "8") && strings.HasSuffix(f[6], "%") {
			rows++
		}
	}
	if rows != 2 {
		t.Errorf("want rows for W=1 and W=8 in:\n%s", out)
	}
	if code, _, stderr := run(t, "bench", "--model", filepath.Join(dir, "stories260K.gguf"), "--widths", "1,x"); code != 2 || !strings.Contains(stderr, "--widths") {
		t.Errorf("bad widths: exit %d, %s", code, stderr)
	}
	// the memory is read for as long as a run before the runs and after
	// each, the ceiling probed before and after; the roofline's bandwidth
	// is the reads' median, the ceiling the better probe, and each run's
	// share is against the reads on either side of it
	code, out, stderr = run(t, "bench", "--model", filepath.Join(dir, "stories260K.gguf"), "--reps", "3", "--widths", "1", "-n", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		WeightBytes float64   `json:"weight_bytes"`
		Bandwidth   float64   `json:"bandwidth_bytes_per_s"`
		Peak        float64   `json:"peak_macs_per_s"`
		KVRead      float64   `json:"kv_read_bytes_per_token"`
		Context     float64   `json:"roofline_context_positions"`
		Decode      []float64 `json:"decode_tokens_per_s"`
		Shares      []float64 `json:"decode_roofline_shares"`
		BW          []float64 `json:"bandwidth_probes_bytes_per_s"`
		Best        float64   `json:"bandwidth_best_pass_bytes_per_s"`
		Peaks       []float64 `json:"peak_probes_macs_per_s"`
		PeakW       int       `json:"peak_set_by_pass_width"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(r.Decode) != 3 || len(r.Shares) != 3 || len(r.BW) != 4 || len(r.Peaks) != 2 {
		t.Fatalf("%d runs, %d shares, %d reads, %d ceiling probes; want 3, 3, 4, 2", len(r.Decode), len(r.Shares), len(r.BW), len(r.Peaks))
	}
	sorted := slices.Sorted(slices.Values(r.BW))
	// the ceiling is the best probe, or a pass's rate where one ran faster
	if r.Bandwidth != (sorted[1]+sorted[2])/2 || (r.PeakW == 0 && r.Peak != slices.Max(r.Peaks)) || r.Peak < slices.Max(r.Peaks) {
		t.Errorf("limits %v B/s and %v MAC/s (set by the pass at W=%d), not the median of the reads %v and the best of the probes %v", r.Bandwidth, r.Peak, r.PeakW, r.BW, r.Peaks)
	}
	if r.Best < slices.Max(r.BW) {
		t.Errorf("fastest pass %v B/s below a whole read's rate %v", r.Best, r.BW)
	}
	// the roofline streams the KV cache a step reads beside the weights:
	// 8 tokens after the prompt attend over more than two positions
	if r.Context <= 2 || r.KVRead <= 0 {
		t.Errorf("roofline at a context of %v positions, %v bytes of KV cache a token", r.Context, r.KVRead)
	}
	for _, sh := range r.Shares {
		bytes := r.WeightBytes + r.KVRead
		lo, hi := r.Decode[0]*bytes/slices.Max(r.BW), r.Decode[2]*bytes/slices.Min(r.BW)
		if sh < lo*(1-1e-9) || sh > hi*(1+1e-9) {
			t.Errorf("share %v outside what the runs %v and reads %v allow (%v-%v)", sh, r.Decode, r.BW, lo, hi)
		}
	}
}

// TestBenchCtx: bench --ctx times decode runs and passes after each depth
// and sets them against the roofline that reads the KV cache a step
// attends over beside the weights (more of it at the deeper context); a
// depth past the model's context is refused, naming both figures.
func TestBenchCtx(t *testing.T) {
	model := filepath.Join(modeltest.ModelsDir(t), "stories260K.gguf")
	db := filepath.Join(t.TempDir(), "a.db")
	code, out, stderr := run(t, "bench", "--model", model, "--reps", "2", "--widths", "1,4", "-n", "8", "--ctx", "64,1500", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// the measurement is kept as the model's newest at depth: the pair's
	// state reads it back (what the Profile screen shows)
	b, err := profiles.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.PairState(context.Background(), profiles.PairSpec{Target: model, Threads: 2})
	b.Close()
	if err != nil || st.Depth == nil || len(st.Depth.Depths) != 2 || st.Depth.Depths[1].Context != 1500 {
		t.Fatalf("kept: %+v, %v", st, err)
	}
	for _, want := range []string{"at depth: decode runs of 8 tokens", "roofline tok/s", "passes after 64: W=1 ", "passes after 1500: W=1 "} {
		if !strings.Contains(out, want) {
			t.Errorf("bench --ctx output lacks %q:\n%s", want, out)
		}
	}
	// each stage says how far it is on stderr, the long ones what is left:
	// 1500 positions are prefilled in three chunks of at most 512
	for _, want := range []string{"decode runs: 1 of 2", "tokens/s; about", "decode runs: 2 of 2", "verify passes: ", "context 1500: prefill: 1 of 3",
		"context 1500: prefill: 3 of 3", "context 1500: decode runs: 2 of 2", "context 64: verify passes: ",
		// and what is left of the whole bench, stage by stage
		"decode runs: 1 of 2 ", "; bench: about ", " left in all"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("bench --ctx progress lacks %q:\n%s", want, stderr)
		}
	}
	code, out, stderr = run(t, "bench", "--model", model, "--reps", "2", "--widths", "1,4", "-n", "8", "--ctx", "64,1500", "--json", "--no-store")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		WeightBytes float64 `json:"weight_bytes"`
		Bandwidth   float64 `json:"bandwidth_bytes_per_s"`
		Depths      []struct {
			Context  int       `json:"context"`
			Decode   []float64 `json:"decode_tokens_per_s"`
			Median   float64   `json:"decode_median_tokens_per_s"`
			KVRead   float64   `json:"kv_read_bytes_per_token"`
			Roofline float64   `json:"roofline_tokens_per_s"`
			Share    float64   `json:"roofline_share"`
			Prefill  float64   `json:"prefill_tokens_per_s"`
			Passes   []struct {
				W int `json:"w"`
			} `json:"verify_curve"`
		} `json:"depths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(r.Depths) != 2 || r.Depths[0].Context != 64 || r.Depths[1].Context != 1500 {
		t.Fatalf("depths %+v, want 64 and 1500", r.Depths)
	}
	// stories260K: 5 layers of 4 kv heads of 8 dims, float32 keys and
	// values: 1280 bytes a position; a run of 8 tokens reads the depth
	// and 1..7 positions after it, 4 more on average
	for _, d := range r.Depths {
		if want := float64(d.Context+4) * 1280; d.KVRead != want {
			t.Errorf("depth %d: %v KV bytes a step, want %v", d.Context, d.KVRead, want)
		}
		roof := r.Bandwidth / (r.WeightBytes + d.KVRead) // to the nanosecond a token
		if !(d.Prefill > 0) {
			t.Errorf("depth %d: prefill %v tokens/s", d.Context, d.Prefill)
		}
		if math.Abs(d.Roofline-roof) > roof*1e-4 || len(d.Decode) != 2 || d.Median != d.Decode[1] || math.Abs(d.Share-d.Median/d.Roofline) > 1e-9 {
			t.Errorf("depth %d: roofline %v (want %v), runs %v, median %v, share %v", d.Context, d.Roofline, roof, d.Decode, d.Median, d.Share)
		}
		if len(d.Passes) != 2 || d.Passes[0].W != 1 || d.Passes[1].W != 4 {
			t.Errorf("depth %d: passes %+v, want W=1 and W=4", d.Context, d.Passes)
		}
	}
	code, _, stderr = run(t, "bench", "--model", model, "--reps", "1", "--widths", "1", "-n", "8", "--ctx", "2045")
	if code == 0 || !strings.Contains(stderr, "--ctx 2045") || !strings.Contains(stderr, "(2053) exceed the model's context of 2048") {
		t.Errorf("a depth past the context: exit %d, %s", code, stderr)
	}
	if code, _, stderr := run(t, "bench", "--model", model, "--ctx", "1,x"); code != 2 || !strings.Contains(stderr, "--ctx") {
		t.Errorf("bad depths: exit %d, %s", code, stderr)
	}
}
