package profiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/hidden"
	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
)

// TestTraceFailureFailsTheRun: a trace that could not be put in place
// exited 0 with no file (the error was assigned to a variable that
// shadowed the run's result). Here the trace's name is taken by a folder
// while the run decodes, so the final rename fails: the run fails naming
// --trace.
func TestTraceFailureFailsTheRun(t *testing.T) {
	ps := PairSpec{Target: modeltest.Stories260K(t), NGram: 2, Threads: 1}
	b := openBench(t)
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	blocked := false
	_, err := b.Run(context.Background(), ps, RunOptions{Plan: spec.Plan{Strategy: "chain", Gamma: 2}, MaxTokens: 8, Prompts: []string{"Once"}, NoStore: true, Trace: trace,
		OnStep: func(int, spec.Step) {
			if !blocked {
				blocked = os.Mkdir(trace, 0o755) == nil
			}
		}})
	if !blocked {
		t.Fatal("the run took no step")
	}
	if err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Fatalf("a trace that could not be written: %v", err)
	}
	// the negative control: the same run with its trace free succeeds
	os.Remove(trace)
	if _, err := b.Run(context.Background(), ps, RunOptions{Plan: spec.Plan{Strategy: "chain", Gamma: 2}, MaxTokens: 8, Prompts: []string{"Once"}, NoStore: true, Trace: trace}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(trace); !strings.Contains(string(data), `"prompt"`) {
		t.Errorf("trace holds %q", data)
	}
}

// TestDrafterFileHashRecorded: a config.yaml recorded the SHA-256 of its
// model files, not of a hidden-state drafter file, so a changed drafter
// was used silently. The export records it like a model's, and a replay
// refuses the drafter once it changed, unless allowed.
func TestDrafterFileHashRecorded(t *testing.T) {
	target, m, hfile := storiesWithHidden(t)
	ctx := context.Background()
	b := openBench(t)
	ps := PairSpec{Target: target, DraftHidden: hfile, Threads: 1}
	tr, err := b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, NoRecheck: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the export of a plan that drafts (this untrained drafter may not
	// pay on its own)
	ex, err := b.config(ctx, ps, tr.Inputs, costmodel.Prediction{Plan: spec.Plan{Strategy: "chain", Gamma: 2}, Speedup: 1.1, AAL: 1.5}, "a test")
	if err != nil {
		t.Fatal(err)
	}
	d := ex.Config.Models.Draft
	data, _ := os.ReadFile(hfile)
	if sum := sha256.Sum256(data); d.Kind != "hidden" || d.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("the exported drafter: %+v; want kind hidden with the file's SHA-256", d)
	}
	c, err := config.Parse("config.yaml", ex.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replayConfig(ctx, c, b.path, false); err != nil {
		t.Fatalf("the unchanged drafter: %v", err)
	}
	other, err := hidden.New(m, 16, m.Layers/2, 2) // another drafter in its place
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Save(hfile, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := replayConfig(ctx, c, b.path, false); !errors.Is(err, errModelChanged) || !strings.Contains(err.Error(), "models.draft.sha256") {
		t.Errorf("a changed drafter: %v", err)
	}
	if _, err := replayConfig(ctx, c, b.path, true); err != nil {
		t.Errorf("a changed drafter allowed: %v", err)
	}
}
