package app

import (
	"context"
	"fmt"
	"image"
	"os"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/engine/tree"
	"arborist/profiles"
	"arborist/profiles/store"
)

// RunScreen runs a full speculative decoding session: streaming text with
// accepted draft tokens marked, live tokens/s, AAL and acceptance, a
// per-step timeline, a Stop button; every run is stored.
type RunScreen struct {
	s        *Session
	Prompt   *widget.Entry
	Suite    *widget.Entry // optional prompt suite file, one prompt per line
	Strategy *widget.Select
	Gamma    *widget.Entry
	Tokens   *widget.Entry
	Temp     *widget.Entry
	Start    *widget.Button
	Stop     *widget.Button
	Baseline *widget.Check // also run plain decoding and store the measured speedup
	Text     *widget.RichText
	Stats    *widget.Label
	Timeline *canvas.Image
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewRunScreen builds the screen.
func NewRunScreen(s *Session) *RunScreen {
	r := &RunScreen{s: s}
	r.Prompt = widget.NewMultiLineEntry()
	r.Prompt.SetText("Once upon a time")
	r.Prompt.SetMinRowsVisible(2)
	r.Suite = widget.NewEntry()
	r.Suite.SetPlaceHolder("or a prompt suite file (one prompt per line), e.g. ../shared/prompts/stories.txt")
	r.Strategy = widget.NewSelect(spec.Strategies, nil)
	r.Strategy.SetSelected("chain")
	r.Gamma = widget.NewEntry()
	r.Gamma.SetText("4")
	r.Tokens = widget.NewEntry()
	r.Tokens.SetText("128")
	r.Temp = widget.NewEntry()
	r.Temp.SetText("0")
	r.Start = widget.NewButton("Run", r.run)
	r.Start.Importance = widget.HighImportance
	r.Stop = widget.NewButton("Stop", func() {
		if r.cancel != nil {
			r.cancel()
		}
	})
	r.Stop.Disable()
	r.Baseline = widget.NewCheck("compare with plain decoding (measured speedup; greedy output checked identical)", nil)
	r.Text = widget.NewRichText()
	r.Text.Wrapping = fyne.TextWrapWord
	r.Stats = widget.NewLabel("Green: draft tokens the target accepted. Plain: the target's own (bonus) tokens.")
	r.Stats.Wrapping = fyne.TextWrapWord
	r.Timeline = newChart(600, 230)
	return r
}

// Title is the tab name.
func (r *RunScreen) Title() string { return "Run" }

// Content lays the screen out.
func (r *RunScreen) Content() fyne.CanvasObject {
	form := widget.NewForm(
		widget.NewFormItem("Prompt", r.Prompt),
		widget.NewFormItem("Prompt suite", r.Suite),
		widget.NewFormItem("Strategy", container.NewHBox(r.Strategy, widget.NewLabel("gamma / depth"), r.Gamma,
			widget.NewLabel("tokens"), r.Tokens, widget.NewLabel("temperature"), r.Temp)),
	)
	top := container.NewVBox(form, container.NewHBox(r.Start, r.Stop, r.Baseline), r.Stats)
	return container.NewBorder(top, r.Timeline, nil, nil, container.NewVScroll(r.Text))
}

// config builds the engine configuration from the widgets.
func (r *RunScreen) config() (spec.Config, error) {
	gamma, err := strconv.Atoi(strings.TrimSpace(r.Gamma.Text))
	if err != nil || gamma < 1 {
		return spec.Config{}, fmt.Errorf("gamma %q must be a positive number", r.Gamma.Text)
	}
	n, err := strconv.Atoi(strings.TrimSpace(r.Tokens.Text))
	if err != nil || n < 1 {
		return spec.Config{}, fmt.Errorf("tokens %q must be a positive number", r.Tokens.Text)
	}
	temp, err := strconv.ParseFloat(strings.TrimSpace(r.Temp.Text), 32)
	if err != nil || temp < 0 {
		return spec.Config{}, fmt.Errorf("temperature %q must be a number >= 0", r.Temp.Text)
	}
	c := spec.Config{Strategy: r.Strategy.Selected, Gamma: gamma, MaxTokens: n, StopAtEOS: true,
		Sample: sample.Params{Temp: float32(temp), TopP: 1, Seed: 1}, MaxSeqs: 4}
	ws := make([]int, gamma)
	for i := range ws {
		ws[i] = 2
	}
	ws[0] = 1
	c.Widths, c.Branch, c.WMax = ws, 2, 2*gamma
	widths := []int{2}
	for len(widths) < gamma {
		widths = append(widths, 1)
	}
	c.Static, _ = tree.FromWidths(widths)
	return c, c.Validate()
}

func (r *RunScreen) run() {
	cfg, err := r.config()
	if err != nil {
		r.s.ShowError(err)
		return
	}
	pspec := r.s.Spec
	pspec.DB = r.s.DBPath // where a hidden-state drafter's id is looked up
	if pspec.Target == "" {
		r.s.ShowError(fmt.Errorf("choose and load models on the Models screen first"))
		return
	}
	if cfg.Strategy != "ar" && pspec.Sources() == 0 {
		r.s.ShowError(fmt.Errorf("strategy %s needs a draft source: choose one on the Models screen", cfg.Strategy))
		return
	}
	prompts := []string{r.Prompt.Text}
	if path := strings.TrimSpace(r.Suite.Text); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			r.s.ShowError(err)
			return
		}
		prompts = nil
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				prompts = append(prompts, l)
			}
		}
		if len(prompts) == 0 {
			r.s.ShowError(fmt.Errorf("%s has no prompts", path))
			return
		}
	}
	baseline := r.Baseline.Checked && cfg.Strategy != "ar"
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan struct{})
	r.Start.Disable()
	r.Stop.Enable()
	r.Text.Segments = nil
	r.Text.Refresh()
	r.Stats.SetText("Loading models ...")
	go func() {
		defer close(r.done)
		defer cancel()
		err := r.session(ctx, pspec, cfg, prompts, baseline)
		fyne.Do(func() {
			r.Start.Enable()
			r.Stop.Disable()
			r.cancel = nil
			if err != nil && ctx.Err() == nil {
				r.Stats.SetText("Failed: " + err.Error())
				r.s.ShowError(err)
			}
		})
	}()
}

