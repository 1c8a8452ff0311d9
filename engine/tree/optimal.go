package tree

import (
	"fmt"
	"math"
)

// Optimal is Sequoia's dynamic programme (Chen et al., arXiv 2402.12374):
// for every size n = 1..maxNodes it builds the static tree of n nodes that
// maximises the expected number of accepted draft tokens when the r-th
// ranked child of a node at depth d (0 = the root's children) is accepted
// with probability at(d, r) once its parent was. A node's value is the
// product of at along its path, the tree's value the sum over its nodes;
// children take ranks 0, 1, ... without gaps (the k-th child is the
// drafter's k-th most likely token), no node lies deeper than maxDepth and
// no node has more than maxRank children. Sequoia's recurrence assumes
// acceptance independent of depth; here at may depend on it, so the table
// is kept per depth:
//
//	G(d, m)    = 1 + H(d+1, 0, m-1)   best subtree of m nodes under a depth-d node (its own value 1)
//	H(d, r, m) = max over s = 1..m of  at(d, r) * G(d, s) + H(d, r+1, m-s),   H(d, r, 0) = 0
//
// (H is the best way to spend m nodes on ranks r, r+1, ... of children at
// depth d), and the tree of n nodes is H(0, 0, n). It costs
// O(maxDepth * maxRank * maxNodes^2) steps. Shapes[n-1] is the tree of n
// nodes (nodes in breadth-first order, siblings by rank) and Values[n-1]
// its expected accepted length, bonus token not counted.
func Optimal(at func(depth, rank int) float64, maxNodes, maxDepth, maxRank int) (shapes []Static, values []float64, err error) {
	if maxNodes < 1 || maxNodes > MaxNodes {
		return nil, nil, fmt.Errorf("tree: optimal trees of up to %d nodes: want 1..%d", maxNodes, MaxNodes)
	}
	if maxDepth < 1 || maxRank < 1 {
		return nil, nil, fmt.Errorf("tree: optimal trees need depth >= 1 and children >= 1 (got %d, %d)", maxDepth, maxRank)
	}
	maxDepth, maxRank = min(maxDepth, maxNodes), min(maxRank, maxNodes)
	n := maxNodes
	a := make([][]float64, maxDepth)
	for d := range a {
		a[d] = make([]float64, maxRank)
		for r := range a[d] {
			a[d][r] = math.Max(0, at(d, r))
		}
	}
	inf := math.Inf(-1)
	// G[d][m]: best subtree of m nodes rooted at a depth-d node.
	// H[d][r][m], pick[d][r][m]: the best use of m nodes on child ranks
	// r.. at depth d, and the size s given to rank r (0: none).
	G := make([][]float64, maxDepth)
	H := make([][][]float64, maxDepth+1)
	pick := make([][][]int32, maxDepth)
	for d := maxDepth; d >= 0; d-- {
		if d == maxDepth {
			// below the deepest level: no children at all
			H[d] = [][]float64{make([]float64, n+1)}
			for m := 1; m <= n; m++ {
				H[d][0][m] = inf
			}
			continue
		}
		G[d] = make([]float64, n+1)
		G[d][0] = inf
		below := H[d+1][0]
		for m := 1; m <= n; m++ {
			G[d][m] = 1 + below[m-1]
		}
		H[d] = make([][]float64, maxRank+1)
		pick[d] = make([][]int32, maxRank)
		H[d][maxRank] = make([]float64, n+1)
		for m := 1; m <= n; m++ {
			H[d][maxRank][m] = inf
		}
		for r := maxRank - 1; r >= 0; r-- {
			h, next := make([]float64, n+1), H[d][r+1]
			pk := make([]int32, n+1)
			for m := 1; m <= n; m++ {
				h[m] = inf
				for s := 1; s <= m; s++ {
					if G[d][s] == inf || next[m-s] == inf {
						continue
					}
					// a rank with no child ends the siblings: next[0] = 0 only then
					if v := a[d][r]*G[d][s] + next[m-s]; v > h[m] {
						h[m], pk[m] = v, int32(s)
					}
				}
			}
			H[d][r], pick[d][r] = h, pk
		}
	}
	shapes, values = make([]Static, n), make([]float64, n)
	for size := 1; size <= n; size++ {
		values[size-1] = H[0][0][size]
		if values[size-1] == inf {
			return nil, nil, fmt.Errorf("tree: no tree of %d nodes fits depth %d and %d children", size, maxDepth, maxRank)
		}
		shapes[size-1] = Static{Parents: buildOptimal(pick, size)}
	}
	return shapes, values, nil
}

// buildOptimal reads the tree of size nodes back from the DP's choices,
// breadth first: each queued node carries the nodes its subtree still owns.
func buildOptimal(pick [][][]int32, size int) []int {
	type item struct{ node, depth, m int } // m: nodes below node (node itself excluded)
	parents := make([]int, 0, size)
	queue := []item{{Root, 0, size}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		m := it.m
		for r := 0; m > 0; r++ {
			s := int(pick[it.depth][r][m])
			parents = append(parents, it.node)
			queue = append(queue, item{len(parents) - 1, it.depth + 1, s - 1})
			m -= s
		}
	}
	return parents
}
