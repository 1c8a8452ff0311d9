package modeltest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"arborist/engine/model"
	"arborist/engine/sample"
)

// MultiCase is one sequence of a pass of several: the prefix its cache
// holds before the pass (prefilled alone), its cache's capacity, and its
// batch in the pass.
type MultiCase struct {
	Name   string
	Prefix []int
	Cap    int
	Batch  model.Batch
}

// MultiCases are sequences of every kind a server's pass mixes: plain
// decode rows at different pasts, prefill chunks (into an empty cache and
// after a past), tree rows with a mask and depth positions, and every
// output kind (logits with hidden states, argmax only, probabilities).
// The caches differ in capacity too (phi3 picks its RoPE factors by it).
func MultiCases() []MultiCase {
	// tree rows after a past of 4: a (depth 1), b under a, c (depth 1),
	// d under c, e under b
	const past = 4
	parent := []int{-1, 0, -1, 2, 1}
	depth := []int{1, 2, 1, 2, 3}
	n := len(parent)
	total := past + n
	mask := make([]bool, n*total)
	pos := make([]int, n)
	for i := range parent {
		for j := 0; j < past; j++ {
			mask[i*total+j] = true
		}
		for k := i; k >= 0; k = parent[k] {
			mask[i*total+past+k] = true
		}
		pos[i] = past - 1 + depth[i]
	}
	// the root's row comes first in a verification batch: here the tree's
	// rows follow the last prefix token, which the cache already holds
	return []MultiCase{
		{"decode", []int{1, 17, 99, 250, 3, 42}, 16, model.Batch{Tokens: []int{7}, Hidden: true}},
		{"decode-long-past", []int{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}, 40, model.Batch{Tokens: []int{45}, Output: model.OutProbs, Sample: sample.Params{Temp: 0.8, TopK: 20}}},
		{"prefill-chunk", []int{1, 200, 5}, 16, model.Batch{Tokens: []int{60, 61, 62, 63, 64}, Want: []int{4, 1}, Hidden: true}},
		{"prefill-fresh", nil, 24, model.Batch{Tokens: []int{1, 88, 77, 66}, Output: model.OutArgmax}},
		{"tree", []int{1, 20, 30, 40}, 16, model.Batch{Tokens: []int{50, 51, 52, 53, 54}, Pos: pos, Mask: mask}},
		{"decode-same-token", []int{1, 17, 99, 250, 3, 42}, 16, model.Batch{Tokens: []int{7}, Want: []int{0}}},
	}
}

// MultiOut is what a sequence's pass gave: its outputs, and the logits of
// one more token decoded on its cache after the pass (so the keys and
// values the pass stored are checked too).
type MultiOut struct {
	res  model.Result
	next []float32
	len  int
}

func bits(x, y []float32) bool {
	return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
}

// RunMulti runs cases on m: each alone (pass nil: Forward on a cache of
// its own), or those order lists, in that order, in one pass of pass. It
// returns each case's outputs at the case's index (the cases a pass left
// out have none).
func RunMulti(ctx context.Context, m *model.Model, pass *model.Pass, cases []MultiCase, order []int) ([]MultiOut, error) {
	caches := make([]*model.Cache, len(cases))
	out := make([]MultiOut, len(cases))
	for i, c := range cases {
		caches[i] = m.NewCache(c.Cap)
		if len(c.Prefix) > 0 {
			var r model.Result
			if err := m.Forward(ctx, caches[i], model.Batch{Tokens: c.Prefix}, &r); err != nil {
				return nil, err
			}
		}
	}
	if pass == nil {
		order = make([]int, len(cases))
		for i, c := range cases {
			order[i] = i
			if err := m.Forward(ctx, caches[i], c.Batch, &out[i].res); err != nil {
				return nil, fmt.Errorf("%s alone: %w", c.Name, err)
			}
		}
	} else {
		seqs := make([]model.Seq, len(order))
		for k, i := range order {
			seqs[k] = model.Seq{Cache: caches[i], Batch: cases[i].Batch, Result: &out[i].res}
		}
		if err := pass.Forward(ctx, seqs); err != nil {
			return nil, err
		}
	}
	for _, i := range order {
		c := cases[i]
		var r model.Result
		tok := 1 + (i*31)%250
		if c.Batch.Mask != nil {
			// a tree's rows sit beside each other: keep the prefix and the
			// path a, b, e before going on, as verification does
			keep := []int{0, 1, 2, 3, len(c.Prefix), len(c.Prefix) + 1, len(c.Prefix) + 4}
			if err := caches[i].Compact(keep); err != nil {
				return nil, err
			}
		}
		out[i].len = caches[i].Len()
		if err := m.Forward(ctx, caches[i], model.Batch{Tokens: []int{tok}}, &r); err != nil {
			return nil, fmt.Errorf("%s, the token after the pass: %w", c.Name, err)
		}
		out[i].next = r.Logits
	}
	for _, c := range caches {
		c.Free()
	}
	return out, nil
}

