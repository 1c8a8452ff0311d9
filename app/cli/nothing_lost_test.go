package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
)

// nothingLost is a database with a tuned plan of stories260K with n-gram
// drafting, and the files around it the cases below aim at.
type nothingLost struct {
	dir, db, target, config string
}

func newNothingLost(t *testing.T) *nothingLost {
	t.Helper()
	f := &nothingLost{dir: t.TempDir()}
	f.db = filepath.Join(f.dir, "a.db")
	f.target = modeltest.Stories260K(t)
	if code, _, stderr := run(t, "tune", "--target", f.target, "--draft-ngram", "2", "--alpha", "0.7", "--db", f.db, "--top", "1"); code != 0 {
		t.Fatalf("tune: %s", stderr)
	}
	f.config = filepath.Join(f.dir, "config.yaml")
	if code, _, stderr := run(t, "export", "--target", f.target, "--draft-ngram", "2", "--db", f.db, "-o", f.config); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	return f
}

// intact checks the database still reads (its runs and plan) and the
// target still holds the model's bytes.
func (f *nothingLost) intact(t *testing.T, target []byte, what string) {
	t.Helper()
	if code, _, stderr := run(t, "runs", "--db", f.db); code != 0 {
		t.Errorf("%s: the database no longer reads: %s", what, stderr)
	}
	if code, _, stderr := run(t, "export", "--target", f.target, "--draft-ngram", "2", "--db", f.db, "-o", filepath.Join(f.dir, "again.yaml")); code != 0 {
		t.Errorf("%s: the database lost its plan: %s", what, stderr)
	}
	if b, _ := os.ReadFile(f.target); !bytes.Equal(b, target) {
		t.Errorf("%s: the model file changed", what)
	}
}

