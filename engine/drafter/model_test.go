package drafter

import (
	"context"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/kernels/cpu"
)

// loadStories loads stories260K on a backend of one thread, both closed
// with the test.
func loadStories(t *testing.T) *model.Model {
	t.Helper()
	be := cpu.New(1)
	t.Cleanup(be.Close)
	m, err := model.Load(testfiles.Stories260K(t), be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// probePaths are the paths a test's drafters are expanded along to
// compare what they propose: the root, one and two tokens on, and a
// sibling.
func probePaths() [][]int { return [][]int{nil, {40}, {40, 41}, {50}} }

// expandProbes is d's distributions after each of probePaths.
func expandProbes(t *testing.T, d *Model) [][]float32 {
	t.Helper()
	paths := probePaths()
	dst := make([][]float32, len(paths))
	for i := range dst {
		dst[i] = make([]float32, d.M.Vocab)
	}
	if err := d.Expand(context.Background(), paths, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestCacheSizedByTheRun: a model drafter made with room for millions of
// positions (a target file declaring that context) sizes its cache by
// what the run reserves, or by the committed tokens and a short
// generation, and grows it for a longer reservation.
func TestCacheSizedByTheRun(t *testing.T) {
	m := loadStories(t)
	d := NewModel(m, 0, 1<<21, "draft")
	ctx := context.Background()
	if err := d.Begin(ctx, []int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if c := d.cache.Cap(); c != 3+defaultRoom {
		t.Errorf("after Begin without a reservation: %d slots", c)
	}
	if err := d.Reserve(100); err != nil || d.cache.Cap() != 3+defaultRoom {
		t.Errorf("a smaller reservation replaced the cache: %d slots, %v", d.cache.Cap(), err)
	}
	if err := d.Reserve(5000); err != nil || d.cache.Cap() != 5000 {
		t.Errorf("Reserve(5000): %d slots, %v", d.cache.Cap(), err)
	}
	if err := d.Begin(ctx, []int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	dist := [][]float32{make([]float32, m.Vocab)}
	if err := d.Expand(ctx, [][]int{nil}, dist); err != nil {
		t.Fatal(err)
	}
	if small := NewModel(m, 0, 64, "draft"); small.Reserve(5000) != nil || small.cache.Cap() != 64 {
		t.Errorf("a reservation beyond the drafter's capacity: %d slots", small.cache.Cap())
	}
}

// TestBeginKeepsSharedPrefix: a drafter begun again on a sequence that
// shares a prefix with the last one (its prompt, or a conversation
// continued) keeps that prefix's cached slots, all but the root's, caches
// the rest of it but the root (prefill, not the first step's drafting), and
// proposes exactly what a fresh drafter proposes; a sequence that differs
// from its first token keeps nothing.
func TestBeginKeepsSharedPrefix(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	paths := probePaths()
	expand := func(d *Model) [][]float32 { return expandProbes(t, d) }
	first := []int{1, 9, 8, 7, 6, 5, 4, 3}
	for _, tc := range []struct {
		name string
		seq  []int
		keep int
	}{
		{"the same prompt", first, len(first) - 1},
		{"the prompt and the accepted tokens", append(append([]int(nil), first...), 40, 41, 99), len(first) + 2},
		{"a prompt that differs at its fourth token", []int{1, 9, 8, 70, 6, 5}, 3},
		{"another prompt", []int{2, 9, 8, 7}, 0},
	} {
		// a step after first: 40 and 41 accepted, 42 the bonus
		d := NewModel(m, 2, 256, "layers:2")
		if err := d.Begin(ctx, first); err != nil {
			t.Fatal(err)
		}
		expand(d)
		if err := d.Commit([]int{40, 41}, 42); err != nil {
			t.Fatal(err)
		}
		if err := d.Begin(ctx, tc.seq); err != nil {
			t.Fatal(err)
		}
		// the rest of the sequence but its root cached by Begin too (a
		// prompt is prefill, not the first step's drafting)
		if d.kept != tc.keep || d.inCache != len(tc.seq)-1 || d.cache.Len() != len(tc.seq)-1 {
			t.Fatalf("%s: %d slots kept, %d cached (%d in the cache), want %d kept and %d cached", tc.name, d.kept, d.inCache, d.cache.Len(), tc.keep, len(tc.seq)-1)
		}
		got := expand(d)
		fresh := NewModel(m, 2, 256, "layers:2")
		if err := fresh.Begin(ctx, tc.seq); err != nil {
			t.Fatal(err)
		}
		want := expand(fresh)
		for i := range paths {
			for j := range want[i] {
				if got[i][j] != want[i][j] {
					t.Fatalf("%s: path %v, token %d: %g after the kept prefix, %g from a fresh drafter", tc.name, paths[i], j, got[i][j], want[i][j])
				}
			}
		}
	}
}

// TestBeginAll: drafters begun together in passes of several sequences
// (a server's wave of prompts) end as each begun alone: the same slots
// cached, and to the bit the same distributions after every path; one
// that had drafted for a sequence before keeps its shared prefix, one
// whose prompt is only its root runs nothing, and prompts past one pass's
// rows go in several. Drafters of different blocks are refused.
func TestBeginAll(t *testing.T) {
	m := loadStories(t)
	ctx := context.Background()
	paths := probePaths()
	expand := func(d *Model) [][]float32 { return expandProbes(t, d) }
	seqs := [][]int{{1, 9, 8, 7, 6, 5, 4, 3}, {1, 9, 8, 70, 6}, {2}, {1, 9, 8, 7, 6, 5, 4, 3, 20}}
	for i := range 5 { // 2,250 rows more: more than one pass takes
		long := []int{1}
		for j := 1; j < 451; j++ {
			long = append(long, 3+(i*31+j*7)%400)
		}
		seqs = append(seqs, long)
	}
	ds := make([]*Model, len(seqs))
	for i := range ds {
		ds[i] = NewModel(m, 2, m.CtxLen, "layers:2")
	}
	// the fourth drafted for its prompt's first eight tokens before
	if err := ds[3].Begin(ctx, seqs[0]); err != nil {
		t.Fatal(err)
	}
	p := m.NewPass()
	defer p.Free()
	if err := BeginAll(ctx, p, ds, seqs); err != nil {
		t.Fatal(err)
	}
	if ds[3].kept != len(seqs[0])-1 {
		t.Errorf("the drafter that had read the first prompt kept %d of its slots, want %d", ds[3].kept, len(seqs[0])-1)
	}
	for i, d := range ds {
		if d.inCache != len(seqs[i])-1 || d.cache.Len() != len(seqs[i])-1 {
			t.Fatalf("sequence %d: %d cached (%d in the cache), want %d", i, d.inCache, d.cache.Len(), len(seqs[i])-1)
		}
		got := expand(d)
		alone := NewModel(m, 2, m.CtxLen, "layers:2")
		if err := alone.Begin(ctx, seqs[i]); err != nil {
			t.Fatal(err)
		}
		want := expand(alone)
		for a := range paths {
			for j := range want[a] {
				if got[a][j] != want[a][j] {
					t.Fatalf("sequence %d, path %v: logit %d is %v, begun alone %v", i, paths[a], j, got[a][j], want[a][j])
				}
			}
		}
		d.Free()
		alone.Free()
	}
	if err := BeginAll(ctx, p, []*Model{NewModel(m, 2, 256, "a"), NewModel(m, 3, 256, "b")}, seqs[:2]); err == nil {
		t.Error("drafters of different blocks begun in one pass")
	}
}
