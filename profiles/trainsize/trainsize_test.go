package trainsize

import (
	"strings"
	"testing"
	"time"

	"arborist/assets"
	"arborist/engine/hidden"
	_ "arborist/kernels/cpu" // the host backend, whose training math Settings.Validate asks about
)

// TestTrainSizes: the default size is the small one and asks for the work
// the three-minute budget was sized on; each size asks for more than the
// one before, the largest for everything; the default drafter settings
// are the default size's; an unknown size is refused naming the sizes.
func TestTrainSizes(t *testing.T) {
	p, err := Predictor(Default)
	if err != nil || p != (Work{Size: "small", Prompts: 100, Tokens: 64, Samples: 1}) {
		t.Fatalf("default predictor work %+v (%v)", p, err)
	}
	d, err := Drafter(Default)
	if err != nil || d != (Work{Size: "small", Prompts: 160, Tokens: 128, Samples: 2, Epochs: 12}) {
		t.Fatalf("default drafter work %+v (%v)", d, err)
	}
	set := DefaultDrafterSettings()
	if set.MaxPrompts != 160 || set.Tokens != 128 || set.Samples != 2 || set.Epochs != 12 || set.Validate() != nil {
		t.Errorf("default drafter settings %+v", set)
	}
	corpus := len(assets.CorpusPrompts())
	if got := DrafterCost(6, set); got.Prompts != 160 || got.Decoded != 160*2*128 || got.Size != "small" || got.Estimate != 0 {
		t.Errorf("default drafter cost %+v", got)
	}
	med := set
	mw, _ := Drafter("medium")
	mw.ApplyTo(&med)
	if got := DrafterCost(6, med); got.Size != "medium" || got.Relative < 2.4 || got.Relative > 2.6 || !strings.Contains(got.String(), "(2.5x the default's work)") {
		t.Errorf("medium drafter cost %+v: %s", got, got)
	}
	sizes := Names()
	if len(sizes) != 3 || sizes[0] != Default {
		t.Fatalf("sizes %v", sizes)
	}
	prev := [2]int{}
	for i, name := range sizes {
		p, _ := Predictor(name)
		d, _ := Drafter(name)
		count := [2]int{Count(6, true, p.Prompts) * p.Tokens, Count(6, true, d.Prompts) * d.Tokens * d.Samples * d.Epochs}
		if count[0] <= prev[0] || count[1] <= prev[1] {
			t.Errorf("%s asks for %v, no more than the size before (%v)", name, count, prev)
		}
		prev = count
		if last := i == len(sizes)-1; last != (p.Prompts == 0 && d.Prompts == 0) {
			t.Errorf("%s: predictor %d prompts, drafter %d (only the largest takes them all)", name, p.Prompts, d.Prompts)
		}
	}
	if Count(6, true, 0) != 6+corpus || Count(6, false, 100) != 6 || Count(6, true, 100) != 100 {
		t.Error("Count")
	}
	for _, bad := range []string{"", "huge", "Small"} {
		if _, err := Predictor(bad); err == nil || !strings.Contains(err.Error(), "small, medium, large") {
			t.Errorf("size %q: %v", bad, err)
		}
		if _, err := Drafter(bad); err == nil {
			t.Errorf("drafter size %q accepted", bad)
		}
	}
}

// TestTrainingPrompts: the given prompts come first, the corpus fills the
// room left, spread from its first line to its last; no limit keeps all.
func TestTrainingPrompts(t *testing.T) {
	given := []string{"a", "b", "c"}
	corpus := make([]string, 100)
	for i := range corpus {
		corpus[i] = string(rune('A' + i%26))
	}
	all := assets.TrainingPrompts(given, corpus, 0)
	if len(all) != 103 || all[0] != "a" || all[3] != corpus[0] {
		t.Fatalf("no limit: %d prompts", len(all))
	}
	got := assets.TrainingPrompts(given, corpus, 13)
	if len(got) != 13 || got[0] != "a" || got[2] != "c" || got[3] != corpus[0] || got[12] != corpus[90] {
		t.Fatalf("limit 13: %v", got)
	}
	if got := assets.TrainingPrompts(given, corpus, 2); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("limit below the given prompts: %v", got)
	}
	if got := assets.TrainingPrompts(given, nil, 50); len(got) != 3 {
		t.Fatalf("no corpus: %v", got)
	}
	if got := assets.Spread(corpus, 4); len(got) != 4 || got[1] != corpus[25] || got[3] != corpus[75] {
		t.Fatalf("spread: %v", got)
	}
}

// TestDrafterClock: the first batch of data prices the rest of the data
// and the epochs; once epochs run, their own rate does, each epoch
// weighted by its depth. The clock is driven by hand: no timing.
func TestDrafterClock(t *testing.T) {
	set := DefaultDrafterSettings()
	set.Epochs, set.Depth, set.Tokens = 3, 3, 10
	now := time.Unix(0, 0)
	c := NewClock(set, func() time.Time { return now })
	if eta, _ := c.Tick(hidden.Progress{Phase: "data", Done: 40, Total: 1000}); eta != 0 {
		t.Fatalf("priced before the first batch: %v", eta)
	}
	now = now.Add(10 * time.Second) // the first batch: 80 tokens in 10 s
	eta, elapsed := c.Tick(hidden.Progress{Phase: "data", Done: 80, Total: 1000})
	per := 10 * time.Second / 80
	epochs := trainPerGenerated * float64(per) * 1000 * (depthWeight(1) + depthWeight(2) + depthWeight(3))
	if want := 920*per + time.Duration(epochs); elapsed != 10*time.Second || (eta-want).Abs() > time.Millisecond {
		t.Fatalf("data ETA %v, want %v", eta, want)
	}
	now = now.Add(115 * time.Second) // the data is done
	c.Tick(hidden.Progress{Phase: "data", Done: 1000, Total: 1000})
	eta, _ = c.Training(900)
	want := time.Duration(trainPerGenerated * float64(per) * 900 * (depthWeight(1) + depthWeight(2) + depthWeight(3)))
	if (eta-want).Abs() > time.Millisecond || c.eta != eta {
		t.Fatalf("training ETA from the data's rate %v, want %v", eta, want)
	}
	// the first epoch (depth 1) took 20 s: the rest weigh 1.75 + 2.5
	now = now.Add(20 * time.Second)
	eta, _ = c.Tick(hidden.Progress{Phase: "eval", Epoch: 0, Depth: 1})
	if want := time.Duration(float64(20*time.Second) * (depthWeight(2) + depthWeight(3)) / depthWeight(1)); (eta - want).Abs() > time.Millisecond {
		t.Fatalf("ETA after epoch 1: %v, want %v", eta, want)
	}
	now = now.Add(time.Minute)
	if eta, _ := c.Tick(hidden.Progress{Phase: "eval", Epoch: 2, Depth: 3}); eta != 0 {
		t.Fatalf("ETA after the last epoch: %v", eta)
	}
}
