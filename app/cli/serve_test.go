package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
)

// syncBuffer is a buffer a running verb writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeVerb: `arborist serve --config` prints where it serves, answers
// a completion with the text `arborist run --config` decodes for the same
// prompt, and exits 0 when its context ends (SIGINT, SIGTERM).
func TestServeVerb(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf(`arborist_version: 0.1.0
models:
  target: {path: %q, device: cpu, max_seq_len: 512, threads: 2}
  draft: {kind: model, path: %q, device: cpu, threads: 2}
speculation: {strategy: egt, egt_widths: [1, 1, 1, 1, 1, 1], branch: 1, w_max: 6, depth_policy: threshold, depth_min: 0.2}
sampling: {temperature: 0, top_p: 1, seed: 1}
`, modeltest.Stories260K(t), modeltest.NoisyDraft(t))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "a.db")
	code, out, stderr := run(t, "run", "--config", cfg, "--prompt", "Once upon a time", "-n", "40", "--no-store", "--db", db)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`\n\n[^\n]*: \d+ tokens in `).FindStringIndex(out)
	if m == nil || !strings.HasPrefix(out, "Once upon a time") {
		t.Fatalf("run's output: %q", out)
	}
	want := strings.TrimSuffix(out[len("Once upon a time"):m[0]+1], "\n")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sout, serr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Main(ctx, Env{Stdout: &sout, Stderr: &serr}, []string{"serve", "--config", cfg, "--port", "0", "--db", db})
	}()
	var url string
	for end := time.Now().Add(30 * time.Second); url == ""; time.Sleep(5 * time.Millisecond) {
		if m := regexp.MustCompile(`at (http://\S+)/v1 `).FindStringSubmatch(sout.String()); m != nil {
			url = m[1]
		}
		select {
		case c := <-exit:
			t.Fatalf("serve exited %d: %s", c, serr.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("serve printed no address: %q %q", sout.String(), serr.String())
		}
	}
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 40}`))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Choices []struct{ Text string }
	}
	json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if len(v.Choices) != 1 || v.Choices[0].Text != want {
		t.Errorf("served %+v, run decoded %q", v, want)
	}
	cancel()
	if c := <-exit; c != 0 {
		t.Errorf("serve exited %d after its context ended: %s", c, serr.String())
	}
	if !strings.Contains(serr.String(), "POST /v1/completions 200") || !strings.Contains(serr.String(), "stopped after 1 requests (1 completed)") {
		t.Errorf("serve's log:\n%s", serr.String())
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve"}, "--config is required"},
		{[]string{"serve", "--config", cfg, "--port", "70000"}, "--port 70000"},
		{[]string{"serve", "--config", filepath.Join(dir, "none.yaml"), "--db", db}, "none.yaml"},
	} {
		if code, _, stderr := run(t, c.args...); code == 0 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, %s", c.args, code, stderr)
		}
	}
}
