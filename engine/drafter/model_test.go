package drafter

import (
	"context"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/kernels/cpu"
)

// TestCacheSizedByTheRun: a model drafter made with room for millions of
// positions (a target file declaring that context) sizes its cache by
// what the run reserves, or by the committed tokens and a short
// generation, and grows it for a longer reservation.
func TestCacheSizedByTheRun(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	m, err := model.Load(testfiles.Stories260K(t), be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
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
