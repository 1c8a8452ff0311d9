package measure

import (
	"context"
	"fmt"
	"strings"
	"time"

	"arborist/engine/model"
	"arborist/profiles/costmodel"
)

// PassAnchor is a pass of Seqs sequences of one row each: the stored
// curve's time and the time now (SeqsCurve's rounds), and Now / Stored.
type PassAnchor struct {
	Seqs        int
	Stored, Now time.Duration
	Scale       float64
}

// RecheckPasses re-times each curve of passes of several sequences at
// its narrowest pass (one row a sequence) and rescales the curves whose
// pass moved past RecheckTolerance by its own ratio. The quick re-check's
// one-sequence anchors do not carry to them: a pass of eight sequences
// spends most of its time in their attention and the rest in the
// weights, where one sequence's is the weights' read, and with the
// bandwidth a third below the profile's the one-sequence anchors read
// x1.5 while plain batching at eight measured 1,213 tokens/s against the
// 921 their ratio priced. Returns the curves to price with (a copy) and
// what it found, in the order of passes.
func RecheckPasses(ctx context.Context, m *model.Model, passes []costmodel.PassCurve) ([]costmodel.PassCurve, []PassAnchor, error) {
	out := make([]costmodel.PassCurve, len(passes))
	copy(out, passes)
	var found []PassAnchor
	for i, pc := range passes {
		if pc.Seqs < 2 || len(pc.Verify) == 0 {
			continue
		}
		a := PassAnchor{Seqs: pc.Seqs, Stored: costmodel.Interp(pc.Verify, pc.Seqs)}
		if a.Stored <= 0 {
			return out, found, fmt.Errorf("profiles: the curve of passes of %d sequences has no positive time at %d rows", pc.Seqs, pc.Seqs)
		}
		now, err := SeqsCurve(ctx, m, pc.Seqs, []int{pc.Seqs}, CurveOptions{Warmup: 2, MinReps: 7, MaxReps: 11})
		if err != nil {
			return out, found, err
		}
		a.Now = now[0].Median
		a.Scale = float64(a.Now) / float64(a.Stored)
		if moved(a.Scale) {
			out[i].Verify = RescaleAt(pc.Verify, []int{pc.Seqs}, []float64{a.Scale})
		}
		found = append(found, a)
	}
	return out, found, nil
}

// passesLine is the re-check's line of the passes of several sequences.
func passesLine(found []PassAnchor) string {
	var b strings.Builder
	b.WriteString("passes of several sequences re-check (one row each):")
	for i, a := range found {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %d stored %.2f ms, now %.2f ms", a.Seqs, float64(a.Stored)/1e6, float64(a.Now)/1e6)
		if moved(a.Scale) {
			fmt.Fprintf(&b, " (rescaled x%.2f)", a.Scale)
		} else {
			b.WriteString(" (kept)")
		}
	}
	return b.String()
}
