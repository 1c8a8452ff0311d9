package app

import (
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
	"arborist/profiles/trainsize"
)

// trainSize is the size choice beside a trainer's button: the core's
// sizes (trainsize.Names), the default selected, and under it what
// the chosen size decodes and trains on, so more data is a choice whose
// cost shows before the training starts.
type trainSize struct {
	Select *widget.Select
	Cost   *widget.Label
	Row    fyne.CanvasObject // a form row's widget: the choice, then its cost
	cost   func() string     // the cost line of the settings as they are
}

// newTrainSize makes the control: choosing a size calls apply with it
// (the trainer's settings take the size's work), then cost writes the
// cost line, as it does again whenever what it depends on changes
// (Refresh).
func newTrainSize(apply func(size string), cost func() string) *trainSize {
	c := profiles.Choices()
	t := &trainSize{cost: cost, Cost: widget.NewLabel("")}
	t.Cost.Wrapping = fyne.TextWrapWord
	t.Select = widget.NewSelect(c.TrainSizes, func(size string) {
		apply(size)
		t.Refresh()
	})
	t.Select.SetSelected(c.DefaultTrainSize)
	t.Row = container.NewBorder(nil, nil, t.Select, nil, t.Cost)
	return t
}

// Refresh rewrites the cost line.
func (t *trainSize) Refresh() {
	if t.Cost != nil && t.cost != nil {
		t.Cost.SetText(t.cost())
	}
}

// drafterCostLine is the cost of training a drafter with set on the
// prompt suite file prompts (its prompts counted where it reads; the
// corpus fills the rest).
func drafterCostLine(set profiles.DrafterSettings, prompts string) string {
	given := 0
	if p := strings.TrimSpace(prompts); p != "" {
		if texts, err := profiles.ReadPrompts(p); err == nil {
			given = len(texts)
		}
	}
	return "Training data: " + trainsize.DrafterCost(given, set).String() + "."
}

// left is a progress line's time left ("" until it is known).
func left(eta time.Duration) string {
	if eta <= 0 {
		return ""
	}
	return ", about " + trainsize.Minutes(eta) + " left"
}