// Wait blocks until the current run (if any) has finished.
func (r *RunScreen) Wait() {
	if r.done != nil {
		<-r.done
	}
}

func (r *RunScreen) session(ctx context.Context, pspec profiles.PairSpec, cfg spec.Config, prompts []string, baseline bool) error {
	pair, err := profiles.OpenPair(pspec, cfg.Sample, cfg.Strategy == "duo")
	if err != nil {
		return err
	}
	defer pair.Close()
	st, err := r.s.Store(ctx)
	if err != nil {
		return err
	}
	run := &store.Run{Hardware: profiles.DetectHardware().Fingerprint, Target: pspec.Target, Drafter: pspec.SourceName(), Strategy: cfg.Strategy, Settings: cfg, Prompts: prompts}
	if _, err := st.CreateRun(ctx, run); err != nil {
		return err
	}
	eng := &spec.Engine{Target: pair.Target, Source: pair.Source, Concurrent: pair.Concurrent}
	if cfg.Strategy == "ar" {
		eng.Source = nil
	}
	var steps []spec.Step
	var pending []store.Step
	promptIdx := 0 // the suite prompt being decoded, recorded with each step
	tokens, accepted, drafted := 0, 0, 0
	start := time.Now()
	lastDraw := time.Now()
	cfg.OnToken = func(id int, draftTok bool) {
		piece := pair.Target.Tok.Piece(id)
		seg := &widget.TextSegment{Text: piece, Style: widget.RichTextStyleInline}
		if draftTok {
			seg.Style.ColorName = "success"
		}
		fyne.Do(func() {
			r.Text.Segments = append(r.Text.Segments, seg)
			r.Text.Refresh()
		})
	}
	cfg.OnStep = func(s spec.Step) {
		steps = append(steps, s)
		tokens += s.Emitted
		accepted += s.Accepted
		drafted += s.Drafted
		pending = append(pending, profiles.StepRecord(len(steps)-1, promptIdx, s))
		if len(pending) >= 16 {
			st.AppendSteps(context.WithoutCancel(ctx), run.ID, pending)
			pending = pending[:0]
		}
		if time.Since(lastDraw) > 250*time.Millisecond {
			lastDraw = time.Now()
			stats := liveStats(tokens, len(steps), accepted, drafted, time.Since(start))
			img := timeline(steps)
			fyne.Do(func() {
				r.Stats.SetText(stats)
				r.Timeline.Image = img
				r.Timeline.Refresh()
			})
		}
	}
	var runErr error
	var decode time.Duration
	var out [][]int // emitted tokens per prompt, for the baseline check
	for pi, prompt := range prompts {
		promptIdx = pi
		fyne.Do(func() {
			text := prompt
			if len(r.Text.Segments) > 0 {
				text = "\n\n" + prompt
			}
			r.Text.Segments = append(r.Text.Segments, &widget.TextSegment{Text: text, Style: widget.RichTextStyle{Inline: true, TextStyle: fyne.TextStyle{Italic: true}}})
			r.Text.Refresh()
		})
		ids := pair.Target.Tok.Encode(prompt, true, false)
		res, err := eng.Run(ctx, ids, cfg)
		if res != nil {
			decode += res.Decode
			out = append(out, res.Tokens)
		}
		if err != nil {
			runErr = err
			break
		}
	}
	st.AppendSteps(context.WithoutCancel(ctx), run.ID, pending)
	note := ""
	if baseline && runErr == nil && decode > 0 {
		fyne.Do(func() { r.Stats.SetText("Running plain decoding for the baseline ...") })
		speedup, same, err := arBaseline(ctx, pair, cfg, prompts, out, float64(tokens)/decode.Seconds())
		switch {
		case err != nil:
			runErr = err
		case cfg.Sample.Greedy() && !same:
			runErr = fmt.Errorf("greedy output differs from plain decoding: speculative decoding was not lossless")
		default:
			run.MeasuredSpeedup = speedup
			note = fmt.Sprintf(" Measured speedup over plain decoding: %.2fx.", speedup)
			if cfg.Sample.Greedy() {
				note += " Output identical to plain decoding."
			}
		}
	}
	run.Status = "done"
	if runErr != nil {
		run.Status = "failed"
		if ctx.Err() != nil {
			run.Status = "stopped"
		}
	}
	run.Tokens, run.Steps, run.Decode = tokens, len(steps), decode
	if decode > 0 {
		run.TokensPerSecond = float64(tokens) / decode.Seconds()
	}
	if len(steps) > 0 {
		run.AAL = float64(tokens) / float64(len(steps))
	}
	if drafted > 0 {
		run.Acceptance = float64(accepted) / float64(drafted)
	}
	if err := st.FinishRun(context.WithoutCancel(ctx), run); err != nil && runErr == nil {
		runErr = err
	}
	if hs := pair.Hidden; hs != nil && cfg.Strategy != "ar" {
		hst := hs.Stats()
		note += fmt.Sprintf(" Hidden drafter: %d of %d steps re-sampled after a rejection (%.1f%% of decode time).", hst.Resampled, hst.Steps, 100*hst.Resample.Seconds()/max(decode.Seconds(), 1e-9))
	}
	stats := liveStats(tokens, len(steps), accepted, drafted, time.Since(start)) + fmt.Sprintf(" Stored as run %d (%s).", run.ID, run.Status) + note
	img := timeline(steps)
	fyne.Do(func() {
		r.Stats.SetText(stats)
		r.Timeline.Image = img
		r.Timeline.Refresh()
		r.s.Changed()
	})
	return runErr
}

