package present

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"arborist/profiles"
)

// MeasuredNote reads a run's measured speedup with how it was measured:
// its rounds and their range, and the first round's throughputs (Totals
// and Base); "" without a baseline.
func MeasuredNote(r *profiles.RunResult) string {
	switch {
	case r.Base == nil:
		return ""
	case r.SelfBaseline:
		return "1.00x over plain decoding (the plan is plain decoding, its own baseline)"
	case len(r.Rounds) <= 1:
		return fmt.Sprintf("%.2fx over plain decoding (%.1f against %.1f tokens/s, one round)", r.Speedup, r.Totals.TPS(), r.Base.TPS())
	}
	plan, plain := r.MedianTPS()
	if plan == 0 { // an older result without the rounds' figures
		plan, plain = r.Totals.TPS(), r.Base.TPS()
	}
	return fmt.Sprintf("%.2fx over plain decoding, the median of %d interleaved rounds (%.2f-%.2fx; medians %.1f against %.1f tokens/s)",
		r.Speedup, len(r.Rounds), slices.Min(r.Rounds), slices.Max(r.Rounds), plan, plain)
}

// AheadNote says how often the drafting done beside verification was of
// use: the steps that drafted ahead and those whose verdict met what they
// prepared, with the time spent waiting for it; "" for a run that drafted
// nothing ahead.
func AheadNote(t *profiles.Totals) string {
	if t.Ahead == 0 {
		return ""
	}
	s := fmt.Sprintf("drafted ahead on %d steps; the verdict met what was prepared on %d (%.0f%%)", t.Ahead, t.AheadHits, 100*float64(t.AheadHits)/float64(t.Ahead))
	if t.Wait > 0 && t.Steps > 0 {
		s += fmt.Sprintf(", waiting %.3f ms a step for it", t.Wait.Seconds()*1000/float64(t.Steps))
	}
	return s
}

// PredictorSummary says in a sentence how a depth predictor fares against
// the policies it must beat on held-out prompts, and what tune does with
// it.
func PredictorSummary(r *profiles.PredictorReport) string {
	st := r.Stats
	s := fmt.Sprintf("Depth predictor %d for %s (reads %s): %.2fx plain decoding on %d held-out steps, against %.2fx for the best fixed depth (%d), %.2fx for the best threshold (%g) and %.2fx with every step at its best depth.",
		r.ID, st.Plan, st.Chosen, st.Predictor, st.Steps[2], st.Fixed[st.BestFixed-1], st.BestFixed, st.ThresholdSpeedup, st.Threshold, st.Oracle)
	return s + " " + PredictorVerdict(r)
}

// PredictorVerdict says whether a depth predictor beat the best fixed
// depth and the best threshold policy on held-out prompts, naming the
// ones that were faster when it did not, and what tune does with it.
func PredictorVerdict(r *profiles.PredictorReport) string {
	st := r.Stats
	if st.Beats {
		return fmt.Sprintf("It is at least as fast as the best fixed depth and the best threshold: tune prices and offers %q.", r.Plan.String())
	}
	var faster []string
	if f := st.Fixed[st.BestFixed-1]; f > st.Predictor {
		faster = append(faster, fmt.Sprintf("the best fixed depth (%d, %.3fx)", st.BestFixed, f))
	}
	if st.ThresholdSpeedup > st.Predictor {
		faster = append(faster, fmt.Sprintf("the best threshold (%g, %.3fx)", st.Threshold, st.ThresholdSpeedup))
	}
	return fmt.Sprintf("It is slower than %s on held-out prompts (%.3fx): tune leaves it out, and a fixed or threshold plan is the one to run.",
		strings.Join(faster, " and "), st.Predictor)
}

// Split reads a prediction's error split (profiles.ErrorSplit) as the
// factors by which each part made the prediction high (+) or low (-); ""
// where the runs measured no steps.
func Split(e profiles.ErrorSplit) string {
	if e.StepMeasured <= 0 || e.BaseMeasured <= 0 || e.AALMeasured <= 0 {
		return ""
	}
	pct := func(pred, meas float64) float64 { return 100 * (pred/meas - 1) }
	return fmt.Sprintf("tokens a step %.2f against %.2f (%+.0f%%), a step %v against %v (%+.0f%%), plain decoding's token %v against %v (%+.0f%%)",
		e.AALPredicted, e.AALMeasured, pct(e.AALPredicted, e.AALMeasured),
		e.StepPredicted.Round(time.Microsecond), e.StepMeasured.Round(time.Microsecond), pct(float64(e.StepMeasured), float64(e.StepPredicted)),
		e.BasePredicted.Round(time.Microsecond), e.BaseMeasured.Round(time.Microsecond), pct(float64(e.BasePredicted), float64(e.BaseMeasured)))
}

// Price writes a prediction's speedup with its interval, "2.93x
// (2.40-3.41x)", or alone where it has none: every screen writes a
// prediction so.
func Price(pr profiles.Prediction) string {
	if pr.High > pr.Low && pr.Low > 0 {
		return fmt.Sprintf("%.2fx (%.2f-%.2fx)", pr.Speedup, pr.Low, pr.High)
	}
	return fmt.Sprintf("%.2fx", pr.Speedup)
}

// Count writes n with its noun, singular for one: "1 request", "3
// requests" (noun is the singular; an s is added).
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
