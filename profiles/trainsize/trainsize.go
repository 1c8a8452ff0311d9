// Package trainsize holds the sizes of the two trainings (the depth
// predictor's and the hidden-state drafter's), declared once for the
// CLI's --size and the GUI's size choice, and what a training costs: the
// work a size asks for, its estimate before it starts, and the clock that
// estimates what remains of a drafter's training as it runs. The
// trainings themselves are the core's workflows.
package trainsize

import (
	"fmt"
	"strings"
	"time"

	"arborist/assets"
	"arborist/engine/hidden"
)

// Work is how much a training decodes and learns from: the size a
// face offers, and what it costs. Prompts are decoded Samples times for
// Tokens tokens each; the drafter then makes Epochs passes over what was
// decoded (the depth predictor's fit is seconds beside its decoding).
type Work struct {
	Size string `json:"size"`
	// Prompts is how many prompts are decoded at most: the given ones
	// first, then the built-in corpus spread evenly (assets.TrainingPrompts);
	// 0: every given prompt and the whole corpus.
	Prompts int `json:"prompts"`
	Tokens  int `json:"tokens"`
	Samples int `json:"samples"`
	Epochs  int `json:"epochs,omitempty"`
}

// trainSize is one size of both trainers, declared once: the CLI's --size
// and the GUI's size choice read this table.
type trainSize struct {
	name               string
	predictor, drafter Work
}

// Default is the size both trainers run at unless asked for more: sized
// to end within about three minutes on the bench pair on a quiet 2-core
// machine (docs/PERFORMANCE.md).
const Default = "small"

// trainSizes are the sizes, smallest first. The depth predictor decodes
// the pair with the calibration's probe tree; its default of 100 prompts
// x 64 tokens is the data its measured held-out gain came from
// (docs/PERFORMANCE.md). The drafter's sizes keep its per-sample settings
// (two samples, greedy and at 0.8, of 128 tokens, 12 epochs) and scale
// the prompts: the data's generation and the epochs both grow with them.
func trainSizes() []trainSize {
	return []trainSize{
		{"small", Work{Prompts: 100, Tokens: 64, Samples: 1}, Work{Prompts: 160, Tokens: 128, Samples: 2, Epochs: 12}},
		{"medium", Work{Prompts: 300, Tokens: 64, Samples: 1}, Work{Prompts: 400, Tokens: 128, Samples: 2, Epochs: 12}},
		{"large", Work{Prompts: 0, Tokens: 64, Samples: 1}, Work{Prompts: 0, Tokens: 128, Samples: 2, Epochs: 12}},
	}
}

// Names are the sizes' names, smallest first.
func Names() []string {
	var out []string
	for _, s := range trainSizes() {
		out = append(out, s.name)
	}
	return out
}

func findSize(name string) (trainSize, error) {
	for _, s := range trainSizes() {
		if s.name == name {
			return s, nil
		}
	}
	return trainSize{}, fmt.Errorf("size %q: choose %s", name, strings.Join(Names(), ", "))
}

// Predictor is what a depth predictor of that size decodes.
func Predictor(name string) (Work, error) {
	s, err := findSize(name)
	s.predictor.Size = s.name
	return s.predictor, err
}

// Drafter is what a hidden-state drafter of that size decodes and
// trains on.
func Drafter(name string) (Work, error) {
	s, err := findSize(name)
	s.drafter.Size = s.name
	return s.drafter, err
}

// ApplyTo sets a drafter's training settings to this size.
func (w Work) ApplyTo(set *hidden.Settings) {
	set.MaxPrompts, set.Tokens, set.Samples, set.Epochs = w.Prompts, w.Tokens, w.Samples, w.Epochs
}

// DefaultDrafterSettings are hidden.DefaultSettings at Default: the
// settings `train drafter` and the GUI start from.
func DefaultDrafterSettings() hidden.Settings {
	set := hidden.DefaultSettings()
	w, _ := Drafter(Default)
	w.ApplyTo(&set)
	return set
}

