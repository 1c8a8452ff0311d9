package app

import (
	"context"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles/store"
)

// TestCompareTable: clicking a header sorts by that column (numbers as
// numbers, again to reverse), a running run reads "running" rather than
// 0.0 tok/s, the CSV follows the table, and picked runs are deleted.
func TestCompareTable(t *testing.T) {
	wb := newBench(t)
	c := wb.Compare
	// the runs are written straight into the screen's database, as other
	// processes write theirs
	st, err := store.Open(context.Background(), wb.Session.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i, tps := range []float64{9.5, 120, 31, 0} {
		r := &store.Run{Target: "/m/target.gguf", Drafter: "/m/draft.gguf", Strategy: "chain"}
		if _, err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			r.Status, r.Tokens, r.Steps, r.TokensPerSecond, r.AAL = "done", 64, 20, tps, 3.2
			if err := st.FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
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
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "run,date,target,drafter,plan,status,tokens,tokens/s,AAL,acceptance,predicted,measured") ||
		!strings.Contains(lines[1], ",target.gguf,draft.gguf,chain,done,64,120.0,3.20,") || !strings.Contains(lines[4], "running,running,running") {
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
	if d := runDrafter(store.Run{Strategy: "ar", Drafter: "/m/draft.gguf"}); d != "-" {
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