// TestOutputsCannotDestroyInputs: an output path naming an input of the
// same command (the database, the model, the trace onto the database, by
// another name too) is refused and the input stays as it was; a trace is
// not touched by a run refused before it starts, and a symlink there is
// refused, not written through; a 0600 output stays 0600; a FIFO stays a
// FIFO.
func TestOutputsCannotDestroyInputs(t *testing.T) {
	f := newNothingLost(t)
	model, _ := os.ReadFile(f.target)
	alias := filepath.Join(f.dir, "alias.db")
	if err := os.Link(f.db, alias); err != nil {
		t.Fatal(err)
	}
	pair := []string{"--target", f.target, "--draft-ngram", "2", "--db", f.db}
	for _, c := range [][]string{
		append([]string{"export", "-o", f.db}, pair...),
		append([]string{"export", "-o", alias}, pair...),
		append([]string{"export", "-o", f.target}, pair...),
		append([]string{"export", "-o", f.db + "-checked"}, pair...),
		append([]string{"tune", "--alpha", "0.7", "--top", "1", "-o", f.db}, pair...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--trace", f.db}, pair...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--trace", f.target}, pair...),
		{"run", "--config", f.config, "--prompt", "Once", "-n", "4", "--db", f.db, "--trace", f.config},
	} {
		code, _, stderr := run(t, c...)
		if code == 0 || !strings.Contains(stderr, "refused") {
			t.Errorf("%v: exit %d: %s", c, code, stderr)
		}
		f.intact(t, model, strings.Join(c[:3], " "))
	}
	if b, _ := os.ReadFile(f.config); !strings.Contains(string(b), "speculation:") {
		t.Error("the replayed config was overwritten by its trace")
	}

	// a run refused before it starts leaves its trace file as it was
	trace := filepath.Join(f.dir, "trace.jsonl")
	os.WriteFile(trace, []byte("an older trace"), 0o644)
	if code, _, _ := run(t, "run", "--prompt", "Once", "--trace", trace, "--db", f.db); code == 0 {
		t.Fatal("a run without a target succeeded")
	}
	if b, _ := os.ReadFile(trace); string(b) != "an older trace" {
		t.Errorf("a refused run truncated its trace: %q", b)
	}
	// a symlink at the trace is refused, the link and its target kept
	victim := filepath.Join(f.dir, "victim.txt")
	os.WriteFile(victim, []byte("precious"), 0o644)
	os.Remove(trace)
	os.Symlink(victim, trace)
	if code, _, stderr := run(t, append([]string{"run", "--prompt", "Once", "-n", "8", "--quiet", "--trace", trace}, pair...)...); code == 0 || !strings.Contains(stderr, "symbolic link") {
		t.Fatalf("run with a trace at a symlink: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the trace was written through a symlink: %q", b)
	}
	if st, err := os.Lstat(trace); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink at the trace was replaced: %v", err)
	}
	os.Remove(trace)
	if code, _, stderr := run(t, append([]string{"run", "--prompt", "Once", "-n", "8", "--quiet", "--trace", trace}, pair...)...); code != 0 {
		t.Fatalf("run with a trace: %s", stderr)
	}
	if b, _ := os.ReadFile(trace); !strings.Contains(string(b), `"prompt"`) {
		t.Errorf("trace holds %q", b)
	}

	// an existing 0600 output keeps its permissions; a FIFO is refused
	secret := filepath.Join(f.dir, "secret.yaml")
	os.WriteFile(secret, nil, 0o600)
	if code, _, stderr := run(t, append([]string{"export", "-o", secret}, pair...)...); code != 0 {
		t.Fatal(stderr)
	}
	if st, _ := os.Stat(secret); st.Mode().Perm() != 0o600 {
		t.Errorf("export onto a 0600 file left %v", st.Mode().Perm())
	}
	fifo := filepath.Join(f.dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		code, _, stderr := run(t, append([]string{"export", "-o", fifo}, pair...)...)
		if st, _ := os.Lstat(fifo); code == 0 || !strings.Contains(stderr, "FIFO") || st.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("export onto a FIFO: exit %d %s, now %v", code, stderr, st.Mode())
		}
	}
	if code, _, stderr := run(t, append([]string{"export", "-o", ""}, pair...)...); code == 0 || !strings.Contains(stderr, "no output file") {
		t.Errorf("export -o '': exit %d %s", code, stderr)
	}
}

