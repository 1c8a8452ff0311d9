package profiles

import (
	"context"
	"strings"
	"testing"

	"arborist/profiles/store"
)

// TestDeleteRuns: finished runs go with their steps; a running run is
// refused by id and nothing is deleted.
func TestDeleteRuns(t *testing.T) {
	ctx := context.Background()
	b := openBench(t)
	st, err := b.db(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := 0; i < 3; i++ {
		r := &store.Run{Target: "t.gguf", Drafter: "d.gguf", Strategy: "chain"}
		id, err := st.CreateRun(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AppendSteps(ctx, id, []store.Step{{Index: 0, Emitted: 2}}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			r.Status = "done"
			if err := st.FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	if err := b.DeleteRuns(ctx, []int64{ids[0], ids[2]}); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("deleting a running run: %v", err)
	}
	if runs, _ := st.Runs(ctx, 0); len(runs) != 3 {
		t.Fatalf("a refused delete removed runs: %d left", len(runs))
	}
	if err := b.DeleteRuns(ctx, ids[:2]); err != nil {
		t.Fatal(err)
	}
	runs, _ := st.Runs(ctx, 0)
	if len(runs) != 1 || runs[0].ID != ids[2] {
		t.Fatalf("left: %+v", runs)
	}
	var n int
	st.DB().QueryRowContext(ctx, "SELECT count(*) FROM run_steps").Scan(&n)
	if n != 1 {
		t.Errorf("%d steps left, want the running run's 1", n)
	}
}
