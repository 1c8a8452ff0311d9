package app

import (
	"context"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/engine/spec"
	"arborist/profiles/store"
)

// TestCompareTable: clicking a header sorts by that column (numbers as
// numbers, again to reverse), a running run reads "running" rather than
// 0.0 tok/s, the CSV follows the table, and picked runs are deleted.
func TestCompareTable(t *testing.T) {
	wb := newBench(t)
	c := wb.Compare
	var runs []*store.Run
	for i, tps := range []float64{9.5, 120, 31, 0} {
		r := &store.Run{Target: "/m/target.gguf", Drafter: "/m/draft.gguf", Strategy: "chain"}
		if i < 3 {
			r.Status, r.Tokens, r.Steps, r.TokensPerSecond, r.AAL = "done", 64, 20, tps, 3.2
		}
		runs = append(runs, r)
	}
	storeRuns(t, wb, runs...)
	c.Refresh()
	col := -1
	for i, cc := range compareCols {
		if cc.name == "tokens/s" {
			col = i
		}
	}
	hdr := c.Table.CreateHeader()
	c.Table.UpdateHeader(widget.TableCellID{Row: -1, Col: col}, hdr)
	test.Tap(hdr.(*widget.Button))
	order := func() (ids []int64) {
		for _, r := range c.Runs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := order(); !equalIDs(got, []int64{4, 1, 3, 2}) { // running (0) first, then 9.5, 31, 120
		t.Fatalf("ascending tokens/s: %v", got)
	}
	c.Table.UpdateHeader(widget.TableCellID{Row: -1, Col: col}, hdr)
	if !strings.HasSuffix(hdr.(*widget.Button).Text, "▲") {
		t.Errorf("header %q does not mark the sort", hdr.(*widget.Button).Text)
	}
	test.Tap(hdr.(*widget.Button))
	if got := order(); !equalIDs(got, []int64{2, 3, 1, 4}) {
		t.Fatalf("descending tokens/s: %v", got)
	}
	var csv strings.Builder
	if err := c.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if len(lines) != 5 || lines[0] != "run,status,date,target,drafter,plan,tokens,temperature,speed (tokens/s),speed low (tokens/s),speed high (tokens/s),AAL (tokens per step),acceptance (%),predicted speedup (x),prediction on assumed acceptance,measured speedup (x),measured speedup low (x),measured speedup high (x)" ||
		!strings.HasPrefix(lines[1], "2,done,") || !strings.HasSuffix(lines[1], ",target.gguf,draft.gguf,chain,64,,120.00,,,3.200,0.0,,,,,") ||
		!strings.HasPrefix(lines[4], "4,running,") || !strings.HasSuffix(lines[4], ",chain,,,,,,,,,,,,") {
		t.Fatalf("csv:\n%s", csv.String())
	}
	c.Toggle(2, true)
	c.Toggle(3, true)
	if err := c.DeletePicked(); err != nil {
		t.Fatal(err)
	}
	if got := order(); !equalIDs(got, []int64{1, 4}) || len(c.Selected) != 0 {
		t.Fatalf("after deleting 2 and 3: %v", got)
	}
	// plain decoding names no drafter, whatever pair it was started from
	if d := runDrafter(store.Run{Strategy: "ar", Drafter: "/m/draft.gguf"}); d != "plain decoding" {
		t.Errorf("an ar run's drafter reads %q", d)
	}
	c.Toggle(4, true)
	if err := c.DeletePicked(); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("deleting a running run: %v", err)
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCompareAsPeopleCompare: the table's columns use the width there is
// (1920) and fit a 1024 window without cutting a header; the runs filter
// by pair; picked runs chart with a colour per plan, named by their plans
// in the legend and the hover values, with a speedup chart; the CSV has
// plain numbers in its numeric cells.
func TestCompareAsPeopleCompare(t *testing.T) {
	wb := newBench(t)
	c := wb.Compare
	egt := spec.Plan{Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12, DepthPolicy: "threshold", DepthMin: 0.2}
	for _, r := range []struct {
		target, drafter string
		plan            spec.Plan
		tps, measured   float64
	}{
		{"/m/a.gguf", "draft:d.gguf", spec.Plan{Strategy: "ar"}, 100, 0},
		{"/m/a.gguf", "draft:d.gguf", egt, 250, 2.5},
		{"/m/a.gguf", "draft:d.gguf", spec.Plan{Strategy: "chain", Gamma: 4}, 200, 2},
		{"/m/a.gguf", "draft:d.gguf", egt, 240, 2.4},
		{"/m/b.gguf", "ngram:3", spec.Plan{Strategy: "duo", Gamma: 6, MaxSeqs: 2}, 90, 1.1},
	} {
		cfg, err := r.plan.Config()
		if err != nil {
			t.Fatal(err)
		}
		storeRuns(t, wb, &store.Run{Target: r.target, Drafter: r.drafter, Strategy: r.plan.Strategy, Settings: cfg, PredictedSpeedup: 2.2,
			Status: "done", Tokens: 64, Steps: 20, TokensPerSecond: r.tps, AAL: 3.2, Acceptance: 0.8, MeasuredSpeedup: r.measured})
	}
	c.Refresh()
	if len(c.Runs) != 5 || c.Filter.Selected != allPairs {
		t.Fatalf("%d runs under %q", len(c.Runs), c.Filter.Selected)
	}

	// columns: every header and one-line cell whole; the plan and pair
	// columns share the rest of the width, on two lines where it is short
	for _, width := range []float32{980, 1880} {
		c.widths = nil
		c.fitColumns(width)
		total := float32(0)
		for i, w := range c.widths {
			total += w
			need := c.cellWidth(i)
			if compareCols[i].flex {
				need = need/2 + theme.InnerPadding()
			}
			if w < need-0.5 {
				t.Errorf("width %v: column %q is %v wide, needs %v", width, compareCols[i].name, w, need)
			}
		}
		if room := width - theme.ScrollBarSize() - theme.Padding()*float32(len(compareCols)); total > room+0.5 || (width > 1500 && total < room-1) {
			t.Errorf("width %v: the columns take %v of %v: %v", width, total, room, c.widths)
		}
	}
	plan := -1
	for i, col := range compareCols {
		if col.name == "plan" {
			plan = i
		}
	}
	if p := runPlan(c.Runs[1]); !strings.Contains(p, "threshold=0.2") {
		t.Errorf("the plan column reads %q", p)
	}
	_ = plan

	// filter by pair: a's runs
	c.Filter.SetSelected(pairFilter{"/m/a.gguf", "draft:d.gguf"}.String())
	if len(c.Runs) != 4 {
		t.Errorf("pair a: %d runs", len(c.Runs))
	}
	// charts: the two egt runs share a colour, the chain has another
	for _, r := range c.Runs {
		c.Toggle(r.ID, true)
	}
	bs := c.Chart.bars
	if c.Speedup.bars == nil || bs == nil || len(bs.Colors) != 4 {
		t.Fatalf("charts: %+v", bs)
	}
	color := map[string]any{}
	for i, r := range c.picked() {
		p := runPlan(r)
		if prev, ok := color[p]; ok && !sameColor(prev.(interface{ RGBA() (r, g, b, a uint32) }), bs.Colors[i]) {
			t.Errorf("plan %s in two colours", p)
		}
		color[p] = bs.Colors[i]
		if !strings.Contains(bs.Details[i], p) {
			t.Errorf("bar %d described %q, its plan is %s", i, bs.Details[i], p)
		}
	}
	if len(color) != 3 || sameColor(color[runPlan(c.Runs[0])].(interface{ RGBA() (r, g, b, a uint32) }), color[runPlan(c.Runs[1])].(interface{ RGBA() (r, g, b, a uint32) })) {
		t.Errorf("%d plan colours", len(color))
	}
	legend := ""
	for _, o := range c.Legend.Objects[0].(*fyne.Container).Objects {
		legend += o.(*fyne.Container).Objects[0].(*widget.Label).Text + "\n"
	}
	if !strings.Contains(legend, egt.String()) || !strings.Contains(legend, "chain gamma=4") {
		t.Errorf("legend:\n%s", legend)
	}
	w := showChart(t, c.Chart)
	_ = w
	pts := c.Chart.Points()
	test.TapAt(c.Chart, c.Chart.PointPos(pts[0]))
	if !strings.Contains(c.Chart.Tip, runPlan(c.picked()[0])) || !strings.Contains(c.Chart.Tip, "tokens/s") {
		t.Errorf("hover on a bar: %q", c.Chart.Tip)
	}

	// CSV: numbers without units
	var out strings.Builder
	if err := c.WriteCSV(&out); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows[1:] {
		for k, head := range rows[0] {
			if !strings.Contains(head, "(") && head != "tokens" {
				continue
			}
			if _, err := strconv.ParseFloat(row[k], 64); row[k] != "" && err != nil {
				t.Errorf("%s: %q is not a plain number", head, row[k])
			}
		}
	}
}

// TestCompareRangesAndTemperature: the table, the charts' hover values and
// the CSV show the temperature each run sampled at and the spread its
// rounds stored (the measured speedup's and the tokens/s's lowest and
// highest round); a run of one round shows a figure without a spread.
func TestCompareRangesAndTemperature(t *testing.T) {
	wb := newBench(t)
	c := wb.Compare
	st, err := store.Open(context.Background(), wb.Session.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	cfg := spec.Config{MaxTokens: 64}
	cfg.Sample.Temp, cfg.Sample.TopP, cfg.Sample.Seed = 0.8, 1, 1
	for i, measured := range []float64{2.1, 1.5} {
		r := &store.Run{Target: "/m/target.gguf", Drafter: "/m/draft.gguf", Strategy: "chain", Settings: cfg}
		if _, err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.Status, r.Tokens, r.Steps, r.TokensPerSecond, r.AAL, r.MeasuredSpeedup = "done", 64, 20, 120, 3.2, measured
		if i == 0 { // five rounds against plain decoding
			r.MeasuredLow, r.MeasuredHigh, r.TPSLow, r.TPSHigh = 1.95, 2.3, 110, 131
		}
		if err := st.FinishRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	c.Refresh()
	cell := func(id int64, name string) string {
		for _, r := range c.Runs {
			for _, col := range compareCols {
				if r.ID == id && col.name == name {
					return col.text(r)
				}
			}
		}
		t.Fatalf("no run %d or column %q", id, name)
		return ""
	}
	if got := cell(1, "measured"); got != "2.10x\n1.95-2.30x" {
		t.Errorf("run 1 measured %q", got)
	}
	if got := cell(1, "tokens/s"); got != "120.0\n110-131" {
		t.Errorf("run 1 tokens/s %q", got)
	}
	if got := cell(2, "measured"); got != "1.50x" {
		t.Errorf("run 2, one round: measured %q", got)
	}
	if got := cell(2, "tokens"); got != "64\ntemp 0.8" {
		t.Errorf("run 2 temperature %q", got)
	}
	var out strings.Builder
	if err := c.WriteCSV(&out); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	field := func(row int, head string) string {
		for i, h := range rows[0] {
			if h == head {
				return rows[row][i]
			}
		}
		t.Fatalf("no CSV column %q in %q", head, rows[0])
		return ""
	}
	// newest first: run 2, then run 1
	for _, w := range []struct {
		row        int
		head, want string
	}{
		{2, "temperature", "0.800"}, {2, "measured speedup low (x)", "1.950"}, {2, "measured speedup high (x)", "2.300"},
		{2, "speed low (tokens/s)", "110.00"}, {2, "speed high (tokens/s)", "131.00"},
		{1, "temperature", "0.800"}, {1, "measured speedup low (x)", ""}, {1, "speed high (tokens/s)", ""},
	} {
		if got := field(w.row, w.head); got != w.want {
			t.Errorf("CSV row %d %s: %q, want %q", w.row, w.head, got, w.want)
		}
	}
	c.Toggle(1, true)
	c.Toggle(2, true)
	var speed, tps []string
	for _, pt := range c.Speedup.Points() {
		speed = append(speed, c.Speedup.describe(pt))
	}
	for _, pt := range c.Chart.Points() {
		tps = append(tps, c.Chart.describe(pt))
	}
	if !strings.Contains(strings.Join(speed, "|"), "run 1, chain, temperature 0.8 (rounds 1.95-2.3x): 2.1 x") ||
		!strings.Contains(strings.Join(tps, "|"), "run 1, chain, temperature 0.8 (rounds 110-131 tokens/s): 120 tokens/s") ||
		!strings.Contains(strings.Join(speed, "|"), "run 2, chain, temperature 0.8: 1.5 x") {
		t.Errorf("hover values:\n%s\n%s", strings.Join(speed, "\n"), strings.Join(tps, "\n"))
	}
}

// TestCompareAcceptanceOfPlainDecoding: plain decoding drafts nothing and
// a run in llama.cpp reports no acceptance: their accepted cell reads
// "-" and their CSV cell is empty, not "0.0%", while a drafting run's
// acceptance shows.
func TestCompareAcceptanceOfPlainDecoding(t *testing.T) {
	var col compareCol
	for _, cc := range compareCols {
		if cc.name == "accepted" {
			col = cc
		}
	}
	for _, c := range []struct {
		run       store.Run
		cell, csv string
	}{
		{store.Run{Strategy: "ar", Status: "done", AAL: 1}, "-", ""},
		{store.Run{Strategy: "chain", Status: "done", AAL: 0}, "-", ""},
		{store.Run{Strategy: "chain", Status: "done", AAL: 3.2, Acceptance: 0.5}, "50.0%", "50.0"},
	} {
		if got, csv := col.text(c.run), col.csv[0].cell(c.run); got != c.cell || csv != c.csv {
			t.Errorf("%s AAL %.1f: cell %q csv %q, want %q %q", c.run.Strategy, c.run.AAL, got, csv, c.cell, c.csv)
		}
	}
}

// TestCompareMarksAssumedPrediction: a run whose prediction was priced on
// assumed acceptance (a plan tuned before any calibration) is stored so,
// and Compare's table and CSV say so; a run priced on a calibration not.
func TestCompareMarksAssumedPrediction(t *testing.T) {
	wb := newBench(t)
	c := wb.Compare
	for _, assumed := range []bool{false, true} {
		storeRuns(t, wb, &store.Run{Target: "/m/target.gguf", Drafter: "/m/draft.gguf", Strategy: "chain", PredictedSpeedup: 2.5, PredictedAssumed: assumed,
			Status: "done", Tokens: 64, Steps: 20, TokensPerSecond: 100, MeasuredSpeedup: 2.1})
	}
	c.Refresh()
	col := -1
	for i, cc := range compareCols {
		if cc.name == "predicted" {
			col = i
		}
	}
	if len(c.Runs) != 2 || col < 0 {
		t.Fatalf("%d runs, predicted column %d", len(c.Runs), col)
	}
	for _, r := range c.Runs {
		if got := compareCols[col].text(r); strings.Contains(got, "assumed") != r.PredictedAssumed || !strings.HasPrefix(got, "2.50x") {
			t.Errorf("run %d (assumed %v): predicted cell %q", r.ID, r.PredictedAssumed, got)
		}
	}
	var csv strings.Builder
	if err := c.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(csv.String(), ",2.500,yes,"); n != 1 || !strings.Contains(csv.String(), ",2.500,,") {
		t.Errorf("csv marks %d runs assumed, want 1:\n%s", n, csv.String())
	}
}

// storeRuns writes runs straight into the screen's database, as other
// processes write theirs: each created, then finished with its figures
// where it has a status (one without stays running).
func storeRuns(t *testing.T, wb *Workbench, runs ...*store.Run) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, wb.Session.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range runs {
		if _, err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.Status == "" {
			continue
		}
		if err := st.FinishRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
}
