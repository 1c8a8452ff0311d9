package app

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
)

// TestValidateInGUI: after a tune, Validate top 5 runs the best distinct
// plans and plain decoding on the prompt suite, shows predicted against
// measured with the measured best marked, and picks that plan for Run and
// Export.
func TestValidateInGUI(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	wb := newBench(t)
	s, sp := wb.Session, wb.Speedup
	s.SetModels(filepath.Join(dir, "stories260K.gguf"), modeltest.NoisyDraft(t))
	waitFor(t, "the pair's stored results", func() bool { return s.idle() && s.State != nil })
	if !sp.Validate.Disabled() {
		t.Fatal("Validate is enabled before any tune")
	}
	// a tune's ranking, as the model makes it from assumed figures
	flat := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 64, Median: 14 * time.Millisecond}}
	preds := costmodel.Search(costmodel.Uniform(0.7, 0.4, 8, 3), costmodel.Costs{Verify: flat, Draft: flat[:1]}, costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 8})
	// the list shows 25; these are one plan 25 times over, so the five
	// distinct plans must come from beyond them
	sp.SetRanked(append(slices.Repeat(preds[:1], 25), preds...))
	waitFor(t, "the first plan stored", func() bool {
		return s.idle() && (sp.stored == preds[0].Plan.String() || strings.Contains(sp.WorkStatus.Text, "could not be stored"))
	})
	if sp.Validate.Disabled() {
		t.Fatal("Validate stays disabled with ranked plans")
	}
	sp.Prompts.SetText(filepath.Join(dir, "..", "prompts", "stories.txt"))
	sp.CalTokens.SetText("12")
	// the inputs a tune left (re-checked costs) stay: a validation stores
	// only runs, so it does not read the stored ones back over them
	kept := &profiles.Inputs{Profiled: true, Costs: costmodel.Costs{Verify: flat, Draft: flat[:1]}}
	s.Inputs = kept
	test.Tap(sp.Validate)
	waitFor(t, "the validation", func() bool {
		return s.idle() && (!sp.busy && sp.Validation.Text != "" || strings.Contains(sp.WorkStatus.Text, "failed"))
	})
	if want := len(costmodel.Distinct(preds, 5)); want < 2 || !strings.Contains(sp.Validation.Text, fmt.Sprintf("\n%d. ", want)) {
		t.Errorf("validated plans: want %d distinct ones listed:\n%s", want, sp.Validation.Text)
	}
	if s.Inputs != kept {
		t.Error("the validation replaced the session's inputs with the stored ones")
	}
	text := sp.Validation.Text
	if !strings.Contains(text, "plain decoding:") || !strings.Contains(text, "<- measured best") || strings.Count(text, "predicted ") < 2 ||
		!strings.Contains(text, "predicted against measured: tokens a step") || strings.Count(text, " (median of 3 rounds, range ") < 2 {
		t.Fatalf("validation view:\n%s\nstatus: %s", text, sp.WorkStatus.Text)
	}
	if !strings.HasPrefix(sp.WorkStatus.Text, "Validated ") && !strings.Contains(sp.WorkStatus.Text, "Picked the measured best") {
		t.Errorf("status: %s", sp.WorkStatus.Text)
	}
	// the marked line's plan is the session's plan now
	var marked string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasSuffix(line, "<- measured best") {
			marked = line
		}
	}
	if s.Tuned == nil || !strings.Contains(marked, s.Tuned.Plan.String()+":") {
		t.Errorf("measured best %q, session plan %v", marked, s.Tuned)
	}

	// the validation is shown again after a restart, with its plan chosen
	picked := s.Tuned.Plan
	waitFor(t, "the measured best stored", func() bool { return s.idle() && sp.stored == picked.String() })
	wb = restart(t, wb)
	s, sp = wb.Session, wb.Speedup
	if sp.Validation.Text != text {
		t.Errorf("after a restart the validation reads:\n%s\nwant:\n%s", sp.Validation.Text, text)
	}
	if s.Tuned == nil || !samePlan(s.Tuned.Plan, picked) || sp.Validate.Disabled() {
		t.Errorf("after a restart the chosen plan is %v, want %s (validate disabled %v)", s.Tuned, picked, sp.Validate.Disabled())
	}
	// and not once its runs are gone
	b, err := s.Bench(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteRuns(context.Background(), []int64{1}); err != nil {
		t.Fatal(err)
	}
	wb = restart(t, wb)
	if wb.Speedup.Validation.Text != "" {
		t.Errorf("a validation whose runs were deleted is shown:\n%s", wb.Speedup.Validation.Text)
	}
}
