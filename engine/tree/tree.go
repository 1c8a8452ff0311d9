// Package tree holds draft token trees: the nodes a drafter proposes after the
// last committed token (the root), the attention mask and positions that
// verify the whole tree in one target pass, and the pruning dynamic
// programme of Yggdrasil's Equal-Growth Tree.
//
// Encoding: node i has Parent (an earlier node index, or Root) and Depth
// (1 for children of the root). A verification batch is [root, nodes...]:
// row 0 is the root token, row 1+i is node i, so a node's ancestors always
// come before it and the batch is causal within each path.
package tree

import (
	"fmt"
	"sort"
)

// Root is the Parent of depth-1 nodes.
const Root = -1

// ChildMode says how a node's children were chosen, which decides the
// lossless rule that verifies them.
type ChildMode uint8

const (
	// Sampled children were drawn independently from the drafter's q.
	Sampled ChildMode = iota
	// Deterministic children were picked by rank (top-k of q).
	Deterministic
)

// Node is one draft token.
type Node struct {
	Parent int     // index of the parent node, or Root
	Token  int     // draft token id
	Depth  int     // 1 + parent's depth
	Q      float32 // drafter probability of Token given the path
	PathP  float64 // product of Q along the path: estimated chance the path is accepted
	Pad    bool    // padding to a fixed shape: never accepted, attends to nothing
}

// Tree is a draft tree. RootMode and Mode say how each node's children were
// chosen; QRoot and QNode hold the drafter distributions the children were
// drawn from (needed by the sampled rule; nil in greedy runs).
type Tree struct {
	Nodes    []Node
	Mode     []ChildMode // per node
	RootMode ChildMode
	QRoot    []float32
	QNode    [][]float32
}

// Add appends a node and returns its index.
func (t *Tree) Add(parent, token int, q float32) int {
	d, pp := 1, 1.0
	if parent != Root {
		d = t.Nodes[parent].Depth + 1
		pp = t.Nodes[parent].PathP
	}
	t.Nodes = append(t.Nodes, Node{Parent: parent, Token: token, Depth: d, Q: q, PathP: pp * float64(q)})
	t.Mode = append(t.Mode, Sampled)
	t.QNode = append(t.QNode, nil)
	return len(t.Nodes) - 1
}

// Len is the number of nodes.
func (t *Tree) Len() int { return len(t.Nodes) }

// MaxDepth is the deepest node's depth (0 for an empty tree).
func (t *Tree) MaxDepth() int {
	d := 0
	for _, n := range t.Nodes {
		if !n.Pad {
			d = max(d, n.Depth)
		}
	}
	return d
}

// Children returns the indices of parent's children, in insertion order.
func (t *Tree) Children(parent int) []int {
	var out []int
	for i, n := range t.Nodes {
		if n.Parent == parent && !n.Pad {
			out = append(out, i)
		}
	}
	return out
}

// Path returns the node indices from depth 1 down to node i.
func (t *Tree) Path(i int) []int {
	var p []int
	for ; i != Root; i = t.Nodes[i].Parent {
		p = append(p, i)
	}
	for a, b := 0, len(p)-1; a < b; a, b = a+1, b-1 {
		p[a], p[b] = p[b], p[a]
	}
	return p
}

// Validate checks parents precede children and depths agree.
func (t *Tree) Validate() error {
	for i, n := range t.Nodes {
		want := 1
		if n.Parent != Root {
			if n.Parent < 0 || n.Parent >= i {
				return fmt.Errorf("tree: node %d has parent %d, which does not precede it", i, n.Parent)
			}
			want = t.Nodes[n.Parent].Depth + 1
		}
		if n.Depth != want && !n.Pad {
			return fmt.Errorf("tree: node %d has depth %d, want %d", i, n.Depth, want)
		}
	}
	return nil
}

// Batch returns the tokens, positions and attention mask of the verification
// batch [root, nodes...] on top of past cached slots: every row attends to
// all cached slots, the root, and its own ancestors; pad rows attend only to
// themselves and never affect real rows.
func (t *Tree) Batch(root, past int) (tokens, pos []int, mask []bool) {
	n := 1 + len(t.Nodes)
	total := past + n
	tokens = make([]int, n)
	pos = make([]int, n)
	mask = make([]bool, n*total)
	tokens[0], pos[0] = root, past
	for j := 0; j <= past; j++ {
		mask[j] = true
	}
	for i, nd := range t.Nodes {
		r := 1 + i
		tokens[r] = nd.Token
		pos[r] = past + nd.Depth
		row := mask[r*total : (r+1)*total]
		if nd.Pad {
			row[past+r] = true
			pos[r] = past
			continue
		}
		for j := 0; j <= past; j++ {
			row[j] = true
		}
		for k := i; k != Root; k = t.Nodes[k].Parent {
			row[past+1+k] = true
		}
	}
	return tokens, pos, mask
}

