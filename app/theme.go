package app

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"golang.org/x/image/font/gofont/gomono"
)

// colorAccepted colours the draft tokens the target accepted in the Run
// screen's text: a green readable on the theme's background (Fyne's
// success green, #43F436, has a contrast of about 1.5:1 on the light
// background).
const colorAccepted fyne.ThemeColorName = "arborist-accepted"

// acceptedColors are colorAccepted in the light and the dark variant: at
// least 4.5:1 against each variant's background (TestAcceptedContrast).
var acceptedColors = map[fyne.ThemeVariant]color.Color{
	theme.VariantLight: color.NRGBA{R: 0x1a, G: 0x7a, B: 0x1a, A: 0xff},
	theme.VariantDark:  color.NRGBA{R: 0x43, G: 0xf4, B: 0x36, A: 0xff},
}

// appTheme is the theme the workbench runs with: the theme around it
// (Fyne's default, light or dark as the settings say) with Arborist's own
// colours added.
type appTheme struct{ fyne.Theme }

// newAppTheme wraps base (nil: Fyne's default theme).
func newAppTheme(base fyne.Theme) fyne.Theme {
	if base == nil {
		base = theme.DefaultTheme()
	}
	return appTheme{base}
}

// Icon is the theme's icon but the question mark, which draws nothing:
// Fyne's confirm dialogs (the file dialog's "Overwrite?", Compare's
// delete) paint it large in their top right corner, behind their text,
// so a wide message was read through a "?". The question stands in the
// title and the buttons.
func (t appTheme) Icon(n fyne.ThemeIconName) fyne.Resource {
	if n == theme.IconNameQuestion {
		return blankIcon
	}
	return t.Theme.Icon(n)
}

// blankIcon is an icon that draws nothing.
var blankIcon = fyne.NewStaticResource("blank.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24" viewBox="0 0 24 24"></svg>`))

func (t appTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	if n == colorAccepted {
		if c, ok := acceptedColors[v]; ok {
			return c
		}
		return acceptedColors[theme.VariantLight]
	}
	return t.Theme.Color(n, v)
}

// monoFont is the font of the monospaced text (the Export screen's YAML,
// the Models screen's model facts): Go Mono. Fyne's bundled monospace
// font draws the underscore about half a pixel thick at the foot of its
// line, so the OpenGL window lost it ("q8_0" read "q8 0" in the light
// theme); Go Mono's underscore is a full stroke above the line's foot.
var monoFont = fyne.NewStaticResource("GoMono.ttf", gomono.TTF)

// Font is the theme's font but for monospaced text, which is monoFont.
func (t appTheme) Font(s fyne.TextStyle) fyne.Resource {
	if s.Monospace {
		return monoFont
	}
	return t.Theme.Font(s)
}
