// Package present holds what the faces (the GUI in app/, the verbs in
// app/cli, the server in app/serve) share in showing the core's results:
// numbers written for people (Human, HumanBytes), the plan families a
// speedup chart draws (Families), and the sentences that read a result
// (MeasuredNote, AheadNote, the depth predictor's verdict, a prediction's
// error split). The core returns values; how they read is decided here,
// once for every face.
package present

import "fmt"

// Human writes a count with a K/M/B suffix.
func Human(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fB%s", v/1e9, unit)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM%s", v/1e6, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK%s", v/1e3, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

// HumanBytes writes a size in B, KiB, MiB or GiB.
func HumanBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
