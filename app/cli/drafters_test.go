package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"arborist/engine/model/modeltest"
)

// cancelOn is a writer that cancels a context once it has seen a marker.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

// TestHiddenDrafterWorkflow: train a drafter, interrupt it, resume it, run
// with it (from the store and from an exported file), import it back.
func TestHiddenDrafterWorkflow(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	prompts := filepath.Join(dir, "..", "prompts", "stories.txt")
	tmp := t.TempDir()
	db := filepath.Join(tmp, "a.db")
	train := []string{"train", "drafter", "--target", target, "--prompts", prompts, "--tokens", "48", "--samples", "2", "--epochs", "3", "--d", "16", "--db", db}

	ctx, cancel := context.WithCancel(context.Background())
	out := &cancelOn{marker: "epoch  1 ", cancel: cancel}
	var errb bytes.Buffer
	code := Main(ctx, Env{Stdout: out, Stderr: &errb}, train)
	if code == 0 || !strings.Contains(out.buf.String(), "interrupted: drafter 1 keeps its last checkpoint") ||
		!strings.Contains(out.buf.String(), "drafter data: about 160 prompts x 2 samples x 48 tokens, 3 epochs (0.") ||
		!strings.Contains(out.buf.String(), "x the default's work), estimated after the first batch\n") ||
		!strings.Contains(out.buf.String(), "in all (measured on the first batch") {
		t.Fatalf("interrupted training: code %d\n%s\n%s", code, out.buf.String(), errb.String())
	}
	code, o, e := run(t, "drafters", "list", "--db", db)
	if code != 0 || !regexp.MustCompile(`(?m)^\s+1 training`).MatchString(o) {
		t.Fatalf("list after interruption: %d\n%s%s", code, o, e)
	}
	runArgs := []string{"run", "--target", target, "--strategy", "egt", "--egt-widths", "1,2,2", "--prompts", prompts, "-n", "32", "--quiet", "--db", db}
	code, _, e = run(t, append(runArgs, "--draft-hidden", "1")...)
	if code != 1 || !strings.Contains(e, "still training") {
		t.Fatalf("run with an unfinished drafter: %d %s", code, e)
	}
	code, o, e = run(t, "train", "drafter", "--resume", "1", "--db", db)
	if code != 0 || strings.Contains(o, "epoch  1 ") || !strings.Contains(o, "epoch  3 ") || !strings.HasSuffix(o, "\n1\n") {
		t.Fatalf("resume: %d\n%s%s", code, o, e)
	}
	if !regexp.MustCompile(`training products in (f32|bf16)\n`).MatchString(o) {
		t.Errorf("the training start does not say the products' precision:\n%s", o)
	}
	code, o, e = run(t, append(train[:len(train)-2:len(train)-2], "--precision", "fp8", "--db", db)...)
	if code == 0 || !strings.Contains(e, "precision \"fp8\" must be auto, f32 or bf16") {
		t.Errorf("train drafter --precision fp8: %d\n%s%s", code, o, e)
	}
	code, o, e = run(t, "drafters", "show", "1", "--db", db)
	if code != 0 || strings.Count(o, "held-out") != 3 || !strings.Contains(o, "drafter 1 (done)") {
		t.Fatalf("show: %d\n%s%s", code, o, e)
	}
	code, o, e = run(t, append(runArgs, "--draft-hidden", "1", "--baseline")...)
	if code != 0 || !strings.Contains(o, "hidden drafter:") || !strings.Contains(o, "speedup:") {
		t.Fatalf("run --draft-hidden 1: %d\n%s%s", code, o, e)
	}
	file := filepath.Join(tmp, "d.gguf")
	if code, o, e = run(t, "drafters", "export", "1", "-o", file, "--db", db); code != 0 {
		t.Fatalf("export: %d %s%s", code, o, e)
	}
	if code, o, e = run(t, append(runArgs, "--draft-hidden", file, "--no-store")...); code != 0 || !strings.Contains(o, "hidden:d.gguf") {
		t.Fatalf("run --draft-hidden FILE: %d\n%s%s", code, o, e)
	}
	if code, o, e = run(t, "drafters", "import", file, "--db", db); code != 0 || !strings.Contains(o, "as drafter 2") {
		t.Fatalf("import: %d %s%s", code, o, e)
	}
	if code, o, e = run(t, "drafters", "rm", "2", "--db", db); code != 0 || !strings.Contains(o, "removed drafter 2") {
		t.Fatalf("rm: %d %s%s", code, o, e)
	}
	if code, _, e = run(t, "drafters", "rm", "2", "--db", db); code != 1 || !strings.Contains(e, "no drafter 2") {
		t.Errorf("rm twice: %d %s", code, e)
	}
	// bad input: a model is not a drafter; a drafter does not fit another target
	if code, _, e = run(t, "drafters", "import", target, "--db", db); code != 1 || !strings.Contains(e, "not a hidden-state drafter") {
		t.Errorf("import of a model file: %d %s", code, e)
	}
	other := modeltest.Shared(t, "models/llama-2-tiny-random.gguf")
	if code, _, e = run(t, "run", "--target", other, "--draft-hidden", file, "--prompt", "x", "--no-store"); code != 1 || !strings.Contains(e, "does not fit") {
		t.Errorf("drafter on another target: %d %s", code, e)
	}
	if code, _, e = run(t, "run", "--target", target, "--draft-hidden", "99", "--prompt", "x", "--db", db); code != 1 || !strings.Contains(e, "no drafter 99") {
		t.Errorf("missing drafter id: %d %s", code, e)
	}
}
