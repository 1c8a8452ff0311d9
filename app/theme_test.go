package app

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// underscoreInk measures the underscore of the TrueType font ttf at size
// pixels: how thick its stroke is and how far its foot lies below the
// line's foot (the face's descent; positive: outside the line, where the
// OpenGL window's text texture ends).
func underscoreInk(t *testing.T, ttf []byte, size float64) (thick, below float64) {
	t.Helper()
	f, err := opentype.Parse(ttf)
	if err != nil {
		t.Fatalf("parse font: %v", err)
	}
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingNone})
	if err != nil {
		t.Fatalf("face: %v", err)
	}
	defer face.Close()
	b, _, ok := face.GlyphBounds('_')
	if !ok {
		t.Fatal("the font has no underscore")
	}
	toF := func(v fixed.Int26_6) float64 { return float64(v) / 64 }
	return toF(b.Max.Y - b.Min.Y), toF(b.Max.Y) - toF(face.Metrics().Descent)
}

// TestMonospaceUnderscoreVisible: the theme's monospaced text (the YAML of
// the Export screen, "q8_0") draws its underscore as a stroke of at least
// a pixel that ends inside the line, at the theme's text size. Fyne's
// bundled monospace font, the negative control, fails it: its stroke is
// about half a pixel (0.55px at 14px) at the line's very foot, which the OpenGL window
// did not show.
func TestMonospaceUnderscoreVisible(t *testing.T) {
	th := newAppTheme(theme.DefaultTheme())
	mono := th.Font(fyne.TextStyle{Monospace: true})
	if mono != monoFont {
		t.Fatalf("the theme's monospace font is %s, want %s", mono.Name(), monoFont.Name())
	}
	if got := th.Font(fyne.TextStyle{}); got != theme.DefaultTheme().Font(fyne.TextStyle{}) {
		t.Errorf("the regular font changed to %s", got.Name())
	}
	size := float64(th.Size(theme.SizeNameText))
	visible := func(ttf []byte) (bool, float64, float64) {
		thick, below := underscoreInk(t, ttf, size)
		return thick >= 1 && below <= 0, thick, below
	}
	if ok, thick, below := visible(mono.Content()); !ok {
		t.Errorf("%s at %.0fpx: underscore %.2fpx thick, its foot %.2fpx below the line; want >= 1px, inside", mono.Name(), size, thick, below)
	}
	bundled := theme.DefaultTheme().Font(fyne.TextStyle{Monospace: true})
	if ok, thick, below := visible(bundled.Content()); ok {
		t.Errorf("negative control: %s passes (underscore %.2fpx thick, %.2fpx below)", bundled.Name(), thick, below)
	}
}
