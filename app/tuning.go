package app

// The Speedup model screen's workflows: calibrate, train the depth
// predictor, tune and validate the pair in the core, list the tuned plans
// and choose the one Run and Export use. The what-if model itself (the
// sliders, the chart, the tree) is speedup.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2/widget"

	"arborist/app/present"
	"arborist/profiles"
	"arborist/profiles/jobs"
)

// work runs a core workflow off the UI goroutine with the buttons
// disabled, reporting progress; done runs on the UI goroutine. With
// reload, the session's inputs are read again from the store afterwards
// (the workflow stored new ones). A tune hands back its own, re-checked,
// and a validation stores only runs: a reload after either had put the
// stored curves back in place of the ones the tune re-checked.
func (sp *SpeedupScreen) work(what string, reload bool, fn func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, progress profiles.Progress) (string, error), done func()) {
	ps := sp.s.PairSpec()
	if ps.Target == "" || ps.Sources() == 0 {
		sp.s.ShowError(fmt.Errorf("%s needs a target and a draft source: choose them on the Models screen", what))
		return
	}
	if sp.busy {
		return
	}
	pair := sp.s.pairNow()
	sp.busy, sp.doing = true, what
	for _, btn := range []*widget.Button{sp.Calibrate, sp.TrainPred, sp.Tune, sp.Validate} {
		btn.Disable()
	}
	sp.WorkStatus.SetText(what + " ...")
	sp.Work.SetValue(0)
	var msg string
	_, err := sp.s.startJob(what, true, func(ctx context.Context, job *jobs.Job) (any, error) {
		b, err := sp.s.Bench(ctx)
		if err == nil {
			msg, err = fn(ctx, b, ps, func(e profiles.Event) {
				frac := -1.0
				if e.Total > 0 {
					frac = float64(e.Done) / float64(e.Total)
				}
				job.Progress(frac, fmt.Sprintf("%s %d of %d %s", e.Stage, e.Done, e.Total, e.Detail))
				sp.s.UI(func() {
					if !sp.busy || !sp.s.samePair(pair) {
						return // a late event after the end, or of the pair chosen before
					}
					if e.Total > 0 {
						sp.Work.SetValue(float64(e.Done) / float64(e.Total))
					}
					sp.WorkStatus.SetText(fmt.Sprintf("%s: %s %d of %d %s", what, e.Stage, e.Done, e.Total, e.Detail))
				})
			})
		}
		if err == nil && reload {
			err = sp.s.LoadInputs(ctx, pair)
		}
		return msg, err
	}, func(v jobs.View) {
		err := v.Err
		{
			defer func() { sp.busy, sp.doing = false, ""; sp.s.Busy() }() // last: tests and users read it as "done"
			for _, btn := range []*widget.Button{sp.Calibrate, sp.TrainPred, sp.Tune} {
				btn.Enable()
			}
			sp.Validate.Disable()
			defer func() { // after done, which may have ranked the first plans
				if len(sp.ranked) > 0 {
					sp.Validate.Enable()
				}
			}()
			if !sp.s.samePair(pair) { // its results belong to the pair chosen before
				sp.pendingChoice = nil
				state := "finished"
				if err != nil {
					state = "failed"
				}
				sp.WorkStatus.SetText(fmt.Sprintf("%s %s for %s, the pair chosen before; what it stored shows when that pair is chosen again.", what, state, pairName(ps)))
				return
			}
			if v.State == jobs.Cancelled {
				sp.WorkStatus.SetText(what + " cancelled.")
				return
			}
			if err != nil {
				sp.WorkStatus.SetText(what + " failed: " + err.Error())
				sp.s.ShowError(err)
				return
			}
			sp.Work.SetValue(1)
			if done != nil {
				done()
			}
			sp.WorkStatus.SetText(msg)
			if p := sp.pendingChoice; p != nil { // after the status: choose reports on it
				sp.pendingChoice = nil
				sp.choose(*p, msg)
			}
		}
	})
	if err != nil { // refused: another heavy job runs (said in a dialog and on the job bar)
		sp.busy, sp.doing = false, ""
		for _, btn := range []*widget.Button{sp.Calibrate, sp.TrainPred, sp.Tune} {
			btn.Enable()
		}
		if len(sp.ranked) > 0 {
			sp.Validate.Enable()
		}
		sp.WorkStatus.SetText(what + " not started: " + err.Error())
	}
}

