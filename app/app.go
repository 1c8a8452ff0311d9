// Package app is Arborist's desktop GUI, built with Fyne. Screens drive the
// same profiles and engine APIs as the CLI verbs; no engine logic and no SQL
// live here. Long work runs off the UI goroutine and reports back through
// fyne.Do.
package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/engine/synth"
	"arborist/kernels/quant"
)

// AppID is the application id, also in FyneApp.toml.
const AppID = "dev.arborist.workbench"

// Run opens the main window and blocks until it is closed; it returns the
// process exit status.
func Run() int {
	a := fyneapp.NewWithID(AppID)
	w := a.NewWindow("Arborist")
	ws := NewWorkbench(w, DemoDir())
	w.SetContent(ws.Content())
	w.Resize(fyne.NewSize(960, 640))
	w.ShowAndRun()
	return 0
}

// Workbench holds the main window's widgets so tests can drive them.
type Workbench struct {
	win      fyne.Window
	Models   *widget.Label
	DemoBtn  *widget.Button
	Status   *widget.Label
	Progress *widget.ProgressBar
	demoDir  string
}

// NewWorkbench builds the (placeholder) workbench: it lists the models it can
// find and offers to build the synthetic demo pair when there are none.
func NewWorkbench(w fyne.Window, demoDir string) *Workbench {
	ws := &Workbench{win: w, demoDir: demoDir}
	ws.Models = widget.NewLabel(describeModels(FindModels(demoDir)))
	ws.Models.Wrapping = fyne.TextWrapWord
	ws.Status = widget.NewLabel("")
	ws.Progress = widget.NewProgressBar()
	ws.Progress.Hide()
	ws.DemoBtn = widget.NewButton("Build demo pair (synthetic)", ws.buildDemo)
	return ws
}

// Content is the window content.
func (ws *Workbench) Content() fyne.CanvasObject {
	title := widget.NewLabelWithStyle("Arborist: speculative decoding workbench", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	note := widget.NewLabel("The full workbench (profile, tune, run, compare, export) is being built; every step is available as a CLI verb: run 'arborist help'.")
	note.Wrapping = fyne.TextWrapWord
	return container.NewVBox(title, note, widget.NewSeparator(), ws.Models, ws.DemoBtn, ws.Progress, ws.Status)
}

// DemoDir is where the synthetic demo pair is written.
func DemoDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "arborist", "demo")
}

// FindModels lists GGUF files in the places Arborist looks by default: the
// shared models folder beside the working directory and the demo folder.
func FindModels(demoDir string) []string {
	var out []string
	for _, dir := range []string{filepath.Join("..", "shared", "models"), filepath.Join("..", "shared", "models", "bench"), demoDir} {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
		out = append(out, matches...)
	}
	return out
}

func describeModels(paths []string) string {
	if len(paths) == 0 {
		return "No GGUF models found. Build the demo pair: a synthetic target and drafter with random weights (clearly labelled synthetic), so every screen can be tried."
	}
	s := "Models found:\n"
	for _, p := range paths {
		s += "  " + p + "\n"
	}
	return s
}

// DemoPair writes the synthetic demo target and drafter into dir and returns
// their paths. Existing files are reused.
func DemoPair(ctx context.Context, dir string, progress func(float64)) (target, drafter string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("demo pair: %w", err)
	}
	target = filepath.Join(dir, "demo-target-synthetic.gguf")
	drafter = filepath.Join(dir, "demo-drafter-synthetic.gguf")
	specs := []struct {
		path, shape string
	}{
		{target, "custom:dim=256,layers=8,heads=8,kv=4,ffn=704,vocab=512"},
		{drafter, "custom:dim=64,layers=2,heads=8,kv=4,ffn=192,vocab=512"},
	}
	for i, s := range specs {
		if _, err := os.Stat(s.path); err == nil {
			continue
		}
		sh, err := synth.ParseShape(s.shape)
		if err != nil {
			return "", "", err
		}
		base := float64(i) / float64(len(specs))
		err = synth.WriteFile(ctx, s.path, sh, synth.Options{Type: quant.Q8_0, Seed: uint64(i + 1), Progress: func(done, total uint64) {
			if progress != nil {
				progress(base + float64(done)/float64(total)/float64(len(specs)))
			}
		}})
		if err != nil {
			return "", "", err
		}
	}
	return target, drafter, nil
}

func (ws *Workbench) buildDemo() {
	ws.DemoBtn.Disable()
	ws.Progress.Show()
	ws.Status.SetText("Writing the synthetic demo pair to " + ws.demoDir + " ...")
	go func() {
		t, d, err := DemoPair(context.Background(), ws.demoDir, func(f float64) {
			fyne.Do(func() { ws.Progress.SetValue(f) })
		})
		fyne.Do(func() {
			ws.DemoBtn.Enable()
			ws.Progress.Hide()
			if err != nil {
				ws.Status.SetText("Demo pair failed: " + err.Error())
				return
			}
			ws.Status.SetText("Demo pair ready (synthetic, random weights):\n  target  " + t + "\n  drafter " + d)
			ws.Models.SetText(describeModels(FindModels(ws.demoDir)))
		})
	}()
}
