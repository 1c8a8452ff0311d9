package app

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
	"arborist/profiles/config"
	"arborist/profiles/loadtest"
)

// LoadTestPanel is the Export screen's load test: the config shown (its
// text, as edited) served by Arborist with the plan, adaptively and
// plainly, and with llama.cpp's folder by llama-server with the exported
// settings and plainly, each driven by C concurrent clients at each level,
// as `arborist loadtest` does; the results are stored as runs, which the
// Compare screen charts.
type LoadTestPanel struct {
	e         *ExportScreen
	Levels    *widget.Entry // the concurrencies, "1,4,8"
	WithLlama *widget.Check // llama-server from the llama.cpp folder too
	Run       *widget.Button
	Status    *widget.Label
	cancel    context.CancelFunc // the test under way (UI goroutine); nil when none
}

// loadHint is the load test's status before a test.
const loadHint = "Load test drives servers of the config above with 1, 4 and 8 clients at once (a few minutes on a small pair): Arborist with the plan, adaptively and plainly, and llama-server where ticked. Compare charts the results."

func newLoadTestPanel(e *ExportScreen) *LoadTestPanel {
	p := &LoadTestPanel{e: e, Levels: widget.NewEntry(), Status: widget.NewLabel(loadHint)}
	p.Levels.SetText("1,4,8")
	p.WithLlama = widget.NewCheck("with llama-server", nil)
	p.Run = widget.NewButton("Load test", p.toggle)
	p.Status.Wrapping = fyne.TextWrapWord
	return p
}

// View lays the panel out: a row of its controls, the status under it.
func (p *LoadTestPanel) View() fyne.CanvasObject {
	levels := container.NewGridWrap(fyne.NewSize(110, p.Levels.MinSize().Height), p.Levels)
	return container.NewVBox(container.NewHBox(widget.NewLabel("Clients at once"), levels, p.WithLlama, p.Run), p.Status)
}

// toggle starts a load test of the config shown, or stops the one under
// way (its servers end with it).
func (p *LoadTestPanel) toggle() {
	if p.cancel != nil {
		p.cancel()
		p.Status.SetText("Stopping the load test...")
		return
	}
	opt, err := p.options()
	if err != nil {
		p.Status.SetText("Not started: " + err.Error())
		return
	}
	p.Run.SetText("Stop load test")
	s := p.e.s
	ctx, cancel := context.WithCancel(s.Context())
	p.cancel = cancel
	p.Status.SetText("Starting the load test...")
	s.Go(func(context.Context) {
		defer cancel()
		res, err := p.runTest(ctx, opt)
		s.UI(func() {
			p.cancel = nil
			p.Run.SetText("Load test")
			switch {
			case ctx.Err() != nil:
				p.Status.SetText("Load test stopped; nothing stored.")
			case err != nil:
				p.Status.SetText("Load test failed: " + err.Error())
			default:
				p.Status.SetText(loadSummary(res))
			}
		})
		if err == nil {
			s.UI(s.Changed) // Compare charts the new runs
		}
	})
}

