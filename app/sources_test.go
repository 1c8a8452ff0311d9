package app

import (
	"maps"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// renderedForm reads the Models screen's form as drawn: each row's label
// with the text of the entry drawn beside it (the first entry in the
// row's widget), so a label standing beside another field's widget shows.
func renderedForm(t *testing.T, m *ModelsScreen) map[string]string {
	t.Helper()
	content := test.WidgetRenderer(m.form).Objects()[0].(*fyne.Container)
	grid := content.Objects[0].(*fyne.Container)
	var entry func(o fyne.CanvasObject) *widget.Entry
	entry = func(o fyne.CanvasObject) *widget.Entry {
		switch w := o.(type) {
		case *widget.Entry:
			return w
		case *fyne.Container:
			for _, c := range w.Objects {
				if e := entry(c); e != nil {
					return e
				}
			}
		}
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(grid.Objects); i += 2 {
		label := grid.Objects[i].(*fyne.Container).Objects[0].(*canvas.Text).Text
		if e := entry(grid.Objects[i+1]); e != nil {
			out[label] = e.Text
		} else {
			out[label] = "(no entry)"
		}
	}
	return out
}

// TestDraftSourceForms: for each registered draft source kind, choosing it
// shows exactly its fields (each label beside its own entry), typing into
// them reads back from the drawn form and into the pair spec, and the
// form stays so after another screen is shown and the first again.
func TestDraftSourceForms(t *testing.T) {
	wb := newBench(t)
	m := wb.Models
	w := wb.Session.Win
	typed := map[string]map[string]string{
		"model":  {"draft": "/m/draft.gguf"},
		"ngram":  {"ngram": "4"},
		"layers": {"layers": "3"},
		"hidden": {"draft": "12", "resample": "2"},
	}
	m.Target.SetText("/m/target.gguf")
	kinds := profiles.Choices().DraftSources
	for _, k := range kinds {
		values, ok := typed[k.Name]
		if !ok {
			t.Fatalf("kind %q has no values in this test", k.Name)
		}
		fyne.DoAndWait(func() { m.Source.SetSelected(k.Label) })
		for _, f := range k.Fields {
			e := m.Fields[f.Name]
			fyne.DoAndWait(func() { e.SetText("") })
			test.Type(e, values[f.Name])
		}
		// another screen and back: the form is the kind's still
		fyne.DoAndWait(func() { wb.Tabs.SelectIndex(len(wb.Tabs.Items) - 1); wb.Tabs.SelectIndex(0) })
		w.Canvas().Refresh(m.formBox)
		got := renderedForm(t, m)
		want := map[string]string{}
		for _, f := range k.Fields {
			want[f.Label] = values[f.Name]
		}
		for label, v := range want {
			if got[label] != v {
				t.Errorf("%s: row %q shows %q, typed %q (form %v)", k.Name, label, got[label], v, got)
			}
		}
		// no other kind's field is shown
		for _, o := range kinds {
			for _, f := range o.Fields {
				if _, shown := got[f.Label]; shown && want[f.Label] == "" {
					t.Errorf("%s: %s's row %q shown", k.Name, o.Name, f.Label)
				}
			}
		}
		_, hasDevice := got["Draft device"]
		if hasDevice != k.Movable {
			t.Errorf("%s: draft device row shown %v, movable %v", k.Name, hasDevice, k.Movable)
		}
		ps, kind, err := m.spec()
		if err != nil || kind.Name != k.Name {
			t.Fatalf("%s: spec read as %s: %v", k.Name, kind.Name, err)
		}
		if back := k.Values(ps); !maps.Equal(back, values) {
			t.Errorf("%s: spec %+v reads back %v, typed %v", k.Name, ps, back, values)
		}
		if k.Movable {
			fyne.DoAndWait(func() { m.DraftThreads.SetText("3") })
			if ps, _, err := m.spec(); err != nil || ps.DraftThreads != 3 {
				t.Errorf("%s: draft threads %d, %v", k.Name, ps.DraftThreads, err)
			}
			fyne.DoAndWait(func() { m.DraftThreads.SetText("") })
		}
		if ps.Sources() != 1 {
			t.Errorf("%s: %d sources set in %+v", k.Name, ps.Sources(), ps)
		}
	}
}
