package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCheckExportVerb: check-export runs the stand-in llama.cpp binaries
// of testdata/llama-cpp and ends with the speedup line; --json gives the
// rounds and the commands.
func TestCheckExportVerb(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := `models:
  target: {path: /m/target.gguf, device: cpu, max_seq_len: 512, threads: 2}
  draft: {kind: model, path: /m/draft.gguf, device: cpu, threads: 2}
speculation: {strategy: egt, egt_widths: [1, 1, 1, 1, 1, 1], branch: 1, w_max: 6, depth_policy: threshold, depth_min: 0.2}
sampling: {temperature: 0, top_p: 1, seed: 1}
predicted: {speedup: 1.97, aal: 3.1}
`
	prompts := filepath.Join(dir, "prompts.txt")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(prompts, []byte("Once upon a time\nThe cat\n"), 0o644)
	llama, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "llama-cpp"))
	db := filepath.Join(dir, "c.db")
	code, out, stderr := run(t, "check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "2", "-n", "32", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^llama\.cpp speedup: 1\.02x \(range 1\.02-1\.02\)$`).MatchString(last) {
		t.Errorf("last line %q", last)
	}
	for _, w := range []string{"round 2: plain 166.7 tokens/s, speculative 170.0 tokens/s, acceptance 67%: 1.02x", "--draft-p-min 0.2 ", "Arborist's prediction for its own engine: 1.97x", "stored as runs 1 (llama.cpp plain) and 2"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	code, out, stderr = run(t, "check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "1", "--json", "--no-store", "--db", db)
	var v struct {
		Rounds  []map[string]float64 `json:"rounds"`
		Speedup float64              `json:"speedup"`
		Spec    []string             `json:"speculative_command"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Rounds) != 1 || v.Speedup < 1 || v.Spec[0] != "llama-speculative-simple" {
		t.Errorf("--json: exit %d %s %s", code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"check-export", "--config", cfg}, "--prompts is required"},
		{[]string{"check-export", "--prompts", prompts}, "--config is required"},
		{[]string{"check-export", "--config", cfg, "--prompts", prompts, "--llama-cpp", dir, "--db", db}, "llama.cpp not found"},
	} {
		if code, _, stderr := run(t, c.args...); code == 0 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, %s", c.args, code, stderr)
		}
	}
}

// TestCheckExportTune: check-export --tune measures llama.cpp's draft
// lengths with the stand-ins (peaking at 3), ends with the best setting,
// writes it with -o into a config whose replay and export carry it, and
// refuses to write onto the config it tuned; -o without --tune is a usage
// error.
func TestCheckExportTune(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := `models:
  target: {path: /m/target.gguf, device: cpu, max_seq_len: 512, threads: 2}
  draft: {kind: model, path: /m/draft.gguf, device: cpu, threads: 2}
speculation: {strategy: chain, gamma: 6}
sampling: {temperature: 0, top_p: 1, seed: 1}
predicted: {speedup: 1.97, aal: 3.1}
`
	os.WriteFile(cfg, []byte(yaml), 0o644)
	prompts := filepath.Join(dir, "prompts.txt")
	os.WriteFile(prompts, []byte("Once upon a time\n"), 0o644)
	llama, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "llama-cpp"))
	db := filepath.Join(dir, "c.db")
	tuned := filepath.Join(dir, "tuned.yaml")
	t.Setenv("ARBORIST_STANDIN_PEAK", "3")
	code, out, stderr := run(t, "check-export", "--tune", "-o", tuned, "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "2", "-n", "32", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "llama.cpp best: --draft-max 3 --draft-p-min 0, 1.09x (range 1.09-1.09)" {
		t.Errorf("last line %q\n%s", last, out)
	}
	for _, w := range []string{"--draft-max 6  --draft-p-min 0     1.02x", "(the plain export's)", "<- best", "Arborist's prediction for its own engine: 1.97x", "stored as runs", "wrote " + tuned} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	b, err := os.ReadFile(tuned)
	if err != nil || !strings.Contains(string(b), "draft_max: 3") || !strings.Contains(string(b), "gamma: 6") {
		t.Errorf("tuned config: %v\n%s", err, b)
	}
	if orig, _ := os.ReadFile(cfg); string(orig) != yaml {
		t.Error("the tuned config was changed")
	}
	// the tuned file is checked as it will run in llama.cpp
	code, out, stderr = run(t, "check-export", "--llama-cpp", llama, "--config", tuned, "--prompts", prompts, "--rounds", "1", "-n", "32", "--no-store", "--db", db)
	if code != 0 || !strings.Contains(out, "--draft-max 3 ") {
		t.Errorf("checking the tuned config: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, _, stderr := run(t, "check-export", "--tune", "-o", cfg, "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "1", "-n", "8", "--no-store", "--db", db); code == 0 || !strings.Contains(stderr, cfg) {
		t.Errorf("-o onto --config: exit %d, %s", code, stderr)
	}
	if code, _, stderr := run(t, "check-export", "-o", tuned, "--config", cfg, "--prompts", prompts); code != 2 || !strings.Contains(stderr, "give --tune") {
		t.Errorf("-o without --tune: exit %d, %s", code, stderr)
	}
}