// options reads the panel into a load test of the config shown.
func (p *LoadTestPanel) options() (loadtest.Options, error) {
	var opt loadtest.Options
	levels, err := profiles.ParseInts(p.Levels.Text)
	if err != nil || len(levels) == 0 {
		return opt, fmt.Errorf("clients at once %q: want levels such as 1,4,8", p.Levels.Text)
	}
	for _, n := range levels {
		if err := config.CheckConcurrency("clients at once", n); err != nil {
			return opt, err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return opt, fmt.Errorf("this program's path, to run serve: %w", err)
	}
	opt = loadtest.Options{ConfigYAML: []byte(p.e.YAML.Text), Concurrency: levels, Arborist: exe}
	if p.WithLlama.Checked {
		opt.LlamaCpp = strings.TrimSpace(p.e.LlamaDir.Text)
		if opt.LlamaCpp == "" {
			return opt, fmt.Errorf("give llama.cpp's bin folder above for llama-server")
		}
	}
	if f := p.e.s.Prompts(); f != "" {
		if opt.Prompts, err = profiles.ReadPrompts(f); err != nil {
			return opt, err
		}
	}
	return opt, nil
}

// runTest runs the load test, showing what will run with its estimate
// first, then each server's round with the time left.
func (p *LoadTestPanel) runTest(ctx context.Context, opt loadtest.Options) (*loadtest.Result, error) {
	s := p.e.s
	b, err := s.Bench(ctx)
	if err != nil {
		return nil, err
	}
	plan, err := b.LoadTestPlan(ctx, opt)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("Load test: %v at once, %d rounds, %s", plan.Concurrency, plan.Rounds, strings.Join(plan.Servers, ", "))
	if plan.Estimate > 0 {
		head += fmt.Sprintf(", about %s", plan.Estimate.Round(time.Second))
	}
	s.UI(func() { p.Status.SetText(head + "...") })
	return b.LoadTest(ctx, opt, func(ev profiles.Event) {
		stage := "" // the rounds' own; the re-check before them says so
		if ev.Stage != "load test" {
			stage = ev.Stage + " "
		}
		s.UI(func() { p.Status.SetText(fmt.Sprintf("%s: %s%d of %d: %s", head, stage, ev.Done, ev.Total, ev.Detail)) })
	})
}

// loadSummary says, per level, each server's aggregate tokens/s, and the
// cost model's beside Arborist's (with the server's own time it priced).
func loadSummary(res *loadtest.Result) string {
	var parts []string
	for _, n := range res.Plan.Concurrency {
		var at []string
		for _, l := range res.Levels {
			switch {
			case l.Concurrency != n:
			case l.Err != "":
				at = append(at, l.Server+" failed")
			case l.Predicted > 0:
				at = append(at, fmt.Sprintf("%s %.1f (predicted %.1f)", l.Server, l.TPS, l.Predicted))
			default:
				at = append(at, fmt.Sprintf("%s %.1f", l.Server, l.TPS))
			}
		}
		parts = append(parts, fmt.Sprintf("%d at once: %s", n, strings.Join(at, ", ")))
	}
	msg := fmt.Sprintf("Aggregate tokens/s (median of %d rounds) — %s.", res.Plan.Rounds, strings.Join(parts, "; "))
	if res.OverheadFirst > 0 || res.OverheadLast > 0 {
		msg += fmt.Sprintf(" Predictions include the server's own %.1f ms a request (timed on one-token requests)", float64(res.OverheadFirst+res.OverheadLast)/1e6)
		switch {
		case res.OverheadStreamPass > 0:
			msg += fmt.Sprintf(" and %.2f ms a streamed pass and %.2f ms for each request's streamed text in it", float64(res.OverheadStreamPass)/1e6,
				float64(res.OverheadStream)/1e6)
		case res.OverheadStream > 0:
			msg += fmt.Sprintf(" and %.2f ms a pass for each request's streamed text", float64(res.OverheadStream)/1e6)
		}
		msg += "."
	}
	return msg + " Stored as runs: Compare charts them."
}

// loadSpec is the Compare screen's load chart of runs: aggregate tokens/s
// against concurrency, a line per server, each level's newest load run
// (runs come newest first), its error bars covering the rounds' 10th to
// 90th percentile. False where none of runs is a load run.
func loadSpec(runs []profiles.Run) (ChartSpec, bool) {
	type key struct {
		server string
		level  int
	}
	seen := map[key]bool{}
	by := map[string][]profiles.Run{}
	var servers []string
	for _, r := range runs {
		l := r.Load
		if l == nil || r.Status != "done" || seen[key{l.Server, l.Concurrency}] {
			continue
		}
		seen[key{l.Server, l.Concurrency}] = true
		if by[l.Server] == nil {
			servers = append(servers, l.Server)
		}
		by[l.Server] = append(by[l.Server], r)
	}
	if len(servers) == 0 {
		return ChartSpec{}, false
	}
	slices.Sort(servers)
	spec := ChartSpec{Title: "Load test (bars: the rounds' p10-p90)", XLabel: "clients at once", YLabel: "aggregate tokens/s", Width: 420, Height: 300}
	for _, name := range servers {
		rs := by[name]
		slices.SortFunc(rs, func(a, b profiles.Run) int { return a.Load.Concurrency - b.Load.Concurrency })
		sr := Series{Name: name}
		for _, r := range rs {
			sr.X = append(sr.X, float64(r.Load.Concurrency))
			sr.Y = append(sr.Y, r.TokensPerSecond)
			sr.Err = append(sr.Err, max(r.TokensPerSecond-r.Load.TPSP10, r.Load.TPSP90-r.TokensPerSecond, 0))
		}
		spec.Series = append(spec.Series, sr)
	}
	return spec, true
}

// updateLoad charts the picked load runs, or where none is picked the
// load runs listed, against concurrency.
func (c *CompareScreen) updateLoad() {
	var runs []profiles.Run
	for _, r := range c.picked() {
		if r.Load != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		runs = c.Runs
	}
	if spec, ok := loadSpec(runs); ok {
		c.LoadChart.SetSpec(spec)
		return
	}
	c.LoadChart.Clear()
}
