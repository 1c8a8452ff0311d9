package app

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"arborist/app/present"
	"arborist/app/serve"
	"arborist/assets"
	"arborist/profiles"
	"arborist/profiles/config"
	"arborist/profiles/jobs"
	"arborist/profiles/llamacheck"
)

// ExportScreen shows the best plan as config.yaml, saves it, gives the
// closest llama.cpp / vLLM / SGLang settings with Copy buttons, and serves
// the config shown behind an OpenAI-compatible API on a local port.
type ExportScreen struct {
	s           *Session
	YAML        *widget.Entry
	Equivalents *widget.Entry
	Save        *widget.Button
	CopyYAML    *widget.Button
	CopyEq      *widget.Button
	Status      *widget.Label
	// Provenance says what the plan was computed from, or warns that
	// some of it is assumed, not measured.
	Provenance *widget.Label
	// Port, Serve and ServeStatus serve the config shown (its text, as
	// edited) on 127.0.0.1:Port, as `arborist serve` does, until Stop.
	Port        *widget.Entry
	Serve       *widget.Button
	ServeStatus *widget.Label
	serving     *serve.Background // on the UI goroutine
	stopServe   chan struct{}     // closed to stop; nil when not serving
	// LlamaDir (with Browse), Check and CheckStatus measure the exported
	// llama.cpp settings in llama.cpp against its plain decoding, as
	// `arborist check-export` does, on the session's prompt suite.
	LlamaDir    *widget.Entry
	Browse      *widget.Button
	Check       *widget.Button
	CheckStatus *widget.Label
	// build is the version the llama.cpp in buildDir printed ("" while
	// not known); on the UI goroutine
	build, buildDir string
	// Tune measures llama.cpp's own draft lengths in llama.cpp, as
	// `arborist check-export --tune` does, and puts the fastest into the
	// YAML shown (Save keeps it).
	Tune *widget.Button
	// Load load-tests the config shown at several concurrencies
	// (loadtest.go).
	Load   *LoadTestPanel
	cfg    *config.Config
	planID int64
}

// NewExportScreen builds the screen.
func NewExportScreen(s *Session) *ExportScreen {
	e := &ExportScreen{s: s}
	e.YAML = widget.NewMultiLineEntry()
	e.YAML.TextStyle = fyne.TextStyle{Monospace: true}
	e.YAML.SetMinRowsVisible(14)
	e.Equivalents = widget.NewMultiLineEntry()
	e.Equivalents.TextStyle = fyne.TextStyle{Monospace: true}
	e.Equivalents.Wrapping = fyne.TextWrapWord
	e.Status = widget.NewLabel("")
	e.Provenance = widget.NewLabel("No plan yet: nothing is predicted before the pair is profiled, calibrated and tuned.")
	e.Provenance.Wrapping = fyne.TextWrapWord
	e.Provenance.Importance = widget.WarningImportance
	e.Save = widget.NewButton("Save config.yaml...", e.save)
	e.CopyYAML = widget.NewButton("Copy YAML", func() { e.copy(e.YAML.Text) })
	e.CopyEq = widget.NewButton("Copy settings", func() { e.copy(e.Equivalents.Text) })
	e.YAML.SetText("# Load models, profile, calibrate and tune (Speedup model screen): the tuned plan appears here.")
	e.Port = widget.NewEntry()
	e.Port.SetText("8080")
	e.Serve = widget.NewButton("Serve", e.toggleServe)
	e.ServeStatus = widget.NewLabel("Not serving. Serve answers OpenAI-compatible requests (/v1/completions, /v1/chat/completions) with the plan above, several requests decoding together in one batch.")
	e.ServeStatus.Wrapping = fyne.TextWrapWord
	e.LlamaDir = widget.NewEntry()
	e.LlamaDir.SetPlaceHolder("llama.cpp's bin folder (empty: PATH)")
	e.LlamaDir.SetText(s.App.Preferences().String(prefLlamaCpp))
	e.Browse = widget.NewButton("Browse...", e.browseLlama)
	e.Check = widget.NewButton("Check in llama.cpp", e.checkLlama)
	e.Tune = widget.NewButton("Tune for llama.cpp", e.tuneLlama)
	e.CheckStatus = widget.NewLabel(e.checkHint())
	e.CheckStatus.Wrapping = fyne.TextWrapWord
	e.LlamaDir.OnSubmitted = func(string) { e.readBuild() }
	e.readBuild()
	e.Load = newLoadTestPanel(e)
	e.YAML.OnChanged = func(string) { e.enableUse() }
	e.enableUse()
	s.OnPair(e.pairShown)
	return e
}