// Count is how many prompts a training with these given prompts decodes (the corpus added where corpus is set, capped at limit).
func Count(given int, corpus bool, limit int) int {
	n := given
	if corpus {
		n += len(assets.CorpusPrompts())
	}
	if limit > 0 {
		n = min(n, limit)
	}
	return n
}

// Cost is a training's cost before it starts: its counts, and the time
// they should take where a stored curve or a measurement prices them
// (Estimate 0: not yet known; it is measured on the first batch).
type Cost struct {
	Work
	Prompts  int           `json:"prompts"`   // what the training decodes, the limit applied
	Decoded  int           `json:"decoded"`   // tokens decoded in all: Prompts x Samples x Tokens
	Estimate time.Duration `json:"estimate"`  // 0: unknown until the first batch
	Basis    string        `json:"basis"`     // what the estimate comes from
	PerToken time.Duration `json:"per_token"` // the decoding's time a token it assumes
	// Relative is this work against the default size's with the same
	// prompts (1: the default's; 0: not compared), so a face can say what
	// a larger size costs before anything is measured.
	Relative float64 `json:"relative,omitempty"`
}

// String is the line a face shows before a training starts: "about 100
// prompts x 64 tokens, estimated 1.4 min (the pair's latency
// curve)".
func (w Cost) String() string {
	s := fmt.Sprintf("about %d prompts x %d tokens", w.Prompts, w.Tokens)
	if w.Samples > 1 {
		s = fmt.Sprintf("about %d prompts x %d samples x %d tokens", w.Prompts, w.Samples, w.Tokens)
	}
	if w.Epochs > 0 {
		s += fmt.Sprintf(", %d epochs", w.Epochs)
	}
	if w.Relative > 0 && (w.Relative < 0.95 || w.Relative > 1.05) {
		s += fmt.Sprintf(" (%.1fx the default's work)", w.Relative)
	}
	if w.Estimate <= 0 {
		return s + ", estimated after the first batch"
	}
	return s + fmt.Sprintf(", estimated %s (%s)", Minutes(w.Estimate), w.Basis)
}

