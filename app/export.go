package app

import (
	"context"
	"os"
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
	cfg         *profiles.Config
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
	e.Save = widget.NewButton("Save config.yaml...", e.save)
	e.CopyYAML = widget.NewButton("Copy YAML", func() { e.copy(e.YAML.Text) })
	e.CopyEq = widget.NewButton("Copy settings", func() { e.copy(e.Equivalents.Text) })
	s.OnChange(e.Update)
	e.Update()
	return e
}

// Title is the tab name.
func (e *ExportScreen) Title() string { return "Export" }

// Content lays the screen out.
func (e *ExportScreen) Content() fyne.CanvasObject {
	top := container.NewHBox(e.Save, e.CopyYAML, e.CopyEq, e.Status)
	return container.NewBorder(top, nil, nil, nil, container.NewVSplit(e.YAML, e.Equivalents))
}

// Update rebuilds the config from the session's best plan.
func (e *ExportScreen) Update() {
	b := e.s.Best
	if b == nil || e.s.Spec.Target == "" {
		e.cfg = nil
		e.YAML.SetText("# Load models, profile, and open the Speedup model screen: the best plan appears here.")
		e.Equivalents.SetText("")
		return
	}
	hw := profiles.DetectHardware()
	c := profiles.NewConfig(e.s.Spec, profiles.ConfigHardware(hw), hw.Cores, 2048, "", *b)
	y, err := c.Marshal()
	if err != nil {
		e.Status.SetText(err.Error())
		return
	}
	e.cfg = c
	e.YAML.SetText(string(y))
	e.Equivalents.SetText(c.Equivalents())
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
	cfg, err := profiles.ParseConfig(path, []byte(e.YAML.Text))
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(e.YAML.Text), 0o644); err != nil {
		return err
	}
	e.cfg = cfg
	if st, err := e.s.Store(context.Background()); err == nil {
		st.SaveExport(context.Background(), 0, e.YAML.Text)
	}
	e.Status.SetText("saved " + path)
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
	d.Show()
}
