package profiles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
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
