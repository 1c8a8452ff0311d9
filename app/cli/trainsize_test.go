package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
)

// TestTrainSizeFlags: both trainers take --size from the core's sizes and
// refuse another, naming the flag and the sizes, before anything is
// loaded; a resumed drafter keeps its size; --prompts-max is checked. The
// help lists each size with the work it asks for.
func TestTrainSizeFlags(t *testing.T) {
	dir := t.TempDir()
	target := modeltest.Stories260K(t)
	db := filepath.Join(dir, "a.db")
	prompts := filepath.Join(dir, "p.txt")
	os.WriteFile(prompts, []byte("Once upon a time\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "predictor", "--target", target, "--draft-ngram", "2", "--prompts", prompts, "--size", "huge", "--db", db}, `--size "huge": choose small, medium, large`},
		{[]string{"train", "predictor", "--target", target, "--draft-ngram", "2", "--prompts", prompts, "--size", "", "--db", db}, `--size "": choose small, medium, large`},
		{[]string{"train", "drafter", "--target", target, "--prompts", prompts, "--size", "Large", "--db", db}, `--size "Large": choose small, medium, large`},
		{[]string{"train", "drafter", "--resume", "1", "--size", "medium", "--db", db}, "--size with --resume"},
		{[]string{"train", "drafter", "--target", target, "--prompts", prompts, "--prompts-max", "-1", "--db", db}, "at most -1 prompts"},
	} {
		code, _, stderr := run(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %.600s", c.args[:2], code, stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused training opened the database")
	}
	_, _, help := run(t, "train", "drafter", "-h")
	for _, want := range []string{"small (160 prompts x 2 samples x 128 tokens, 12 epochs)", "large (every prompt and the whole corpus x 2 samples x 128 tokens, 12 epochs)", "--prompts-max"} {
		if !strings.Contains(help, want) {
			t.Errorf("train drafter -h: no %q\n%s", want, help)
		}
	}
	_, _, help = run(t, "train", "predictor", "-h")
	if !strings.Contains(help, "small (100 prompts x 64 tokens), medium (300 prompts x 64 tokens)") {
		t.Errorf("train predictor -h:\n%s", help)
	}
	// the negative control: a known size passes the flags and reaches the
	// pair (no calibration here)
	code, _, stderr := run(t, "train", "predictor", "--target", target, "--draft-ngram", "2", "--prompts", prompts, "--size", "medium", "--db", db)
	if code != 1 || !strings.Contains(stderr, "calibrat") {
		t.Errorf("--size medium: exit %d: %.600s", code, stderr)
	}
}
