package costmodel

import (
	"fmt"
	"slices"
	"time"
)

// RecheckWindow is the re-check's shape, T_verify(W) over plain
// decoding's token at its anchor widths, read at moments spread over a
// long stretch of time: a calibration reads it before its first prompt and
// after each one. The quick re-check before a search is one such moment,
// and one moment is not enough: on 2 shared Zen 4 cores, twelve re-checks
// of one process three seconds apart read T_verify(4) over plain decoding's
// token at 1.33-1.62, the machine's state moving over seconds, while the
// validations' own steps over their plain decoding held within about 4%
// of their mean across the three tunes of a set, each averaging a minute
// of that motion; the chosen plan's error followed the re-check's
// reading. A calibration run just before spans about that minute, so
// RecheckCosts takes each anchor's ratio as the median over the window's
// moments and its own, and only the scale, plain decoding's token, from
// its own moment alone.
type RecheckWindow struct {
	Widths []int `json:"widths"`
	// Slots hold, per moment, per width, the median over the moment's
	// rounds of T_verify(W) / plain decoding's token.
	Slots   [][]float64 `json:"slots"`
	Backend string      `json:"backend"`
	Threads int         `json:"threads"`
	// Drafting is what drafted between its passes (Drafting.Kind).
	Drafting string    `json:"drafting,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
}

// WindowRounds is how many timed rounds (after an untimed one) a moment of
// a RecheckWindow takes; WindowAge is how old a window may be for
// RecheckCosts to pool it; MinWindowSlots is the fewest moments it pools.
const (
	WindowRounds   = 3
	WindowAge      = 30 * time.Minute
	MinWindowSlots = 3
	MaxWindowSlots = 4096 // more moments than any calibration reads: a damaged record
)

// String says what the window read at W = 4 (its widest anchor when it
// has none), the ratio tune's re-check will pool, for calibrate to print.
func (w *RecheckWindow) String() string {
	if w == nil || len(w.Slots) == 0 || len(w.Widths) < 2 {
		return ""
	}
	i := slices.Index(w.Widths, 4)
	if i < 0 {
		i = len(w.Widths) - 1
	}
	var rs []float64
	for _, s := range w.Slots {
		if i < len(s) {
			rs = append(rs, s[i])
		}
	}
	if len(rs) == 0 {
		return ""
	}
	return fmt.Sprintf("T_verify(%d) read %.2f-%.2f plain decoding tokens (median %.2f) at %d moments over %.0f s; a tune in the next %.0f minutes pools them with its re-check",
		w.Widths[i], slices.Min(rs), slices.Max(rs), Median(rs), len(rs), w.End.Sub(w.Start).Seconds(), WindowAge.Minutes())
}

// Median is the median of xs (the mean of the middle two of an even count,
// 0 for none); xs is not changed.
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
