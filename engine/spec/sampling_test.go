package spec

import (
	"context"
	"reflect"
	"testing"

	"arborist/engine/drafter"
	"arborist/engine/sample"
)

// toldSource records the sampling the engine tells its source.
type toldSource struct {
	*drafter.Model
	told []sample.Params
}

func (s *toldSource) SetSample(p sample.Params) {
	s.told = append(s.told, p)
	s.Model.SetSample(p)
}

// TestSourceFollowsTheRun: the engine tells the draft source each
// generation's sampling, Run and Batch alike, so a source that drafted
// at another sampling before drafts exactly as a fresh one: the same
// tree (tokens and path probabilities) every step and the same tokens.
// Negative control: another temperature drafts other trees.
func TestSourceFollowsTheRun(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	prompt := p.target.Tok.Encode("Once upon a time", true, false)
	run := func(src drafter.Source, smp sample.Params) ([]int, [][]TreeNode) {
		var trees [][]TreeNode
		cfg := Config{Plan: ChainPlan(4), MaxTokens: 40, Sample: smp, OnStep: func(s Step) { trees = append(trees, s.Tree) }}
		res, err := (&Engine{Target: p.target, Source: src}).Run(ctx, prompt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens, trees
	}
	smp := sample.Params{Temp: 0.8, TopP: 0.95, Seed: 7}
	told := &toldSource{Model: drafter.NewModel(p.draft, 0, 512, "draft")}
	told.Model.SetSample(sample.Params{Temp: 1.7}) // what it drafted at before
	fresh := drafter.NewModel(p.draft, 0, 512, "draft")
	fresh.SetSample(smp)
	gotToks, gotTrees := run(told, smp)
	wantToks, wantTrees := run(fresh, smp)
	if len(told.told) != 1 || told.told[0] != smp {
		t.Fatalf("the source was told %+v, the run samples %+v", told.told, smp)
	}
	if !reflect.DeepEqual(gotToks, wantToks) || !reflect.DeepEqual(gotTrees, wantTrees) {
		t.Fatalf("a source told the run's sampling drafts otherwise than one opened at it:\n got %v\nwant %v", gotToks, wantToks)
	}
	other := smp
	other.Temp = 0.5
	if _, trees := run(drafter.NewModel(p.draft, 0, 512, "draft"), other); reflect.DeepEqual(trees, wantTrees) {
		t.Fatal("temperatures 0.5 and 0.8 drafted the same trees: the comparison above cannot fail")
	}

	// a batch's requests, each at its own sampling
	b := NewBatch(p.target, BatchOptions{})
	greedy := sample.Params{TopP: 1, Seed: 1}
	srcs := []*toldSource{{Model: drafter.NewModel(p.draft, 0, 512, "draft")}, {Model: drafter.NewModel(p.draft, 0, 512, "draft")}}
	var hs []*Handle
	for i, smp := range []sample.Params{smp, greedy} {
		h, err := b.Submit(ctx, Request{Prompt: prompt, Config: Config{Plan: ChainPlan(3), MaxTokens: 10, Sample: smp}, Source: srcs[i]})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	stepAll(t, b)
	for i, want := range []sample.Params{smp, greedy} {
		if _, err := hs[i].Wait(); err != nil {
			t.Fatal(err)
		}
		if len(srcs[i].told) != 1 || srcs[i].told[0] != want {
			t.Errorf("request %d's source was told %+v; it samples %+v", i, srcs[i].told, want)
		}
	}
}