// usable says whether the YAML shown is a config (a pair without a plan
// shows a comment: nothing to serve, check or tune).
func (e *ExportScreen) usable() bool {
	_, err := config.Parse("config.yaml", []byte(e.YAML.Text))
	return err == nil
}

// enableUse enables Serve, Check and Tune only for a config (Check and
// Tune beside a running heavy job queue behind it). On the UI goroutine.
func (e *ExportScreen) enableUse() {
	ok := e.usable()
	for _, b := range []*widget.Button{e.Serve, e.Check, e.Tune, e.Save} {
		switch {
		case !ok:
			b.Disable()
		case b == e.Serve && e.stopServe != nil:
		default:
			b.Enable()
		}
	}
}

// checkHint is the llama.cpp check's status before a check: what Check
// and Tune do, and which llama.cpp the flags are for, the build found in
// the folder given (its own --version) or, before one is known, the
// release they are written for.
func (e *ExportScreen) checkHint() string {
	if e.build != "" {
		return checkHintText + fmt.Sprintf(" The llama.cpp in %s is version %s (the flags are written for release %s or later).", e.buildDir, e.build, profiles.LlamaCppFlagsRelease)
	}
	return checkHintText + fmt.Sprintf(" The llama.cpp flags are written for release %s or later; give llama.cpp's folder to see its build's version.", profiles.LlamaCppFlagsRelease)
}

// readBuild reads the version of the llama.cpp build in the folder given
// (its program's --version, off the UI goroutine) and shows it in the
// hint; no folder, or none there, leaves the release the flags are for.
func (e *ExportScreen) readBuild() {
	dir := strings.TrimSpace(e.LlamaDir.Text)
	if dir == e.buildDir && (dir == "" || e.build != "") {
		return
	}
	e.build, e.buildDir = "", dir
	if dir == "" {
		e.showBuild()
		return
	}
	e.s.Go(func(ctx context.Context) {
		v, err := profiles.LlamaCppBuild(ctx, dir)
		e.s.UI(func() {
			if dir != e.buildDir {
				return // another folder given since
			}
			if err == nil { // else none there: the release the flags are for
				e.build = v
			}
			e.showBuild()
		})
	})
}

// showBuild refreshes the hint when it is what the status shows.
func (e *ExportScreen) showBuild() {
	if strings.HasPrefix(e.CheckStatus.Text, checkHintText) {
		e.CheckStatus.SetText(e.checkHint())
	}
}

// checkHintText is what Check and Tune do, the start of checkHint.
const checkHintText = "The plan's speedup is predicted for Arborist's engine; Check measures the llama.cpp line above in llama.cpp itself, Tune measures llama.cpp's own draft lengths there and keeps the fastest."

// pairShown clears what was said of the previous pair's config (saved,
// checked) and renders the new pair's newest plan.
func (e *ExportScreen) pairShown(st *profiles.PairState, err error) {
	switch {
	case st == nil && err == nil:
		e.Status.SetText("")
		e.showLlamaJobs() // the pair's own checks, if any
	case st != nil && st.Steps.Exports > 0:
		times := present.Count(st.Steps.Exports, "time")
		if st.Steps.Exports == 1 {
			times = "once"
		}
		e.Status.SetText("exported " + times + " before")
	}
	e.Update()
}

// Title is the tab name.
func (e *ExportScreen) Title() string { return "Export" }

