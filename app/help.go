package app

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// One-line explanations of the metrics the screens show, so a newcomer
// reads what a figure means where it appears (Fyne has no hover
// tooltips; each screen shows the lines for its own figures).
const (
	metricTVerify    = "T_verify: how long one target pass takes to check W draft tokens at once (measured by Profile)."
	metricAAL        = "AAL: average tokens accepted per target pass; plain decoding is 1.0, higher is better."
	metricAcceptance = "Acceptance: the share of drafted tokens the target agreed with."
	metricSpeedup    = "Speedup: decoding speed relative to plain decoding with the target alone (predicted by the model, measured by a run)."
	metricTPS        = "Tokens/s: generated tokens over generation time only (no loading, prefill or baseline)."
)

// metricHelp is a small, wrapped label with the given explanations.
func metricHelp(lines ...string) *widget.Label {
	l := widget.NewLabel(strings.Join(lines, "\n"))
	l.Wrapping = fyne.TextWrapWord
	l.SizeName = theme.SizeNameCaptionText
	return l
}
