package app

import (
	"errors"
	"image/color"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"

	"arborist/profiles"
	"arborist/profiles/costmodel"
	"arborist/profiles/latency"
	"arborist/profiles/store"
)

// TestRecentFillsItsField: a recent file picked beside the target fills
// the target, one picked beside the draft model fills the draft model.
func TestRecentFillsItsField(t *testing.T) {
	wb := newBench(t)
	s, m := wb.Session, wb.Models
	s.App.Preferences().SetStringList(prefRecent, []string{"/m/a.gguf", "/m/b.gguf"})
	m.Target.SetText("/m/t.gguf")
	m.Draft.SetText("/m/d.gguf")
	menu := m.recentMenu(m.Target)
	if len(menu.Items) != 2 {
		t.Fatalf("recent menu: %d items", len(menu.Items))
	}
	menu.Items[1].Action()
	if m.Target.Text != "/m/b.gguf" || m.Draft.Text != "/m/d.gguf" {
		t.Errorf("a pick beside the target gave target %q, draft %q", m.Target.Text, m.Draft.Text)
	}
	m.recentMenu(m.Draft).Items[0].Action()
	if m.Target.Text != "/m/b.gguf" || m.Draft.Text != "/m/a.gguf" {
		t.Errorf("a pick beside the draft gave target %q, draft %q", m.Target.Text, m.Draft.Text)
	}
}

// TestModelsRowsFollowTheSource: the n-gram length or layer count shows
// only for those sources, the draft model file only for a draft model or
// a hidden drafter, the draft device only for a source that runs on one.
func TestModelsRowsFollowTheSource(t *testing.T) {
	m := newBench(t).Models
	for _, c := range []struct {
		source    string
		want, not []string
	}{
		{SourceModel, []string{"Draft model", "Draft device"}, []string{"N-gram length", "Layers (self-draft)"}},
		{SourceHidden, []string{"Hidden drafter (id or file)", "Draft device"}, []string{"N-gram length", "Draft model"}},
		{SourceNGram, []string{"N-gram length"}, []string{"Draft model", "Draft device", "Layers (self-draft)"}},
		{SourceLayers, []string{"Layers (self-draft)", "Draft device"}, []string{"Draft model", "N-gram length"}},
	} {
		m.Source.SetSelected(c.source)
		rows := m.shownRows()
		for _, w := range c.want {
			if !slices.Contains(rows, w) {
				t.Errorf("%s: no row %q in %q", c.source, w, rows)
			}
		}
		for _, n := range c.not {
			if slices.Contains(rows, n) {
				t.Errorf("%s: row %q shown in %q", c.source, n, rows)
			}
		}
	}
}

// TestAcceptedContrast: accepted draft tokens read at 4.5:1 or more on
// the background, in the light and the dark theme.
func TestAcceptedContrast(t *testing.T) {
	th := newAppTheme(theme.DefaultTheme())
	for _, v := range []fyne.ThemeVariant{theme.VariantLight, theme.VariantDark} {
		fg, bg := th.Color(colorAccepted, v), th.Color(theme.ColorNameBackground, v)
		if c := contrast(fg, bg); c < 4.5 {
			t.Errorf("variant %d: accepted tokens %v on %v, contrast %.2f:1", v, fg, bg, c)
		}
		if th.Color(theme.ColorNameForeground, v) != theme.DefaultTheme().Color(theme.ColorNameForeground, v) {
			t.Errorf("variant %d: the theme changed a colour of Fyne's", v)
		}
	}
}

