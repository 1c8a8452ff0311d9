package app

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// TestRunTextStream: the view follows new text until the user scrolls
// up, and the streamed text is laid out in rows of whole words.
func TestRunTextStream(t *testing.T) {
	wb := newBench(t)
	r := wb.Run
	wb.Tabs.SelectIndex(indexOf(t, wb, r.Title()))
	wb.Session.Win.Resize(fyne.NewSize(800, 600))
	green := widget.RichTextStyleInline
	green.ColorName = colorAccepted
	fyne.DoAndWait(func() {
		for i := 0; i < 100; i++ {
			r.appendText(" un", widget.RichTextStyleInline)
			r.appendText("believ", green) // a word of two colours stays whole
			r.appendText("able", widget.RichTextStyleInline)
		}
	})
	var rows []string
	fyne.DoAndWait(func() { rows = textRows(r.Text.Segments) })
	if len(rows) < 5 {
		t.Fatalf("%d rows for 100 words", len(rows))
	}
	for _, row := range rows {
		for _, w := range strings.Fields(row) {
			if w != "unbelievable" {
				t.Fatalf("a word broken across rows: %q in %q", w, row)
			}
		}
	}
	var off, max float32
	fyne.DoAndWait(func() {
		off, max = r.TextScroll.Offset.Y, r.TextScroll.Content.MinSize().Height-r.TextScroll.Size().Height
	})
	if max <= 0 || off < max-1 {
		t.Fatalf("view does not follow the text: offset %v of %v", off, max)
	}
	fyne.DoAndWait(func() {
		r.TextScroll.ScrollToTop() // the user scrolls up to read
		for i := 0; i < 30; i++ {
			r.appendText(" more text", widget.RichTextStyleInline)
		}
	})
	fyne.DoAndWait(func() { off = r.TextScroll.Offset.Y })
	if off != 0 {
		t.Errorf("the view jumped to the end while the user read above (offset %v)", off)
	}
	if w := newMinWidth(r.TextScroll, 320).MinSize().Width; w < 320 {
		t.Errorf("the text may be laid out %v wide", w)
	}
}

// TestFlowSegments: rows fit the width, break at spaces only, keep
// fragments of a word in different colours together, and a narrow view
// never gets one character per row.
func TestFlowSegments(t *testing.T) {
	test.NewTempApp(t)
	green := widget.RichTextStyleInline
	green.ColorName = colorAccepted
	var stream []piece
	for i := 0; i < 20; i++ {
		stream = append(stream, piece{" she wanted to play outsid", green}, piece{"e with", widget.RichTextStyleInline})
	}
	stream = append(stream, piece{"\n\nNext prompt", widget.RichTextStyle{Inline: true, TextStyle: fyne.TextStyle{Italic: true}}})
	size := theme.TextSize()
	for _, width := range []float32{120, 400} {
		segs := flowSegments(stream, width, size)
		rows := textRows(segs)
		for _, row := range rows {
			if w := fyne.MeasureText(row, size, fyne.TextStyle{}).Width; w > width+1 && len(strings.Fields(row)) > 1 {
				t.Errorf("width %v: row %q is %v wide", width, row, w)
			}
			for _, w := range strings.Fields(row) {
				if w == "outsid" || w == "e" {
					t.Errorf("width %v: a word split in %q", width, row)
				}
			}
			if n := len([]rune(strings.TrimSpace(row))); n == 1 {
				t.Errorf("width %v: a one-character row %q", width, row)
			}
		}
		if rows[len(rows)-1] != "Next prompt" || rows[len(rows)-2] != "" {
			t.Errorf("width %v: the prompt's blank line is lost: %q", width, rows[len(rows)-3:])
		}
	}
}

// textRows joins rich text segments into the rows they show.
func textRows(segs []widget.RichTextSegment) []string {
	var rows []string
	var cur strings.Builder
	for _, s := range segs {
		ts := s.(*widget.TextSegment)
		cur.WriteString(ts.Text)
		if !ts.Style.Inline {
			rows = append(rows, cur.String())
			cur.Reset()
		}
	}
	return rows
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

// screenScroll is the scroll a screen sits in (each tab's content: the
// screen scrolls in a window smaller than it needs).
func screenScroll(t *testing.T, wb *Workbench, title string) *container.Scroll {
	t.Helper()
	sc, ok := wb.Tabs.Items[indexOf(t, wb, title)].Content.(*container.Scroll)
	if !ok {
		t.Fatalf("the %s screen does not scroll", title)
	}
	return sc
}

// TestRunStreamBatches: a batch of streamed pieces (what a run sends at
// most every 100 ms) lands as the same stream as the pieces one by one:
// neighbours of one style merge, and a prompt starts a paragraph unless it
// is the first text.
func TestRunStreamBatches(t *testing.T) {
	wb := newBench(t)
	r := wb.Run
	green := widget.RichTextStyleInline
	green.ColorName = colorAccepted
	italic := widget.RichTextStyle{Inline: true, TextStyle: fyne.TextStyle{Italic: true}}
	batch := []streamed{{piece{"Once", italic}, true}, {piece: piece{" upon", green}}, {piece: piece{" a", green}},
		{piece: piece{" time", widget.RichTextStyleInline}}, {piece{"Next", italic}, true}}
	fyne.DoAndWait(func() { r.clearText(); r.appendPieces(batch) })
	want := []piece{{"Once", italic}, {" upon a", green}, {" time", widget.RichTextStyleInline}, {"\n\nNext", italic}}
	if len(r.stream) != len(want) {
		t.Fatalf("stream %v, want %v", r.stream, want)
	}
	for i, p := range want {
		if r.stream[i].text != p.text || r.stream[i].style != p.style {
			t.Errorf("piece %d: %q, want %q", i, r.stream[i].text, p.text)
		}
	}
}