// Content lays the screen out.
func (e *ExportScreen) Content() fyne.CanvasObject {
	port := container.NewGridWrap(fyne.NewSize(90, e.Port.MinSize().Height), e.Port)
	// the port and Serve at their own height, top-aligned: beside a
	// status wrapped onto two lines they stretched Serve to twice a button
	serve := container.NewBorder(nil, nil, container.NewVBox(container.NewHBox(widget.NewLabel("Port"), port, e.Serve)), nil, e.ServeStatus)
	dir := container.NewGridWrap(fyne.NewSize(260, e.LlamaDir.MinSize().Height), e.LlamaDir)
	// the status under the buttons, as wide as the screen: beside them it
	// wrapped into a narrow column that stretched the buttons at 1024
	check := container.NewVBox(container.NewHBox(widget.NewLabel("llama.cpp"), dir, e.Browse, e.Check, e.Tune), e.CheckStatus)
	top := container.NewVBox(container.NewHBox(e.Save, e.CopyYAML, e.CopyEq, e.Status), e.Provenance, serve, check, e.Load.View())
	return container.NewBorder(top, nil, nil, nil, container.NewVSplit(e.YAML, e.Equivalents))
}

// Update rebuilds the export in the background (see Reload), as the
// session's work: Close waits for it, and tests wait for it to be idle.
func (e *ExportScreen) Update() {
	e.s.Go(func(context.Context) { _ = e.Reload() })
}

// Reload renders the pair's newest tuned plan through the workflow core,
// exactly as `arborist export` does for the same database. It blocks; call
// it off the UI goroutine.
func (e *ExportScreen) Reload() error {
	ps := e.s.PairSpec()
	var ex *profiles.Export
	err := fmt.Errorf("no models chosen")
	if ps.Target != "" {
		var b *profiles.Bench
		if b, err = e.s.Bench(context.Background()); err == nil {
			ex, err = b.Export(context.Background(), ps)
		}
	}
	e.s.UIWait(func() {
		if err != nil {
			e.cfg, e.planID = nil, 0
			e.YAML.SetText("# Load models, profile, calibrate and tune (Speedup model screen): the tuned plan appears here.\n# " + err.Error())
			e.Equivalents.SetText("")
			e.Provenance.Importance = widget.WarningImportance
			e.Provenance.SetText("No plan yet: nothing is predicted before the pair is profiled, calibrated and tuned.")
			e.showLlamaJobs()
			return
		}
		e.Provenance.Importance = widget.MediumImportance
		text := "Computed from: " + ex.Provenance + "."
		if ex.Assumed {
			e.Provenance.Importance = widget.WarningImportance
			text = "⚠ Some inputs are assumed, not measured: the predicted speedup is a guess. " + text
		}
		e.Provenance.SetText(text)
		e.cfg, e.planID = ex.Config, ex.PlanID
		e.YAML.SetText(string(ex.YAML))
		e.Equivalents.SetText(ex.Equivalents)
		e.showLlamaJobs() // a tune in llama.cpp's config replaces the plain export
	})
	return err
}

func (e *ExportScreen) copy(text string) {
	if e.s.Win != nil {
		e.s.App.Clipboard().SetContent(text)
	}
	e.Status.SetText("copied at " + time.Now().Format("15:04:05"))
}

// SaveTo validates the (possibly edited) YAML and writes it to path; the
// export is recorded in the database.
func (e *ExportScreen) SaveTo(path string) error {
	b, err := e.s.Bench(context.Background())
	if err != nil {
		return err
	}
	if err := b.Write(context.Background(), e.planID, []byte(e.YAML.Text), path); err != nil {
		return err
	}
	e.Status.SetText("saved " + path)
	e.s.Changed() // the export is a step of the guide
	return nil
}

func (e *ExportScreen) save() {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		path := w.URI().Path()
		w.Close()
		e.s.ShowError(e.SaveTo(path))
	}, e.s.Win)
	d.SetFileName("config.yaml")
	startIn(d, "")
	d.Show()
}

// Shown renders the pair's newest plan when the tab is selected.
func (e *ExportScreen) Shown() { e.Update() }

