package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// TestAttentionSeqs: the attention of several sequences in one dispatch
// (kernels.AttentionAll on this backend) gives every sequence, to the
// bit, what Attention gives it alone: decode rows, verification rows
// with a tree mask, a prefill chunk, a context past one chunk of slots
// (whose plan folds its chunks in a second job), float32 and float16
// caches, heads of 8 and of 64, on one and two threads. The sequences'
// outputs differ from each other, so rows mixed up between them would
// show; a pass of fewer sequences after one of more holds too.
func TestAttentionSeqs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	type seq struct {
		past, n int
		tree    bool
	}
	for _, sh := range []struct {
		heads, kvHeads, hd int
	}{{64, 32, 8}, {8, 2, 64}} {
		for _, typ := range []quant.Type{quant.F32, quant.F16} {
			for _, threads := range []int{1, 2} {
				t.Run(fmt.Sprintf("hd=%d/%v/threads=%d", sh.hd, typ, threads), func(t *testing.T) {
					be := New(threads)
					defer be.Close()
					kvd, qd := sh.kvHeads*sh.hd, sh.heads*sh.hd
					shape := kernels.AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.hd, Scale: 0.3}
					seqs := []seq{{100, 1, false}, {3, 1, false}, {40, 8, true}, {0, 24, false}, {1300, 1, false}, {1290, 6, true}, {57, 1, false}}
					parts := make([]kernels.SeqAttention, len(seqs))
					alone := make([][]float32, len(seqs))
					for i, s := range seqs {
						kvi, err := be.NewKV(1, s.past+s.n, kvd, typ)
						if err != nil {
							t.Fatal(err)
						}
						defer kvi.Free()
						total := s.past + s.n
						be.StoreKV(kvi, 0, 0, Wrap(gaussian(rng, total*kvd)), Wrap(gaussian(rng, total*kvd)), total)
						var mask []bool
						if s.tree { // node r's parent is (r-1)/2; every node sees the prefix
							mask = make([]bool, s.n*total)
							for r := 0; r < s.n; r++ {
								for j := 0; j < s.past; j++ {
									mask[r*total+j] = true
								}
								for a := r; ; a = (a - 1) / 2 {
									mask[r*total+s.past+a] = true
									if a == 0 {
										break
									}
								}
							}
						}
						q := Wrap(gaussian(rng, s.n*qd))
						alone[i] = make([]float32, s.n*qd)
						be.Attention(Wrap(alone[i]), q, kvi, 0, s.past, s.n, mask, shape)
						parts[i] = kernels.SeqAttention{Out: Wrap(make([]float32, s.n*qd)), Q: q, KV: kvi, Past: s.past, N: s.n, Mask: mask}
					}
					if haveC {
						if _, ok := kernels.Device(be).(kernels.SeqsAttender); !ok {
							t.Fatal("the C backend does not take a pass's attention in one dispatch")
						}
					}
					// two, all of them, then fewer (passes as requests come
					// and go: the job's arrays grow, then hold more than it
					// runs)
					for _, run := range [][]int{{0, 1}, {2, 0, 1}, {3, 2, 1, 0}, {0, 1, 2, 3, 4, 5, 6}, {4, 0, 2}, {3, 6}} {
						some := make([]kernels.SeqAttention, len(run))
						for k, i := range run {
							some[k] = parts[i]
							clear(Data(parts[i].Out))
						}
						kernels.AttentionAll(be, 0, some, shape)
						for k, i := range run {
							got := Data(parts[i].Out)
							for x := range got {
								if got[x] != alone[i][x] {
									t.Fatalf("sequence %d (past %d, %d rows) of %v: value %d is %g beside the others, %g alone", i, seqs[i].past, seqs[i].n, run, x, got[x], alone[i][x])
								}
							}
							if k > 0 && Data(parts[run[k-1]].Out)[0] == got[0] {
								t.Fatalf("sequences %d and %d have the same first output: the comparison would not see them mixed up", run[k-1], i)
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkAttentionSeqs: a pass of eight sequences' decode steps (one
// row each, 100 cached positions) at the bench target's shape (64 heads
// of 8 over 32 kv heads), float32 and float16 caches, over twenty layers
// in turn, each sequence with its own cache, so the keys and values come
// from memory as a batched pass's do. One op is one layer's dispatch.
func BenchmarkAttentionSeqs(b *testing.B) {
	const heads, kvHeads, hd, layers, past, nseq = 64, 32, 8, 20, 100, 8
	kvd, qd := kvHeads*hd, heads*hd
	shape := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.3}
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		b.Run(typ.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			be := New(DefaultThreads())
			defer be.Close()
			seqs := make([]kernels.SeqAttention, nseq)
			for i := range seqs {
				kvi, err := be.NewKV(layers, 2048, kvd, typ)
				if err != nil {
					b.Fatal(err)
				}
				defer kvi.Free()
				for l := 0; l < layers; l++ {
					be.StoreKV(kvi, l, 0, Wrap(gaussian(rng, (past+1)*kvd)), Wrap(gaussian(rng, (past+1)*kvd)), past+1)
				}
				seqs[i] = kernels.SeqAttention{Out: Wrap(make([]float32, qd)), Q: Wrap(gaussian(rng, qd)), KV: kvi, Past: past, N: 1}
			}
			l := 0
			for b.Loop() {
				kernels.AttentionAll(be, l%layers, seqs, shape)
				l++
			}
		})
	}
}
