package store

import (
	"testing"

	"arborist/engine/spec"
)

// TestRunPairAndSpeedup: a run belongs to its target's pair with its own
// draft source, and so does plain decoding of that target (every pair's
// baseline); a finished run of plain decoding is 1.00x whatever was
// stored, any other run its measured speedup.
func TestRunPairAndSpeedup(t *testing.T) {
	plain := spec.PlainStrategy()
	var drafted string
	for _, s := range spec.Strategies() {
		if !spec.IsPlain(s) {
			drafted = s
			break
		}
	}
	for _, c := range []struct {
		run    Run
		in     bool // of the pair t.gguf with draft:d.gguf
		plain  bool
		factor float64
	}{
		{Run{Target: "t.gguf", Drafter: "draft:d.gguf", Strategy: drafted, Status: "done", MeasuredSpeedup: 1.7}, true, false, 1.7},
		{Run{Target: "t.gguf", Drafter: "ngram:3", Strategy: drafted, Status: "done", MeasuredSpeedup: 1.2}, false, false, 1.2},
		{Run{Target: "t.gguf", Strategy: plain, Status: "done"}, true, true, 1},
		{Run{Target: "t.gguf", Drafter: "ngram:3", Strategy: plain, Status: "done", MeasuredSpeedup: 0}, true, true, 1},
		{Run{Target: "t.gguf", Strategy: plain, Status: "running"}, true, true, 0},
		{Run{Target: "other.gguf", Strategy: plain, Status: "done"}, false, true, 1},
		{Run{Target: "other.gguf", Drafter: "draft:d.gguf", Strategy: drafted, Status: "done"}, false, false, 0},
	} {
		r := c.run
		if got := r.InPair("t.gguf", "draft:d.gguf"); got != c.in {
			t.Errorf("%+v in the pair: %v, want %v", r, got, c.in)
		}
		if r.Plain() != c.plain || r.Speedup() != c.factor {
			t.Errorf("%+v: plain %v, speedup %v; want %v, %v", r, r.Plain(), r.Speedup(), c.plain, c.factor)
		}
	}
}

// TestDrafterHeldOut: a stored drafter's held-out loss is its last
// epoch's; none before the first epoch or where the record is damaged.
func TestDrafterHeldOut(t *testing.T) {
	for losses, want := range map[string]float64{
		`[{"Epoch":1,"HeldOut":0.9},{"Epoch":2,"HeldOut":0.5}]`: 0.5,
		`[]`: -1, ``: -1, `{"HeldOut":1}`: -1,
	} {
		got, ok := Drafter{Losses: losses}.HeldOut()
		if want < 0 && ok || want >= 0 && (!ok || got != want) {
			t.Errorf("%q: %v %v, want %v", losses, got, ok, want)
		}
	}
}