// suite reads the prompt suite and the tokens per prompt.
func (sp *SpeedupScreen) suite() (string, []string, int, error) {
	path := strings.TrimSpace(sp.Prompts.Text)
	n, err := strconv.Atoi(strings.TrimSpace(sp.CalTokens.Text))
	if err != nil || n < 2 {
		return "", nil, 0, fmt.Errorf("tokens %q must be a number above 1", sp.CalTokens.Text)
	}
	if path == "" {
		return "", nil, 0, fmt.Errorf("give a prompt suite file")
	}
	texts, err := profiles.ReadPrompts(path)
	if err == nil {
		sp.s.SetPrompts(path)
	}
	return path, texts, n, err
}

func (sp *SpeedupScreen) calibrate() {
	path, texts, n, err := sp.suite()
	if err == nil {
		var smp profiles.SampleParams
		if smp, err = sp.sampling(); err == nil {
			sp.calibrateAt(path, texts, n, smp)
			return
		}
	}
	sp.s.ShowError(err)
}

// sampling is the temperature the workflows measure at, bounded as the
// temperature field bounds it everywhere (the other fields at their
// defaults: top-p 1, seed 1).
func (sp *SpeedupScreen) sampling() (profiles.SampleParams, error) {
	p := profiles.DefaultSampling()
	if err := p.Set(profiles.TemperatureField, strings.TrimSpace(sp.Temp.Text)); err != nil {
		return p, err
	}
	return p, nil
}

// calibrateAt calibrates the pair at the sampling smp.
func (sp *SpeedupScreen) calibrateAt(path string, texts []string, n int, smp profiles.SampleParams) {
	sp.work(jobCalibrate, true, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		c, err := b.Calibrate(ctx, ps, texts, path, n, smp, pr)
		if err != nil {
			return "", err
		}
		msg := fmt.Sprintf("Calibration %d stored: %d prompts, %d steps, top-candidate acceptance %.0f%% at depth 1.", c.ID, c.Prompts, c.Acc.Steps, 100*c.Acc.At(0, 0))
		if c.Acc.Window != nil {
			msg += " Between prompts, " + c.Acc.Window.String() + "."
		}
		return msg, nil
	}, nil)
}

func (sp *SpeedupScreen) trainPredictor() {
	_, texts, n, err := sp.suite()
	if err != nil {
		sp.s.ShowError(err)
		return
	}
	sp.work(jobPredictor, true, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		r, err := b.TrainPredictor(ctx, ps, profiles.PredictorOptions{Prompts: texts, Tokens: n, Corpus: true}, pr)
		if err != nil {
			return "", err
		}
		return present.PredictorSummary(r), nil
	}, nil)
}

