package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
	"arborist/profiles/store"
)

// TestStoppedRunKeepsTotals: a run stopped by SIGINT was
// stored as "stopped" with totals 0 though its steps were stored. The verb's
// context is what SIGINT and SIGTERM cancel (main.go); here it is cancelled
// mid-suite.
func TestStoppedRunKeepsTotals(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	tmp := t.TempDir()
	prompts := filepath.Join(tmp, "p.txt")
	os.WriteFile(prompts, []byte(strings.Repeat("Once upon a time\n", 2000)), 0o644)
	db := filepath.Join(tmp, "s.db")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, Env{Stdout: &out, Stderr: &errb}, []string{"run", "--target", target, "--draft-ngram", "2", "--strategy", "chain", "--gamma", "2",
		"--prompts", prompts, "-n", "64", "--temp", "0", "--quiet", "--db", db})
	if code == 0 {
		t.Skip("the whole suite finished before the cancel")
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background(), 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	r := runs[0]
	steps, _ := st.RunSteps(context.Background(), r.ID)
	if r.Status != "stopped" || len(steps) == 0 || r.Steps != len(steps) || r.Tokens == 0 {
		t.Fatalf("stopped run: status %s, %d steps and %d tokens recorded, %d steps stored (%s)", r.Status, r.Steps, r.Tokens, len(steps), errb.String())
	}
}

// TestHostileFlags: --threads 1000000 hung at
// 1.5 GiB, run -n 1e9 stopped silently at the context with exit 0, huge
// -n or --gamma overflowed into negative sizes, and --widths 1000,1000,1000
// built a 12 GiB tree. Each is refused at once with a clear message.
func TestHostileFlags(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	base := []string{"run", "--target", target, "--prompt", "Once", "--no-store"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", target, "--prompt", "Once", "--threads", "1000000"}, "logical cores"},
		{append(base, "--draft-ngram", "2", "--threads", "1000000"), "logical cores"},
		{append(base, "--draft-ngram", "2", "-n", "1000000000"), "exceed the model's context"},
		{append(base, "--draft-ngram", "2", "-n", "9223372036854775807"), "exceed the model's context"},
		{append(base, "--draft-ngram", "2", "--strategy", "chain", "--gamma", "9223372036854775807", "-n", "8"), "gamma"},
		{append(base, "--draft", target, "--strategy", "tree", "--widths", "1000,1000,1000", "-n", "8"), "512"},
	} {
		code, _, stderr := run(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "-922") {
			t.Errorf("%v: exit %d: %s", c.args[1:], code, stderr)
		}
	}
}

// TestTraceWriteFailure: --trace /dev/full exited 0 with every trace line
// lost; a device is now refused as a trace before the run starts.
func TestTraceWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := modeltest.ModelsDir(t)
	code, _, stderr := run(t, "run", "--target", filepath.Join(dir, "stories260K.gguf"), "--draft-ngram", "2", "--prompt", "Once", "-n", "8",
		"--no-store", "--quiet", "--trace", "/dev/full")
	if code == 0 || !strings.Contains(stderr, "--trace") || !strings.Contains(stderr, "/dev/full is a device") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestNoMmap: --no-mmap reads the models into memory
// and gives the same greedy text as the mapped run.
func TestNoMmap(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	m := filepath.Join(dir, "stories260K.gguf")
	_, mapped, _ := run(t, "generate", "--model", m, "--prompt", "Once upon a time", "-n", "24", "--temp", "0")
	code, read, stderr := run(t, "generate", "--model", m, "--prompt", "Once upon a time", "-n", "24", "--temp", "0", "--no-mmap")
	if code != 0 || read == "" {
		t.Fatalf("--no-mmap: exit %d: %s", code, stderr)
	}
	first := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
	if first(read) != first(mapped) {
		t.Errorf("--no-mmap output differs:\n%s\n%s", first(read), first(mapped))
	}
	code, _, stderr = run(t, "run", "--target", m, "--draft", m, "--strategy", "chain", "--gamma", "2", "--prompt", "Once", "-n", "8", "--no-store", "--quiet", "--no-mmap")
	if code != 0 {
		t.Errorf("run --no-mmap: exit %d: %s", code, stderr)
	}
}