// TestHostileInputsRefusedQuickly: devices and endless files named as a
// config, a drafter or a prompt suite, non-finite or absurd numbers, and
// sizes that would take minutes or gigabytes are each refused at once with
// a message naming what is wrong.
func TestHostileInputsRefusedQuickly(t *testing.T) {
	dir := t.TempDir()
	target := modeltest.Stories260K(t)
	db := filepath.Join(dir, "a.db")
	empty := filepath.Join(dir, "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	nanPlan := filepath.Join(dir, "nan.yaml")
	os.WriteFile(nanPlan, []byte("models: {target: {path: "+target+"}, draft: {kind: ngram, ngram: 2}}\nspeculation: {strategy: chain, gamma: 2}\npredicted: {speedup: .nan}\n"), 0o644)
	prompts := modeltest.StoryPromptsFile(t)
	partial := filepath.Join(dir, "demo")
	os.MkdirAll(partial, 0o755)
	os.WriteFile(filepath.Join(partial, "demo-target.gguf"), []byte("mine"), 0o644)
	base := []string{"run", "--target", target, "--prompt", "Once", "-n", "4", "--db", db}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--config", "/dev/zero", "--prompt", "x", "--db", db}, "not a regular file"},
		{[]string{"drafters", "import", "/dev/urandom", "--db", db}, "not a regular file"},
		{append(append([]string{}, base...), "--draft-hidden", "/dev/zero"), "not a regular file"},
		{[]string{"run", "--target", target, "--draft-ngram", "2", "--prompts", "/dev/zero", "--db", db}, "not a regular file"},
		{[]string{"run", "--config", empty, "--prompt", "x", "--db", db}, "empty"},
		{[]string{"run", "--config", nanPlan, "--prompt", "x", "--db", db}, "predicted.speedup"},
		{[]string{"generate", "--model", target, "--temp", "Inf"}, "temperature"},
		{[]string{"generate", "--model", target, "--temp", "1e39"}, "temperature"},
		{[]string{"generate", "--model", target, "--temp", "0.5", "--top-p", "NaN"}, "top-p"},
		{[]string{"generate", "--model", target, "--temp", "0.5", "--min-p", "NaN"}, "min-p"},
		{append(append([]string{}, base...), "--draft-ngram", "2", "--strategy", "egt", "--depth-policy", "threshold", "--depth-min", "NaN"), "depth-min"},
		{append(append([]string{}, base...), "--draft-ngram", "1000000000"), "at most 1024"},
		{append(append([]string{}, base...), "--draft-ngram", "2", "--strategy", "tree", "--widths", "4096"), "512"},
		{append(append([]string{}, base...), "--draft-ngram", "2", "--strategy", "egt", "--egt-widths", "64,64,64,64", "--branch", "64", "--w-max", "4096"), "512"},
		{[]string{"profile", "--target", target, "--draft-ngram", "2", "--max-w", "4096", "--db", db}, "--max-w 4096"},
		{[]string{"profile", "--target", target, "--draft-ngram", "2", "--ctx", "1000000000", "--db", db}, "--ctx 1000000000"},
		{[]string{"profile", "--target", target, "--draft-ngram", "2", "--seqs", "0", "--db", db}, "--seqs 0"},
		{[]string{"bench", "--model", target, "--reps", "1000000000"}, "--reps"},
		{[]string{"train", "drafter", "--target", target, "--prompts", empty, "--epochs", "1000000000", "--db", db}, "epochs"},
		{[]string{"train", "drafter", "--target", target, "--prompts", empty, "--tokens", "1000000000", "--db", db}, "tokens"},
		{[]string{"train", "drafter", "--target", target, "--prompts", empty, "--clip", "NaN", "--db", db}, "clip"},
		{[]string{"demo", "-o", partial}, "--force"},
		{[]string{"calibrate", "--target", target, "--draft-ngram", "2", "--prompts", prompts, "-n", "1000000000", "--db", db}, "exceed the model's context"},
	} {
		start := time.Now()
		code, _, stderr := run(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("%v took %v to refuse", c.args, d) // a bound on hanging, not a timing assertion
		}
	}
	if b, _ := os.ReadFile(filepath.Join(partial, "demo-target.gguf")); string(b) != "mine" {
		t.Error("demo replaced a file without --force")
	}
}

// TestConfigFlagsNotDropped: a flag that would change what config.yaml
// holds (the plan, the sampling, the models) is refused beside --config,
// never dropped silently; one the config leaves to the run overrides it
// with a note; the prediction's source is named.
func TestConfigFlagsNotDropped(t *testing.T) {
	f := newNothingLost(t)
	code, _, stderr := run(t, "run", "--config", f.config, "--strategy", "tree", "--widths", "3,2", "--temp", "0.9", "--prompt", "Once", "-n", "4", "--db", f.db)
	if code != 2 || !strings.Contains(stderr, "--strategy") || !strings.Contains(stderr, "--widths") || !strings.Contains(stderr, "--temp") {
		t.Errorf("plan flags beside --config: exit %d: %s", code, stderr)
	}
	code, out, stderr := run(t, "run", "--config", f.config, "--threads", "1", "--prompt", "Once", "-n", "4", "--db", f.db, "--quiet")
	if code != 0 || !strings.Contains(stderr, "note: --threads 1 overrides") {
		t.Errorf("--threads beside --config: exit %d: %s", code, stderr)
	}
	if strings.Contains(out, "()") {
		t.Errorf("the prediction's source is left empty:\n%s", out)
	}
}
