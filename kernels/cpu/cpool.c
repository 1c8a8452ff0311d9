//go:build cgo && !purego

// The pool's workers wait for jobs in C, and run in C the chunks of the
// jobs the C kernels do (products, attention, the element-wise work of a
// pass); a job of Go code sends them back to Go to run it.
//
// Why in C: a goroutine in a C call holds its processor (P) in a system
// call as far as the Go scheduler knows, and after 20 us the runtime's
// monitor takes the P back and, with none idle, starts a spinning thread
// to look for work on it. Workers waiting in Go and calling into C for
// every chunk had that happen on almost every chunk on two cores: a third
// thread took turns with the two that multiply (9-11K context switches a
// second), and a 512-token Q4_K product of 8192 x 2048 ran at 63-66% of
// the compute ceiling, where the same product on two processes of one
// thread each ran at 74-80%. A worker that stays in C keeps one P idle,
// so the monitor leaves the caller's P alone and stops waking (80-81%;
// docs/CPU.md), as long as the caller passes through the Go scheduler
// now and then (cpool_cgo.go's tick).
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cpool.h"
#include "q40x8.h"
#include "simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define relax() _mm_pause()
#elif defined(__aarch64__)
#define relax() __asm__ __volatile__("yield")
#else
#define relax() ((void)0)
#endif

// An idle worker polls for ARB_POOL_SPIN_NS before it sleeps: a pass
// hands out a job every few microseconds, and waking a sleeping thread
// costs about as much as a small product. After its first ARB_POOL_PAUSES
// polls it yields the core every sixteenth, so that a thread with work (the
// caller, another backend's, another process's) runs first: unlike the
// goroutines the workers were, these threads are not held to GOMAXPROCS,
// and two backends' pools polling on two cores had taken turns with the
// threads doing the work.
#ifndef ARB_POOL_SPIN_NS
#define ARB_POOL_SPIN_NS 100000L
#endif
#ifndef ARB_POOL_PAUSES
#define ARB_POOL_PAUSES 1024
#endif

enum { JOB_GO = 1, JOB_MM, JOB_ROWS, JOB_ATTN, JOB_ATTN_SEQS };

struct arb_pool {
	int n;
	// job is the current job: its number (bumped once a job) times 8 plus
	// its kind. A job of C code is done when done reaches its total
	// units: a worker that comes late finds its units all claimed and
	// holds nobody up. claim is the job's number (low 32 bits) in its top
	// half and the next unclaimed unit in its bottom half, so a claim on a
	// job that has ended fails; total and chunk (the fewest units a claim
	// takes: drain) are atomics for the same reason (a late worker reads
	// them before its claim can fail).
	_Atomic uint64_t job;
	_Atomic uint64_t claim;
	_Atomic long done;
	_Atomic long total, chunk;
	_Atomic int pending; // a job of Go code: workers yet to run their part
	_Atomic int quit;
	_Atomic int sleepers;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	// the job's operands: set by the call that runs it, cleared before it
	// returns (the Go memory they point to is the caller's only for the
	// call)
	arb_mm_args mm;
	arb_rows_args rows;
	arb_attn_args attn;
	float *out[4];
	const uint8_t *w[4];
	const int8_t *aq[3];  // the activations by ARB_ACT_*: rows, panels, K panels
	const float *ad[3];
	const int32_t *ac[3];
	const float *x, *wv, *y, *cos, *sin;
	float *xo;
	void *dk, *dv;
	const void *kc, *vc;
	const uint8_t *mask;
	const int32_t *bnd, *cnt; // attention's plan: its rows' chunks
	float *part;              // and a split plan's records
	const arb_attn_seq *seqs; // a job of several sequences' attention: each one's plan and operands
	int nseqs;
	long seqs_scratch; // the most scratch one of their tasks needs
	uint64_t last[ARB_POOL_MAX]; // the last job word each worker saw
	float *scratch[ARB_POOL_MAX];     // each worker's scratch, and its size
	long scratch_n[ARB_POOL_MAX];
};