// tune ranks every plan in the core with the pair's stored calibration (or
// the sliders' assumed values when there is none) and lists them.
func (sp *SpeedupScreen) tune() {
	// a tune prices plans at its calibration's sampling: a temperature
	// other than the calibration's asks for a calibration at it first
	if in := sp.s.Inputs; in.Calibrated() && sp.UseCal.Checked {
		smp, err := sp.sampling()
		if err != nil {
			sp.s.ShowError(err)
			return
		}
		if at := in.Acc.Sample.Temp; at != smp.Temp {
			sp.WorkStatus.SetText(fmt.Sprintf("Not tuned: calibration %d was measured at temperature %g, the temperature asked is %g. Calibrate at %g first (a tune prices plans at its calibration's sampling), or set the temperature back to %g.",
				in.CalID, at, smp.Temp, smp.Temp, at))
			return
		}
	}
	alpha := 0.0
	if sp.s.Acc == nil || !sp.UseCal.Checked {
		alpha = sp.Alpha.Value
	}
	var res *profiles.TuneResult
	sp.work(jobTune, false, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		t, err := b.Tune(ctx, ps, profiles.TuneOptions{Alpha: alpha, Place: sp.Place.Checked}, pr)
		if err != nil {
			return "", err
		}
		res = t
		best := t.Best()
		msg := fmt.Sprintf("Tuned: %d plans ranked (acceptance %s); best %s, predicted %s, stored as plan %d. Pick a plan, then Run it.",
			len(t.Ranked), t.Inputs.Describe(), best.Plan, present.Price(best), t.PlanID)
		if rc := t.Inputs.Recheck.Brief(); rc != "" {
			msg += " " + rc
		}
		// a re-check beyond the stored curve's spread is said (under
		// the status, with the offer to profile again, until the user
		// acts), not swapped in silently
		return msg, nil
	}, func() { sp.showTune(res) })
}

// showTune shows a tune's result: its ranking, its loads, and a re-check
// that disagreed with the stored curve.
func (sp *SpeedupScreen) showTune(res *profiles.TuneResult) {
	sp.stored = res.Best().Plan.String() // Tune stored it
	// from now on this screen's chart and its best plan read the
	// tune's inputs, whose costs the tune re-checked against the
	// machine of this minute (so they are not read back from the
	// store after it): read from the stored curves, the screen's best
	// plan had been predicted at 2.50x beside the tune's 2.30x for
	// the same plan. A re-check that disagreed with the stored curve
	// stays this screen's: the other screens keep the stored curve
	// (and the tuned plan's stored prediction, whose interval carries
	// the disagreement) until the user profiles again or re-tunes.
	if _, disagreed := res.Inputs.Disagreement(); disagreed {
		sp.s.Rechecked = res.Inputs
		sp.s.Changed()
	} else {
		sp.s.SetInputs(res.Inputs)
	}
	sp.showReprofile(res.Inputs)
	sp.SetRanked(res.Ranked)
	sp.Loads.Show(res.Loads)
}

// showReprofile offers to profile again when the tune's re-check
// disagreed with the stored curve beyond its spread, and hides the offer
// when it agreed.
func (sp *SpeedupScreen) showReprofile(in *profiles.Inputs) {
	sp.offered = nil
	if note := in.DisagreementNote(); note != "" {
		sp.offered = sp.s.Rechecked
		sp.Disagreement.SetText(note)
		sp.Disagreement.Show()
		sp.Reprofile.Show()
	} else {
		sp.Disagreement.Hide()
		sp.Reprofile.Hide()
	}
}

// inputs are what this screen prices on: a tune's re-checked inputs that
// disagreed with the stored curve (until the user re-profiles or
// re-tunes), else the session's.
func (sp *SpeedupScreen) inputs() *profiles.Inputs {
	if in := sp.s.Rechecked; in != nil {
		return in
	}
	return sp.s.Inputs
}

