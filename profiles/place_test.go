package profiles

import (
	"context"
	"slices"
	"strings"
	"testing"

	"arborist/profiles/costmodel"
)

// Placements: the pair's own placement first, then the target on every
// backend with the drafter beside it or on each other one; n-gram lookup
// has no device to move to.
func TestPlacements(t *testing.T) {
	names := []string{"cpu", "cuda"}
	got := placements(PairSpec{Target: "t", Draft: "d"}, names)
	want := []placement{{"cpu", ""}, {"cpu", "cuda"}, {"cuda", ""}, {"cuda", "cpu"}}
	if !slices.Equal(got, want) {
		t.Errorf("draft model: %v, want %v", got, want)
	}
	got = placements(PairSpec{Target: "t", Draft: "d", Backend: "cuda", DraftBackend: "cpu"}, names)
	want = []placement{{"cuda", "cpu"}, {"cpu", ""}, {"cpu", "cuda"}, {"cuda", ""}}
	if !slices.Equal(got, want) {
		t.Errorf("duo on two devices: %v, want %v", got, want)
	}
	got = placements(PairSpec{Target: "t", NGram: 3, Backend: "cuda"}, names)
	want = []placement{{"cuda", ""}, {"cpu", ""}}
	if !slices.Equal(got, want) {
		t.Errorf("n-gram: %v, want %v", got, want)
	}
	if s := (placement{"cuda", "cpu"}).String(); s != "target on cuda, drafter on cpu" {
		t.Errorf("%q", s)
	}
}

// A tune with placements ranks every placement's plans together, each
// labelled with its placement (plain decoding once per target device),
// stores the best with its placement, and the export records where each
// model runs.
func TestTunePlaced(t *testing.T) {
	ps := storiesPair(t)
	ctx := context.Background()
	b := openBench(t)
	places := []placement{{"cpu", ""}, {"cpu", "cpu"}} // one device here: the same device twice
	space := costmodel.SearchSpace{MaxGamma: 3, MaxDepth: 2, MaxNodes: 6}
	tr, err := b.Tune(ctx, ps, TuneOptions{Alpha: 0.7, Space: space, Place: true, placements: places, NoRecheck: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, seen := 0, map[placement]int{}
	for _, pr := range tr.Ranked {
		pl := placement{pr.Backend, pr.DraftBackend}
		if !slices.Contains(places, pl) {
			t.Fatalf("plan %s placed at %v", pr.Plan, pl)
		}
		seen[pl]++
		if pr.Plan.Strategy == "ar" {
			plain++
			if pr.Speedup != 1 || pl.DraftBackend != "" {
				t.Errorf("plain decoding at %v predicted %.3fx", pl, pr.Speedup)
			}
		}
	}
	if plain != 1 || seen[places[0]] == 0 || seen[places[1]] != seen[places[0]]-1 {
		t.Errorf("plain decoding %d times; plans per placement %v", plain, seen)
	}
	for i := 1; i < len(tr.Ranked); i++ {
		if tr.Ranked[i].Speedup > tr.Ranked[i-1].Speedup {
			t.Fatalf("ranked out of order at %d", i)
		}
	}
	best := tr.Best()
	if best.Backend != "cpu" || !strings.Contains(best.Placed(), "cpu") {
		t.Errorf("best %s placed %q", best.Plan, best.Placed())
	}
	ex, err := b.Export(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ex.YAML), "device: cpu") {
		t.Errorf("config.yaml records no device:\n%s", ex.YAML)
	}
}
