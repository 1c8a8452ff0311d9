package app

import (
	"strings"
	"testing"
	"time"

	"arborist/profiles"
	"arborist/profiles/loadtest"
	"arborist/profiles/store"
)

// loadRun is a finished load run of server at level.
func loadRun(id int64, server string, level int, tps, p10, p90 float64) profiles.Run {
	return profiles.Run{ID: id, Status: "done", Strategy: "chain", TokensPerSecond: tps,
		Load: &store.Load{Server: server, Concurrency: level, TPSP10: p10, TPSP90: p90, Rounds: 3}}
}

// TestLoadSpec: the load chart draws a line per server of aggregate
// tokens/s against concurrency from each level's newest load run, its
// bars covering the rounds' p10-p90; runs without a load (or not done)
// are left out, and none gives no chart.
func TestLoadSpec(t *testing.T) {
	runs := []profiles.Run{ // newest first
		loadRun(9, "arborist-plain", 8, 40, 38, 45),
		loadRun(8, "arborist-plan", 1, 12, 11, 13),
		loadRun(7, "arborist-plain", 1, 10, 9.5, 10.5),
		loadRun(6, "arborist-plain", 8, 99, 99, 99), // older at the same level
		{ID: 5, Status: "done", Strategy: "ar", TokensPerSecond: 50},
		{ID: 4, Status: "running", Load: &store.Load{Server: "arborist-plan", Concurrency: 8}},
	}
	spec, ok := loadSpec(runs)
	if !ok || len(spec.Series) != 2 {
		t.Fatalf("spec %+v, %v: want two servers", spec, ok)
	}
	plain, plan := spec.Series[0], spec.Series[1]
	if plain.Name != "arborist-plain" || len(plain.X) != 2 || plain.X[0] != 1 || plain.X[1] != 8 || plain.Y[1] != 40 || plain.Err[1] != 5 || plain.Err[0] != 0.5 {
		t.Errorf("plain: %+v", plain)
	}
	if plan.Name != "arborist-plan" || len(plan.X) != 1 || plan.Y[0] != 12 {
		t.Errorf("plan: %+v", plan)
	}
	if _, ok := loadSpec(runs[4:5]); ok {
		t.Error("a chart of runs without a load")
	}
}

// TestLoadSummary: the load test's summary gives each server's median
// tokens/s at each level, the model's prediction beside Arborist's
// servers where there is one, a failed server as failed, and the
// server's own time the predictions include.
func TestLoadSummary(t *testing.T) {
	res := &loadtest.Result{Plan: loadtest.Plan{Concurrency: []int{1, 8}, Rounds: 3}, OverheadFirst: 2 * time.Millisecond, OverheadLast: 500 * time.Microsecond,
		Levels: []loadtest.Level{
			{Server: "arborist-plain", Concurrency: 1, Summary: loadtest.Summary{TPS: 450}, Predicted: 480},
			{Server: "llama-server", Concurrency: 1, Summary: loadtest.Summary{TPS: 130}},
			{Server: "arborist-plain", Concurrency: 8, Err: "crashed"},
		}}
	got := loadSummary(res)
	for _, want := range []string{"1 at once: arborist-plain 450.0 (predicted 480.0), llama-server 130.0;", "8 at once: arborist-plain failed.", "own 2.5 ms a request"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
}

// TestCompareChartsLoadRuns: stored load runs are charted on the Compare
// screen whether or not any is picked; without load runs the chart is
// empty.
func TestCompareChartsLoadRuns(t *testing.T) {
	wb := newBench(t)
	c := wb.Compare
	c.Refresh()
	if c.LoadChart.line != nil {
		t.Fatal("a load chart without load runs")
	}
	for _, n := range []int{1, 4} {
		storeRuns(t, wb, &store.Run{Target: "/m/target.gguf", Strategy: "ar", Status: "done", TokensPerSecond: float64(10 * n),
			Load: &store.Load{Server: "arborist-plain", Concurrency: n, TTFT: time.Millisecond, TPSP10: float64(9 * n), TPSP90: float64(11 * n), Rounds: 3}})
	}
	c.Filter.SetSelected(allPairs)
	c.Refresh()
	if c.LoadChart.line == nil || len(c.LoadChart.line.Series) != 1 || len(c.LoadChart.line.Series[0].X) != 2 {
		t.Fatalf("load chart: %+v", c.LoadChart.line)
	}
}

// TestLoadTestPanelRefuses: levels that are not a list of concurrencies,
// or llama-server without llama.cpp's folder, are refused before a test
// starts, naming what is wrong.
func TestLoadTestPanelRefuses(t *testing.T) {
	wb := newBench(t)
	p := wb.Export.Load
	for _, tc := range []struct{ levels, want string }{{"1,x", "want levels"}, {"0", "clients at once 0"}, {"1,4,999", "999"}} {
		p.Levels.SetText(tc.levels)
		p.toggle()
		if !strings.Contains(p.Status.Text, tc.want) || p.cancel != nil {
			t.Errorf("levels %q: %q", tc.levels, p.Status.Text)
		}
	}
	p.Levels.SetText("1,2")
	p.WithLlama.SetChecked(true)
	wb.Export.LlamaDir.SetText("")
	p.toggle()
	if !strings.Contains(p.Status.Text, "llama.cpp's bin folder") {
		t.Errorf("llama-server without a folder: %q", p.Status.Text)
	}
	p.WithLlama.SetChecked(false)
	if opt, err := p.options(); err != nil || len(opt.Concurrency) != 2 || len(opt.ConfigYAML) == 0 || opt.Arborist == "" {
		t.Errorf("options: %+v, %v", opt, err)
	}
}