// SameMulti says where two runs' outputs of the cases differ, to the bit
// ("" when nowhere).
func SameMulti(cases []MultiCase, a, b []MultiOut) string {
	for i, c := range cases {
		x, y := &a[i], &b[i]
		switch {
		case !bits(x.res.Logits, y.res.Logits):
			return c.Name + ": logits"
		case !bits(x.res.Probs, y.res.Probs):
			return c.Name + ": probabilities"
		case !bits(x.res.Hidden, y.res.Hidden):
			return c.Name + ": hidden states"
		case !slices.Equal(x.res.Argmax, y.res.Argmax):
			return c.Name + ": argmax"
		case x.len != y.len:
			return fmt.Sprintf("%s: cache of %d slots, %d", c.Name, x.len, y.len)
		case !bits(x.next, y.next):
			return c.Name + ": the token after the pass (the keys and values it stored)"
		}
	}
	return ""
}

// MultiSequence: a pass of several sequences, each with its own cache,
// gives every sequence, to the bit, what a pass of it alone gives: plain
// decode rows at different pasts, prefill chunks, tree rows with masks,
// every output kind, in any order and beside any others, with the keys and
// values each stored continuing exactly as after its own pass. This is
// the backend's rule that a row's result is independent of what else is
// in the pass, on which batching many requests stays lossless.
func MultiSequence(t *testing.T, dev Device) {
	ctx := context.Background()
	d := open(t, dev)
	cases := MultiCases()
	for _, s := range Shapes {
		t.Run(s.Name, func(t *testing.T) {
			m, _ := Synth(t, d, s.Shape, s.Type, 42)
			alone, err := RunMulti(ctx, m, nil, cases, nil)
			if err != nil {
				t.Fatal(err)
			}
			// the comparison has teeth: the same sequence in two caches
			// gives the same logits, two sequences different ones, so
			// rows mixed up between sequences would show
			if !bits(alone[0].res.Logits, alone[5].res.Logits) || bits(alone[0].res.Logits, alone[2].res.Logits[:m.Vocab]) ||
				bits(alone[0].next, alone[5].next) {
				t.Fatal("the sequences alone do not tell each other apart: the comparison would not see rows mixed up")
			}
			pass := m.NewPass()
			defer pass.Free()
			all := []int{0, 1, 2, 3, 4, 5}
			for _, order := range [][]int{all, {4, 2, 0, 5, 3, 1}, {3, 1}, {4}} {
				got, err := RunMulti(ctx, m, pass, cases, order)
				if err != nil {
					t.Fatal(err)
				}
				for _, i := range order {
					if where := SameMulti(cases[i:i+1], alone[i:i+1], got[i:i+1]); where != "" {
						t.Fatalf("sequences %v in one pass: %s differ from the sequence alone", order, where)
					}
				}
			}
		})
	}
}
