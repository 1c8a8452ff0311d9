package model_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/kernels/devicetest"
	"arborist/kernels/quant"
)

// TestPassFaultCaught is the multi-sequence identity's negative control:
// a pass whose sequences attend with the wrong sequence's queries (rows
// mixed up between sequences) is told apart from the sequences alone,
// for every kind of sequence but the first, whose queries it reads, and
// the one that repeats the first's rows in a cache of its own.
func TestPassFaultCaught(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t, shapes[0].Shape, quant.F32)
	cases := modeltest.MultiCases()
	alone, err := modeltest.RunMulti(ctx, m, nil, cases, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := m.NewPass()
	defer pass.Free()
	order := []int{0, 1, 2, 3, 4, 5} // 5 repeats 0
	got, err := modeltest.RunMulti(ctx, m, pass, cases, order)
	if err != nil {
		t.Fatal(err)
	}
	if where := modeltest.SameMulti(cases, alone, got); where != "" {
		t.Fatalf("the correct pass differs from the sequences alone: %s", where)
	}
	model.SetPassFault(pass, true)
	got, err = modeltest.RunMulti(ctx, m, pass, cases, order)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range order[1:5] {
		if where := modeltest.SameMulti(cases[i:i+1], alone[i:i+1], got[i:i+1]); where == "" {
			t.Errorf("%s: a pass attending with another sequence's queries was not caught", cases[i].Name)
		} else {
			t.Logf("%s: caught (%s)", cases[i].Name, where)
		}
	}
}