// toggleServe starts serving the config shown on the port, or stops the
// server running.
func (e *ExportScreen) toggleServe() {
	if e.stopServe != nil {
		close(e.stopServe)
		e.stopServe = nil
		e.Serve.Disable()
		e.ServeStatus.SetText("Stopping: the request decoding finishes first...")
		return
	}
	port, err := strconv.Atoi(strings.TrimSpace(e.Port.Text))
	if err != nil || port < 0 || port > 65535 {
		e.ServeStatus.SetText(fmt.Sprintf("Port %q: want a number from 0 to 65535 (0: a free one).", e.Port.Text))
		return
	}
	text := e.YAML.Text
	stop := make(chan struct{})
	e.stopServe = stop
	e.Serve.SetText("Stop serving")
	e.ServeStatus.SetText("Opening the pair...")
	e.s.Go(func(ctx context.Context) {
		sv, err := e.startServing(ctx, text, port)
		if err != nil {
			e.s.UI(func() {
				if e.stopServe == stop {
					e.stopServe = nil
				}
				e.Serve.SetText("Serve")
				e.Serve.Enable()
				e.ServeStatus.SetText("Not serving: " + err.Error())
			})
			return
		}
		e.s.UI(func() {
			e.serving = sv
			e.refreshServing()
		})
		select {
		case <-ctx.Done(): // the window closes
		case <-stop:
		case <-sv.Done():
		}
		err = sv.Stop()
		st := sv.Server().Stats()
		e.s.UI(func() {
			e.serving = nil
			if e.stopServe == stop {
				e.stopServe = nil
			}
			e.Serve.SetText("Serve")
			e.Serve.Enable()
			msg := fmt.Sprintf("Stopped after %s (%d completed, %s at %.1f tokens/s).", present.Count(st.Requests, "request"), st.Completed, present.Count(st.Totals.Tokens, "token"), st.TPS)
			if err != nil {
				msg = "Stopped: " + err.Error()
			}
			e.ServeStatus.SetText(msg)
		})
	})
}

// startServing parses the config text and serves it on 127.0.0.1:port.
func (e *ExportScreen) startServing(ctx context.Context, text string, port int) (*serve.Background, error) {
	b, err := e.s.Bench(ctx)
	if err != nil {
		return nil, err
	}
	c, err := config.Parse("config.yaml", []byte(text))
	if err != nil {
		return nil, err
	}
	opt := serve.Options{OnRequest: func(string) { e.s.UI(e.refreshServing) }}
	return serve.Start(ctx, b, c, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), opt)
}

// refreshServing shows the server's address and figures. On the UI
// goroutine.
func (e *ExportScreen) refreshServing() {
	if e.serving == nil {
		return
	}
	srv := e.serving.Server()
	st := srv.Stats()
	chat := "chat from the model's template"
	if srv.Chat() != nil {
		chat = "no chat template: completions only"
	}
	e.ServeStatus.SetText(fmt.Sprintf("Serving %s at %s/v1 with %s, up to %d requests together, %d running, %d waiting (%s): %s, %s, %.1f tokens/s, AAL %.2f, acceptance %.0f%%.",
		st.Model, e.serving.URL, st.Plan, st.MaxSeqs, st.Running, st.Queued, chat, present.Count(st.Requests, "request"), present.Count(st.Totals.Tokens, "token"), st.TPS, st.AAL, 100*st.Accept))
}

// prefLlamaCpp remembers the llama.cpp folder last checked with.
const prefLlamaCpp = "llama_cpp_dir"

func (e *ExportScreen) browseLlama() {
	d := dialog.NewFolderOpen(func(u fyne.ListableURI, err error) {
		if err == nil && u != nil {
			e.LlamaDir.SetText(u.Path())
			e.readBuild()
		}
	}, e.s.Win)
	d.Show()
}