// validate measures the tune's five best distinct plans (plans doing the
// same work under other names count once) against plain decoding,
// interleaved prompt by prompt, as `arborist tune --validate --top 5`
// does, shows predicted against measured and picks the measured best.
func (sp *SpeedupScreen) validate() {
	_, texts, n, err := sp.suite()
	if err != nil {
		sp.s.ShowError(err)
		return
	}
	// from every tuned plan, as tune --validate --top 5 does: the 25
	// listed can all be one plan under other names (on the demo pair only
	// one distinct plan was validated)
	plans, err := profiles.ValidationPlans(sp.candidates, 5)
	switch {
	case errors.Is(err, profiles.ErrPlacedValidation):
		sp.s.ShowError(fmt.Errorf("%w, and these plans were ranked across devices: choose the device and draft device of the plan you want on the Models screen, then tune without placing and validate", err))
		return
	case errors.Is(err, profiles.ErrNotTuned):
		sp.s.ShowError(fmt.Errorf("%w: there are no ranked plans to validate", err))
		return
	}
	var v *profiles.Validation
	sp.work(jobValidate, false, func(ctx context.Context, b *profiles.Bench, ps profiles.PairSpec, pr profiles.Progress) (string, error) {
		rounds := profiles.Choices().Rounds
		total := rounds * len(texts) * (len(plans) + 1)
		done := 0
		var err error
		v, err = b.Validate(ctx, ps, profiles.ValidateOptions{Plans: plans, MaxTokens: n, Prompts: texts, Rounds: rounds,
			OnRun: func(round, prompt, plan int) {
				done++
				pr(profiles.Event{Stage: "run", Done: done, Total: total, Detail: fmt.Sprintf("round %d, prompt %d", round+1, prompt+1)})
			}})
		if err != nil {
			return "", err
		}
		best := v.Plans[v.Best]
		noun := "plans"
		if len(v.Plans) == 1 {
			noun = "plan"
		}
		return fmt.Sprintf("Validated %d %s against plain decoding (%.1f tokens/s): the measured best is %s at %.2fx%s, predicted %.2fx; the predicted best reached %.0f%% of it.",
			len(v.Plans), noun, v.Base.TPS(), best.Label, best.Measured, spread(best.Rounds), best.Predicted, 100*v.Plans[0].Measured/max(best.Measured, 1e-9)), nil
	}, func() {
		sp.Validation.SetText(describeValidation(v, plans))
		sp.keepValidation(v)
		best := v.Plans[v.Best]
		for _, p := range plans {
			if p.Plan.String() == best.Plan.String() {
				sp.pendingChoice = &p
			}
		}
	})
}

// describeValidation lists each validated plan, predicted against measured.
//
// Each prediction reads with its interval, from the plans validated.
func describeValidation(v *profiles.Validation, plans []profiles.Prediction) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plain decoding: %.1f tokens/s\n", v.Base.TPS())
	for i, p := range v.Plans {
		mark := ""
		if p.Best {
			mark = "  <- measured best"
		}
		price := fmt.Sprintf("%.2fx", p.Predicted)
		for _, q := range plans {
			if samePlan(q.Plan, p.Plan) && q.Speedup == p.Predicted {
				price = present.Price(q)
			}
		}
		fmt.Fprintf(&b, "%d. %s: predicted %s, measured %.2fx%s (%.1f tokens/s)%s\n", i+1, p.Plan, price, p.Measured, spread(p.Rounds), p.Totals.TPS(), mark)
		if s := present.Split(p.Split); s != "" {
			fmt.Fprintf(&b, "    predicted against measured: %s\n", s)
		}
	}
	return strings.TrimSpace(b.String())
}

// spread says how a median speedup moved over its rounds: "median of 3
// rounds, range 1.95-2.30x" ("" for a single round).
func spread(rounds []float64) string {
	if len(rounds) < 2 {
		return ""
	}
	return fmt.Sprintf(" (median of %d rounds, range %.2f-%.2fx)", len(rounds), slices.Min(rounds), slices.Max(rounds))
}

// SetRanked lists a tune's plans and picks the best.
func (sp *SpeedupScreen) SetRanked(preds []profiles.Prediction) {
	sp.list(preds)
	if len(sp.ranked) > 0 {
		sp.Ranked.SetSelectedIndex(0)
	}
}

// list shows the plans ranked (the best 25) and enables their validation.
func (sp *SpeedupScreen) list(preds []profiles.Prediction) {
	listed := profiles.Twinless(preds) // each plan once, under its first name
	sp.ranked, sp.candidates = listed[:min(len(listed), 25)], preds
	var opts []string
	for i, p := range sp.ranked {
		o := fmt.Sprintf("%d. %s: %s (AAL %.2f, %d nodes)", i+1, p.Plan, present.Price(p), p.AAL, p.Nodes)
		if where := p.Where(); where != "" {
			o += ", " + where
		}
		opts = append(opts, o)
	}
	sp.Ranked.Options = opts
	if len(opts) > 0 && !sp.busy {
		sp.Validate.Enable()
	}
	sp.Ranked.Refresh()
}

