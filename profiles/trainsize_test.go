package profiles

import (
	"strings"
	"testing"
	"time"

	"arborist/assets"
	"arborist/engine/hidden"
)

// TestTrainSizes: the default size is the small one and asks for the work
// the three-minute budget was sized on; each size asks for more than the
// one before, the largest for everything; the catalog's drafter settings
// are the default size's; an unknown size is refused naming the sizes.
func TestTrainSizes(t *testing.T) {
	p, err := PredictorSize(DefaultTrainSize)
	if err != nil || p != (TrainWork{Size: "small", Prompts: 100, Tokens: 64, Samples: 1}) {
		t.Fatalf("default predictor work %+v (%v)", p, err)
	}
	d, err := DrafterSize(DefaultTrainSize)
	if err != nil || d != (TrainWork{Size: "small", Prompts: 160, Tokens: 128, Samples: 2, Epochs: 12}) {
		t.Fatalf("default drafter work %+v (%v)", d, err)
	}
	set := Choices().DrafterSettings
	if set.MaxPrompts != 160 || set.Tokens != 128 || set.Samples != 2 || set.Epochs != 12 || set.Validate() != nil {
		t.Errorf("catalog drafter settings %+v", set)
	}
	corpus := len(assets.CorpusPrompts())
	if got := DrafterCost(6, set); got.Prompts != 160 || got.Decoded != 160*2*128 || got.Size != "small" || got.Estimate != 0 {
		t.Errorf("default drafter cost %+v", got)
	}
	med := set
	mw, _ := DrafterSize("medium")
	mw.ApplyTo(&med)
	if got := DrafterCost(6, med); got.Size != "medium" || got.Relative < 2.4 || got.Relative > 2.6 || !strings.Contains(got.String(), "(2.5x the default's work)") {
		t.Errorf("medium drafter cost %+v: %s", got, got)
	}
	sizes := TrainSizes()
	if len(sizes) != 3 || sizes[0] != DefaultTrainSize {
		t.Fatalf("sizes %v", sizes)
	}
	prev := [2]int{}
	for i, name := range sizes {
		p, _ := PredictorSize(name)
		d, _ := DrafterSize(name)
		count := [2]int{TrainCount(6, true, p.Prompts) * p.Tokens, TrainCount(6, true, d.Prompts) * d.Tokens * d.Samples * d.Epochs}
		if count[0] <= prev[0] || count[1] <= prev[1] {
			t.Errorf("%s asks for %v, no more than the size before (%v)", name, count, prev)
		}
		prev = count
		if last := i == len(sizes)-1; last != (p.Prompts == 0 && d.Prompts == 0) {
			t.Errorf("%s: predictor %d prompts, drafter %d (only the largest takes them all)", name, p.Prompts, d.Prompts)
		}
	}
	if TrainCount(6, true, 0) != 6+corpus || TrainCount(6, false, 100) != 6 || TrainCount(6, true, 100) != 100 {
		t.Error("TrainCount")
	}
	for _, bad := range []string{"", "huge", "Small"} {
		if _, err := PredictorSize(bad); err == nil || !strings.Contains(err.Error(), "small, medium, large") {
			t.Errorf("size %q: %v", bad, err)
		}
		if _, err := DrafterSize(bad); err == nil {
			t.Errorf("drafter size %q accepted", bad)
		}
	}
	if w, _ := (PredictorOptions{Tokens: 40}).work(); w.Tokens != 40 || w.Prompts != 100 {
		t.Errorf("options' tokens over the size's: %+v", w)
	}
	if _, err := (PredictorOptions{Size: "huge"}).work(); err == nil {
		t.Error("unknown size in the options accepted")
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
	set := defaultDrafterSettings()
	set.Epochs, set.Depth, set.Tokens = 3, 3, 10
	now := time.Unix(0, 0)
	c := newDrafterClock(set, func() time.Time { return now })
	if eta, _ := c.tick(hidden.Progress{Phase: "data", Done: 40, Total: 1000}); eta != 0 {
		t.Fatalf("priced before the first batch: %v", eta)
	}
	now = now.Add(10 * time.Second) // the first batch: 80 tokens in 10 s
	eta, elapsed := c.tick(hidden.Progress{Phase: "data", Done: 80, Total: 1000})
	per := 10 * time.Second / 80
	epochs := trainPerGenerated * float64(per) * 1000 * (depthWeight(1) + depthWeight(2) + depthWeight(3))
	if want := 920*per + time.Duration(epochs); elapsed != 10*time.Second || (eta-want).Abs() > time.Millisecond {
		t.Fatalf("data ETA %v, want %v", eta, want)
	}
	now = now.Add(115 * time.Second) // the data is done
	c.tick(hidden.Progress{Phase: "data", Done: 1000, Total: 1000})
	c.training(900)
	want := time.Duration(trainPerGenerated * float64(per) * 900 * (depthWeight(1) + depthWeight(2) + depthWeight(3)))
	if (c.eta - want).Abs() > time.Millisecond {
		t.Fatalf("training ETA from the data's rate %v, want %v", c.eta, want)
	}
	// the first epoch (depth 1) took 20 s: the rest weigh 1.75 + 2.5
	now = now.Add(20 * time.Second)
	eta, _ = c.tick(hidden.Progress{Phase: "eval", Epoch: 0, Depth: 1})
	if want := time.Duration(float64(20*time.Second) * (depthWeight(2) + depthWeight(3)) / depthWeight(1)); (eta - want).Abs() > time.Millisecond {
		t.Fatalf("ETA after epoch 1: %v, want %v", eta, want)
	}
	now = now.Add(time.Minute)
	if eta, _ := c.tick(hidden.Progress{Phase: "eval", Epoch: 2, Depth: 3}); eta != 0 {
		t.Fatalf("ETA after the last epoch: %v", eta)
	}
}
