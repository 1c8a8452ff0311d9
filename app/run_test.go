package app

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// TestRunTextStream: streamed pieces of one style join one segment (so
// words wrap whole), the view follows new text until the user scrolls up,
// and a narrow window still gives the text a readable width.
func TestRunTextStream(t *testing.T) {
	wb := newBench(t)
	r := wb.Run
	wb.Tabs.SelectIndex(indexOf(t, wb, r.Title()))
	fyne.DoAndWait(func() {
		for i := 0; i < 100; i++ {
			r.appendText(" un", widget.RichTextStyleInline)
			r.appendText("believ", widget.RichTextStyleInline)
			r.appendText("able", widget.RichTextStyleInline)
		}
	})
	if n := len(r.Text.Segments); n != 1 {
		t.Fatalf("%d segments for one style, want 1", n)
	}
	var off, max float32
	fyne.DoAndWait(func() {
		off, max = r.TextScroll.Offset.Y, r.TextScroll.Content.MinSize().Height-r.TextScroll.Size().Height
	})
	if max <= 0 || off < max-1 {
		t.Fatalf("view does not follow the text: offset %v of %v", off, max)
	}
	green := widget.RichTextStyleInline
	green.ColorName = "success"
	fyne.DoAndWait(func() {
		r.appendText(" drafted", green)
		r.TextScroll.ScrollToTop() // the user scrolls up to read
		for i := 0; i < 30; i++ {
			r.appendText(" more text", widget.RichTextStyleInline)
		}
	})
	if len(r.Text.Segments) != 3 {
		t.Errorf("%d segments, want 3 (plain, accepted, plain)", len(r.Text.Segments))
	}
	fyne.DoAndWait(func() { off = r.TextScroll.Offset.Y })
	if off != 0 {
		t.Errorf("the view jumped to the end while the user read above (offset %v)", off)
	}
	if w := newMinWidth(r.TextScroll, 320).MinSize().Width; w < 320 {
		t.Errorf("the text may be laid out %v wide", w)
	}
}

// TestRunPromptSource: the prompt and the suite are an explicit choice; a
// suite path left in its field does not override the prompt.
func TestRunPromptSource(t *testing.T) {
	r := newBench(t).Run
	r.Suite.SetText(filepath.Join(t.TempDir(), "missing.txt"))
	if !r.Suite.Disabled() || r.Prompt.Disabled() {
		t.Error("with the prompt chosen, the suite field should be off")
	}
	p, err := r.Prompts()
	if err != nil || len(p) != 1 || p[0] != "Once upon a time" {
		t.Fatalf("prompt: %q %v", p, err)
	}
	r.Source.SetSelected(PromptSuite)
	if r.Suite.Disabled() || !r.Prompt.Disabled() {
		t.Error("with the suite chosen, the prompt field should be off")
	}
	if _, err := r.Prompts(); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("a missing suite: %v", err)
	}
}

// TestLiveTokensPerSecond: the live figure divides by generation time only.
func TestLiveTokensPerSecond(t *testing.T) {
	if s := liveStats(50, 10, 40, 60, 500*time.Millisecond); !strings.HasPrefix(s, "50 tokens, 100.0 tokens/s, AAL 5.00, acceptance 66.7%") {
		t.Error(s)
	}
	if s := liveStats(0, 0, 0, 0, 0); !strings.Contains(s, "0.0 tokens/s") {
		t.Error(s)
	}
}

func indexOf(t *testing.T, wb *Workbench, title string) int {
	t.Helper()
	for i, it := range wb.Tabs.Items {
		if it.Text == title {
			return i
		}
	}
	t.Fatalf("no tab %q", title)
	return -1
}
