package tree

import (
	"math"
	"math/rand/v2"
	"testing"
)

// forest is an ordered forest: each tree is a node and the forest of its
// children (siblings in rank order).
type forest []struct{ kids forest }

// forests enumerates every ordered forest of n nodes (Catalan(n) of them).
func forests(n int) []forest {
	if n == 0 {
		return []forest{nil}
	}
	var out []forest
	for s := 1; s <= n; s++ {
		for _, kids := range forests(s - 1) {
			for _, rest := range forests(n - s) {
				f := forest{{kids}}
				out = append(out, append(f, rest...))
			}
		}
	}
	return out
}

// worth is the expected accepted length of f at depth d, or -Inf when it
// breaks the depth or children limit.
func worth(f forest, at func(d, r int) float64, d, maxDepth, maxRank int) float64 {
	if len(f) == 0 {
		return 0
	}
	if d >= maxDepth || len(f) > maxRank {
		return math.Inf(-1)
	}
	s := 0.0
	for r, t := range f {
		s += at(d, r) * (1 + worth(t.kids, at, d+1, maxDepth, maxRank))
	}
	return s
}

// shapeWorth prices a parent list the way the cost model does.
func shapeWorth(st Static, at func(d, r int) float64) (float64, int, int) {
	val := make([]float64, len(st.Parents))
	depth := make([]int, len(st.Parents))
	rank := st.Rank()
	total, maxD, maxR := 0.0, 0, 0
	for i, p := range st.Parents {
		v := 1.0
		if p != Root {
			v, depth[i] = val[p], depth[p]+1
		}
		val[i] = v * at(depth[i], rank[i])
		total += val[i]
		maxD, maxR = max(maxD, depth[i]+1), max(maxR, rank[i]+1)
	}
	return total, maxD, maxR
}

// TestOptimalBruteForce: for random depth-dependent acceptance tables, the
// DP's tree of every size up to 8 is worth exactly the best of all ordered
// trees of that size (with and without depth and children limits), and the
// shape it returns is worth what it claims and respects the limits.
func TestOptimalBruteForce(t *testing.T) {
	const n = 8
	all := make([][]forest, n+1)
	for k := 1; k <= n; k++ {
		all[k] = forests(k)
	}
	if len(all[n]) != 1430 {
		t.Fatalf("%d forests of %d nodes, want Catalan(8) = 1430", len(all[n]), n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 30; trial++ {
		tab := make([][]float64, 5)
		for d := range tab {
			left := 1.0
			tab[d] = make([]float64, 4)
			for r := range tab[d] {
				tab[d][r] = left * rng.Float64()
				left -= tab[d][r]
			}
		}
		at := func(d, r int) float64 {
			if r >= len(tab[0]) {
				return 0
			}
			return tab[min(d, len(tab)-1)][r]
		}
		for _, lim := range [][2]int{{n, n}, {3, 2}, {2, 3}} {
			maxDepth, maxRank := lim[0], lim[1]
			shapes, values, err := Optimal(at, n, maxDepth, maxRank)
			if err != nil {
				t.Fatal(err)
			}
			for k := 1; k <= n; k++ {
				best := math.Inf(-1)
				for _, f := range all[k] {
					best = math.Max(best, worth(f, at, 0, maxDepth, maxRank))
				}
				if math.IsInf(best, -1) {
					continue
				}
				if math.Abs(values[k-1]-best) > 1e-12 {
					t.Fatalf("trial %d, limits %v, %d nodes: DP %.15f, brute force %.15f", trial, lim, k, values[k-1], best)
				}
				st := shapes[k-1]
				if _, err := FromParents(st.Parents); err != nil || len(st.Parents) != k {
					t.Fatalf("shape %v of %d nodes: %v", st.Parents, k, err)
				}
				w, d, r := shapeWorth(st, at)
				if math.Abs(w-best) > 1e-12 || d > maxDepth || r > maxRank {
					t.Fatalf("shape %v is worth %.15f (depth %d, children %d), want %.15f within %v", st.Parents, w, d, r, best, lim)
				}
			}
		}
	}
}

// TestOptimalShapes: with acceptance falling by rank only, a single node is
// the top-1 child, and with perfect top-1 acceptance the best tree is a chain.
func TestOptimalShapes(t *testing.T) {
	shapes, _, err := Optimal(func(d, r int) float64 { return []float64{1, 0, 0}[min(r, 2)] }, 6, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	for k, st := range shapes {
		for i, p := range st.Parents {
			if p != i-1 {
				t.Fatalf("%d nodes: %v is not a chain", k+1, st.Parents)
			}
		}
	}
	if _, _, err := Optimal(func(int, int) float64 { return 0.5 }, 5, 1, 2); err == nil {
		t.Error("5 nodes fit depth 1 with 2 children")
	}
	if _, _, err := Optimal(func(int, int) float64 { return 0.5 }, MaxNodes+1, 4, 4); err == nil {
		t.Error("oversized request accepted")
	}
}