// Pad appends pad nodes (token padTok) until the tree has size nodes.
func (t *Tree) Pad(size, padTok int) {
	for len(t.Nodes) < size {
		t.Nodes = append(t.Nodes, Node{Parent: Root, Token: padTok, Depth: 1, Pad: true})
		t.Mode = append(t.Mode, Deterministic)
		t.QNode = append(t.QNode, nil)
	}
}

// Prune keeps the ancestor-closed subset of at most budget nodes with the
// largest total value (value[i] for node i; PathP when value is nil), by the
// tree-knapsack dynamic programme, and returns the pruned tree with indices
// renumbered in the original order.
func (t *Tree) Prune(budget int, value []float64) *Tree {
	if budget >= len(t.Nodes) {
		return t
	}
	if value == nil {
		value = make([]float64, len(t.Nodes))
		for i, n := range t.Nodes {
			value[i] = n.PathP
		}
	}
	keep := selectSubtree(t, budget, value)
	return t.Subset(keep)
}

// Subset returns the tree restricted to the (ancestor-closed) nodes in keep.
func (t *Tree) Subset(keep []bool) *Tree {
	idx := make([]int, len(t.Nodes))
	out := &Tree{RootMode: t.RootMode, QRoot: t.QRoot}
	for i, n := range t.Nodes {
		idx[i] = -2
		if !keep[i] {
			continue
		}
		if n.Parent != Root {
			n.Parent = idx[n.Parent]
		}
		idx[i] = len(out.Nodes)
		out.Nodes = append(out.Nodes, n)
		out.Mode = append(out.Mode, t.Mode[i])
		out.QNode = append(out.QNode, t.QNode[i])
	}
	return out
}

