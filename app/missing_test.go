package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
)

// TestMissingFilesRepick: remembered files that were moved or deleted are
// reported on the screens that use them, each with a button that opens a
// file dialog; a picked file clears the notice.
func TestMissingFilesRepick(t *testing.T) {
	dir := t.TempDir()
	gone := func(name string) string { return filepath.Join(dir, "moved", name) }
	a := test.NewTempApp(t)
	p := a.Preferences()
	p.SetString(prefTarget, gone("target.gguf"))
	p.SetString(prefDraft, gone("draft.gguf"))
	p.SetString(prefPrompts, gone("stories.txt"))
	w := a.NewWindow("Arborist")
	s := NewSession(a, w, filepath.Join(dir, "demo"))
	s.DBPath = filepath.Join(dir, "gui.db")
	t.Cleanup(s.Close)
	wb := NewWorkbench(s)
	waitFor(t, "the start-up work", s.idle) // as openBench does
	w.SetContent(wb.Root)
	w.Resize(fyne.NewSize(1100, 760))

	m, sp, r := wb.Models, wb.Speedup, wb.Run
	for _, c := range []struct {
		name string
		fc   *fileCheck
		want string
	}{
		{"target", m.TargetCheck, gone("target.gguf")},
		{"draft", m.DraftCheck, gone("draft.gguf")},
		{"training prompts", m.TrainCheck, gone("stories.txt")},
		{"calibration prompts", sp.PromptsCheck, gone("stories.txt")},
	} {
		if !c.fc.Box.Visible() || !strings.Contains(c.fc.Label.Text, c.want) || !strings.Contains(c.fc.Label.Text, "no longer exists") {
			t.Errorf("%s: notice visible %v, %q", c.name, c.fc.Box.Visible(), c.fc.Label.Text)
		}
	}
	// the run's suite matters only when the run reads it
	if r.SuiteCheck.Box.Visible() {
		t.Error("the run warns about a suite it does not read")
	}
	r.Source.SetSelected(PromptSuite)
	if !r.SuiteCheck.Box.Visible() {
		t.Error("the run's missing suite is not reported")
	}

	// the button opens a file dialog
	fyne.DoAndWait(func() { wb.Tabs.SelectIndex(0) })
	test.Tap(m.TargetCheck.Repick)
	if w.Canvas().Overlays().Top() == nil {
		t.Error("Pick it again opened no dialog")
	}
	// a file picked in it replaces the path and clears the notice
	found := filepath.Join(dir, "target.gguf")
	if err := os.WriteFile(found, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.TargetCheck.Picked(found)
	if m.Target.Text != found || m.TargetCheck.Box.Visible() {
		t.Errorf("after picking: entry %q, notice visible %v", m.Target.Text, m.TargetCheck.Box.Visible())
	}
	// a hidden drafter's database id is not a file
	m.Source.SetSelected(SourceHidden)
	m.Draft.SetText("3")
	if m.DraftCheck.Box.Visible() {
		t.Error("a drafter id reported as a missing file")
	}
	m.Source.SetSelected(SourceNGram)
	m.Draft.SetText(gone("draft.gguf"))
	if m.DraftCheck.Box.Visible() {
		t.Error("an n-gram source warns about the draft file")
	}
}
