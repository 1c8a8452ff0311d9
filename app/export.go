package app

import (
	"context"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// ExportScreen shows the best plan as config.yaml, saves it, and gives the
// closest llama.cpp / vLLM / SGLang settings with Copy buttons.
type ExportScreen struct {
	s           *Session
	YAML        *widget.Entry
	Equivalents *widget.Entry
	Save        *widget.Button
	CopyYAML    *widget.Button
	CopyEq      *widget.Button
	Status      *widget.Label
	// Provenance says what the plan was computed from, or warns that
	// some of it is assumed, not measured.
	Provenance *widget.Label
	cfg        *profiles.Config
	planID     int64
}

// NewExportScreen builds the screen.
func NewExportScreen(s *Session) *ExportScreen {
	e := &ExportScreen{s: s}
	e.YAML = widget.NewMultiLineEntry()
	e.YAML.TextStyle = fyne.TextStyle{Monospace: true}
	e.YAML.SetMinRowsVisible(14)
	e.Equivalents = widget.NewMultiLineEntry()
	e.Equivalents.TextStyle = fyne.TextStyle{Monospace: true}
	e.Equivalents.Wrapping = fyne.TextWrapWord
	e.Status = widget.NewLabel("")
	e.Provenance = widget.NewLabel("No plan yet: nothing is predicted before the pair is profiled, calibrated and tuned.")
	e.Provenance.Wrapping = fyne.TextWrapWord
	e.Provenance.Importance = widget.WarningImportance
	e.Save = widget.NewButton("Save config.yaml...", e.save)
	e.CopyYAML = widget.NewButton("Copy YAML", func() { e.copy(e.YAML.Text) })
	e.CopyEq = widget.NewButton("Copy settings", func() { e.copy(e.Equivalents.Text) })
	e.YAML.SetText("# Load models, profile, calibrate and tune (Speedup model screen): the tuned plan appears here.")
	return e
}

// Title is the tab name.
func (e *ExportScreen) Title() string { return "Export" }

// Content lays the screen out.
func (e *ExportScreen) Content() fyne.CanvasObject {
	top := container.NewVBox(container.NewHBox(e.Save, e.CopyYAML, e.CopyEq, e.Status), e.Provenance)
	return container.NewBorder(top, nil, nil, nil, container.NewVSplit(e.YAML, e.Equivalents))
}

// Update rebuilds the export in the background (see Reload).
func (e *ExportScreen) Update() {
	go e.Reload()
}

// Reload renders the pair's newest tuned plan through the workflow core,
// exactly as `arborist export` does for the same database. It blocks; call
// it off the UI goroutine.
func (e *ExportScreen) Reload() error {
	ps := e.s.PairSpec()
	var ex *profiles.Export
	err := fmt.Errorf("no models chosen")
	if ps.Target != "" {
		var b *profiles.Bench
		if b, err = e.s.Bench(context.Background()); err == nil {
			ex, err = b.Export(context.Background(), ps)
		}
	}
	fyne.DoAndWait(func() {
		if err != nil {
			e.cfg, e.planID = nil, 0
			e.YAML.SetText("# Load models, profile, calibrate and tune (Speedup model screen): the tuned plan appears here.\n# " + err.Error())
			e.Equivalents.SetText("")
			e.Provenance.Importance = widget.WarningImportance
			e.Provenance.SetText("No plan yet: nothing is predicted before the pair is profiled, calibrated and tuned.")
			return
		}
		e.Provenance.Importance = widget.MediumImportance
		text := "Computed from: " + ex.Provenance + "."
		if ex.Assumed {
			e.Provenance.Importance = widget.WarningImportance
			text = "⚠ Some inputs are assumed, not measured: the predicted speedup is a guess. " + text
		}
		e.Provenance.SetText(text)
		e.cfg, e.planID = ex.Config, ex.PlanID
		e.YAML.SetText(string(ex.YAML))
		e.Equivalents.SetText(ex.Equivalents)
	})
	return err
}

func (e *ExportScreen) copy(text string) {
	if e.s.Win != nil {
		e.s.App.Clipboard().SetContent(text)
	}
	e.Status.SetText("copied at " + time.Now().Format("15:04:05"))
}

// SaveTo validates the (possibly edited) YAML and writes it to path; the
// export is recorded in the database.
func (e *ExportScreen) SaveTo(path string) error {
	b, err := e.s.Bench(context.Background())
	if err != nil {
		return err
	}
	if err := b.Write(context.Background(), e.planID, []byte(e.YAML.Text), path); err != nil {
		return err
	}
	e.Status.SetText("saved " + path)
	e.s.Changed() // the export is a step of the guide
	return nil
}

func (e *ExportScreen) save() {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		path := w.URI().Path()
		w.Close()
		e.s.ShowError(e.SaveTo(path))
	}, e.s.Win)
	d.SetFileName("config.yaml")
	startIn(d, "")
	d.Show()
}

// Shown renders the pair's newest plan when the tab is selected.
func (e *ExportScreen) Shown() { e.Update() }