// workHint is the work status before anything is done for a pair.
const workHint = "Calibrate the pair on a prompt suite, then Tune: the ranked plans appear below; the chosen one runs on the Run screen."

// pairShown clears the previous pair's results (its ranking, chosen plan,
// validation, work status and the curve's zoom) and shows the new pair's
// stored ones: its newest plan, picked again without storing it again, in
// a tune's ranking scored again on the stored curves and calibration, and
// the last validation while its runs are stored.
func (sp *SpeedupScreen) pairShown(st *profiles.PairState, err error) {
	if st == nil {
		if err != nil {
			return
		}
		sp.ranked, sp.candidates, sp.pendingChoice, sp.stored = nil, nil, nil, ""
		sp.Ranked.Options = nil
		sp.Ranked.ClearSelected()
		sp.Ranked.Refresh()
		sp.Validate.Disable()
		sp.Validation.SetText("")
		sp.Work.SetValue(0)
		sp.WorkStatus.SetText(workHint)
		sp.Curve.ResetZoom() // the session's Changed that follows redraws the model
		return
	}
	if st.PlanID == 0 || sp.busy || len(sp.ranked) > 0 || sp.s.Tuned != nil {
		return // nothing stored, or work since the pair was chosen shows its own
	}
	ranked, at := profiles.Twinless(st.Ranked), -1
	for i, p := range ranked[:min(len(ranked), 25)] {
		if samePlan(p.Plan, st.Plan.Plan) {
			at = i
			break
		}
	}
	if at >= 0 {
		// the stored plan's price is the one stored with it (its interval,
		// curve and calibration), not the ranking's re-scoring: one price
		// a plan on every screen until it is tuned again
		ranked = slices.Clone(ranked)
		ranked[at] = st.Plan
	}
	if at < 0 { // picked from the chart, or beyond the best 25
		ranked, at = profiles.Twinless(append([]profiles.Prediction{st.Plan}, st.Ranked...)), 0
	}
	sp.stored = st.Plan.Plan.String() // the database holds it: picking it stores nothing
	sp.list(ranked)
	sp.Ranked.SetSelectedIndex(at)
	msg := fmt.Sprintf("Stored plan %d, the pair's newest (Run and Export use it): %s.", st.PlanID, st.Plan.Plan)
	if len(st.Ranked) > 0 {
		msg += " The list is a tune's ranking scored again on the stored curves and calibration; Tune again to re-check this machine."
	}
	sp.WorkStatus.SetText(msg)
	if text := sp.keptValidation(st); text != "" && sp.Validation.Text == "" {
		sp.Validation.SetText(text)
	}
}

// samePlan says whether two plans are the same in every field their
// strategy reads.
func samePlan(a, b profiles.Plan) bool {
	ja, _ := json.Marshal(a.Trim())
	jb, _ := json.Marshal(b.Trim())
	return string(ja) == string(jb)
}

// pairName names a pair in messages.
func pairName(ps profiles.PairSpec) string {
	name := filepath.Base(ps.Target)
	if src := ps.SourceName(); src != "" {
		name += " with " + src
	}
	return name
}

// keptValidation is what the GUI keeps of a validation across restarts
// (the core stores its runs, not the validation): the text shown, and the
// runs it stored, without which it is not shown again.
type keptValidation struct {
	Text string  `json:"text"`
	Runs []int64 `json:"runs"`
}

// prefValidation prefixes the preference keeping a pair's last validation.
const prefValidation = "validation."

