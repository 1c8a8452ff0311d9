package profiles

import (
	"testing"

	"arborist/profiles/trainsize"
)

// TestPredictorWork: the catalog offers the default size's drafter
// settings; a depth predictor's options take their size's work, the
// tokens they name over it, and refuse an unknown size.
func TestPredictorWork(t *testing.T) {
	if got, want := Choices().DrafterSettings, trainsize.DefaultDrafterSettings(); got.MaxPrompts != want.MaxPrompts || got.Tokens != want.Tokens ||
		got.Samples != want.Samples || got.Epochs != want.Epochs || got.MaxPrompts != 160 {
		t.Errorf("catalog drafter settings %+v", got)
	}
	if w, _ := (PredictorOptions{Tokens: 40}).work(); w.Tokens != 40 || w.Prompts != 100 {
		t.Errorf("options' tokens over the size's: %+v", w)
	}
	if _, err := (PredictorOptions{Size: "huge"}).work(); err == nil {
		t.Error("unknown size in the options accepted")
	}
}
