//go:build cgo && !purego

package cpu

// #include "cpool.h"
import "C"

import (
	"runtime"

	"arborist/kernels"
)

// seqsJob is one AttentionSeqs call: each sequence planned as attendC
// plans it alone (same chunks, kernel and blocks, so the same bits), and
// the plans' tasks numbered one after another, so that one hand-over to
// the C workers runs them all (cpool.c's arb_pool_attn_seqs).
type seqsJob struct {
	b     *Backend
	seqs  []attnJob        // each sequence's plan and operands, its buffers kept between calls
	descs []C.arb_attn_seq // their C form, units numbered in the current phase
	pin   runtime.Pinner   // the Go memory descs points to, for the C call
}

// AttentionSeqs computes the attention of the pass's sequences on layer
// in one dispatch (kernels.SeqsAttender). A soft-capped model's sequences
// each run alone on the Go loop, as Attention runs them.
func (b *Backend) AttentionSeqs(layer int, seqs []kernels.SeqAttention, s kernels.AttnShape) {
	if s.Softcap != 0 || len(seqs) < 2 {
		for _, q := range seqs {
			b.Attention(q.Out, q.Q, q.KV, layer, q.Past, q.N, q.Mask, s)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	j := &b.seqs
	j.b = b
	if cap(j.seqs) < len(seqs) {
		j.seqs = append(j.seqs[:cap(j.seqs)], make([]attnJob, len(seqs)-cap(j.seqs))...)
	}
	if cap(j.descs) < len(seqs) {
		j.descs = make([]C.arb_attn_seq, len(seqs))
	}
	j.seqs, j.descs = j.seqs[:len(seqs)], j.descs[:len(seqs)]
	total, work, split := 0, 0, false
	for i, q := range seqs {
		p := &j.seqs[i]
		p.b = b
		var f16 bool
		p.kc, p.vc, f16 = q.KV.(*KV).layerPtrs(layer)
		p.out, p.q, p.mask = Data(q.Out), Data(q.Q), q.Mask
		tasks := p.plan(f16, q.Past, q.N, s.Heads, s.KVHeads, s.HeadDim, s.Scale, b.threads, len(seqs))
		j.descs[i].first, j.descs[i].units = C.long(total), C.long(tasks)
		total += tasks
		work += q.N * s.Heads * (q.Past + q.N) * s.HeadDim
		split = split || p.a.split != 0
	}
	b.pool.run(j, total, attnGrain(total, work))
	if split {
		total = 0
		for i := range j.seqs {
			p, units := &j.seqs[i], 0
			if p.a.split != 0 {
				p.a.phase = 1
				units = int(p.a.n * p.a.heads)
			}
			j.descs[i].first, j.descs[i].units = C.long(total), C.long(units)
			total += units
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

// do runs the job's units lo..hi-1 on the calling thread: each
// sequence's share of them on its own plan.
func (j *seqsJob) do(worker, lo, hi int) {
	for i := range j.seqs {
		d := &j.descs[i]
		a, b := max(lo, int(d.first)), min(hi, int(d.first+d.units))
		if a < b {
			j.seqs[i].do(worker, a-int(d.first), b-int(d.first))
		}
	}
}

// runC runs the job's units on the C workers (pool.run's cJob): every
// sequence's plan and operands in descs, the Go memory they point to
// pinned for the call.
func (j *seqsJob) runC(total, chunk int) bool {
	defer j.pin.Unpin()
	scratch := 0
	for i := range j.seqs {
		p, d := &j.seqs[i], &j.descs[i]
		d.a = p.a
		d.out, d.q, d.kc, d.vc = j.pinF32(p.out), j.pinF32(p.q), p.kc, p.vc
		d.mask, d.bnd, d.cnt, d.part = nil, j.pinI32(p.bnd), j.pinI32(p.cnt), j.pinF32(p.part)
		if p.mask != nil {
			j.pin.Pin(&p.mask[0])
			d.mask = p.maskp()
		}
		j.pin.Pin(p.kc) // a cache on the Go heap (a mapped one is not Go memory, and Pin leaves it)
		j.pin.Pin(p.vc)
		scratch = max(scratch, int(p.a.scratch))
	}
	C.arb_pool_attn_seqs(j.b.pool.c.p, &j.descs[0], C.int(len(j.descs)), C.long(scratch), C.long(total), C.long(chunk))
	// the pointers unpinned now dropped: cgo checks the whole array a
	// later call passes, its entries past that call's count too
	for i := range j.descs {
		d := &j.descs[i]
		d.out, d.q, d.kc, d.vc, d.mask, d.bnd, d.cnt, d.part = nil, nil, nil, nil, nil, nil, nil, nil
	}
	return true
}

func (j *seqsJob) pinF32(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	j.pin.Pin(&s[0])
	return f32p(s)
}

func (j *seqsJob) pinI32(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	j.pin.Pin(&s[0])
	return i32p(s)
}
