package model_test

import (
	"context"
	"fmt"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest"
	"arborist/kernels/cpu"
)

// BenchmarkPassSeqs times a decode pass of S sequences of one row each at
// a short context on the bench target, against one sequence of one row:
// what a server's plain batching pays per step.
func BenchmarkPassSeqs(b *testing.B) {
	path := modeltest.Shared(b, "models/bench/target-60m-q8_0.gguf")
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(path, be)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	for _, S := range []int{1, 8} {
		b.Run(fmt.Sprintf("seqs=%d", S), func(b *testing.B) {
			caches := make([]*model.Cache, S)
			seqs := make([]model.Seq, S)
			for i := range caches {
				caches[i] = m.NewCache(2048)
				prompt := make([]int, 100)
				for j := range prompt {
					prompt[j] = 3 + (i*7+j*13)%500
				}
				var r model.Result
				if err := m.Forward(ctx, caches[i], model.Batch{Tokens: prompt}, &r); err != nil {
					b.Fatal(err)
				}
				seqs[i] = model.Seq{Cache: caches[i], Result: &model.Result{}}
			}
			pass := m.NewPass()
			defer pass.Free()
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				for i := range seqs {
					caches[i].Truncate(100)
					seqs[i].Batch = model.Batch{Tokens: []int{5 + i}}
				}
				if err := pass.Forward(ctx, seqs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
