//go:build cgo && !purego

package cpu

// #include "cpool.h"
import "C"

import (
	"runtime"
	"time"
	"unsafe"

	"arborist/kernels/quant"
)

// cpool is the workers' C side (cpool.c), and the operands of the job it
// runs (kept here: passed from the stack, cgo would move them to the heap
// on every call).
type cpool struct {
	p       *C.arb_pool
	yielded time.Time // when the caller last yielded to the Go scheduler
	mm      C.arb_mm_args
	rows    C.arb_rows_args
	attn    C.arb_attn_args
}

func (c *cpool) start(n int) { c.p = C.arb_pool_new(C.int(n)) }

// yieldMin is how often at least the caller passes through the Go
// scheduler between C jobs. A goroutine that runs 10 ms without doing so
// is preempted by the runtime's monitor, and the P of one in a C call then
// taken from it; with the workers in C, one P is idle, so that started
// threads looking for work on it, which took turns with the workers.
const yieldMin = time.Millisecond

// tick yields to the Go scheduler when the caller has not for yieldMin.
func (c *cpool) tick() {
	if now := time.Now(); now.Sub(c.yielded) >= yieldMin {
		runtime.Gosched()
		c.yielded = now
	}
}
func (c *cpool) ok() bool { return c.p != nil }

// work is worker w's wait in C: it runs the C jobs there and returns true
// for a job of Go code, false once the pool is closed.
func (c *cpool) work(w int) bool { return C.arb_pool_work(c.p, C.int(w)) == 1 }
func (c *cpool) done()           { C.arb_pool_done(c.p) }
func (c *cpool) postGo()         { C.arb_pool_post_go(c.p) }
func (c *cpool) wait()           { C.arb_pool_wait(c.p) }
func (c *cpool) close()          { C.arb_pool_close(c.p) }
func (c *cpool) free() {
	C.arb_pool_free(c.p)
	c.p = nil
}

func i8p(s []int8) *C.int8_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int8_t)(unsafe.Pointer(&s[0]))
}

func i32p(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

func u8p(s []byte) *C.uint8_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&s[0]))
}

// runC runs the product on the C workers (pool.run's cJob).
func (j *matmulJob) runC(total, chunk int) bool {
	return j.b.mmC(unsafe.Slice(j, 1), []int{0, total}, chunk)
}

// runC runs the products on the C workers (pool.run's cJob).
func (j *multiJob) runC(total, chunk int) bool {
	return j.jobs[0].b.mmC(j.jobs[:j.count], j.start[:j.count+1], chunk)
}

// mmC runs the products of jobs (of one input, units start[i] ..
// start[i+1]-1 job i's) on the C workers in chunks of chunk units, as
// their do would chunk by chunk.
func (b *Backend) mmC(jobs []matmulJob, start []int, chunk int) bool {
	if len(jobs) > 4 {
		return false
	}
	total := start[len(jobs)]
	a := &b.pool.c.mm
	*a = C.arb_mm_args{}
	var outs [4]*C.float
	var ws [4]*C.uint8_t
	var x *C.float
	a.count = C.int(len(jobs))
	for i := range jobs {
		j := &jobs[i]
		w := j.w
		m := &a.m[i]
		a.start[i], a.start[i+1] = C.long(start[i]), C.long(start[i+1])
		m._type, m.rows, m.cols, m.n, m.row_bytes = C.int(w.typ), C.int(w.rows), C.int(w.cols), C.int(j.n), C.long(w.rowBytes)
		m.stream = cBool(b.streams()) // read by the repacked tiles alone
		outs[i] = f32p(j.out)
		switch {
		case w.packed != nil && w.group == 16:
			m.how, m.act, ws[i] = C.ARB_MM_X16, C.ARB_ACT_PANELS, u8p(w.packed)
			if layoutOf(w) == inKPanels {
				m.act = C.ARB_ACT_KPANELS
			}
		case w.packed != nil:
			m.how, m.act, ws[i] = C.ARB_MM_X8, C.ARB_ACT_ROWS, u8p(w.packed)
			if layoutOf(w) == inKPanels {
				m.act = C.ARB_ACT_KPANELS
			}
		case usesQ8(w.typ):
			m.how, m.act, ws[i] = C.ARB_MM_Q8, C.ARB_ACT_ROWS, u8p(w.data)
		default:
			m.how, m.act, ws[i] = C.ARB_MM_F32, C.ARB_ACT_F32, u8p(w.data)
			x = f32p(j.x)
		}
	}
	rq, rd, rs, pq, pd, pc, kq, kd, kc := b.q8.cActivations()
	C.arb_pool_mm(b.pool.c.p, a, outs[0], outs[1], outs[2], outs[3], ws[0], ws[1], ws[2], ws[3],
		rq, rd, rs, pq, pd, pc, kq, kd, kc, x, C.long(total), C.long(chunk))
	return true
}