arb_pool *arb_pool_new(int n) {
	if (n < 1 || n > ARB_POOL_MAX) return 0;
	arb_pool *p = calloc(1, sizeof *p);
	if (!p) return 0;
	p->n = n;
	pthread_mutex_init(&p->mu, 0);
	pthread_cond_init(&p->cv, 0);
	return p;
}

// arb_pool_close sends the workers home: arb_pool_work returns 0.
void arb_pool_close(arb_pool *p) {
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->quit, 1);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

// arb_pool_free frees p once no worker is in arb_pool_work.
void arb_pool_free(arb_pool *p) {
	for (int w = 0; w < ARB_POOL_MAX; w++) free(p->scratch[w]);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

// scratch is worker w's scratch of at least n floats (with headroom:
// attention asks for one more slot every step).
static float *scratch(arb_pool *p, int w, long n) {
	if (p->scratch_n[w] < n) {
		long m = n > 2 * p->scratch_n[w] ? n : 2 * p->scratch_n[w];
		if (m < 1024) m = 1024;
		free(p->scratch[w]);
		// on a cache line, as Go's allocator places a large slice: the
		// attention kernels' vectors of scores do not straddle lines
		void *v = 0;
		p->scratch[w] = posix_memalign(&v, 64, (size_t)m * sizeof(float)) == 0 ? v : 0;
		if (!p->scratch[w]) {
			fprintf(stderr, "arborist: out of memory for %ld floats of worker scratch\n", m);
			abort();
		}
		p->scratch_n[w] = m;
	}
	return p->scratch[w];
}

static void mm_one(arb_pool *p, int i, int w, long lo, long hi) {
	const arb_mm_one *m = &p->mm.m[i];
	int a = m->act;
	switch (m->how) {
	case ARB_MM_X16: {
		long g1 = 2 * hi, groups = (m->rows + 15) / 16;
		arb_mm_x16(m->type, p->w[i], (int)(2 * lo), (int)(g1 < groups ? g1 : groups), p->aq[a], p->ad[a], p->ac[a], m->cols / 32,
		           m->n, p->out[i], m->rows, m->stream);
		return;
	}
	case ARB_MM_X8:
		if (a == ARB_ACT_KPANELS) {
			arb_mm_k8(m->type, p->w[i], (int)lo, (int)hi, p->aq[a], p->ad[a], p->ac[a], m->cols / 32, m->n, p->out[i], m->rows,
			          m->stream, arb_avx_vnni());
			return;
		}
		arb_mm_x8(m->type, p->w[i], (int)lo, (int)hi, m->cols / 32, p->ad[0], p->aq[0], p->ac[0], m->n, p->out[i], m->rows, m->stream,
		          arb_avx_vnni());
		return;
	case ARB_MM_Q8:
		arb_mm_q8(m->type, p->w[i], m->row_bytes, (int)lo, (int)hi, m->cols / 32, p->ad[0], p->aq[0], p->ac[0], m->n, p->out[i], m->rows);
		return;
	case ARB_MM_F32:
		arb_mm_f32(m->type, p->w[i], m->row_bytes, (int)lo, (int)hi, m->cols, p->x, m->n, p->out[i], m->rows, scratch(p, w, (long)ARB_F32_ROWS * m->cols));
		return;
	}
}

static void rows_do(arb_pool *p, long lo, long hi) {
	const arb_rows_args *a = &p->rows;
	switch (a->op) {
	case ARB_ROW_NORM:
		arb_rmsnorm(p->out[0] + lo * a->dim, p->xo + lo * a->dim, p->wv, (int)(hi - lo), a->dim, a->eps);
		return;
	case ARB_ROW_ADD: arb_add(p->xo + lo, p->y + lo, hi - lo); return;
	case ARB_ROW_SILU: arb_silu_mul(p->xo + lo, p->y + lo, hi - lo); return;
	case ARB_ROW_ROPE: {
		long wd = (long)a->heads * a->hd, half = a->rope_dim / 2;
		arb_rope(p->xo + lo * wd, (int)(hi - lo), a->heads, a->hd, a->rope_dim, a->neox, p->cos + lo * half, p->sin + lo * half);
		return;
	}
	case ARB_ROW_QUANT: {
		long cols = a->cols, nb = cols / 32;
		if (a->layout & 1)
			arb_quantize_q8(p->xo + lo * cols, (int)((hi - lo) * cols), (float *)p->ad[0] + lo * nb, (int8_t *)p->aq[0] + lo * cols,
			                (int32_t *)p->ac[0] + lo * nb);
		if (a->layout & 2)
			arb_quantize_q8_panels(p->xo, a->n, a->cols, (int)lo, (int)hi, (int8_t *)p->aq[1], (float *)p->ad[1], (int32_t *)p->ac[1]);
		if (a->layout & 4)
			arb_quantize_q8k_panels(p->xo, a->n, a->cols, (int)lo, (int)hi, (int8_t *)p->aq[2], (float *)p->ad[2], (int32_t *)p->ac[2]);
		return;
	}
	case ARB_ROW_STORE: {
		long wd = a->width, at = (a->slot + lo) * wd, len = (hi - lo) * wd;
		if (a->f16) {
			arb_f32_to_f16((uint16_t *)p->dk + at, p->xo + lo * wd, len);
			arb_f32_to_f16((uint16_t *)p->dv + at, p->y + lo * wd, len);
		} else {
			memcpy((float *)p->dk + at, p->xo + lo * wd, (size_t)len * sizeof(float));
			memcpy((float *)p->dv + at, p->y + lo * wd, (size_t)len * sizeof(float));
		}
		return;
	}
	}
}

static void chunk_do(arb_pool *p, int kind, int w, long lo, long hi) {
	switch (kind) {
	case JOB_MM:
		for (int i = 0; i < p->mm.count; i++) {
			long a = lo > p->mm.start[i] ? lo : p->mm.start[i], b = hi < p->mm.start[i + 1] ? hi : p->mm.start[i + 1];
			if (a < b) mm_one(p, i, w, a - p->mm.start[i], b - p->mm.start[i]);
		}
		return;
	case JOB_ROWS: rows_do(p, lo, hi); return;
	case JOB_ATTN: {
		const arb_attn_args *a = &p->attn;
		arb_attention(a, p->out[0], p->x, p->kc, p->vc, p->mask, p->bnd, p->cnt, p->part, lo, hi, scratch(p, w, a->scratch));
		return;
	}
	case JOB_ATTN_SEQS: {
		// the first sequence whose units reach past lo, then each one
		// the chunk overlaps, on its own plan
		int i = 0, j = p->nseqs;
		while (i < j) {
			int m = (i + j) / 2;
			if (p->seqs[m].first + p->seqs[m].units <= lo) i = m + 1;
			else j = m;
		}
		float *sc = scratch(p, w, p->seqs_scratch);
		for (; i < p->nseqs && p->seqs[i].first < hi; i++) {
			const arb_attn_seq *s = &p->seqs[i];
			long a = lo > s->first ? lo : s->first, b = hi < s->first + s->units ? hi : s->first + s->units;
			if (a < b) arb_attention(&s->a, s->out, s->q, s->kc, s->vc, s->mask, s->bnd, s->cnt, s->part, a - s->first, b - s->first, sc);
		}
		return;
	}
	}
}

// drain runs chunks of job number seq (kind) until its units are all
// claimed, or it has ended. A claim takes the unclaimed units' share of
// one thread, and no fewer than the job's chunk: half a job's units on two
// threads, then a quarter, an eighth, down to the chunk (guided
// scheduling). Every claim and every chunk's end moves the claim's and
// the count's cache line between the cores, and on the bench target's
// products (512 wide) a chunk was a microsecond or two of work. Against
// four fixed chunks a thread, its passes of 1 to 128 tokens ran in
// 0.93-0.95 of the time (medians of eight rounds interleaved in one
// process) and the 1B shapes' in 0.93-1.01. The last claims stay small,
// so a thread that the system takes away mid-job leaves little for the
// other to wait on.
static void drain(arb_pool *p, uint64_t seq, int kind, int w) {
	uint64_t tag = (seq & 0xffffffffULL) << 32;
	for (;;) {
		uint64_t c = atomic_load(&p->claim);
		if ((c & ~0xffffffffULL) != tag) return;
		long lo = (long)(c & 0xffffffffULL), total = atomic_load(&p->total), chunk = atomic_load(&p->chunk);
		if (lo >= total) return;
		if ((total - lo) / p->n > chunk) chunk = (total - lo) / p->n;
		long hi = lo + chunk < total ? lo + chunk : total;
		if (!atomic_compare_exchange_weak(&p->claim, &c, tag | (uint64_t)hi)) continue;
		chunk_do(p, kind, w, lo, hi);
		atomic_fetch_add(&p->done, hi - lo);
	}
}

// backoff is one poll's wait of a thread waiting on the others: a pause,
// and after ARB_POOL_PAUSES polls a yield of the core every sixteenth.
static void backoff(int spins) {
	if (spins < ARB_POOL_PAUSES || spins % 16 != 0)
		relax();
	else
		sched_yield();
}

static long now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

// arb_pool_work is worker w's life (w >= 1, on its own thread): it runs
// the C jobs' chunks as they come, and returns 1 when a job of Go code
// comes (the caller runs its chunks in Go, calls arb_pool_done and comes
// back) and 0 once the pool is closed.
int arb_pool_work(arb_pool *p, int w) {
	for (;;) {
		uint64_t g;
		long since = 0;
		for (int spins = 0; (g = atomic_load(&p->job)) == p->last[w]; spins++) {
			if (atomic_load(&p->quit)) return 0;
			backoff(spins);
			if (spins < ARB_POOL_PAUSES || spins % 16 != 0) continue;
			long t = now_ns();
			if (!since) since = t;
			if (t - since < ARB_POOL_SPIN_NS) continue;
			pthread_mutex_lock(&p->mu);
			atomic_fetch_add(&p->sleepers, 1); // before the check: a job's poster reads it after posting
			while (atomic_load(&p->job) == p->last[w] && !atomic_load(&p->quit)) pthread_cond_wait(&p->cv, &p->mu);
			atomic_fetch_sub(&p->sleepers, 1);
			pthread_mutex_unlock(&p->mu);
			since = 0;
		}
		p->last[w] = g;
		if ((int)(g & 7) == JOB_GO) return 1;
		drain(p, g >> 3, (int)(g & 7), w);
	}
}

// post hands the job set in p to the workers.
static void post(arb_pool *p, int kind, long total, long chunk) {
	uint64_t seq = (atomic_load(&p->job) >> 3) + 1;
	// the claim first: a worker late for the last job, which read its
	// claim before this, fails to claim against this job's total
	atomic_store(&p->claim, (seq & 0xffffffffULL) << 32);
	atomic_store(&p->total, total), atomic_store(&p->chunk, chunk);
	atomic_store(&p->done, 0);
	atomic_store(&p->pending, kind == JOB_GO ? p->n - 1 : 0);
	atomic_store(&p->job, seq << 3 | (uint64_t)kind);
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
}

// arb_pool_post_go hands the workers a job of Go code: each returns from
// arb_pool_work to run its part.
void arb_pool_post_go(arb_pool *p) { post(p, JOB_GO, 0, 1); }

// arb_pool_done is a worker's word that it has run its part of a job of
// Go code.
void arb_pool_done(arb_pool *p) { atomic_fetch_sub(&p->pending, 1); }

// arb_pool_wait returns once every worker has run its part of a job of Go
// code.
void arb_pool_wait(arb_pool *p) {
	for (int spins = 0; atomic_load(&p->pending) > 0; spins++) backoff(spins);
}

// run runs the job set in p, the caller as worker 0, or alone when it is
// one chunk (or more units than a claim holds), and forgets its operands.
static void run(arb_pool *p, int kind, long total, long chunk) {
	if (chunk >= total || total >= 0x7fffffffL) {
		chunk_do(p, kind, 0, 0, total);
	} else {
		post(p, kind, total, chunk);
		drain(p, atomic_load(&p->job) >> 3, kind, 0);
		for (int spins = 0; atomic_load(&p->done) < total; spins++) backoff(spins);
	}
	memset(p->out, 0, sizeof p->out), memset(p->w, 0, sizeof p->w);
	memset(p->aq, 0, sizeof p->aq), memset(p->ad, 0, sizeof p->ad), memset(p->ac, 0, sizeof p->ac);
	p->x = p->wv = p->y = p->cos = p->sin = 0;
	p->xo = 0, p->dk = p->dv = 0, p->kc = p->vc = 0, p->mask = 0, p->bnd = p->cnt = 0, p->part = 0;
	p->seqs = 0, p->nseqs = 0;
}

// set_acts sets the job's activations: row by row, in panels, in K panels.
static void set_acts(arb_pool *p, const int8_t *rq, const float *rd, const int32_t *rs, const int8_t *pq, const float *pd,
                     const int32_t *pc, const int8_t *kq, const float *kd, const int32_t *kc) {
	p->aq[0] = rq, p->ad[0] = rd, p->ac[0] = rs;
	p->aq[1] = pq, p->ad[1] = pd, p->ac[1] = pc;
	p->aq[2] = kq, p->ad[2] = kd, p->ac[2] = kc;
}

// arb_pool_mm runs up to four products of one input (arb_mm_args),
// total units in chunks of chunk: out and weights o_i, w_i; the input
// quantised row by row (rq, rd, rs), in panels (pq, pd, pc), in K panels
// (kq, kd, kc), or as floats (x), whichever the products read.
void arb_pool_mm(arb_pool *p, const arb_mm_args *a, float *o0, float *o1, float *o2, float *o3, const uint8_t *w0,
                 const uint8_t *w1, const uint8_t *w2, const uint8_t *w3, const int8_t *rq, const float *rd, const int32_t *rs,
                 const int8_t *pq, const float *pd, const int32_t *pc, const int8_t *kq, const float *kd, const int32_t *kc,
                 const float *x, long total, long chunk) {
	p->mm = *a;
	p->out[0] = o0, p->out[1] = o1, p->out[2] = o2, p->out[3] = o3;
	p->w[0] = w0, p->w[1] = w1, p->w[2] = w2, p->w[3] = w3;
	set_acts(p, rq, rd, rs, pq, pd, pc, kq, kd, kc);
	p->x = x;
	run(p, JOB_MM, total, chunk);
}

// arb_pool_rows runs an element-wise operation (arb_rows_args.op) over
// total units (rows, or values for the add and the SiLU gate).
void arb_pool_rows(arb_pool *p, const arb_rows_args *a, float *out, float *x, const float *w, const float *y, const float *cos,
                   const float *sin, void *dk, void *dv, int8_t *rq, float *rd, int32_t *rs, int8_t *pq, float *pd, int32_t *pc,
                   int8_t *kq, float *kd, int32_t *kc, long total, long chunk) {
	p->rows = *a;
	p->out[0] = out, p->xo = x, p->wv = w, p->y = y, p->cos = cos, p->sin = sin, p->dk = dk, p->dv = dv;
	set_acts(p, rq, rd, rs, pq, pd, pc, kq, kd, kc);
	run(p, JOB_ROWS, total, chunk);
}

// arb_pool_attn runs total units of arb_attention's phase a->phase.
void arb_pool_attn(arb_pool *p, const arb_attn_args *a, float *out, const float *q, const void *kc, const void *vc,
                   const uint8_t *mask, const int32_t *bnd, const int32_t *cnt, float *part, long total, long chunk) {
	p->attn = *a;
	p->out[0] = out, p->x = q, p->kc = kc, p->vc = vc, p->mask = mask, p->bnd = bnd, p->cnt = cnt, p->part = part;
	run(p, JOB_ATTN, total, chunk);
}

// arb_pool_attn_seqs runs the attention of count sequences in one job:
// total units, sequence i's s[i].first .. s[i].first+s[i].units-1, each
// run as arb_attention runs its plan's units alone (a task of one
// sequence's plan at a time, so its bits are the same), with up to
// scratch floats of scratch a task. One hand-over for a pass's sequences
// where a call each handed over a few tasks and waited for the slowest.
void arb_pool_attn_seqs(arb_pool *p, const arb_attn_seq *s, int count, long scratch, long total, long chunk) {
	p->seqs = s, p->nseqs = count, p->seqs_scratch = scratch;
	run(p, JOB_ATTN_SEQS, total, chunk);
}
