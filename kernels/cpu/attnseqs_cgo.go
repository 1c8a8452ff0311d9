//go:build cgo && !purego

package cpu

// #include "attn.h"
import "C"

import (
	"runtime"
	"unsafe"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// seqsJob is one AttentionSeqs call: each sequence planned as attendC
// plans it alone (same chunks, kernel and blocks, so the same bits), and
// the plans' tasks numbered one after another so that one hand-over to
// the workers runs them all.
type seqsJob struct {
	b     *Backend
	seqs  []seqPlan
	phase int // 1: the split plans' folds
}

// seqPlan is one sequence's plan and operands; first is its first task's
// number in the job's current phase.
type seqPlan struct {
	attnJob
	first, tasks int
}

// AttentionSeqs computes the attention of the pass's sequences on layer
// in one dispatch (kernels.SeqsAttender); a soft-capped model runs each
// alone on the Go loop.
func (b *Backend) AttentionSeqs(layer int, seqs []kernels.SeqAttention, s kernels.AttnShape) {
	if s.Softcap != 0 || len(seqs) < 2 {
		for _, q := range seqs {
			b.Attention(q.Out, q.Q, q.KV, layer, q.Past, q.N, q.Mask, s)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	j := &b.attnSeqs
	j.b = b
	if cap(j.seqs) < len(seqs) {
		j.seqs = append(j.seqs[:cap(j.seqs)], make([]seqPlan, len(seqs)-cap(j.seqs))...)
	}
	j.seqs = j.seqs[:len(seqs)]
	total, work, scratch, split := 0, 0, 0, false
	for i, q := range seqs {
		c := q.KV.(*KV)
		p := &j.seqs[i]
		p.b = b
		f16 := c.typ == quant.F16
		if f16 {
			p.kc, p.vc = unsafe.Pointer(&c.k16[layer][0]), unsafe.Pointer(&c.v16[layer][0])
		} else {
			p.kc, p.vc = unsafe.Pointer(&c.k[layer][0]), unsafe.Pointer(&c.v[layer][0])
		}
		p.out, p.q, p.mask = Data(q.Out), Data(q.Q), q.Mask
		p.plan(f16, q.Past, q.N, s.Heads, s.KVHeads, s.HeadDim, s.Scale, b.threads)
		p.first, p.tasks = total, int(p.a.tasks)
		total += p.tasks
		work += q.N * s.Heads * (q.Past + q.N) * s.HeadDim
		scratch = max(scratch, int(p.a.scratch))
		split = split || p.a.split != 0
	}
	j.phase = 0
	b.pool.run(j, total, max(1, 4096*total/max(1, work)))
	if split {
		j.phase, total = 1, 0
		for i := range j.seqs {
			p := &j.seqs[i]
			p.first, p.tasks = total, 0
			if p.a.split != 0 {
				p.a.phase = 1
				p.tasks = int(p.a.n * p.a.heads)
			}
			total += p.tasks
		}
		b.pool.run(j, total, max(1, total/(4*b.threads)))
	}
	for i := range j.seqs {
		p := &j.seqs[i]
		p.out, p.q, p.kc, p.vc, p.mask = nil, nil, nil, nil, nil // drop the references to the caller's memory
	}
	for _, q := range seqs {
		runtime.KeepAlive(q.KV) // its mapping holds the layers read
	}
}

// do runs the job's tasks lo..hi-1: each sequence's share of them with
// its own plan.
func (j *seqsJob) do(worker, lo, hi int) {
	for i := range j.seqs {
		p := &j.seqs[i]
		a, b := max(lo, p.first), min(hi, p.first+p.tasks)
		if a >= b {
			continue
		}
		C.arb_attention(&p.a, f32p(p.out), f32p(p.q), p.kc, p.vc, p.maskp(), i32p(p.bnd), i32p(p.cnt), f32p(p.part), C.long(a-p.first),
			C.long(b-p.first), f32p(j.b.scratchRow(worker, int(p.a.scratch))))
	}
}