func liveStats(tokens, steps, accepted, drafted int, el time.Duration) string {
	aal, acc := 0.0, 0.0
	if steps > 0 {
		aal = float64(tokens) / float64(steps)
	}
	if drafted > 0 {
		acc = 100 * float64(accepted) / float64(drafted)
	}
	return fmt.Sprintf("%d tokens, %.1f tokens/s, AAL %.2f, acceptance %.1f%% (%d steps).", tokens, float64(tokens)/el.Seconds(), aal, acc, steps)
}

// timeline charts each step's draft, verify and overhead time, and the
// drafting that overlapped verification (duo, AOT).
func timeline(steps []spec.Step) image.Image {
	names := []string{"draft", "verify", "overhead", "overlap (draft during verify)"}
	series := make([]Series, len(names))
	for i := range series {
		series[i].Name = names[i]
	}
	for i, s := range steps {
		for k, d := range []time.Duration{s.Draft, s.Verify, s.Overhead, s.Overlap} {
			series[k].X = append(series[k].X, float64(i+1))
			series[k].Y = append(series[k].Y, float64(d)/1e6)
		}
	}
	return RenderChart(ChartSpec{Title: "Per-step timeline", XLabel: "step", YLabel: "milliseconds", Series: series, Width: 760, Height: 260})
}

// arBaseline runs plain decoding on the same prompts and returns the
// speculative run's speedup over it and whether the outputs were identical.
func arBaseline(ctx context.Context, pair *profiles.Pair, cfg spec.Config, prompts []string, got [][]int, tps float64) (float64, bool, error) {
	base := cfg
	base.Strategy, base.OnToken, base.OnStep = "ar", nil, nil
	eng := &spec.Engine{Target: pair.Target}
	tokens, same := 0, len(got) == len(prompts)
	var decode time.Duration
	for i, p := range prompts {
		res, err := eng.Run(ctx, pair.Target.Tok.Encode(p, true, false), base)
		if err != nil {
			return 0, false, err
		}
		tokens += len(res.Tokens)
		decode += res.Decode
		if i < len(got) && fmt.Sprint(got[i]) != fmt.Sprint(res.Tokens) {
			same = false
		}
	}
	if decode <= 0 {
		return 0, same, nil
	}
	return tps / (float64(tokens) / decode.Seconds()), same, nil
}