// Minutes writes a duration as a face shows an estimate: "40 s", "2.5
// min", "1.2 h".
func Minutes(d time.Duration) string {
	switch {
	case d < 90*time.Second:
		return fmt.Sprintf("%.0f s", max(1, d.Seconds()))
	case d < 90*time.Minute:
		return fmt.Sprintf("%.1f min", d.Minutes())
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// ETA is what remains of a job done parts of total after elapsed, at the
// rate so far (0 until something is done).
func ETA(elapsed time.Duration, done, total float64) time.Duration {
	if done <= 0 || total <= done {
		return 0
	}
	return time.Duration(float64(elapsed) * (total - done) / done)
}

// trainPerGenerated is what a training token costs an epoch at depth 1
// against what generating a token of its data cost: measured on the bench
// target (bfloat16 products, 2 threads) at 0.70 against 4.9 ms under the
// same load, so the first batch of data also prices the epochs until the
// first has run.
const trainPerGenerated = 0.15

// depthWeight is an epoch's cost at curriculum depth d against depth 1:
// each further depth adds a forward and backward pass of the drafter
// (measured 1 : 1.61 : 2.48 for depths 1 to 3).
func depthWeight(d int) float64 { return 0.25 + 0.75*float64(d) }

// Clock estimates what remains of a drafter's training from its
// progress: during the data, from the generation's rate so far (and the
// epochs priced from it, trainPerGenerated); during the epochs, from their
// rate so far, each weighted by its depth.
type Clock struct {
	set       hidden.Settings
	start     time.Time
	dataStart time.Time
	trainAt   time.Time // zero until training starts
	generated int       // tokens of data generated so far
	weights   []float64 // each epoch's cost in depth-1 epochs
	eta       time.Duration
	now       func() time.Time
}

func NewClock(set hidden.Settings, now func() time.Time) *Clock {
	t := now() // made as the data's generation starts
	c := &Clock{set: set, start: t, dataStart: t, now: now}
	for e := range set.Epochs {
		c.weights = append(c.weights, depthWeight(set.DepthAt(e)))
	}
	return c
}

// epochsLeft is the depth-weighted epochs left after epoch e's share done
// of its batches.
func (c *Clock) epochsLeft(epoch int, done float64) float64 {
	left := 0.0
	for e := epoch; e < len(c.weights); e++ {
		left += c.weights[e]
	}
	if epoch < len(c.weights) {
		left -= done * c.weights[epoch]
	}
	return max(0, left)
}

// Training notes that the data is ready, tokens of it to train on, and
// returns the ETA and elapsed time: the generation's rate prices the
// epochs until the first batches have run.
func (c *Clock) Training(tokens int) (time.Duration, time.Duration) {
	c.trainAt = c.now()
	if c.generated > 0 {
		per := float64(c.trainAt.Sub(c.dataStart)) / float64(c.generated)
		c.eta = time.Duration(per * trainPerGenerated * float64(tokens) * c.epochsLeft(0, 0))
	}
	return c.eta, c.now().Sub(c.start)
}

// Tick folds a progress report in and returns the ETA and elapsed time.
func (c *Clock) Tick(p hidden.Progress) (time.Duration, time.Duration) {
	now := c.now()
	switch p.Phase {
	case "data":
		c.generated = p.Done
		// the first batch of sequences decoded prices the rest
		if p.Done >= min(p.Total, 8*c.set.Tokens) && p.Done > 0 {
			per := float64(now.Sub(c.dataStart)) / float64(p.Done)
			data := per * float64(p.Total-p.Done)
			epochs := per * trainPerGenerated * float64(p.Total) * c.epochsLeft(0, 0)
			c.eta = time.Duration(data + epochs)
		}
	case "train", "eval":
		if c.trainAt == (time.Time{}) {
			c.trainAt = now
		}
		share := 1.0
		if p.Phase == "train" && p.Total > 0 {
			share = float64(p.Done) / float64(p.Total)
		}
		done := c.epochsLeft(0, 0) - c.epochsLeft(p.Epoch, share)
		c.eta = ETA(now.Sub(c.trainAt), done, c.epochsLeft(0, 0))
	}
	return c.eta, now.Sub(c.start)
}

// DrafterCost is what a drafter's training with these settings decodes
// and trains on, before it starts. Its time is measured on the first
// batch of data (profiles.TrainEvent.ETA): no stored curve prices the trainer's
// batched generation and its epochs.
func DrafterCost(prompts int, set hidden.Settings) Cost {
	w := drafterSize(set)
	for _, s := range trainSizes() {
		if s.drafter.Prompts == w.Prompts && s.drafter.Tokens == w.Tokens && s.drafter.Samples == w.Samples && s.drafter.Epochs == w.Epochs {
			w.Size = s.name
		}
	}
	out := Cost{Work: w, Prompts: Count(prompts, set.Corpus, set.MaxPrompts)}
	out.Decoded = out.Prompts * max(1, w.Samples) * w.Tokens
	def := set
	drafterSize(DefaultDrafterSettings()).ApplyTo(&def)
	base := Count(prompts, def.Corpus, def.MaxPrompts) * max(1, def.Samples) * def.Tokens
	if units := drafterUnits(def, base); units > 0 {
		out.Relative = drafterUnits(set, out.Decoded) / units
	}
	return out
}

// size is the training size these settings ask for.
func drafterSize(set hidden.Settings) Work {
	return Work{Prompts: set.MaxPrompts, Tokens: set.Tokens, Samples: set.Samples, Epochs: set.Epochs}
}

// drafterUnits is a drafter training's work in generated tokens: the data,
// and its epochs priced as trainPerGenerated a token at depth 1.
func drafterUnits(set hidden.Settings, decoded int) float64 {
	epochs := 0.0
	for e := range set.Epochs {
		epochs += depthWeight(set.DepthAt(e))
	}
	return float64(decoded) * (1 + trainPerGenerated*epochs)
}
