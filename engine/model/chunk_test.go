package model_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels/quant"
)

// TestLongBatchInPasses: a causal batch longer than the rows of one pass
// runs as several passes and gives the bits one pass gives: every output
// kind of the wanted rows in Want order, every row when Want is nil, and a
// cache that continues the same; sliding windows included.
func TestLongBatchInPasses(t *testing.T) {
	ctx := context.Background()
	for _, shape := range []string{
		"custom:dim=64,layers=2,heads=4,kv=2,ffn=96,vocab=300",
		"custom:dim=64,layers=3,heads=2,kv=1,hd=32,ffn=96,vocab=300,arch=gemma2,window=4",
	} {
		m := tinyModel(t, shape, quant.F32)
		toks := make([]int, 13)
		for i := range toks {
			toks[i] = 3 + 17*i%290
		}
		for _, b := range []model.Batch{
			{Tokens: toks, Want: []int{12, 3, 7, 4}, Hidden: true},
			{Tokens: toks, Want: []int{0, 12}, Output: model.OutArgmax},
			{Tokens: toks, Want: []int{9}, Output: model.OutProbs, Sample: sample.Params{Temp: 0.8, TopP: 1}},
			{Tokens: toks},
		} {
			run := func(rows int) (model.Result, []float32) {
				model.SetMaxRows(m, rows)
				c := m.NewCache(32)
				var r, next model.Result
				if err := m.Forward(ctx, c, b, &r); err != nil {
					t.Fatal(err)
				}
				model.SetMaxRows(m, 0)
				if err := m.Forward(ctx, c, model.Batch{Tokens: []int{5, 6}}, &next); err != nil {
					t.Fatal(err)
				}
				return r, next.Logits
			}
			one, oneNext := run(0)
			for _, rows := range []int{1, 5, 12} {
				got, gotNext := run(rows)
				if !same(got.Logits, one.Logits) || !same(got.Probs, one.Probs) || !same(got.Hidden, one.Hidden) ||
					!slices.Equal(got.Argmax, one.Argmax) || !same(gotNext, oneNext) {
					t.Fatalf("%s, want %v, output %d, passes of %d rows: differs from one pass", shape, b.Want, b.Output, rows)
				}
				if len(one.Logits)+len(one.Argmax) == 0 {
					t.Fatal("no outputs")
				}
			}
		}
	}
}

func same(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}