// TestPassRefuses: a pass checks every sequence before it runs any, and
// names the one at fault: a shared cache, another model's cache, blocks
// that differ, a batch its cache cannot hold, more rows than one pass
// takes; the caches are left as they were.
func TestPassRefuses(t *testing.T) {
	ctx := context.Background()
	m := tinyModel(t, shapes[0].Shape, quant.F32)
	other := tinyModel(t, shapes[0].Shape, quant.F32)
	pass := m.NewPass()
	defer pass.Free()
	a, b := m.NewCache(8), m.NewCache(8)
	var ra, rb model.Result
	ok := model.Seq{Cache: a, Batch: model.Batch{Tokens: []int{1, 2}}, Result: &ra}
	for _, c := range []struct {
		name string
		seqs []model.Seq
		want string
	}{
		{"none", nil, "no sequences"},
		{"shared cache", []model.Seq{ok, {Cache: a, Batch: model.Batch{Tokens: []int{3}}, Result: &rb}}, "sequences 0 and 1 of the pass share a cache"},
		{"another model", []model.Seq{ok, {Cache: other.NewCache(8), Batch: model.Batch{Tokens: []int{3}}, Result: &rb}}, "sequence 1 of the pass has a cache of another model"},
		{"blocks", []model.Seq{ok, {Cache: b, Batch: model.Batch{Tokens: []int{3}, Layers: 1}, Result: &rb}}, "sequence 1 of the pass runs 1 blocks"},
		{"full", []model.Seq{ok, {Cache: b, Batch: model.Batch{Tokens: make([]int, 9)}, Result: &rb}}, "sequence 1 of the pass: model: context full"},
		{"no result", []model.Seq{ok, {Cache: b, Batch: model.Batch{Tokens: []int{3}}}}, "sequence 1 of the pass has no cache or no result"},
	} {
		err := pass.Forward(ctx, c.seqs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if a.Len() != 0 || b.Len() != 0 {
			t.Fatalf("%s: a refused pass changed the caches (%d, %d slots)", c.name, a.Len(), b.Len())
		}
	}
	model.SetMaxRows(m, 4)
	defer model.SetMaxRows(m, 0)
	err := pass.Forward(ctx, []model.Seq{ok, {Cache: b, Batch: model.Batch{Tokens: []int{3, 4, 5}}, Result: &rb}})
	if err == nil || !strings.Contains(err.Error(), "a pass of 5 rows is more than the 4 one pass takes") {
		t.Errorf("too many rows: %v", err)
	}
	if err := pass.Forward(ctx, []model.Seq{ok, {Cache: b, Batch: model.Batch{Tokens: []int{3, 4}}, Result: &rb}}); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 2 || b.Len() != 2 || len(ra.Logits) != 2*m.Vocab || len(rb.Logits) != 2*m.Vocab {
		t.Errorf("a pass of two sequences of two rows left caches of %d and %d slots and %d and %d logits", a.Len(), b.Len(), len(ra.Logits), len(rb.Logits))
	}
}

// TestCacheBudget: a cache is admitted only within what the budget has
// left, refused before anything is allocated with an error naming the
// bound (larger than the whole budget: never; larger than what is left:
// until caches are freed), and freeing a cache makes room at once.
func TestCacheBudget(t *testing.T) {
	fake := devicetest.NewFake()
	defer fake.Close()
	m, _ := modeltest.Synth(t, fake, shapes[0].Shape, quant.F32, 3)
	per := m.KVBytesAs(1, m.KVType)
	m.KVType = quant.F16
	if half := m.KVBytesAs(1, quant.F16); half*2 != per {
		t.Fatalf("an F16 position takes %d bytes, F32 %d", half, per)
	}
	per /= 2
	b := model.NewCacheBudget(100 * per) // 100 positions of F16
	allocs := func() int { return fake.Calls()["NewKV"] }
	if _, err := b.NewCache(m, 101); !errors.Is(err, model.ErrOverBudget) || !strings.Contains(err.Error(), "101 positions") {
		t.Fatalf("a cache larger than the budget: %v", err)
	}
	if err := b.Fits(m, 101); !errors.Is(err, model.ErrOverBudget) {
		t.Fatalf("Fits of a cache larger than the budget: %v", err)
	}
	if allocs() != 0 {
		t.Fatal("a refused cache was allocated")
	}
	c1, err := b.NewCache(m, 60)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Type() != quant.F16 || allocs() != 1 {
		t.Fatalf("an admitted cache is %s, %d allocations", c1.Type(), allocs())
	}
	if used, held := b.Used(); used != 60*per || held != 1 {
		t.Fatalf("the budget holds %d bytes in %d caches, want %d in 1", used, held, 60*per)
	}
	_, err = b.NewCache(m, 41)
	if !errors.Is(err, model.ErrBudgetFull) || errors.Is(err, model.ErrOverBudget) || !strings.Contains(err.Error(), "41 positions") {
		t.Fatalf("a cache larger than what is left: %v", err)
	}
	if allocs() != 1 {
		t.Fatal("a refused cache was allocated")
	}
	c2, err := b.NewCache(m, 40) // exactly what is left
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.NewCache(m, 1); !errors.Is(err, model.ErrBudgetFull) {
		t.Fatalf("a full budget admitted a cache: %v", err)
	}
	c1.Free()
	c1.Free() // freeing twice gives nothing back twice
	if used, held := b.Used(); used != 40*per || held != 1 {
		t.Fatalf("after a free the budget holds %d bytes in %d caches, want %d in 1", used, held, 40*per)
	}
	if kept, n := b.Spare(); kept != 60*per || n != 1 {
		t.Fatalf("the freed cache's memory: %d bytes in %d spares kept, want %d in 1", kept, n, 60*per)
	}
	c3, err := b.NewCache(m, 50) // fits in the spare: no allocation
	if err != nil {
		t.Fatalf("the freed room: %v", err)
	}
	if kept, n := b.Spare(); allocs() != 2 || kept != 0 || n != 0 {
		t.Fatalf("a cache that fits a spare: %d allocations (want 2), %d bytes in %d spares left", allocs(), kept, n)
	}
	if used, held := b.Used(); used != 100*per || held != 2 {
		t.Fatalf("a cache in a spare of 60 positions: the budget holds %d bytes in %d caches, want %d in 2", used, held, 100*per)
	}
	var res model.Result
	if err := m.Forward(context.Background(), c3, model.Batch{Tokens: []int{1, 2, 3}}, &res); err != nil {
		t.Fatal(err)
	}
	if c3.Cap() != 50 {
		t.Fatalf("a cache made in a larger spare has %d positions, want the 50 asked for", c3.Cap())
	}
	c2.Free()
	c3.Free()
	if used, held := b.Used(); used != 0 || held != 0 {
		t.Fatalf("every cache freed, the budget holds %d bytes in %d caches", used, held)
	}
	// a cache no spare holds takes their bytes: the spares are released
	c4, err := b.NewCache(m, 100)
	if err != nil {
		t.Fatalf("the spares' room: %v", err)
	}
	if kept, n := b.Spare(); allocs() != 3 || kept != 0 || n != 0 {
		t.Fatalf("a cache larger than every spare: %d allocations (want 3), %d bytes in %d spares left", allocs(), kept, n)
	}
	c4.Free()
	b.Release()
	if kept, n := b.Spare(); kept != 0 || n != 0 {
		t.Fatalf("released, the budget keeps %d bytes in %d spares", kept, n)
	}
	// the device's own refusal gives the bytes back too
	fake.MaxValues = 10
	if _, err := b.NewCache(m, 50); err == nil {
		t.Fatal("a cache the device cannot hold was admitted")
	}
	if used, held := b.Used(); used != 0 || held != 0 {
		t.Fatalf("a cache the device refused left %d bytes in %d caches taken", used, held)
	}
}
