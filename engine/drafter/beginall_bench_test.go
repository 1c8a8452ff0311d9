package drafter

import (
	"context"
	"fmt"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/kernels/cpu"
)

// BenchmarkBeginAll times a wave of seven 17-token prompts read into the
// bench pair's draft model: one Begin after another, as a server's step
// had run them, and together (BeginAll), as it runs them now.
func BenchmarkBeginAll(b *testing.B) {
	path := testfiles.Shared(b, "models/bench/draft-noisy-0.05.gguf")
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(path, be)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	seqs := make([][]int, 7)
	for i := range seqs {
		for j := range 17 {
			seqs[i] = append(seqs[i], 3+(i*7+j*13)%500)
		}
	}
	for _, together := range []bool{false, true} {
		b.Run(fmt.Sprintf("together=%v", together), func(b *testing.B) {
			ds := make([]*Model, len(seqs))
			for i := range ds {
				ds[i] = NewModel(m, 0, 256, "draft")
				defer ds[i].Free()
			}
			p := m.NewPass()
			defer p.Free()
			for b.Loop() {
				for _, d := range ds {
					d.inCache = 0 // every prompt read again
				}
				if together {
					if err := BeginAll(ctx, p, ds, seqs); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for i, d := range ds {
					if err := d.Begin(ctx, seqs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