// pairKey names the chosen pair in the database, for preferences.
func (s *Session) pairKey() string {
	ps := s.PairSpec()
	h := fnv.New64a()
	for _, f := range []string{s.DBPath, ps.Target, ps.SourceName(), ps.Backend, ps.DraftBackend} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// keepValidation remembers the validation shown, for the pair.
func (sp *SpeedupScreen) keepValidation(v *profiles.Validation) {
	k := keptValidation{Text: sp.Validation.Text}
	if v.BaseRunID > 0 {
		k.Runs = append(k.Runs, v.BaseRunID)
	}
	for _, p := range v.Plans {
		if p.RunID > 0 {
			k.Runs = append(k.Runs, p.RunID)
		}
	}
	if len(k.Runs) == 0 {
		return // nothing stored: nothing to show again
	}
	b, err := json.Marshal(k)
	if err == nil {
		sp.s.App.Preferences().SetString(prefValidation+sp.s.pairKey(), string(b))
	}
}

// keptValidation is the pair's last validation while all its runs are
// still stored ("" otherwise).
func (sp *SpeedupScreen) keptValidation(st *profiles.PairState) string {
	var k keptValidation
	if json.Unmarshal([]byte(sp.s.App.Preferences().String(prefValidation+sp.s.pairKey())), &k) != nil || len(k.Runs) == 0 {
		return ""
	}
	have := map[int64]bool{}
	for _, r := range st.Runs {
		have[r.ID] = true
	}
	for _, id := range k.Runs {
		if !have[id] {
			return ""
		}
	}
	return k.Text
}

// pick makes the chosen ranked plan the session's tuned plan.
func (sp *SpeedupScreen) pick(string) {
	if sp.selecting {
		return // choose marks its plan in the list
	}
	i := sp.Ranked.SelectedIndex()
	if i < 0 || i >= len(sp.ranked) {
		return
	}
	p := sp.ranked[i]
	sp.choose(p, fmt.Sprintf("Picked plan %d of the tune: %s, predicted %s.", i+1, p.Plan, present.Price(p)))
}

// choose makes p the plan Run and Export use: the session's tuned plan at
// once, and the pair's newest stored plan (what Export renders, in the GUI
// and `arborist export`) once the core has stored it.
func (sp *SpeedupScreen) choose(p profiles.Prediction, msg string) {
	// the list marks the plan chosen (a validation's measured best, a
	// point of the chart), not the one picked before
	for i, q := range sp.ranked {
		if samePlan(q.Plan, p.Plan) && sp.Ranked.SelectedIndex() != i {
			sp.selecting = true
			sp.Ranked.SetSelectedIndex(i)
			sp.selecting = false
			break
		}
	}
	sp.s.Tuned, sp.s.TunedAssumed = &p, !sp.inputs().Calibrated()
	sp.s.Changed()
	ps := sp.s.PairSpec()
	if ps.Target == "" || ps.Sources() == 0 {
		sp.WorkStatus.SetText(msg + " Run can use it; load a pair on the Models screen to export it.")
		return
	}
	key := p.Plan.String()
	if key == sp.stored {
		sp.WorkStatus.SetText(msg + " Run and Export use it.")
		return
	}
	sp.WorkStatus.SetText(msg + " Run can use it; storing it for Export ...")
	sp.s.Write(func() {
		ctx := context.Background()
		b, err := sp.s.Bench(ctx)
		var id int64
		if err == nil {
			id, err = b.Choose(ctx, ps, p)
		}
		sp.s.UI(func() {
			if sp.s.Tuned == nil || sp.s.Tuned.Plan.String() != key {
				return // another plan was picked meanwhile
			}
			if err != nil {
				sp.WorkStatus.SetText(msg + " Run can use it; it could not be stored for Export: " + err.Error())
				return
			}
			sp.stored = key
			sp.WorkStatus.SetText(fmt.Sprintf("%s Stored as plan %d (its id in the database; the list marks it): Run and Export use it.", msg, id))
		})
	})
}