// cActivations is q's buffers as the C side reads them: row by row (q,
// d, s), in panels and in K panels (q, d, c each); nil where unsized.
func (q *q8Buf) cActivations() (rq *C.int8_t, rd *C.float, rs *C.int32_t, pq *C.int8_t, pd *C.float, pc *C.int32_t,
	kq *C.int8_t, kd *C.float, kc *C.int32_t) {
	return i8p(q.q), f32p(q.d), i32p(q.s), i8p(q.p.q), f32p(q.p.d), i32p(q.p.c), i8p(q.k.q), f32p(q.k.d), i32p(q.k.c)
}

// runC runs j over n units on the C workers (pool.run's cJob); false
// where its operation has no C form here (a half-float store without
// F16C, RoPE over no dims). The bounds the Go operation would check chunk
// by chunk are checked first.
func (j *rowsJob) runC(n, chunk int) bool {
	b := j.b
	a := &b.pool.c.rows
	*a = C.arb_rows_args{op: C.int(j.op), dim: C.int(j.dim), eps: C.float(j.eps)}
	var out, x, w, y, cos, sin *C.float
	var dk, dv unsafe.Pointer
	var rq, pq, kq *C.int8_t
	var rd, pd, kd *C.float
	var rs, pc, kc *C.int32_t
	switch j.op {
	case opNorm:
		_, _, _ = j.out[n*j.dim-1], j.x[n*j.dim-1], j.w[j.dim-1]
		out, x, w = f32p(j.out), f32p(j.x), f32p(j.w)
	case opAdd, opSiLU:
		_, _ = j.x[n-1], j.y[n-1]
		x, y = f32p(j.x), f32p(j.y)
	case opRoPE:
		s := j.rope
		half := s.RopeDim / 2
		if half == 0 {
			return false
		}
		_, _, _ = j.x[n*s.Heads*s.HeadDim-1], j.cos[n*half-1], j.sin[n*half-1]
		a.heads, a.hd, a.rope_dim = C.int(s.Heads), C.int(s.HeadDim), C.int(s.RopeDim)
		if s.Neox {
			a.neox = 1
		}
		x, cos, sin = f32p(j.x), f32p(j.cos), f32p(j.sin)
	case opQuant:
		a.n, a.cols, a.layout = C.int(j.n), C.int(len(j.x)/j.n), C.int(j.layout)
		x = f32p(j.x)
		rq, rd, rs, pq, pd, pc, kq, kd, kc = b.q8.cActivations()
	case opStore:
		c, wd := j.kv, j.kv.width
		_, _ = j.x[n*wd-1], j.y[n*wd-1]
		a.width = C.int(wd) // and slot 0: dk and dv are at the first row's slot
		if c.typ == quant.F32 {
			k, v := c.k[j.layer][j.slot*wd:(j.slot+n)*wd], c.v[j.layer][j.slot*wd:(j.slot+n)*wd]
			dk, dv = unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0])
		} else {
			if simdLevel < 1 {
				return false // arb_f32_to_f16 needs F16C
			}
			k, v := c.k16[j.layer][j.slot*wd:(j.slot+n)*wd], c.v16[j.layer][j.slot*wd:(j.slot+n)*wd]
			dk, dv = unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0])
			a.f16 = 1
		}
		x, y = f32p(j.x), f32p(j.y)
	default:
		return false
	}
	C.arb_pool_rows(b.pool.c.p, a, out, x, w, y, cos, sin, dk, dv, rq, rd, rs, pq, pd, pc, kq, kd, kc, C.long(n), C.long(chunk))
	return true
}

// runC runs j's tasks (or, phase 1, its records' folds) on the C
// workers (pool.run's cJob).
func (j *attnJob) runC(tasks, chunk int) bool {
	b := j.b
	b.pool.c.attn = j.a
	C.arb_pool_attn(b.pool.c.p, &b.pool.c.attn, f32p(j.out), f32p(j.q), j.kc, j.vc, j.maskp(), i32p(j.bnd), i32p(j.cnt), f32p(j.part),
		C.long(tasks), C.long(chunk))
	return true
}
