package cli

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/profiles/loadtest/loadtesttest"
)

// loadConfig writes a config.yaml of a chain plan with n-gram drafting.
func loadConfig(t *testing.T) string {
	t.Helper()
	target := filepath.Join(modeltest.ModelsDir(t), "stories260K.gguf")
	p := filepath.Join(t.TempDir(), "c.yaml")
	y := "models:\n  target: {path: " + target + ", device: cpu, max_seq_len: 256, threads: 1}\n  draft: {kind: ngram, ngram: 3}\n" +
		"optimization: {draft_budget: \"3\", max_sequences: 1}\nserving: {concurrency: 1, policy: plan}\nspeculation: {strategy: chain, gamma: 3}\nsampling: {top_p: 1, seed: 1}\n"
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadTestVerb: loadtest --url drives the server there at each level
// and prints the table (text) or one JSON document, storing a run per
// level; the plan and its estimate come first on stderr.
func TestLoadTestVerb(t *testing.T) {
	f := &loadtesttest.Fake{Tokens: 4, PerChunk: 2, Usage: true}
	ts := httptest.NewServer(f.Handler())
	defer ts.Close()
	cfg := loadConfig(t)
	db := filepath.Join(t.TempDir(), "l.db")
	code, out, stderr := run(t, "loadtest", "--config", cfg, "--url", ts.URL, "--concurrency", "2,1", "--rounds", "2", "-n", "4", "--requests", "1", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// every level sends each of the eight default prompts: one client
	// eight requests a round, two clients four each
	if !strings.Contains(stderr, "load test: [1 2] at once, 2 rounds, servers [url]: 32 requests of 4 tokens") {
		t.Errorf("no plan up front:\n%s", stderr)
	}
	for _, w := range []string{"TTFT ms (p90)", "\n1    url ", "\n2    url ", "load test done in"} {
		if !strings.Contains(out, w) {
			t.Errorf("the table lacks %q:\n%s", w, out)
		}
	}
	// warm-up requests (one a client) aside, every level's requests
	// reached the server
	if f.Requests() != 2*(8+2*4)+2*(1+2) {
		t.Errorf("%d requests served, want 32 and 6 warm-ups", f.Requests())
	}
	code, out, stderr = run(t, "loadtest", "--config", cfg, "--url", ts.URL, "--concurrency", "3", "--rounds", "1", "-n", "4", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var doc struct {
		Servers []string `json:"servers"`
		Levels  []struct {
			Server      string  `json:"server"`
			Concurrency int     `json:"concurrency"`
			TPS         float64 `json:"tokens_per_s"`
			Requests    int     `json:"requests"`
			Tokens      int     `json:"tokens"`
			RunID       int64   `json:"run_id"`
		} `json:"levels"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	if len(doc.Levels) != 1 || doc.Levels[0].Concurrency != 3 || doc.Levels[0].Requests != 9 || doc.Levels[0].Tokens != 36 || doc.Levels[0].RunID != 3 || doc.Levels[0].TPS <= 0 {
		t.Errorf("--json: %+v", doc)
	}
	code, out, _ = run(t, "runs", "--json", "--db", db)
	if code != 0 || strings.Count(out, `"load": {`) != 3 {
		t.Errorf("runs --json lists %d load runs, want 3:\n%s", strings.Count(out, `"load": {`), out)
	}
}

// TestLoadTestVerbUsage: levels, rounds and tokens out of bounds, a
// missing config and --url with --llama-cpp are usage errors.
func TestLoadTestVerbUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"loadtest"}, "--config is required"},
		{[]string{"loadtest", "--config", "c.yaml", "--concurrency", "1,0"}, "--concurrency 0: want 1 to 256"},
		{[]string{"loadtest", "--config", "c.yaml", "--concurrency", "1,,4"}, "--concurrency"},
		{[]string{"loadtest", "--config", "c.yaml", "--concurrency", "512"}, "--concurrency 512"},
		{[]string{"loadtest", "--config", "c.yaml", "--rounds", "0"}, "--rounds 0"},
		{[]string{"loadtest", "--config", "c.yaml", "-n", "0"}, "-n 0"},
		{[]string{"loadtest", "--config", "c.yaml", "--url", "http://x", "--llama-cpp", "/x"}, "give one"},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.msg)
		}
	}
}