// contrast is the WCAG contrast ratio of two colours.
func contrast(a, b color.Color) float64 {
	lum := func(c color.Color) float64 {
		r, g, b, _ := c.RGBA()
		ch := func(v uint32) float64 {
			x := float64(v) / 0xffff
			if x <= 0.03928 {
				return x / 12.92
			}
			return math.Pow((x+0.055)/1.055, 2.4)
		}
		return 0.2126*ch(r) + 0.7152*ch(g) + 0.0722*ch(b)
	}
	la, lb := lum(a), lum(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// TestShortEntriesShowTheirValue: the token counts and the temperature
// are laid out wide enough to show "1024" and "0.75" whole in a 1024x640
// window.
func TestShortEntriesShowTheirValue(t *testing.T) {
	wb := newBench(t)
	fyne.DoAndWait(func() { wb.Session.Win.Resize(fyne.NewSize(1024, 640)) })
	r, sp := wb.Run, wb.Speedup
	for _, c := range []struct {
		tab  int
		name string
		e    interface {
			SetText(string)
			Size() fyne.Size
		}
		text string
	}{{3, "run tokens", r.Tokens, "1024"}, {3, "temperature", r.Sampling.entries["temperature"], "0.75"}, {3, "seed", r.Sampling.entries["seed"], "1234"}, {2, "calibration tokens", sp.CalTokens, "1024"}} {
		fyne.DoAndWait(func() { wb.Tabs.SelectIndex(c.tab); c.e.SetText(c.text) })
		need := fyne.MeasureText(c.text, theme.TextSize(), fyne.TextStyle{}).Width + 2*theme.InnerPadding()
		var got float32
		fyne.DoAndWait(func() { got = c.e.Size().Width })
		if got < need {
			t.Errorf("%s: %q needs %v, the field is %v wide", c.name, c.text, need, got)
		}
	}
}

// TestErrorDialog: the error dialog's icon sits beside its message, not
// over it, and a long message wraps within the window.
func TestErrorDialog(t *testing.T) {
	a := test.NewTempApp(t)
	w := a.NewWindow("x")
	w.Resize(fyne.NewSize(1024, 640))
	err := errors.New("calibration needs prompts and a positive token count: the prompt suite ../shared/prompts/stories.txt has no line that is not empty, so nothing was measured")
	content, icon, msg := errorContent(err, w)
	size := content.MinSize()
	content.Resize(size)
	var column fyne.CanvasObject // the icon's
	for _, o := range content.(*fyne.Container).Objects {
		if o != fyne.CanvasObject(msg) {
			column = o
		}
	}
	if column == nil || icon.Size().Width < 32 || column.Position().X+column.Size().Width > msg.Position().X {
		t.Errorf("the icon's column (%v, %v) overlaps the message at %v", column.Position(), column.Size(), msg.Position())
	}
	if size.Width > 0.75*1024 || !strings.Contains(msg.Text, "\n") || !strings.HasPrefix(msg.Text, "Calibration needs") {
		t.Errorf("message %v wide:\n%s", size.Width, msg.Text)
	}
	showError(err, w)
	if w.Canvas().Overlays().Top() == nil {
		t.Error("no dialog shown")
	}
}

// TestRestoreKeepsNewerWork: what the database held when a pair was
// chosen arrives after work on that pair has shown its own results (a
// profile, a tune's ranking, a run): those stay, the stored ones do not
// replace them.
func TestRestoreKeepsNewerWork(t *testing.T) {
	wb := newBench(t)
	s, p, sp, r := wb.Session, wb.Profile, wb.Speedup, wb.Run
	flat := []latency.Point{{W: 1, Median: 10 * time.Millisecond}, {W: 64, Median: 14 * time.Millisecond}}
	newer := costmodel.Search(costmodel.Uniform(0.7, 0.4, 8, 3), costmodel.Costs{Verify: flat, Draft: flat[:1]}, costmodel.SearchSpace{MaxGamma: 4, MaxDepth: 3, MaxNodes: 8})
	stored := profiles.Prediction{Plan: profiles.Plan{Strategy: "chain", Gamma: 7}, Speedup: 9}
	vp := &profiles.Profile{Curve: &store.Curve{Points: flat}}
	st := &profiles.PairState{PlanID: 4, Plan: stored, Ranked: []profiles.Prediction{stored}, Verify: vp,
		Runs: []profiles.Run{{ID: 9, Strategy: "ar", Status: "done"}}, Inputs: &profiles.Inputs{}}
	fyne.DoAndWait(func() {
		p.Chart.SetSpec(ChartSpec{Title: "measured now", Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}}}})
		p.Status.SetText("measured now")
		sp.stored = newer[0].Plan.String() // as a tune stores its best
		sp.SetRanked(newer)
		r.Stats.SetText("a run of this pair")
		for _, f := range s.pairHooks {
			f(st, nil)
		}
	})
	if p.Status.Text != "measured now" {
		t.Errorf("the profile was replaced: %s", p.Status.Text)
	}
	if len(sp.ranked) == 0 || !samePlan(sp.ranked[0].Plan, newer[0].Plan) || s.Tuned == nil || !samePlan(s.Tuned.Plan, newer[0].Plan) {
		t.Errorf("the tune was replaced: %v, tuned %v", sp.ranked[0].Plan, s.Tuned)
	}
	if r.Stats.Text != "a run of this pair" {
		t.Errorf("the run was replaced: %s", r.Stats.Text)
	}
}

// TestConfirmDrawsNoQuestionMark: Fyne's confirm dialogs (the file
// dialog's "Overwrite?") paint their icon behind their text; under the
// workbench's theme that icon draws nothing, while the others stay.
func TestConfirmDrawsNoQuestionMark(t *testing.T) {
	a := test.NewTempApp(t)
	if !strings.Contains(string(theme.QuestionIcon().Content()), "<path") {
		t.Fatal("the default question icon draws nothing: the check below proves nothing")
	}
	a.Settings().SetTheme(newAppTheme(nil))
	if c := string(theme.QuestionIcon().Content()); strings.Contains(c, "<path") || strings.Contains(c, "<circle") {
		t.Errorf("the question icon still draws: %s", c)
	}
	if !strings.Contains(string(theme.ErrorIcon().Content()), "<path") {
		t.Error("the error icon went blank too")
	}
}