// checkLlama runs the check of the config shown in llama.cpp in the
// background, showing each round and then the measured speedup.
//
// The check is a job of the pair shown when it starts: it reports to that
// pair whatever pair is shown meanwhile, and its result shows again
// whenever that pair is (showLlamaJobs).
func (e *ExportScreen) checkLlama() {
	text, dir := e.YAML.Text, strings.TrimSpace(e.LlamaDir.Text)
	if !e.usable() {
		e.CheckStatus.SetText("Nothing to check: the pair has no plan yet (tune it on the Speedup model screen).")
		return
	}
	e.s.App.Preferences().SetString(prefLlamaCpp, dir)
	e.readBuild()
	e.CheckStatus.SetText("Running llama.cpp: plain decoding and the exported settings in turn, 3 rounds...")
	e.s.startJob(jobCheck, true, func(ctx context.Context, job *jobs.Job) (any, error) {
		return e.checkIn(ctx, job, text, dir)
	}, func(v jobs.View) {
		if e.s.ownPair(v) {
			e.showLlamaJobs()
		}
		e.s.Changed() // Compare lists the new runs
	})
}

// checkSummary says what a check in llama.cpp measured.
func checkSummary(res *llamacheck.Result) string {
	msg := fmt.Sprintf("llama.cpp speedup: %.2fx (range %.2f-%.2f) in llama.cpp %s, acceptance %.0f%%", res.Speedup, res.Min, res.Max, res.Version, 100*res.Acceptance)
	if res.Predicted > 0 {
		msg += fmt.Sprintf("; Arborist predicts %.2fx for its own engine", res.Predicted)
	}
	return msg + fmt.Sprintf(". Stored as runs %d and %d (Compare).", res.PlainRun, res.SpecRun)
}

// showLlamaJobs shows the chosen pair's newest check and tune in
// llama.cpp: running (their progress), ended (their result; a tune's
// config in the YAML shown), or none. On the UI goroutine.
func (e *ExportScreen) showLlamaJobs() {
	key := e.s.Spec.Key()
	var newest *jobs.View
	for _, kind := range []string{jobCheck, jobLlamaTune} {
		if v, ok := e.s.Jobs.Last(key, kind); ok && (newest == nil || v.ID > newest.ID) {
			newest = &v
		}
	}
	if newest == nil {
		e.CheckStatus.SetText(e.checkHint())
		return
	}
	v := *newest
	what := "Not checked"
	if v.Kind == jobLlamaTune {
		what = "Not tuned"
	}
	switch {
	case v.State == jobs.Running:
		e.CheckStatus.SetText(v.Kind + " (progress below the screens) ...")
	case v.State == jobs.Queued:
		e.CheckStatus.SetText(v.Kind + ": queued behind " + v.Behind + " (below the screens); it starts when that ends.")
	case v.State == jobs.Cancelled:
		e.CheckStatus.SetText(what + ": cancelled.")
	case v.Err != nil:
		e.CheckStatus.SetText(what + ": " + v.Err.Error())
	default:
		switch res := v.Result.(type) {
		case *llamacheck.Result:
			e.CheckStatus.SetText(checkSummary(res))
		case llamaTuned:
			e.CheckStatus.SetText(tuneSummary(res.res))
			if e.YAML.Text != res.yaml {
				e.YAML.SetText(res.yaml)
				e.Equivalents.SetText(res.res.Config.Equivalents())
			}
		}
	}
}

// llamaTuned is a tune for llama.cpp's result, kept as its pair's: the
// measurement and the tuned config's YAML.
type llamaTuned struct {
	res  *llamacheck.TuneResult
	yaml string
}

// checkIn measures the config text's llama.cpp settings in the llama.cpp
// of dir, on the session's prompt suite (else the first prompts of the
// built-in corpus).
func (e *ExportScreen) checkIn(ctx context.Context, job *jobs.Job, text, dir string) (*llamacheck.Result, error) {
	b, err := e.s.Bench(ctx)
	if err != nil {
		return nil, err
	}
	c, err := config.Parse("config.yaml", []byte(text))
	if err != nil {
		return nil, err
	}
	prompts, err := e.checkPrompts()
	if err != nil {
		return nil, err
	}
	opt := llamacheck.Options{LlamaCpp: dir, Prompts: prompts, Rounds: 3, OnRound: func(i int, r llamacheck.Round) {
		job.Progress(float64(i+1)/3, fmt.Sprintf("round %d of 3: plain %.1f tokens/s, exported settings %.1f tokens/s: %.2fx", i+1, r.Plain, r.Spec, r.Speedup))
	}}
	return b.CheckExport(ctx, c, opt)
}

