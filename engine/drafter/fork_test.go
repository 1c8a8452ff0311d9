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
	be := cpu.New(1)
	defer be.Close()
	m, err := model.Load(testfiles.Stories260K(t), be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	for _, src := range []Source{NewModel(m, 2, 256, sample.Params{Temp: 0.7}, "layers:2"), NewNGram(3, m.Vocab)} {
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
	if d := NewModel(m, 0, 64, sample.Params{}, "draft"); d.Reserve(64) == nil {
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