// selectSubtree solves: choose a set S, closed under taking parents, with
// |S| <= budget, maximising sum(value[S]). best[v][k] is the best value of k
// nodes taken from v's subtree including v; children merge as knapsacks.
func selectSubtree(t *Tree, budget int, value []float64) []bool {
	n := len(t.Nodes)
	kids := make([][]int, n+1) // index n stands for the root
	for i, nd := range t.Nodes {
		p := nd.Parent
		if p == Root {
			p = n
		}
		kids[p] = append(kids[p], i)
	}
	type table struct {
		best []float64 // best[k], k nodes
		take [][]int   // per child, how many nodes it got, for each k (for reconstruction)
	}
	tabs := make([]table, n+1)
	var solve func(v int)
	solve = func(v int) {
		self := 0.0
		base := 1
		if v == n {
			base = 0 // the root itself costs nothing
		} else {
			self = value[v]
		}
		best := []float64{self}
		if base == 1 {
			best = []float64{negInf, self}
		}
		var takes [][]int
		for _, c := range kids[v] {
			solve(c)
			cb := tabs[c].best
			nb := make([]float64, min(len(best)+len(cb)-1, budget+1))
			choice := make([]int, len(nb))
			for k := range nb {
				nb[k] = negInf
			}
			for a := range best {
				if best[a] == negInf {
					continue
				}
				for b := 0; b < len(cb) && a+b < len(nb); b++ {
					if cb[b] == negInf && b > 0 {
						continue
					}
					v := best[a]
					if b > 0 {
						v += cb[b]
					}
					if v > nb[a+b] {
						nb[a+b], choice[a+b] = v, b
					}
				}
			}
			best = nb
			takes = append(takes, choice)
		}
		tabs[v] = table{best: best, take: takes}
	}
	solve(n)
	// best total over k <= budget
	rb := tabs[n].best
	k := 0
	for i := range rb {
		if rb[i] > rb[k] {
			k = i
		}
	}
	keep := make([]bool, n)
	var mark func(v, k int)
	mark = func(v, k int) {
		if v != n {
			keep[v] = true
			k--
		}
		cs := kids[v]
		for i := len(cs) - 1; i >= 0; i-- {
			b := tabs[v].take[i][k+boolInt(v != n)]
			if b > 0 {
				mark(cs[i], b)
			}
			k -= b
		}
	}
	mark(n, k)
	return keep
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var negInf = -1e300

// Static is a fixed tree shape: Widths[d] children under each node of depth
// d (d = 0 is the root), e.g. [3 2 1] gives 3 + 6 + 6 nodes. It is the shape
// a Sequoia-style search produces; nodes are ranked children (top-k).
type Static struct {
	Parents []int // parent list, Root for depth 1; nodes in breadth-first order
}

// MaxNodes bounds the draft nodes of one tree: every node is a row of one
// verification pass, with its KV cache slot and a row of the attention mask.
// It is the widest pass a profile times (W = 512): a wider tree is never
// priced, costs memory quadratic in its size, and on a large model takes
// minutes a step. Shapes are checked against it before anything is built.
const MaxNodes = 512

// WidthsSize is the number of nodes the static shape of widths has
// (w1 + w1*w2 + ...), computed without building it; an error names the
// depth where it passes budget (or MaxNodes when budget <= 0).
func WidthsSize(widths []int, budget int) (int, error) {
	if budget <= 0 || budget > MaxNodes {
		budget = MaxNodes
	}
	total, level := 0, 1
	for d, w := range widths {
		if w <= 0 {
			return 0, fmt.Errorf("tree: width %d at depth %d must be positive", w, d+1)
		}
		if w > budget || level > budget/w {
			return 0, fmt.Errorf("tree: widths %s give more than %d nodes at depth %d (the most one verification pass takes)", head(widths), budget, d+1)
		}
		level *= w
		total += level
		if total > budget {
			return 0, fmt.Errorf("tree: widths %s give more than %d nodes by depth %d (the most one verification pass takes)", head(widths), budget, d+1)
		}
	}
	return total, nil
}

// FromWidths builds the static shape with the given branching per depth.
// Its size is checked against MaxNodes before anything is allocated.
func FromWidths(widths []int) (Static, error) {
	var s Static
	n, err := WidthsSize(widths, MaxNodes)
	if err != nil {
		return s, err
	}
	s.Parents = make([]int, 0, n)
	level := []int{Root}
	for _, w := range widths {
		var next []int
		for _, p := range level {
			for k := 0; k < w; k++ {
				s.Parents = append(s.Parents, p)
				next = append(next, len(s.Parents)-1)
			}
		}
		level = next
	}
	return s, nil
}

// FromParents validates a parent list (Root = -1 for depth 1; each parent
// index precedes its child).
func FromParents(parents []int) (Static, error) {
	if len(parents) > MaxNodes {
		return Static{}, fmt.Errorf("tree: %d nodes is more than %d (the most one verification pass takes)", len(parents), MaxNodes)
	}
	for i, p := range parents {
		if p != Root && (p < 0 || p >= i) {
			return Static{}, fmt.Errorf("tree: parent %d of node %d must be -1 or an earlier node", p, i)
		}
	}
	return Static{Parents: append([]int(nil), parents...)}, nil
}

// Rank returns the rank of each node among its siblings (0 = first child),
// so a static shape can say "the k-th most likely child".
func (s Static) Rank() []int {
	seen := map[int]int{}
	r := make([]int, len(s.Parents))
	for i, p := range s.Parents {
		r[i] = seen[p]
		seen[p]++
	}
	return r
}

// TopK returns the indices of the k largest values of q, in descending order
// (ties: lower index first).
func TopK(q []float32, k int) []int {
	k = min(k, len(q))
	idx := make([]int, 0, k+1)
	for i, v := range q {
		if len(idx) == k && v <= q[idx[k-1]] {
			continue
		}
		pos := sort.Search(len(idx), func(j int) bool { return q[idx[j]] < v })
		idx = append(idx, 0)
		copy(idx[pos+1:], idx[pos:])
		idx[pos] = i
		if len(idx) > k {
			idx = idx[:k]
		}
	}
	return idx
}

// head writes a widths list for a message: its first eight and how many
// more (a list from a file or a flag can be megabytes long).
func head(widths []int) string {
	if len(widths) <= 8 {
		return fmt.Sprint(widths)
	}
	return fmt.Sprintf("%v... (%d in all)", widths[:8], len(widths))
}