// checkPrompts are the prompts a check or tune in llama.cpp decodes: the
// session's prompt suite, else the first prompts of the built-in corpus.
func (e *ExportScreen) checkPrompts() ([]string, error) {
	if f := e.s.Prompts(); f != "" {
		return profiles.ReadPrompts(f)
	}
	prompts := assets.CorpusPrompts()
	return prompts[:min(4, len(prompts))], nil
}

// tuneLlama measures llama.cpp's own draft lengths for the config shown in
// llama.cpp in the background and, when done, shows the fastest beside
// the exported setting and Arborist's prediction, and puts it into the
// YAML and the llama.cpp line shown (Save writes it).
func (e *ExportScreen) tuneLlama() {
	text, dir := e.YAML.Text, strings.TrimSpace(e.LlamaDir.Text)
	if !e.usable() {
		e.CheckStatus.SetText("Nothing to tune: the pair has no plan yet (tune it on the Speedup model screen).")
		return
	}
	e.s.App.Preferences().SetString(prefLlamaCpp, dir)
	e.readBuild()
	e.CheckStatus.SetText("Running llama.cpp: plain decoding and each draft length in turn, 3 rounds...")
	e.s.startJob(jobLlamaTune, true, func(ctx context.Context, job *jobs.Job) (any, error) {
		res, yaml, err := e.tuneIn(ctx, job, text, dir)
		if err != nil {
			return nil, err
		}
		return llamaTuned{res: res, yaml: yaml}, nil
	}, func(v jobs.View) {
		if e.s.ownPair(v) {
			e.showLlamaJobs()
		}
		e.s.Changed() // Compare lists the new runs
	})
}

// tuneIn runs the tune of the config text in the llama.cpp of dir and
// returns the tuned config's YAML.
func (e *ExportScreen) tuneIn(ctx context.Context, job *jobs.Job, text, dir string) (*llamacheck.TuneResult, string, error) {
	b, err := e.s.Bench(ctx)
	if err != nil {
		return nil, "", err
	}
	c, err := config.Parse("config.yaml", []byte(text))
	if err != nil {
		return nil, "", err
	}
	prompts, err := e.checkPrompts()
	if err != nil {
		return nil, "", err
	}
	opt := llamacheck.Options{LlamaCpp: dir, Prompts: prompts, Rounds: 3, OnRound: func(i int, r llamacheck.Round) {
		job.Progress(float64(i+1)/3, fmt.Sprintf("round %d of 3: plain %.1f tokens/s, the round's best setting %.2fx", i+1, r.Plain, r.Speedup))
	}}
	res, err := b.TuneLlamaCpp(ctx, c, opt)
	if err != nil {
		return nil, "", err
	}
	y, err := res.Config.Marshal()
	return res, string(y), err
}

// tuneSummary says what a tune for llama.cpp measured: the fastest
// setting (or no speculation) beside the exported one, and Arborist's
// prediction for its own engine.
func tuneSummary(res *llamacheck.TuneResult) string {
	var msg string
	if bs := res.Best; bs != nil {
		msg = fmt.Sprintf("llama.cpp best: --draft-max %d --draft-p-min %g, %.2fx (range %.2f-%.2f) in llama.cpp %s", bs.DraftMax, bs.DraftPMin, bs.Speedup, bs.Low, bs.High, res.Version)
	} else {
		msg = fmt.Sprintf("llama.cpp best: no speculation: no draft length measured faster than llama.cpp's plain decoding (llama.cpp %s)", res.Version)
	}
	if ex := res.Exported; ex != nil {
		msg += fmt.Sprintf("; the plain export's --draft-max %d: %.2fx", ex.DraftMax, ex.Speedup)
	}
	if res.Predicted > 0 {
		msg += fmt.Sprintf("; Arborist predicts %.2fx for its own engine", res.Predicted)
	}
	return msg + ". The YAML and the llama.cpp line above now carry it: Save to keep it."
}
