package tree

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestBatchMaskPositions(t *testing.T) {
	tr := &Tree{}
	a := tr.Add(Root, 10, 0.5) // depth 1
	b := tr.Add(a, 11, 0.5)    // depth 2
	c := tr.Add(Root, 12, 0.25)
	tr.Pad(4, 0)
	toks, pos, mask := tr.Batch(9, 3)
	if !reflect.DeepEqual(toks, []int{9, 10, 11, 12, 0}) {
		t.Errorf("tokens %v", toks)
	}
	if !reflect.DeepEqual(pos, []int{3, 4, 5, 4, 3}) {
		t.Errorf("positions %v", pos)
	}
	total := 3 + 5
	row := func(r int) []bool { return mask[r*total : (r+1)*total] }
	T, F := true, false
	want := [][]bool{
		{T, T, T, T, F, F, F, F}, // root: cache + itself
		{T, T, T, T, T, F, F, F}, // a: root + a
		{T, T, T, T, T, T, F, F}, // b: root + a + b
		{T, T, T, T, F, F, T, F}, // c: root + c
		{F, F, F, F, F, F, F, T}, // pad: only itself
	}
	for r := range want {
		if !reflect.DeepEqual(row(r), want[r]) {
			t.Errorf("mask row %d = %v, want %v", r, row(r), want[r])
		}
	}
	if tr.Nodes[b].PathP != 0.25 || tr.Nodes[c].Depth != 1 {
		t.Errorf("b pathP %v, c depth %d", tr.Nodes[b].PathP, tr.Nodes[c].Depth)
	}
	if got := tr.Path(b); !reflect.DeepEqual(got, []int{a, b}) {
		t.Errorf("Path(b) = %v", got)
	}
	if tr.MaxDepth() != 2 || len(tr.Children(Root)) != 2 {
		t.Errorf("max depth %d, root children %v", tr.MaxDepth(), tr.Children(Root))
	}
	if err := tr.Validate(); err != nil {
		t.Error(err)
	}
}

// bruteBest enumerates every ancestor-closed subset of at most budget nodes.
func bruteBest(tr *Tree, budget int, value []float64) float64 {
	n := tr.Len()
	best := 0.0
	for m := 0; m < 1<<n; m++ {
		cnt, sum, ok := 0, 0.0, true
		for i := 0; i < n && ok; i++ {
			if m&(1<<i) == 0 {
				continue
			}
			cnt++
			sum += value[i]
			if p := tr.Nodes[i].Parent; p != Root && m&(1<<p) == 0 {
				ok = false
			}
		}
		if ok && cnt <= budget && sum > best {
			best = sum
		}
	}
	return best
}

// TestPruneMatchesBruteForce checks the knapsack DP on random trees with
// arbitrary (not path-monotone) values against exhaustive search.
func TestPruneMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 300; trial++ {
		tr := &Tree{}
		n := 1 + rng.IntN(11)
		value := make([]float64, n)
		for i := 0; i < n; i++ {
			p := Root
			if i > 0 && rng.IntN(4) != 0 {
				p = rng.IntN(i)
			}
			tr.Add(p, i, float32(rng.Float64()))
			value[i] = rng.Float64()
		}
		budget := 1 + rng.IntN(n)
		got := tr.Prune(budget, value)
		if err := got.Validate(); err != nil {
			t.Fatal(err)
		}
		if got.Len() > budget {
			t.Fatalf("pruned to %d nodes, budget %d", got.Len(), budget)
		}
		sum := 0.0
		for _, nd := range got.Nodes {
			sum += value[nd.Token] // token = original index
		}
		if want := bruteBest(tr, budget, value); sum < want-1e-9 {
			t.Fatalf("trial %d: DP value %.6f < optimum %.6f (n=%d budget=%d)", trial, sum, want, n, budget)
		}
	}
}

func TestStaticShapes(t *testing.T) {
	s, err := FromWidths([]int{3, 2, 1})
	if err != nil || len(s.Parents) != 3+6+6 {
		t.Fatalf("FromWidths: %v, %d nodes", err, len(s.Parents))
	}
	if r := s.Rank(); r[0] != 0 || r[2] != 2 || r[4] != 1 {
		t.Errorf("ranks %v", r)
	}
	if _, err := FromParents([]int{-1, 0, 5}); err == nil {
		t.Error("forward parent accepted")
	}
	if _, err := FromWidths([]int{2, 0}); err == nil {
		t.Error("zero width accepted")
	}
	if got := TopK([]float32{0.1, 0.5, 0.2, 0.5}, 3); !reflect.DeepEqual(got, []int{1, 3, 2}) {
		t.Errorf("TopK = %v", got)
	}
}

// TestWidthsBounded: widths such as 1000,1000,1000 (a billion-node tree,
// 12 GiB in 40 s if built) are refused from their computed size, without
// allocating.
func TestWidthsBounded(t *testing.T) {
	for _, ws := range [][]int{{1000, 1000, 1000}, {MaxNodes + 1}, {2, 2, 2, 2, 2, 2, 2, 2, 2}, {1 << 62, 1 << 62}} {
		allocs := testing.AllocsPerRun(1, func() {
			if _, err := FromWidths(ws); err == nil {
				t.Errorf("FromWidths(%v) accepted", ws)
			}
		})
		if allocs > 64 {
			t.Errorf("FromWidths(%v) allocated %v times before refusing", ws, allocs)
		}
	}
	s, err := FromWidths([]int{8, 8, 6})
	if err != nil || len(s.Parents) != 8+64+384 || len(s.Parents) > MaxNodes {
		t.Fatalf("8,8,6: %d nodes, %v", len(s.Parents), err)
	}
	if n, err := WidthsSize([]int{3, 2, 1}, 0); n != 15 || err != nil {
		t.Fatalf("WidthsSize(3,2,1) = %d, %v", n, err)
	}
	if _, err := FromParents(make([]int, MaxNodes+1)); err == nil {
		t.Fatal("FromParents accepted more than MaxNodes nodes")
	}
}
