package app

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
)

// TestTrainSizeChoice: the Models screen offers the core's training sizes
// beside its Train button, the default chosen, with the chosen size's
// work shown before anything starts; a larger size sets the drafter's
// settings to it and says how much more it costs.
func TestTrainSizeChoice(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	m := newBench(t).Models
	m.TrainPrompts.SetText(filepath.Join(dir, "..", "prompts", "stories.txt"))
	c := profiles.Choices()
	if !slices.Equal(m.TrainSize.Select.Options, c.TrainSizes) || m.TrainSize.Select.Selected != c.DefaultTrainSize {
		t.Fatalf("sizes %q, chosen %q", m.TrainSize.Select.Options, m.TrainSize.Select.Selected)
	}
	found := false
	for _, it := range m.form.Items {
		found = found || (it.Text == "Training size" && it.Widget == m.TrainSize.Row)
	}
	if !found {
		t.Error("no Training size row in the form")
	}
	if got := m.TrainSize.Cost.Text; got != "Training data: about 160 prompts x 2 samples x 128 tokens, 12 epochs, estimated after the first batch." {
		t.Errorf("default cost %q", got)
	}
	m.TrainSize.Select.SetSelected("medium")
	if s := m.TrainSettings; s.MaxPrompts != 400 || s.Tokens != 128 || s.Epochs != 12 || !strings.Contains(m.TrainSize.Cost.Text, "about 400 prompts x 2 samples x 128 tokens, 12 epochs (2.5x the default's work)") {
		t.Errorf("medium: settings %+v, cost %q", m.TrainSettings, m.TrainSize.Cost.Text)
	}
	m.TrainSize.Select.SetSelected("large")
	if m.TrainSettings.MaxPrompts != 0 || !strings.Contains(m.TrainSize.Cost.Text, "about 1003 prompts") {
		t.Errorf("large: settings %+v, cost %q", m.TrainSettings, m.TrainSize.Cost.Text)
	}
}
