package drafter

import (
	"context"
	"slices"
	"strings"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/engine/sample"
	"arborist/kernels/cpu"
)

// TestFork: an instance a source forks shares its model and settings but
// drafts a sequence of its own (what one instance commits changes nothing
// of the other's proposals), and Free releases its cache; a source that
// cannot fork says so.
func TestFork(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	for _, src := range []Source{NewModel(m, 2, 256, "layers:2"), NewNGram(3, m.Vocab)} {
		a, b := []int{1, 5, 9, 5, 9, 5}, []int{1, 7, 7, 3, 7, 7}
		want := expandRoot(t, ctx, src, a)
		f, err := Fork(src) // of a source that has drafted
		if err != nil {
			t.Fatal(err)
		}
		if f == src || f.Name() != src.Name() || f.Vocab() != src.Vocab() {
			t.Fatalf("%s forked to %s (the same instance: %v)", src.Name(), f.Name(), f == src)
		}
		// the two interleaved: src begun, then the fork drafting and
		// committing its own sequence, then src drafting
		if err := src.Begin(ctx, a); err != nil {
			t.Fatal(err)
		}
		expandRoot(t, ctx, f, b)
		if err := f.Commit(nil, 3); err != nil {
			t.Fatal(err)
		}
		q := [][]float32{make([]float32, src.Vocab())}
		if err := src.Expand(ctx, [][]int{nil}, q); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(q[0], want) {
			t.Fatalf("%s: another instance's sequence changed its proposals", src.Name())
		}
		Free(f)
		Free(src)
	}
	if d := NewModel(m, 0, 64, "draft"); d.Reserve(64) == nil {
		Free(d)
		if d.cache != nil {
			t.Fatal("Free left the drafter's cache")
		}
	}
	if _, err := Fork(plainSource{}); err == nil || !strings.Contains(err.Error(), "cannot make an instance") {
		t.Fatalf("a source without Fork: %v", err)
	}
}

// expandRoot begins src on seq and returns its distribution at the root.
func expandRoot(t *testing.T, ctx context.Context, src Source, seq []int) []float32 {
	t.Helper()
	if err := src.Begin(ctx, seq); err != nil {
		t.Fatal(err)
	}
	q := [][]float32{make([]float32, src.Vocab())}
	if err := src.Expand(ctx, [][]int{nil}, q); err != nil {
		t.Fatal(err)
	}
	return q[0]
}

// plainSource is a source without Fork.
type plainSource struct{}

func (plainSource) Name() string                                       { return "plain" }
func (plainSource) Begin(context.Context, []int) error                 { return nil }
func (plainSource) Expand(context.Context, [][]int, [][]float32) error { return nil }
func (plainSource) Commit([]int, int) error                            { return nil }
func (plainSource) Vocab() int                                         { return 1 }

// TestSetSample: a model drafter proposes from its distribution after the
// sampling it was told (a cooler temperature: a larger top probability; a
// top-k: that many tokens), a fork proposes at its source's sampling, and
// greedy runs propose the plain softmax; n-gram lookup proposes the same
// whatever the sampling.
func TestSetSample(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	m, err := model.Load(testfiles.Stories260K(t), be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	seq := []int{1, 5, 9, 5, 9, 5}
	d := NewModel(m, 2, 256, "layers:2")
	plain := expandRoot(t, ctx, d, seq)
	d.SetSample(sample.Params{Temp: 0.5, TopK: 5, Seed: 3})
	cool := expandRoot(t, ctx, d, seq)
	kept := 0
	for _, v := range cool {
		if v > 0 {
			kept++
		}
	}
	if slices.Max(cool) <= slices.Max(plain) || kept != 5 {
		t.Fatalf("at temperature 0.5 and top-k 5: top probability %v (plain softmax %v), %d tokens kept", slices.Max(cool), slices.Max(plain), kept)
	}
	f, err := Fork(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := expandRoot(t, ctx, f, seq); !slices.Equal(got, cool) {
		t.Fatal("a fork proposes at another sampling than its source")
	}
	Free(f)
	d.SetSample(sample.Params{TopK: 5}) // greedy: the plain softmax, whatever else is set
	if got := expandRoot(t, ctx, d, seq); !slices.Equal(got, plain) {
		t.Fatal("a greedy run's drafter does not propose the plain softmax")
	}
	Free(d)
	ng := NewNGram(3, m.Vocab)
	before := expandRoot(t, ctx, ng, seq)
	SetSample(ng, sample.Params{Temp: 0.5})
	if !slices.Equal(expandRoot(t, ctx, ng, seq), before) {
		t.Fatal("n-gram lookup proposes by the sampling")
	}
}
