//go:build cgo && !purego

// Inference attention: softmax(q.K^T * scale, masked) . V for a batch of
// rows over one layer of a sequence's KV cache (float32, or float16 read
// as half floats and widened in registers with F16C), at every SIMD
// level: the portable loop, AVX2, AVX-512 (and attn16.c's kernels, which
// put the query vectors in the lanes of 512-bit vectors).
//
// Chunks. A row's visible slots are numbered in slot order, and chunk c
// of the row holds numbers c*C .. (c+1)*C - 1 (C = arb_attention_chunk,
// a constant of the head width). A chunk gives a record: its largest
// score m, the sum s of the weights e^(score - m) over its slots (in
// double) and the weighted sums o of its values, unnormalised. A row's
// records are folded in chunk order (attn_fold) and its result is o / s
// (attn_final). The chunks depend on nothing but the row's visible
// slots, and the fold's order is fixed, so a row's result is the same
// bits whatever the batch, the tasks or the threads, and a tree row's
// is its path's decoded alone (the same keys in the same order, only
// their slot numbers differ). A row that sees at most C slots has one
// chunk, and o / s is then its softmax over them as one pass gives it.
//
// Tasks. A task is a kv head (for heads of 8 on AVX2, a block of them)
// and a group of up to ATTN_ROWS rows (a verification pass: all of
// them), chunk by chunk: a chunk's keys and values come from memory once
// for every query head that shares the kv head and every row of the
// group, the group's rows then reading them from cache in blocks of query
// vectors. Where there are fewer such tasks than twice the threads (a
// decode step over a long cache of few kv heads), each chunk is a task of
// its own, which stores its records, and a second job folds them: the
// same records folded in the same order, so the same bits. A decode
// step (heads of a multiple of 16 dims on AVX-512, of a multiple of 8
// other than 8 on AVX2) takes a block of kv heads a task instead
// (attention_heads512, attention_heads_avx2, heads_block), so that a
// task reads whole rows of the cache in order rather than a head's width
// of each.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attn.h"
#include "simd.h"

#define AI inline __attribute__((always_inline))

// ATTN_ROWS is the most rows a task takes.
enum { ATTN_ROWS = 64 };

// HEADS_VECTORS is the most query vectors a kv head (rows times the
// heads that share it) that attention_heads512 and attention_heads_avx2
// take: a decode step's.
enum { HEADS_VECTORS = 8 };

// HEADS_SLOTS is how many slots attention_heads512 (attention_heads_avx2)
// takes a kv head at a time in its weighted sums: their value rows, all
// of the task's kv heads, stay in the first level of cache (32 KiB for 8
// kv heads of 64 in float16) from the first head to the last.
enum { HEADS_SLOTS = 32 };

// arb_attention_chunk is the visible slots a chunk holds for heads of hd
// dims: about 32K multiply-adds of scores a query vector (512 slots of
// 64 or 128 dims, 4096 of 8), so that the fold (an exponential and hd
// multiply-adds a chunk) stays a small part of a decode step, and a
// block of sixteen query vectors' scores of a chunk (32 KiB) stays in the
// second level of cache in a long prefill. Chunks of 1024 slots (64K
// multiply-adds) had given a decode step after 4096 cached float16
// tokens four tasks on two threads, each a megabyte of keys then one of
// values: the 1B Q4_K shape's decode there ran 2-4% slower with them
// (eight of ten interleaved runs of `bench --ctx 4096 --kv f16`), one
// layer's attention 0.73-0.94 of the time with 512 (ten pairs; 8192
// cached: 0.85-1.28), heads of 128 over 2000 neither way (0.94-1.13).
int arb_attention_chunk(int hd) {
	int c = 32768 / (hd > 0 ? hd : 1);
	c = c < 512 ? 512 : c > 4096 ? 4096 : c;
	return c & ~63;
}

// ---- records ----

static AI void rec_set(float *r, int hd, float m, double s) {
	int R = arb_attn_rec(hd);
	r[R - 4] = m;
	memcpy(r + R - 2, &s, sizeof s);
}
static AI float rec_m(const float *r, int hd) { return r[arb_attn_rec(hd) - 4]; }
static AI double rec_s(const float *r, int hd) {
	double s;
	memcpy(&s, r + arb_attn_rec(hd) - 2, sizeof s);
	return s;
}

// attn_fold folds record p (a vector's next chunk) into st (its earlier
// chunks): the larger maximum M, each side scaled by e^(its m - M) (2^
// with pow2, whose scores are in units of log2 e), the sums added in
// double and the value sums in float. One compiled copy (noinline) serves
// every caller, so the same records fold to the same bits wherever they
// were computed.
static __attribute__((noinline)) void attn_fold(float *st, const float *p, int hd, int pow2) {
	float m0 = rec_m(st, hd), m1 = rec_m(p, hd), M = m0 > m1 ? m0 : m1;
	float a = m0 == M ? 1.0f : pow2 ? exp2f(m0 - M) : expf(m0 - M);
	float b = m1 == M ? 1.0f : pow2 ? exp2f(m1 - M) : expf(m1 - M);
	for (int t = 0; t < hd; t++) {
		float x = st[t] * a, y = p[t] * b;
		st[t] = x + y;
	}
	rec_set(st, hd, M, rec_s(st, hd) * a + rec_s(p, hd) * b);
}

// attn_final writes a vector's result from its folded record: o times
// 1/s (1/s rounded to float, as every softmax here has it).
static __attribute__((noinline)) void attn_final(float *out, const float *st, int hd) {
	float inv = (float)(1.0 / rec_s(st, hd));
	for (int t = 0; t < hd; t++) out[t] = st[t] * inv;
}

// ---- the chunks of a row ----

// row_chunks sets b[0..k] for a row that sees row's set slots (bytes 0 or
// 1) of total, and returns its count of chunks k: chunk c holds its
// visible slots from b[c] to before b[c+1] (b[c] the slot numbered c*C,
// b[k] one past its last visible slot). Eight slots at a time, a word at
// once where no chunk starts in it.
static int row_chunks(const uint8_t *row, int total, int C, int32_t *b) {
	int count = 0, k = 0, last = -1, next = 0; // next: the number that starts chunk k
	for (int j = 0; j < total;) {
		if (j + 8 <= total) {
			uint64_t w;
			memcpy(&w, row + j, 8);
			if (w == 0) {
				j += 8;
				continue;
			}
			int s = (int)((w * 0x0101010101010101ULL) >> 56); // its set bytes
			if (next >= count + s) {
				count += s;
				last = j + (63 - __builtin_clzll(w)) / 8;
				j += 8;
				continue;
			}
		}
		if (row[j]) {
			if (count == next) b[k++] = j, next += C;
			count++, last = j;
		}
		j++;
	}
	if (k) b[k] = last + 1;
	return k;
}

// hd8_kv_block is how many kv heads one task of attention_hd8 takes: as
// many as give its weighted sums up to eight query vectors (a decode step
// of two heads a kv head: four), one when a kv head alone has eight; then
// more, doubling while the job keeps two tasks a thread (one sequence)
// or four (a pass of several requests' decode steps): a task then reads
// more of each cache row at once, and fewer tasks start cold. Eight
// one-row sequences of the bench target (32 kv heads) ran their attention
// in 0.85-0.9 of the time with one task a sequence than with eight; one
// sequence's decode step on two threads, 20 layers in turn, in 0.78 (F32)
// and 0.88 (F16) after 512 cached tokens and 0.91 and 0.97 after 2048
// with eight kv heads a task than with four (medians of seven pairs,
// 2-core Zen 3).
static inline int hd8_kv_block(int rows, int group, int kv_heads, int seqs, int threads) {
	int nv = rows * group, kb = nv >= 8 ? 1 : 8 / nv;
	long per = seqs > 1 ? 4 : 2;
	if (kb > 1)
		while (2 * kb <= kv_heads && (long)(kv_heads / (2 * kb)) * seqs >= per * threads) kb *= 2;
	return kb < kv_heads ? kb : kv_heads;
}

// attn_rows is how many rows a block of attention_avx2 (attention_avx512)
// takes: with the heads that share their kv head, 16 query vectors score
// each block of keys while it sits in the first level of cache.
static int attn_rows(int group) { return group >= 16 ? 1 : 16 / group; }

// live_span sets *js to the first slot of the rows' chunks (lo[r] ..
// hi[r]-1, r < nr) rounded down to a multiple of 8, and returns one past
// their last, or -1 when no row has a slot. A kernel counts its slots
// from *js: the softmax's partial sums, slot j in sum j mod 8, then take
// the same slots whatever the rows beside it.
static int live_span(const int32_t *lo, const int32_t *hi, int nr, int *js) {
	int a = -1, e = -1;
	for (int r = 0; r < nr; r++) {
		if (hi[r] <= lo[r]) continue;
		if (a < 0 || lo[r] < a) a = lo[r];
		if (hi[r] > e) e = hi[r];
	}
	*js = a < 0 ? 0 : a & ~7;
	return e;
}

// ---- AVX2 + FMA + F16C, and AVX-512 ----
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#include "vec8.h"
#include "vec16.h"

// softmax_sum replaces sc[j] (j < count) by e^(sc[j] - maxs), 8 at a time
// (the last few too, through a padded copy), and returns their sum in
// double, as ggml sums them. Masked slots (-inf) give exactly 0, so a row
// sums the same whether it is computed alone or in a batch; and in
// double a float weight adds exactly unless it is some 2^29 times below
// the running sum (and then moves it by less than a float's rounding
// can show), so a tree row's sum, with masked slots among its own, is
// its path's alone whatever partial sums its slots fall into.
//
// With pow2 (a constant in every caller) the scores come scaled by
// log2 e (ARB_HD8_SCALE, heads of width 8) and sc[j] becomes 2^(sc[j] -
// maxs), exp2_8_masked's: at eight dims a score the exponential costs as
// much as the score, and a power of two saves its scaling and its
// two-step reduction by ln 2.
AVX2 static AI double softmax_sum(float *sc, int count, float maxs, int pow2) {
	__m256 vmax = _mm256_set1_ps(maxs);
	__m256d s0 = _mm256_setzero_pd(), s1 = s0;
	int j = 0;
	for (; j + 8 <= count; j += 8) {
		__m256 x = _mm256_sub_ps(_mm256_loadu_ps(sc + j), vmax), e = pow2 ? exp2_8_masked(x) : exp8_masked(x);
		_mm256_storeu_ps(sc + j, e);
		s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	if (j < count) {
		float tmp[8];
		for (int k = 0; k < 8; k++) tmp[k] = j + k < count ? sc[j + k] : -INFINITY;
		__m256 x = _mm256_sub_ps(_mm256_loadu_ps(tmp), vmax), e = pow2 ? exp2_8_masked(x) : exp8_masked(x);
		_mm256_storeu_ps(tmp, e);
		for (int k = 0; j + k < count; k++) sc[j + k] = tmp[k];
		s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	double sd[4];
	_mm256_storeu_pd(sd, _mm256_add_pd(s0, s1));
	return (sd[0] + sd[1]) + (sd[2] + sd[3]);
}

// max_masked is the largest of sc[0..count-1] (-inf when all are), eight
// at a time.
AVX2 static inline float max_masked(const float *sc, int count) {
	__m256 m = _mm256_set1_ps(-INFINITY);
	int j = 0;
	for (; j + 8 <= count; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(sc + j));
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	float r = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
	for (; j < count; j++)
		if (sc[j] > r) r = sc[j];
	return r;
}

// ld8 loads 8 cached values from element i of a KV cache layer: float32,
// or float16 widened with F16C. f16 is a constant in every caller (the
// kernels are inlined into one wrapper per cache type), so the float32
// kernels compile to the same instructions as before the F16 cache existed.
AVX2 static AI __m256 ld8(const void *p, long i, int f16) {
	if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	return _mm256_loadu_ps((const float *)p + i);
}

// at returns the cache layer p from element i on (float32, or float16).
static AI const void *at(const void *p, long i, int f16) {
	return f16 ? (const void *)((const uint16_t *)p + i) : (const void *)((const float *)p + i);
}

// mask_scores sets sc[j] to -inf for the slots j in from..to-1 that row
// hides, eight mask bytes at a time (a tree's rows see the whole prefix:
// blocks with every slot visible are skipped).
AVX2 static AI void mask_scores(float *sc, const uint8_t *row, int from, int to) {
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	int j = from;
	for (; j + 8 <= to; j += 8) {
		uint64_t bytes;
		memcpy(&bytes, row + j, 8);
		if (bytes == 0x0101010101010101ULL) continue;
		__m256i m = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + j)));
		__m256 hide = _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, _mm256_setzero_si256()));
		_mm256_storeu_ps(sc + j, _mm256_blendv_ps(_mm256_loadu_ps(sc + j), ninf, hide));
	}
	for (; j < to; j++)
		if (!row[j]) sc[j] = -INFINITY;
}

// weights turns a vector's scores sc[0..tp-1] (slots from the block's
// first; the row's chunk lo..hi-1 of them, row its mask from that first
// slot or NULL) into its weights, and sets its record's maximum and sum:
// the slots before lo -inf, those it hides -inf (weight 0), from hi on 0.
AVX2 static AI void weights(float *sc, float *rec, int hd, const uint8_t *row, int lo, int hi, int tp, int pow2) {
	if (hi <= lo) {
		memset(sc, 0, (size_t)tp * sizeof(float));
		rec_set(rec, hd, -INFINITY, 0);
		return;
	}
	for (int j = 0; j < lo; j++) sc[j] = -INFINITY;
	if (row) mask_scores(sc, row, lo, hi);
	float maxs = max_masked(sc, hi); // hidden slots hold -inf
	if (maxs == -INFINITY) { // sees nothing here: every weight 0
		memset(sc, 0, (size_t)tp * sizeof(float));
		rec_set(rec, hd, -INFINITY, 0);
		return;
	}
	double s = softmax_sum(sc, hi, maxs, pow2);
	for (int j = hi; j < tp; j++) sc[j] = 0;
	rec_set(rec, hd, maxs, s);
}

// wsum_rows adds weights[k][j] * v_k[j] over slots from <= j < to into
// acc[k] for kn query vectors (weights kn rows of stride tp; vector k's
// values rows of stride kvd from element vo[k] of the cache layer v:
// vectors of a block of kv heads read their own head's values).
// Each slot asks for the same span of the row sixteen on, and past the
// last, for the first rows of next's span (the next call's first head,
// -1: none), whose own first rows would otherwise come cold.
AVX2 static AI void wsum_rows(__m256 *acc, const float *w, int tp, const void *v, const long *vo, long next, int kvd, int from, int to, int kn,
                              int f16) {
	__m256 a[8]; // a local copy the compiler keeps in registers (acc escapes, so it is stored every slot)
	for (int k = 0; k < kn; k++) a[k] = acc[k];
	int span = f16 ? 2 : 4, bytes = (int)(vo[kn - 1] - vo[0] + 8) * span; // the rows' span of the cache row
	for (int j = from; j < to; j++) {
		long o = j + 16 < to ? vo[0] + (long)(j + 16) * kvd : next >= 0 ? next + (long)(from + j + 16 - to) * kvd : -1;
		if (o >= 0)
			for (int pf = 0; pf < bytes; pf += 64) _mm_prefetch((const char *)v + o * span + pf, _MM_HINT_T0);
		for (int k = 0; k < kn; k++)
			a[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(w + (long)k * tp + j), ld8(v, vo[k] + (long)j * kvd, f16), a[k]);
	}
	for (int k = 0; k < kn; k++) acc[k] = a[k];
}

// HD8_VALUES_AHEAD is the most bytes of value rows attention_hd8
// requests while it computes a block's weights: a decode step's block
// over a short context (the bench target's 32 kv heads after 100
// positions: 101 KiB in float32), whose weighted sums had waited on
// their rows coming from memory a kv width apart (eight one-row
// sequences' attention, BenchmarkAttentionSeqs/F32, 152-180 us a layer
// with the requests, 184-223 without, medians of five interleaved
// runs, 2-core Zen 3). A longer block's rows would not stay in the
// second level until its sums reach them.
enum { HD8_VALUES_AHEAD = 192 << 10 };

// attention_hd8 is a block of attention for heads of width 8, where one
// key is a single vector and reducing each q.k product horizontally would
// cost more than the product: kv heads kh0..kh0+kn-1 and rows i0..i1-1
// (row i's chunk slots lo[i-i0] .. hi[i-i0]-1), its records at
// rec[((i-i0)*kn*group + b*group + g) * rec] (kv head kh0+b, head g of
// those sharing it). Every block of 8 keys is loaded and transposed once,
// then scored for all of the kv head's query vectors with 8 multiply-adds
// each. The block's heads are scored slot block by slot block, so a step
// reads each cache row's span of them at once, and their weighted sums
// run side by side: a decode step has two query vectors a kv head, and
// one kv head alone left two chains of multiply-adds, each waiting on
// the last (a 1024-slot decode step spent a third of its time there).
// Hidden scores are set to -inf, whose exponential is exactly 0; the
// slots outside a row's chunk get weight 0 without being scored (a causal
// row skips the blocks it cannot see), and a zero weight adds exactly
// nothing, so a row gets the same bits whatever the batch around it.
AVX2 static AI void attention_hd8(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                  int heads, int kv_heads, float scale, int kh0, int kn, int i0, int i1, const int32_t *lo0,
                                  const int32_t *hi0, float *scores) {
	int group = heads / kv_heads, kvd = kv_heads * 8, qd = heads * 8, R = arb_attn_rec(8), nr = i1 - i0, per = nr * group;
	int lo[ATTN_ROWS], hi[ATTN_ROWS], js, je = live_span(lo0, hi0, nr, &js);
	if (je < 0) return;
	for (int r = 0; r < nr; r++) lo[r] = lo0[r] - js, hi[r] = hi0[r] - js;
	int jn = je - js, tp = (jn + 7) & ~7, left = total - js, span = f16 ? 2 : 4;
	const void *kb = at(kc, (long)js * kvd, f16), *vb = at(vc, (long)js * kvd, f16);
	const __m256 vscale = _mm256_set1_ps(ARB_HD8_SCALE(scale));
	// scores: vector k = b*per + r*group + g at scores + k*tp
	for (int j0 = 0; j0 < jn; j0 += 8) {
		// the rows two blocks ahead requested now: a step reads each
		// row's span of the block's heads, rows a kv width apart,
		// which the hardware's prefetch did not follow
		// (a kv head at a time, the lines that start in its span, between
		// the products: a burst of every head's lines stalls the loads
		// behind it)
		for (int b = 0; b < kn; b++) {
			int kh = kh0 + b;
			long ks = (long)kh * 8 * span; // the head's first byte in a row
			if (b == 0 || ks % 64 < 8 * span)
				for (int u = 16; u < 24 && j0 + u < left; u++)
					_mm_prefetch((const char *)kb + (long)(j0 + u) * kvd * span + (b == 0 ? ks : ks & ~63L), _MM_HINT_T0);
			__m256 r[8];
			for (int u = 0; u < 8; u++) r[u] = j0 + u < left ? ld8(kb, (long)(j0 + u) * kvd + kh * 8, f16) : _mm256_setzero_ps();
			transpose8(r);
			for (int rr = 0; rr < nr; rr++) {
				if (j0 >= hi[rr] || j0 + 8 <= lo[rr]) continue; // none of its chunk's slots here
				for (int g = 0; g < group; g++) {
					const float *qv = q + (long)(i0 + rr) * qd + (kh * group + g) * 8;
					__m256 sv = _mm256_mul_ps(_mm256_broadcast_ss(qv), r[0]);
					for (int t = 1; t < 8; t++) sv = _mm256_fmadd_ps(_mm256_broadcast_ss(qv + t), r[t], sv);
					_mm256_storeu_ps(scores + (long)(b * per + rr * group + g) * tp + j0, _mm256_mul_ps(sv, vscale));
				}
			}
		}
	}
	int nv = kn * per, hn = kn * group;
	// while the weights are computed (arithmetic alone), the block's
	// value rows are requested into the second level of cache, a share
	// of them with each vector, where they fit there beside the keys
	// (HD8_VALUES_AHEAD): the weighted sums below then read them from it
	long vspan = (long)kn * 8 * span, v0 = (long)kh0 * 8 * span; // the block's heads' bytes of a value row
	int ahead = (long)jn * vspan <= HD8_VALUES_AHEAD;
	for (int k = 0; k < nv; k++) {
		for (int j = ahead ? (int)((long)k * jn / nv) : jn; j < (int)((long)(k + 1) * jn / nv); j++)
			for (long pf = v0 & ~63L; pf < v0 + vspan; pf += 64) _mm_prefetch((const char *)vb + (long)j * kvd * span + pf, _MM_HINT_T1);
		int rr = k % per / group;
		const uint8_t *row = mask ? mask + (long)(i0 + rr) * total + js : NULL;
		weights(scores + (long)k * tp, rec + (long)(rr * hn + k / per * group + k % group) * R, 8, row, lo[rr], hi[rr], tp, 1);
	}
	// weighted sums of the values, up to 8 query vectors per pass over
	// the slots: a value vector is loaded for all of its kv head's
	// vectors, and a slot a vector does not see has weight exactly 0,
	// which leaves its sum as if the slot were not there
	for (int k0 = 0; k0 < nv; k0 += 8) {
		int kn8 = nv - k0 < 8 ? nv - k0 : 8;
		__m256 acc[8];
		long vo[8];
		int from = jn, to = 0; // the slots of these vectors' chunks
		for (int k = 0; k < 8; k++) {
			acc[k] = _mm256_setzero_ps();
			int kk = k0 + (k < kn8 ? k : kn8 - 1), rr = kk % per / group;
			vo[k] = (long)(kh0 + kk / per) * 8;
			if (hi[rr] > lo[rr]) {
				if (lo[rr] < from) from = lo[rr];
				if (hi[rr] > to) to = hi[rr];
			}
		}
		const float *sc = scores + (long)k0 * tp;
		long nx = k0 + 8 < nv ? (long)(kh0 + (k0 + 8) / per) * 8 : -1; // the next vectors' first head
		if (nx == vo[0]) nx = -1; // the same head's rows: already asked for
		switch (kn8) { // one loop per vector count, so the accumulators stay in registers
		case 8: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 8, f16); break;
		case 7: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 7, f16); break;
		case 6: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 6, f16); break;
		case 5: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 5, f16); break;
		case 4: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 4, f16); break;
		case 3: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 3, f16); break;
		case 2: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 2, f16); break;
		default: wsum_rows(acc, sc, tp, vb, vo, nx, kvd, from, to, 1, f16); break;
		}
		for (int k = 0; k < kn8; k++) {
			int kk = k0 + k, rr = kk % per / group;
			_mm256_storeu_ps(rec + (long)(rr * hn + kk / per * group + kk % group) * R, acc[k]);
		}
	}
}

// score_heads writes sc[u*stride + j] = q_u . k_j * scale for gn heads
// (q_u at q + u*hd) and the slots from <= j < limit (-inf where masked),
// loading each key row once for all of them.
AVX2 static AI void score_heads(float *sc, int stride, const float *q, int hd, const void *k, long k0, int kvd, const uint8_t *row, int from,
                                int limit, float scale, int gn, int f16) {
	for (int j = from; j < limit; j++) {
		if (row && !row[j]) {
			for (int u = 0; u < gn; u++) sc[(long)u * stride + j] = -INFINITY;
			continue;
		}
		long kj = k0 + (long)j * kvd;
		__m256 acc[4], kv0 = ld8(k, kj, f16);
		for (int u = 0; u < gn; u++) acc[u] = _mm256_mul_ps(_mm256_loadu_ps(q + (long)u * hd), kv0);
		for (int t = 8; t < hd; t += 8) {
			__m256 kt = ld8(k, kj + t, f16);
			for (int u = 0; u < gn; u++) acc[u] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (long)u * hd + t), kt, acc[u]);
		}
		for (int u = 0; u < gn; u++) sc[(long)u * stride + j] = hsum8(acc[u]) * scale;
	}
}

// hsum8x4 returns the four sums hsum8(a[s]), s < 4, in one vector: the
// same additions in the same order, done for four vectors at once (the
// halves added, then lanes 0+2 and 1+3, then those two).
AVX2 static AI __m128 hsum8x4(const __m256 a[4]) {
	__m256 z02 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[2], 0x20), _mm256_permute2f128_ps(a[0], a[2], 0x31));
	__m256 z13 = _mm256_add_ps(_mm256_permute2f128_ps(a[1], a[3], 0x20), _mm256_permute2f128_ps(a[1], a[3], 0x31));
	__m256 b = _mm256_add_ps(_mm256_shuffle_ps(z02, z13, 0x44), _mm256_shuffle_ps(z02, z13, 0xee));
	__m256 r = _mm256_add_ps(_mm256_shuffle_ps(b, b, 0x88), _mm256_shuffle_ps(b, b, 0xdd));
	return _mm_castpd_ps(_mm_unpacklo_pd(_mm_castps_pd(_mm256_castps256_ps128(r)), _mm_castps_pd(_mm256_extractf128_ps(r, 1))));
}

// score_block writes, for nq (1 or 2) query vectors q[u] (of hd values),
// sc[u*stride + j0..j0+3] = q_u . k_j * scale for the four slots from j0:
// each dot product is score_heads's, lane for lane and add for add, but
// the four keys are read once for both queries and the four horizontal
// sums are one transposed reduction (two queries by four slots keep the
// accumulators in the sixteen registers AVX2 has).
AVX2 static AI void score_block(float *sc, long stride, const float *const q[2], int nq, int hd, const void *k, long k0, int kvd, int j0,
                                float scale, int f16) {
	__m256 acc[2][4];
	long kj = k0 + (long)j0 * kvd;
	for (int t = 0; t < hd; t += 8) {
		__m256 qt[2];
		for (int u = 0; u < nq; u++) qt[u] = _mm256_loadu_ps(q[u] + t);
		for (int s = 0; s < 4; s++) {
			__m256 ks = ld8(k, kj + (long)s * kvd + t, f16);
			for (int u = 0; u < nq; u++) acc[u][s] = t ? _mm256_fmadd_ps(qt[u], ks, acc[u][s]) : _mm256_mul_ps(qt[u], ks);
		}
	}
	__m128 vs = _mm_set1_ps(scale);
	for (int u = 0; u < nq; u++) _mm_storeu_ps(sc + (long)u * stride + j0, _mm_mul_ps(hsum8x4(acc[u]), vs));
}

// score_quads writes, for nq (1 to 4) query vectors q[u] (of hd values),
// sc[u*stride + j0..j0+3] = q_u . k_j * scale for the four slots from j0:
// score_block's dot products, lane for lane and add for add, two slots
// at a time for all nq vectors, so each key is widened from float16 once
// for the four heads a decode step has a kv head in llama-3.2-1b, where
// score_block's pairs widen it twice (on a 2-core Zen 3 a conversion
// costs as much as two multiply-adds). Over a float32 cache, where
// nothing is widened, the pairs stay: the quads had made a decode step
// after 4096 positions slower there (median 1.15x, nine pairs).
AVX2 static AI void score_quads(float *sc, long stride, const float *const q[4], int nq, int hd, const void *k, long k0, int kvd, int j0,
                                float scale, int f16) {
	__m128 vs = _mm_set1_ps(scale);
	for (int s0 = 0; s0 < 4; s0 += 2) {
		__m256 acc[4][2];
		long kj = k0 + (long)(j0 + s0) * kvd;
		for (int t = 0; t < hd; t += 8) {
			__m256 ka = ld8(k, kj + t, f16), kb = ld8(k, kj + kvd + t, f16);
			for (int u = 0; u < nq; u++) {
				__m256 qt = _mm256_loadu_ps(q[u] + t);
				acc[u][0] = t ? _mm256_fmadd_ps(qt, ka, acc[u][0]) : _mm256_mul_ps(qt, ka);
				acc[u][1] = t ? _mm256_fmadd_ps(qt, kb, acc[u][1]) : _mm256_mul_ps(qt, kb);
			}
		}
		for (int u = 0; u < nq; u += 2) { // two vectors' two slots a transposed reduction
			int w = u + 1 < nq ? u + 1 : u;
			__m256 four[4] = {acc[u][0], acc[u][1], acc[w][0], acc[w][1]};
			__m128 r = _mm_mul_ps(hsum8x4(four), vs);
			_mm_storel_pi((__m64 *)(sc + (long)u * stride + j0 + s0), r);
			if (w != u) _mm_storeh_pi((__m64 *)(sc + (long)w * stride + j0 + s0), r);
		}
	}
}

// wsum_heads sets acc[u*tn + k] (u < gn, k < tn) to the sum over visible
// slots from <= j < limit of w[u*stride + j] * v[j*kvd + 8k .. +8]: tn
// vectors of dims of gn heads' weighted value sums, in one pass over the
// slots that reads each value row once for all gn heads. With ahead
// (attn_ahead), each slot requests its span of the row 48 slots on, as
// the keys are: a head's value rows lie a kv width apart (1 KiB in
// llama-3.2-1b's float16 cache), which the hardware's prefetch did not
// follow, and on a 2-core Zen 3 (AVX2) a decode step after 4096 tokens
// spent 45% of its attention waiting on these loads.
AVX2 static AI void wsum_heads(__m256 *acc, const float *w, int stride, const uint8_t *row, const void *v, long v0, int kvd, int from,
                               int limit, int gn, int tn, int f16, int ahead) {
	__m256 a[8];
	for (int k = 0; k < gn * tn; k++) a[k] = _mm256_setzero_ps();
	int span = f16 ? 2 : 4;
	for (int j = from; j < limit; j++) {
		if (ahead)
			for (int pf = 0; pf < 8 * tn * span; pf += 64) _mm_prefetch((const char *)v + (v0 + (long)(j + 48) * kvd) * span + pf, _MM_HINT_T0);
		if (row && !row[j]) continue;
		__m256 vj[8];
		for (int k = 0; k < tn; k++) vj[k] = ld8(v, v0 + (long)j * kvd + 8 * k, f16);
		for (int u = 0; u < gn; u++) {
			__m256 p = _mm256_set1_ps(w[(long)u * stride + j]);
			for (int k = 0; k < tn; k++) a[u * tn + k] = _mm256_fmadd_ps(p, vj[k], a[u * tn + k]);
		}
	}
	for (int k = 0; k < gn * tn; k++) acc[k] = a[k];
}

// WSUM_PAIRS runs CALL(GN, TN) for gn (1 or 2) heads and tn (1 to 8
// with one head, 1 to 4 with two) vectors of dims, the counts constants
// in each case, so a call's accumulators stay in registers.
#define WSUM_PAIRS(gn, tn, CALL) \
	switch ((gn) * 16 + (tn)) { \
	case 0x18: CALL(1, 8); break; \
	case 0x17: CALL(1, 7); break; \
	case 0x16: CALL(1, 6); break; \
	case 0x15: CALL(1, 5); break; \
	case 0x14: CALL(1, 4); break; \
	case 0x13: CALL(1, 3); break; \
	case 0x12: CALL(1, 2); break; \
	case 0x11: CALL(1, 1); break; \
	case 0x24: CALL(2, 4); break; \
	case 0x23: CALL(2, 3); break; \
	case 0x22: CALL(2, 2); break; \
	default: CALL(2, 1); break; \
	}

// WSUM_QUADS is WSUM_PAIRS for gn of 1 to 4 heads over tn of 1 or 2
// vectors of dims.
#define WSUM_QUADS(gn, tn, CALL) \
	switch ((gn) * 16 + (tn)) { \
	case 0x42: CALL(4, 2); break; \
	case 0x41: CALL(4, 1); break; \
	case 0x32: CALL(3, 2); break; \
	case 0x31: CALL(3, 1); break; \
	case 0x22: CALL(2, 2); break; \
	case 0x21: CALL(2, 1); break; \
	case 0x12: CALL(1, 2); break; \
	default: CALL(1, 1); break; \
	}

// attn_ahead says whether a block of nq query vectors requests its keys
// and values 48 slots ahead: a decode step's few vectors over a long
// cache (ahead: the cache holds 1024 slots or more), whose rows (a
// head's, a kv width apart: 2 KiB in llama-3.2-1b) come from memory and
// which the hardware's prefetch did not follow. With it a decode step's
// attention of that shape after 2048 cached tokens read its cache at
// 27-28 GB/s where it had read 15-19 (0.61-0.69 of the time); in a wide
// pass, whose rows come from cache, the requests only cost (a 128-row
// pass 14% slower).
static inline int attn_ahead(int nq, int ahead) { return nq <= 8 && ahead; }

// ATTN_SCORES defines NAME, the first half of a block of attention_avx2
// (or, with the 512-bit helpers, attention_avx512): the weights of every
// query vector of rows i0..i1-1 of kv head kh (each row with its group of
// heads, vector u = (i - i0) * group + g at scores + u*tp), slots counted
// from the block's first (keys k0 elements into kc; row i's mask, from
// that slot, at mask + (i - i0) * total; its chunk lo[i-i0] ..
// hi[i-i0]-1), four slots a block (SCORE_BLOCK) while a block fits, then
// slot by slot (SCORE_HEADS); then each vector's weights in place, its
// maximum and sum into mx[u] and sm[u]. Every weight outside a row's
// chunk, up to jn, and all of a blind row's are 0, so a sum over the
// block's slots adds exactly nothing for them.
// TAIL_SCORES scores one row's group of heads over the slots from <=
// j < limit with SCORE_HEADS (score_heads, score_heads16), four heads at
// a time (one loop per head count, so the accumulators stay in
// registers): head g's query vector at qv + g*hd, its scores at sc +
// g*tp.
#define TAIL_SCORES(SCORE_HEADS, sc, tp, qv, hd, kc, k0, kvd, row, from, limit, scale, group, f16) \
	for (int g0_ = 0; g0_ < (group); g0_ += 4) { \
		float *sc_ = (sc) + (long)g0_ * (tp); \
		const float *qv_ = (qv) + (long)g0_ * (hd); \
		switch ((group) - g0_ < 4 ? (group) - g0_ : 4) { \
		case 4: SCORE_HEADS(sc_, tp, qv_, hd, kc, k0, kvd, row, from, limit, scale, 4, f16); break; \
		case 3: SCORE_HEADS(sc_, tp, qv_, hd, kc, k0, kvd, row, from, limit, scale, 3, f16); break; \
		case 2: SCORE_HEADS(sc_, tp, qv_, hd, kc, k0, kvd, row, from, limit, scale, 2, f16); break; \
		default: SCORE_HEADS(sc_, tp, qv_, hd, kc, k0, kvd, row, from, limit, scale, 1, f16); break; \
		} \
	}

#define ATTN_SCORES(NAME, TARGET, SCORE_BLOCK, SCORE_HEADS)                                                                      \
	TARGET static AI void NAME(float *scores, float *mx, double *sm, const float *q, const void *kc, long k0, int f16,            \
	                           const uint8_t *mask, int total, int group, int hd, int kvd, int qd, int kh, int i0, int i1,        \
	                           const int *lo, const int *hi, int jn, int tp, float scale, int ahead) {                           \
		int nq = (i1 - i0) * group, jb = jn / 4 * 4, span = f16 ? 2 : 4;                                                      \
		ahead = attn_ahead(nq, ahead);                                                                                         \
		for (int j0 = 0; j0 < jb; j0 += 4) {                                                                                   \
			for (int x = 48; ahead && x < 52; x++) /* the keys 48 slots on (attn_ahead) */                                   \
				for (int pf = 0; pf < hd * span; pf += 64)                                                                 \
					_mm_prefetch((const char *)kc + (k0 + (long)(j0 + x) * kvd) * span + pf, _MM_HINT_T0);             \
			for (int u = 0; u < nq; u += 2) {                                                                              \
				const float *qp[2];                                                                                        \
				for (int v = 0; v < 2 && u + v < nq; v++) {                                                                \
					int i = i0 + (u + v) / group, g = (u + v) % group;                                                 \
					qp[v] = q + (long)i * qd + (long)(kh * group + g) * hd;                                            \
				}                                                                                                          \
				if (u + 1 < nq) SCORE_BLOCK(scores + (long)u * tp, tp, qp, 2, hd, kc, k0, kvd, j0, scale, f16);           \
				else SCORE_BLOCK(scores + (long)u * tp, tp, qp, 1, hd, kc, k0, kvd, j0, scale, f16);                      \
			}                                                                                                                  \
		}                                                                                                                      \
		for (int i = i0; i < i1; i++) {                                                                                        \
			const uint8_t *row = mask ? mask + (long)(i - i0) * total : NULL;                                              \
			int l = lo[i - i0], h = hi[i - i0];                                                                            \
			if (h > l) /* the slots after the blocks, one at a time */                                                     \
				TAIL_SCORES(SCORE_HEADS, scores + (long)(i - i0) * group * tp, tp,                                         \
				            q + (long)i * qd + (long)kh * group * hd, hd, kc, k0, kvd, row, jb > l ? jb : l, h,            \
				            scale, group, f16);                                                                            \
			for (int g = 0; g < group; g++) {                                                                              \
				int u = (i - i0) * group + g;                                                                              \
				float r[4];                                                                                                \
				weights(scores + (long)u * tp, r, 0, row, l, h, jn, 0);                                                    \
				mx[u] = rec_m(r, 0), sm[u] = rec_s(r, 0);                                                                  \
			}                                                                                                                  \
		}                                                                                                                      \
	}

ATTN_SCORES(attn_scores8, AVX2, score_block, score_heads)

// block_rows re-bases the chunks of rows i0..i1-1 (lo0, hi0: their slots)
// on the block's first slot *js (live_span's), into lo and hi, and
// returns the block's slots from it, or -1 for a block with none.
static AI int block_rows(const int32_t *lo0, const int32_t *hi0, int nr, int *lo, int *hi, int *js) {
	int je = live_span(lo0, hi0, nr, js);
	if (je < 0) return -1;
	for (int r = 0; r < nr; r++) {
		lo[r] = hi0[r] > lo0[r] ? lo0[r] - *js : 0;
		hi[r] = hi0[r] > lo0[r] ? hi0[r] - *js : 0;
	}
	return je - *js;
}

// blind_rows sets the records of a block's rows that see nothing here.
static AI void blind_rows(float *rec, const int *lo, const int *hi, int nr, int group, int hd) {
	int R = arb_attn_rec(hd);
	for (int r = 0; r < nr; r++)
		if (hi[r] <= lo[r])
			for (int g = 0; g < group; g++) {
				memset(rec + (long)(r * group + g) * R, 0, (size_t)hd * sizeof(float));
				rec_set(rec + (long)(r * group + g) * R, hd, -INFINITY, 0);
			}
}

// attention_avx2 is a block of attention for head widths that are
// multiples of 8 (other than 8): kv head kh and attn_rows rows i0..i1-1,
// so every key row is read once for all the rows and heads that share it
// (grouped-query attention), scored four slots at a time (score_block),
// and every value row once for the heads of a row. Each row's scores,
// weights and weighted sums are computed as a row alone would compute
// them (the slots outside its chunk are never summed), so a row's record
// does not depend on the batch. Row i's records at rec[((i-i0)*group +
// g) * rec].
AVX2 static AI void attention_avx2(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                   int group, int hd, int kvd, int qd, int kh, int i0, int i1, const int32_t *lo0, const int32_t *hi0,
                                   float scale, int ahead, float *scores) {
	int nr = i1 - i0, lo[16], hi[16], js, jn = block_rows(lo0, hi0, nr, lo, hi, &js), R = arb_attn_rec(hd);
	if (jn < 0) return;
	int tp = (jn + 7) & ~7;
	long k0 = (long)js * kvd + (long)kh * hd;
	float mx[256];
	double sm[256]; // (i1 - i0) * group <= 256: attention_mode checks
	int pf = attn_ahead((i1 - i0) * group, ahead);
	attn_scores8(scores, mx, sm, q, kc, k0, f16, mask ? mask + (long)i0 * total + js : NULL, total, group, hd, kvd, qd, kh, i0, i1, lo,
	             hi, jn, tp, scale, ahead);
	for (int i = i0; i < i1; i++) {
		const uint8_t *row = mask ? mask + (long)i * total + js : NULL;
		int l = lo[i - i0], h = hi[i - i0];
		float *rs = scores + (long)(i - i0) * group * tp;
		// the weighted sums of the values: two heads and four vectors of
		// dims (or one head and eight) per pass over the slots, so a value
		// row is read once for each pair of heads that share it (each dim
		// still sums over the slots in order). Measured on one thread, pairs
		// cost what single heads did for 32 heads of 128 over 8 kv heads at
		// 2000 slots, and four heads at a time were 10% slower there. The
		// dims are the outer loop, so the pairs of heads after the first
		// read the rows' span the first just brought to the cache.
		int width = group < 2 ? 8 : 4;
		for (int t0 = 0; t0 < hd; t0 += 8 * width) {
			int tn = (hd - t0) / 8 < width ? (hd - t0) / 8 : width;
			for (int g0 = 0; g0 < group; g0 += 2) {
				int gn = group - g0 < 2 ? group - g0 : 2;
				__m256 acc[8];
				const float *w = rs + (long)g0 * tp;
				long v = k0 + t0;
				int first = pf && g0 == 0; // the first pair requests the rows' span
#define WSUM(GN, TN) wsum_heads(acc, w, tp, row, vc, v, kvd, l, h, GN, TN, f16, first)
				WSUM_PAIRS(gn, tn, WSUM) // one loop per shape, so the accumulators stay in registers
#undef WSUM
				for (int u = 0; u < gn; u++) {
					float *o = rec + (long)((i - i0) * group + g0 + u) * R + t0;
					for (int k = 0; k < tn; k++) _mm256_storeu_ps(o + 8 * k, acc[u * tn + k]);
				}
			}
		}
		for (int g = 0; g < group; g++) {
			int u = (i - i0) * group + g;
			rec_set(rec + (long)u * R, hd, mx[u], sm[u]);
		}
	}
}

// wsum_add is wsum_heads continuing the sums in am (head u's dims 8k ..
// 8k+7 at am + u*astride + 8k) over the slots from <= j < limit: the
// same multiply-adds in the same order of slots (masked slots skipped
// alike), so summing a vector's slots block by block gives the bits of
// wsum_heads's one pass over them. Where pf > 0 each slot asks for the
// same dims of slot j + pf (below pfend).
AVX2 static AI void wsum_add(float *am, int astride, const float *w, int stride, const uint8_t *row, const void *v, long v0, int kvd,
                             int from, int limit, int gn, int tn, int f16, int pf, int pfend) {
	__m256 a[8];
	int span = f16 ? 2 : 4;
	for (int u = 0; u < gn; u++)
		for (int k = 0; k < tn; k++) a[u * tn + k] = _mm256_loadu_ps(am + (long)u * astride + 8 * k);
	for (int j = from; j < limit; j++) {
		if (pf > 0 && j + pf < pfend)
			for (int b = 0; b < 8 * tn * span; b += 64) _mm_prefetch((const char *)v + (v0 + (long)(j + pf) * kvd) * span + b, _MM_HINT_T0);
		if (row && !row[j]) continue;
		__m256 vj[8];
		for (int k = 0; k < tn; k++) vj[k] = ld8(v, v0 + (long)j * kvd + 8 * k, f16);
		for (int u = 0; u < gn; u++) {
			__m256 p = _mm256_set1_ps(w[(long)u * stride + j]);
			for (int k = 0; k < tn; k++) a[u * tn + k] = _mm256_fmadd_ps(p, vj[k], a[u * tn + k]);
		}
	}
	for (int u = 0; u < gn; u++)
		for (int k = 0; k < tn; k++) _mm256_storeu_ps(am + (long)u * astride + 8 * k, a[u * tn + k]);
}

// attention_heads_avx2 is attention_avx2 for a block of few query
// vectors (rows i0..i1-1 times the group of heads that share a kv head,
// at most HEADS_VECTORS: a decode step) over kv heads kh0..kh0+kn-1 at
// once, as attention_heads512 is on AVX-512: four slots are scored for
// every kv head of the block before the next four, and the values are
// summed HEADS_SLOTS slots at a time for every kv head, so a task reads
// its rows' span of the cache in order where attention_avx2 reads a
// head's width of every row (128 bytes of 1 KiB in llama-3.2-1b), a
// stride the hardware's prefetch follows poorly. Its records, row r's
// head (kh0 + b)*group + g's, at rec[(r*kn*group + b*group + g) * rec].
// Every score is score_block's (score_quads computes the same) or
// score_heads's, every weight weights', and every value sum wsum_heads's
// multiply-adds in the same order (however many heads a pass takes), for
// the same slots as attention_avx2 takes them, so a row's record is the
// same bits whichever kernel computed it.
AVX2 static AI void attention_heads_avx2(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                         int group, int hd, int kvd, int qd, int kh0, int kn, int i0, int i1, const int32_t *lo0,
                                         const int32_t *hi0, float scale, int ahead, float *scratch) {
	int nr = i1 - i0, lo[16], hi[16], js, jn = block_rows(lo0, hi0, nr, lo, hi, &js), R = arb_attn_rec(hd), nq = nr * group;
	if (jn < 0) return;
	int tp = (jn + 7) & ~7, span = f16 ? 2 : 4, jb = jn / 4 * 4;
	long k0 = (long)js * kvd + (long)kh0 * hd;
	// the scratch: vector u of kv head b's weights at S + (b*nq + u)*tp,
	// then its value sums at acc + (b*nq + u)*hd
	float *S = scratch, *acc = S + (long)kn * nq * tp;
	const float *qp[HEADS_VECTORS];
	for (int u = 0; u < nq; u++) qp[u] = q + (long)(i0 + u / group) * qd + (long)(kh0 * group + u % group) * hd;
	for (int j0 = 0; j0 < jb; j0 += 4)
		for (int b = 0; b < kn; b++) {
			if (ahead) // kv head b's keys 16 slots on, a head at a time between the products
				for (int x = 16; x < 20; x++)
					for (int pf = 0; pf < hd * span; pf += 64)
						_mm_prefetch((const char *)kc + (k0 + (long)(j0 + x) * kvd + (long)b * hd) * span + pf, _MM_HINT_T0);
			for (int u = 0; u < nq; u += f16 ? 4 : 2) { // four vectors a call over float16 (two over float32), the count a constant in each
				const float *qb[4];
				for (int x = 0; x < 4; x++) qb[x] = qp[u + (u + x < nq ? x : 0)] + (long)b * group * hd;
				float *sc = S + (long)(b * nq + u) * tp;
				long kb = k0 + (long)b * hd;
				if (!f16) {
					if (u + 1 < nq) score_block(sc, tp, qb, 2, hd, kc, kb, kvd, j0, scale, f16);
					else score_block(sc, tp, qb, 1, hd, kc, kb, kvd, j0, scale, f16);
					continue;
				}
				switch (nq - u < 4 ? nq - u : 4) {
				case 4: score_quads(sc, tp, qb, 4, hd, kc, kb, kvd, j0, scale, f16); break;
				case 3: score_quads(sc, tp, qb, 3, hd, kc, kb, kvd, j0, scale, f16); break;
				case 2: score_quads(sc, tp, qb, 2, hd, kc, kb, kvd, j0, scale, f16); break;
				default: score_quads(sc, tp, qb, 1, hd, kc, kb, kvd, j0, scale, f16); break;
				}
			}
		}
	for (int b = 0; b < kn; b++) {
		long kb = k0 + (long)b * hd;
		for (int i = i0; i < i1; i++) {
			const uint8_t *row = mask ? mask + (long)i * total + js : NULL;
			int l = lo[i - i0], h = hi[i - i0];
			float *sc = S + (long)(b * nq + (i - i0) * group) * tp;
			if (h > l) // the slots after the blocks, one at a time, as attn_scores8 takes them
				TAIL_SCORES(score_heads, sc, tp, q + (long)i * qd + (long)(kh0 + b) * group * hd, hd, kc, kb, kvd, row, jb > l ? jb : l, h,
				            scale, group, f16);
			for (int g = 0; g < group; g++) {
				float r[4];
				weights(sc + (long)g * tp, r, 0, row, l, h, jn, 0);
				float *o = rec + (long)(((i - i0) * kn + b) * group + g) * R;
				memset(acc + (long)(b * nq + (i - i0) * group + g) * hd, 0, (size_t)hd * sizeof(float));
				rec_set(o, hd, rec_m(r, 0), rec_s(r, 0));
			}
		}
	}
	// the weighted sums of the values, HEADS_SLOTS slots a kv head at a
	// time: in attention_avx2's pairs of heads and passes over the dims,
	// or over float16 for more than two heads a kv head four heads over
	// two vectors of dims a pass, so each value is widened once for the
	// four
	int quads = f16 && group > 2, hstep = quads ? 4 : 2, width = quads ? 2 : group < 2 ? 8 : 4;
	for (int j0 = 0; j0 < jn; j0 += HEADS_SLOTS) {
		int j1 = j0 + HEADS_SLOTS < jn ? j0 + HEADS_SLOTS : jn;
		for (int b = 0; b < kn; b++)
			for (int i = i0; i < i1; i++) {
				int l = lo[i - i0] > j0 ? lo[i - i0] : j0, h = hi[i - i0] < j1 ? hi[i - i0] : j1;
				if (h <= l) continue;
				const uint8_t *row = mask ? mask + (long)i * total + js : NULL;
				int u0 = b * nq + (i - i0) * group;
				for (int t0 = 0; t0 < hd; t0 += 8 * width) {
					int tn = (hd - t0) / 8 < width ? (hd - t0) / 8 : width;
					for (int g0 = 0; g0 < group; g0 += hstep) {
						int gn = group - g0 < hstep ? group - g0 : hstep;
						const float *w = S + (long)(u0 + g0) * tp;
						float *am = acc + (long)(u0 + g0) * hd + t0;
						long v = k0 + (long)b * hd + t0;
						int pf = ahead && g0 == 0 ? HEADS_SLOTS : 0; // the first heads ask for the next block's rows
#define WSUM(GN, TN) wsum_add(am, hd, w, tp, row, vc, v, kvd, l, h, GN, TN, f16, pf, jn)
						if (quads) WSUM_QUADS(gn, tn, WSUM) // one loop per shape, so the accumulators stay in registers
						else WSUM_PAIRS(gn, tn, WSUM)
#undef WSUM
					}
				}
			}
	}
	for (int b = 0; b < kn; b++)
		for (int u = 0; u < nq; u++)
			memcpy(rec + (long)(((u / group) * kn + b) * group + u % group) * R, acc + (long)(b * nq + u) * hd, (size_t)hd * sizeof(float));
}

#define AVX512F __attribute__((target("avx2,fma,f16c,avx512f")))

// The 512-bit twins of ld8, score_heads, score_block and wsum_heads, for
// head widths that are multiples of 16 where the CPU has AVX-512: sixteen
// dims a multiply-add where the AVX2 kernels do eight. A dot product's
// sixteen lanes are added half onto half and then summed as hsum8 sums
// eight, so every row's scores are computed the same way whatever the
// batch (this kernel serves every batch size on such a CPU).
AVX512F static AI __m512 ld16(const void *p, long i, int f16) {
	if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
	return _mm512_loadu_ps((const float *)p + i);
}

AVX512F static AI __m256 fold16(__m512 v) {
	return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

AVX512F static AI void score_heads16(float *sc, int stride, const float *q, int hd, const void *k, long k0, int kvd, const uint8_t *row,
                                     int from, int limit, float scale, int gn, int f16) {
	for (int j = from; j < limit; j++) {
		if (row && !row[j]) {
			for (int u = 0; u < gn; u++) sc[(long)u * stride + j] = -INFINITY;
			continue;
		}
		long kj = k0 + (long)j * kvd;
		__m512 acc[4], kv0 = ld16(k, kj, f16);
		for (int u = 0; u < gn; u++) acc[u] = _mm512_mul_ps(_mm512_loadu_ps(q + (long)u * hd), kv0);
		for (int t = 16; t < hd; t += 16) {
			__m512 kt = ld16(k, kj + t, f16);
			for (int u = 0; u < gn; u++) acc[u] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (long)u * hd + t), kt, acc[u]);
		}
		for (int u = 0; u < gn; u++) sc[(long)u * stride + j] = hsum8(fold16(acc[u])) * scale;
	}
}

AVX512F static AI void score_block16(float *sc, long stride, const float *const q[2], int nq, int hd, const void *k, long k0, int kvd,
                                     int j0, float scale, int f16) {
	__m512 acc[2][4];
	long kj = k0 + (long)j0 * kvd;
	for (int t = 0; t < hd; t += 16) {
		__m512 qt[2];
		for (int u = 0; u < nq; u++) qt[u] = _mm512_loadu_ps(q[u] + t);
		for (int s = 0; s < 4; s++) {
			__m512 ks = ld16(k, kj + (long)s * kvd + t, f16);
			for (int u = 0; u < nq; u++) acc[u][s] = t ? _mm512_fmadd_ps(qt[u], ks, acc[u][s]) : _mm512_mul_ps(qt[u], ks);
		}
	}
	__m128 vs = _mm_set1_ps(scale);
	for (int u = 0; u < nq; u++) {
		__m256 f[4] = {fold16(acc[u][0]), fold16(acc[u][1]), fold16(acc[u][2]), fold16(acc[u][3])};
		_mm_storeu_ps(sc + (long)u * stride + j0, _mm_mul_ps(hsum8x4(f), vs));
	}
}

// wsum_set16 sets acc[k*tn + c] (k < kn, c < tn) to the sum over slots
// from <= j < limit of w[k*stride + j*jstride] * v[j*kvd + 16c .. +16]:
// kn query vectors' weighted sums of tn vectors of dims, in one pass over
// the slots that reads each value row's dims once for all of them. A
// weight of 0 adds nothing (hidden and unseen slots hold 0), so each sum
// is the one the query vector alone would get.
AVX512F static AI void wsum_set16(__m512 *acc, const float *w, int stride, int jstride, const void *v, long v0, int kvd, int from, int limit,
                                  int kn, int tn, int f16, int ahead) {
	__m512 a[16];
	for (int k = 0; k < kn * tn; k++) a[k] = _mm512_setzero_ps();
	int span = f16 ? 2 : 4;
	for (int j = from; j < limit; j++) {
		if (ahead) // as ATTN_SCORES requests the keys
			for (int pf = 0; pf < 16 * tn * span; pf += 64) _mm_prefetch((const char *)v + (v0 + (long)(j + 48) * kvd) * span + pf, _MM_HINT_T0);
		__m512 vj[8];
		for (int c = 0; c < tn; c++) vj[c] = ld16(v, v0 + (long)j * kvd + 16 * c, f16);
		for (int k = 0; k < kn; k++) {
			__m512 p = _mm512_set1_ps(w[(long)k * stride + (long)j * jstride]);
			for (int c = 0; c < tn; c++) a[k * tn + c] = _mm512_fmadd_ps(p, vj[c], a[k * tn + c]);
		}
	}
	for (int k = 0; k < kn * tn; k++) acc[k] = a[k];
}

ATTN_SCORES(attn_scores16, AVX512F, score_block16, score_heads16)

// attention_avx512 is attention_avx2 on 512-bit vectors, for head widths
// that are multiples of 16: the same blocks, weights and order of slots,
// sixteen dims a vector.
AVX512F static AI void attention_avx512(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                        int group, int hd, int kvd, int qd, int kh, int i0, int i1, const int32_t *lo0,
                                        const int32_t *hi0, float scale, int ahead, float *scores) {
	int nr = i1 - i0, lo[16], hi[16], js, jn = block_rows(lo0, hi0, nr, lo, hi, &js), R = arb_attn_rec(hd);
	if (jn < 0) return;
	int tp = (jn + 7) & ~7, nq = nr * group;
	long k0 = (long)js * kvd + (long)kh * hd;
	const uint8_t *m0 = mask ? mask + (long)i0 * total + js : NULL;
	float mx[256];
	double sm[256]; // nq <= 256: attention_mode checks
	// the weight of vector u and slot j at scores[u*ws + j*wj]: a row
	// each, or (attn16.c's kernel, for enough vectors) a slot each
	long ws = tp, wj = 1;
	if (nq < ARB_LANES16_MIN ||
	    arb_lanes16_weights(scores, mx, sm, scores + 16L * tp, (uint32_t *)(scores + 16L * tp + 16L * hd), q, at(kc, k0, f16), f16, m0,
	                        total, group, hd, kvd, qd, kh, i0, i1, lo, hi, jn, scale) != 0)
		attn_scores16(scores, mx, sm, q, kc, k0, f16, m0, total, group, hd, kvd, qd, kh, i0, i1, lo, hi, jn, tp, scale, ahead);
	else
		ws = 1, wj = 16;
	// the weighted sums of the values: up to eight query vectors and
	// 16 / (their number) vectors of dims (at most 8) a pass over the
	// slots, so a value row's dims are read once for all the block's
	// rows and heads, and a decode step (one to four vectors) reads
	// each value row once rather than once for every 32 dims (each
	// row a page apart in a long cache: 32 heads of 128 over 32 at
	// 2000 cached read their values four times over)
	int vn = nq < 8 ? nq : 8, tw = 16 / vn < 8 ? 16 / vn : 8;
	ahead = attn_ahead(nq, ahead);
	for (int u0 = 0; u0 < nq; u0 += 8) {
		int kn = nq - u0 < 8 ? nq - u0 : 8, from = jn, last = 0; // the slots these vectors see
		for (int r = u0 / group; r <= (u0 + kn - 1) / group; r++)
			if (hi[r] > lo[r]) {
				if (lo[r] < from) from = lo[r];
				if (hi[r] > last) last = hi[r];
			}
		for (int t0 = 0; t0 < hd; t0 += 16 * tw) {
			int tn = (hd - t0) / 16 < tw ? (hd - t0) / 16 : tw;
			__m512 acc[16];
			const float *w = scores + (long)u0 * ws;
			long v = k0 + t0;
			// one loop per shape, so the accumulators stay in registers
#define WSUM16(KN, TN) \
	case (KN) * 16 + (TN): wsum_set16(acc, w, ws, wj, vc, v, kvd, from, last, KN, TN, f16, ahead); break;
			switch (kn * 16 + tn) {
			WSUM16(8, 2) WSUM16(8, 1)
			WSUM16(7, 2) WSUM16(7, 1)
			WSUM16(6, 2) WSUM16(6, 1)
			WSUM16(5, 3) WSUM16(5, 2) WSUM16(5, 1)
			WSUM16(4, 4) WSUM16(4, 3) WSUM16(4, 2) WSUM16(4, 1)
			WSUM16(3, 5) WSUM16(3, 4) WSUM16(3, 3) WSUM16(3, 2) WSUM16(3, 1)
			WSUM16(2, 8) WSUM16(2, 7) WSUM16(2, 6) WSUM16(2, 5) WSUM16(2, 4) WSUM16(2, 3) WSUM16(2, 2) WSUM16(2, 1)
			WSUM16(1, 8) WSUM16(1, 7) WSUM16(1, 6) WSUM16(1, 5) WSUM16(1, 4) WSUM16(1, 3) WSUM16(1, 2)
			default: wsum_set16(acc, w, ws, wj, vc, v, kvd, from, last, 1, 1, f16, ahead); break;
			}
#undef WSUM16
			for (int k = 0; k < kn; k++) {
				float *o = rec + (long)(u0 + k) * R + t0;
				for (int c = 0; c < tn; c++) _mm512_storeu_ps(o + 16 * c, acc[k * tn + c]);
			}
		}
	}
	for (int u = 0; u < nq; u++) rec_set(rec + (long)u * R, hd, mx[u], sm[u]);
	blind_rows(rec, lo, hi, nr, group, hd);
}

// score4x4 writes, for four query vectors qp[u] (hd values, a multiple
// of 16) and the four slots from kj (keys kvd elements apart),
// sc[u*stride + s] = q_u . k_s * scale for u < nu: each dot product is
// score_block16's (lane m the product of dims m, then a multiply-add for
// each dims t+m; then lanes m and m+8 added, m and m+4, 0+2 and 1+3, and
// those two), but the sixteen of them reduce together, lane positions
// exchanged between vectors (fifteen vertical additions in all, where
// one product alone takes four horizontal ones), and each key row is
// widened once for the four queries.
AVX512F static AI void score4x4(float *sc, long stride, const float *const qp[4], int nu, int hd, const void *k, long kj, int kvd,
                                float scale, int f16) {
	__m512 A[16]; // A[4u + s]: query u, slot s
	for (int s = 0; s < 4; s++) {
		__m512 ks = ld16(k, kj + (long)s * kvd, f16);
		for (int u = 0; u < 4; u++) A[4 * u + s] = _mm512_mul_ps(_mm512_loadu_ps(qp[u]), ks);
	}
	for (int t = 16; t < hd; t += 16)
		for (int s = 0; s < 4; s++) {
			__m512 ks = ld16(k, kj + (long)s * kvd + t, f16);
			for (int u = 0; u < 4; u++) A[4 * u + s] = _mm512_fmadd_ps(_mm512_loadu_ps(qp[u] + t), ks, A[4 * u + s]);
		}
	// lanes m + m+8: W[p] holds vector 2p's eight sums, then 2p+1's
	__m512 W[8];
	for (int p = 0; p < 8; p++)
		W[p] = _mm512_add_ps(_mm512_shuffle_f32x4(A[2 * p], A[2 * p + 1], 0x44), _mm512_shuffle_f32x4(A[2 * p], A[2 * p + 1], 0xee));
	// m + m+4: Z[r]'s quarters hold vectors 4r .. 4r+3
	__m512 Z[4];
	for (int r = 0; r < 4; r++)
		Z[r] = _mm512_add_ps(_mm512_shuffle_f32x4(W[2 * r], W[2 * r + 1], 0x88), _mm512_shuffle_f32x4(W[2 * r], W[2 * r + 1], 0xdd));
	// 0+2 and 1+3: D[k]'s quarter x holds vector 8k+x's two, then 8k+4+x's
	__m512 D[2];
	for (int x = 0; x < 2; x++)
		D[x] = _mm512_add_ps(_mm512_shuffle_ps(Z[2 * x], Z[2 * x + 1], 0x44), _mm512_shuffle_ps(Z[2 * x], Z[2 * x + 1], 0xee));
	// the last addition: lane 4x + y is vector 4y + x's sum (query y, slot x)
	__m512 E = _mm512_add_ps(_mm512_shuffle_ps(D[0], D[1], 0x88), _mm512_shuffle_ps(D[0], D[1], 0xdd));
	E = _mm512_mul_ps(E, _mm512_set1_ps(scale));
	E = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), E); // lane 4u + s
	_mm_storeu_ps(sc, _mm512_castps512_ps128(E));
	if (nu > 1) _mm_storeu_ps(sc + stride, _mm512_extractf32x4_ps(E, 1));
	if (nu > 2) _mm_storeu_ps(sc + 2 * stride, _mm512_extractf32x4_ps(E, 2));
	if (nu > 3) _mm_storeu_ps(sc + 3 * stride, _mm512_extractf32x4_ps(E, 3));
}

// wsum_add16 is wsum_set16 continuing the sums in accm (vector k's dims
// 16c .. 16c+15 at accm + k*astride + 16c): the same multiply-adds in the
// same order of slots, so summing a vector's slots block by block gives
// the bits of one pass over them. Where pf > 0 it asks, with each slot j,
// for the same dims of slot j + pf (below pfend) into the first level of
// cache: one row's lines at a time between the products, where a block's
// worth asked at once stalls the loads that follow it.
AVX512F static AI void wsum_add16(float *accm, int astride, const float *w, int stride, const void *v, long v0, int kvd, int from,
                                  int limit, int kn, int tn, int f16, int pf, int pfend) {
	__m512 a[16];
	int span = f16 ? 2 : 4;
	for (int k = 0; k < kn; k++)
		for (int c = 0; c < tn; c++) a[k * tn + c] = _mm512_loadu_ps(accm + (long)k * astride + 16 * c);
	for (int j = from; j < limit; j++) {
		if (pf > 0 && j + pf < pfend)
			for (int b = 0; b < tn * 16 * span; b += 64) _mm_prefetch((const char *)v + (v0 + (long)(j + pf) * kvd) * span + b, _MM_HINT_T0);
		__m512 vj[8];
		for (int c = 0; c < tn; c++) vj[c] = ld16(v, v0 + (long)j * kvd + 16 * c, f16);
		for (int k = 0; k < kn; k++) {
			__m512 p = _mm512_set1_ps(w[(long)k * stride + j]);
			for (int c = 0; c < tn; c++) a[k * tn + c] = _mm512_fmadd_ps(p, vj[c], a[k * tn + c]);
		}
	}
	for (int k = 0; k < kn; k++)
		for (int c = 0; c < tn; c++) _mm512_storeu_ps(accm + (long)k * astride + 16 * c, a[k * tn + c]);
}

// weights16 is weights (no pow2) sixteen slots a vector: the same
// maximum, the same exponentials lane for lane (exp16_masked), and the
// same sum, slot j into partial sum j mod 8 in slot order and the eight
// combined as softmax_sum combines them, so the same bits in half the
// instructions.
AVX512F static AI void weights16(float *sc, float *rec, const uint8_t *row, int lo, int hi, int tp) {
	if (hi <= lo) {
		memset(sc, 0, (size_t)tp * sizeof(float));
		rec_set(rec, 0, -INFINITY, 0);
		return;
	}
	for (int j = 0; j < lo; j++) sc[j] = -INFINITY;
	if (row) mask_scores(sc, row, lo, hi);
	const __m512 ninf = _mm512_set1_ps(-INFINITY);
	__m512 m = ninf;
	int j = 0;
	for (; j + 16 <= hi; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(sc + j));
	__mmask16 tail = (__mmask16)((1u << (hi - j)) - 1);
	m = _mm512_max_ps(m, _mm512_mask_loadu_ps(ninf, tail, sc + j));
	float maxs = _mm512_reduce_max_ps(m);
	if (maxs == -INFINITY) {
		memset(sc, 0, (size_t)tp * sizeof(float));
		rec_set(rec, 0, -INFINITY, 0);
		return;
	}
	__m512 vmax = _mm512_set1_ps(maxs);
	__m512d p = _mm512_setzero_pd(); // lane m: the slots j mod 8 = m
	for (j = 0; j + 16 <= hi; j += 16) {
		__m512 e = exp16_masked(_mm512_sub_ps(_mm512_loadu_ps(sc + j), vmax));
		_mm512_storeu_ps(sc + j, e);
		p = _mm512_add_pd(p, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		p = _mm512_add_pd(p, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
	}
	if (j < hi) { // the last few, -inf (weight 0) past hi
		__m512 e = exp16_masked(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, tail, sc + j), vmax));
		_mm512_mask_storeu_ps(sc + j, tail, e);
		p = _mm512_add_pd(p, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		if (hi - j > 8) p = _mm512_add_pd(p, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
	}
	double sd[8];
	_mm512_storeu_pd(sd, p);
	double s = ((sd[0] + sd[4]) + (sd[1] + sd[5])) + ((sd[2] + sd[6]) + (sd[3] + sd[7]));
	for (j = hi; j < tp; j++) sc[j] = 0;
	rec_set(rec, 0, maxs, s);
}

// attention_heads512 is attention_avx512 for a block of few query
// vectors (rows i0..i1-1 times the group of heads that share a kv head,
// at most 8: a decode step) over kv heads kh0..kh0+kn-1 at once: its
// records, row r's head (kh0 + b)*group + g's at rec[(r*kn*group +
// b*group + g) * rec]. A decode step's keys and values of one kv head
// are a head's width in every cache row (128 bytes of 1 KiB in
// llama-3.2-1b), which read head by head came from memory at half the
// rate of a whole row's; here four slots are scored for every kv head of
// the block before the next four (score4x4), and the values are summed
// HEADS_SLOTS slots at a time for every kv head, so the task reads its
// rows' span of the cache in order. Each score, weight and sum is the
// same arithmetic as attention_avx512's (score_block16's, weights',
// wsum_set16's), so a row's record does not depend on which kernel
// computed it.
AVX512F static AI void attention_heads512(float *rec, const float *q, const void *kc, const void *vc, int f16, int total,
                                          const uint8_t *mask, int group, int hd, int kvd, int qd, int kh0, int kn, int i0, int i1,
                                          const int32_t *lo0, const int32_t *hi0, float scale, int ahead, float *scratch) {
	int nr = i1 - i0, lo[16], hi[16], js, jn = block_rows(lo0, hi0, nr, lo, hi, &js), R = arb_attn_rec(hd), nq = nr * group;
	if (jn < 0) return;
	int tp = (jn + 15) & ~15, span = f16 ? 2 : 4, jb = jn / 4 * 4;
	long k0 = (long)js * kvd + (long)kh0 * hd;
	// the scratch: vector u of kv head b's weights at S + (b*nq + u)*tp,
	// then its value sums at acc + (b*nq + u)*hd
	float *S = scratch, *acc = S + (long)kn * nq * tp;
	const float *qp[8];
	for (int u = 0; u < nq; u++) qp[u] = q + (long)(i0 + u / group) * qd + (long)(kh0 * group + u % group) * hd;
	for (int u = nq; u < 8; u++) qp[u] = qp[nq - 1];
	for (int j0 = 0; j0 < jb; j0 += 4) {
		for (int b = 0; b < kn; b++) {
			if (ahead) // kv head b's keys 16 slots on, a head at a time between the products
				for (int x = 16; x < 20; x++)
					for (int pf = 0; pf < hd * span; pf += 64)
						_mm_prefetch((const char *)kc + (k0 + (long)(j0 + x) * kvd + (long)b * hd) * span + pf, _MM_HINT_T0);
			for (int u0 = 0; u0 < nq; u0 += 4) {
				const float *qb[4] = {qp[u0], qp[u0 + 1], qp[u0 + 2], qp[u0 + 3]};
				for (int x = 0; x < 4; x++) qb[x] += (long)b * group * hd;
				score4x4(S + (long)(b * nq + u0) * tp + j0, tp, qb, nq - u0, hd, kc, k0 + (long)b * hd + (long)j0 * kvd, kvd, scale, f16);
			}
		}
	}
	for (int b = 0; b < kn; b++) {
		long kb = k0 + (long)b * hd;
		for (int i = i0; i < i1; i++) {
			const uint8_t *row = mask ? mask + (long)i * total + js : NULL;
			int l = lo[i - i0], h = hi[i - i0];
			for (int g = 0; g < group; g++) {
				int u = (i - i0) * group + g;
				float *sc = S + (long)(b * nq + u) * tp, r[4];
				const float *qv = q + (long)i * qd + (long)((kh0 + b) * group + g) * hd;
				if (h > jb) score_heads16(sc, tp, qv, hd, kc, kb, kvd, row, jb > l ? jb : l, h, scale, 1, f16); // the last few slots
				weights16(sc, r, row, l, h, tp);
				float *o = rec + (long)(((i - i0) * kn + b) * group + g) * R;
				rec_set(o, hd, rec_m(r, 0), rec_s(r, 0));
				memset(acc + (long)(b * nq + u) * hd, 0, (size_t)hd * sizeof(float));
			}
		}
	}
	// the weighted sums of the values, HEADS_SLOTS slots a kv head at a
	// time; vectors and dims in passes as attention_avx512 takes them
	// (the first vectors of each kv head ask for the next block's rows)
	int vn = nq < 8 ? nq : 8, tw = 16 / vn < 8 ? 16 / vn : 8, from = jn, last = 0;
	for (int r = 0; r < nr; r++)
		if (hi[r] > lo[r]) {
			if (lo[r] < from) from = lo[r];
			if (hi[r] > last) last = hi[r];
		}
	for (int j0 = from; j0 < last; j0 += HEADS_SLOTS) {
		int j1 = j0 + HEADS_SLOTS < last ? j0 + HEADS_SLOTS : last;
		for (int b = 0; b < kn; b++)
			for (int u0 = 0; u0 < nq; u0 += 8) {
				int kq = nq - u0 < 8 ? nq - u0 : 8;
				for (int t0 = 0; t0 < hd; t0 += 16 * tw) {
					int tn = (hd - t0) / 16 < tw ? (hd - t0) / 16 : tw;
					const float *w = S + (long)(b * nq + u0) * tp;
					float *am = acc + (long)(b * nq + u0) * hd + t0;
					long v = k0 + (long)b * hd + t0;
					int pf = ahead && u0 == 0 ? HEADS_SLOTS : 0;
#define WADD16(KN, TN) \
	case (KN) * 16 + (TN): wsum_add16(am, hd, w, tp, vc, v, kvd, j0, j1, KN, TN, f16, pf, jn); break;
					switch (kq * 16 + tn) {
					WADD16(8, 2) WADD16(8, 1)
					WADD16(7, 2) WADD16(7, 1)
					WADD16(6, 2) WADD16(6, 1)
					WADD16(5, 3) WADD16(5, 2) WADD16(5, 1)
					WADD16(4, 4) WADD16(4, 3) WADD16(4, 2) WADD16(4, 1)
					WADD16(3, 5) WADD16(3, 4) WADD16(3, 3) WADD16(3, 2) WADD16(3, 1)
					WADD16(2, 8) WADD16(2, 7) WADD16(2, 6) WADD16(2, 5) WADD16(2, 4) WADD16(2, 3) WADD16(2, 2) WADD16(2, 1)
					WADD16(1, 8) WADD16(1, 7) WADD16(1, 6) WADD16(1, 5) WADD16(1, 4) WADD16(1, 3) WADD16(1, 2)
					default: wsum_add16(am, hd, w, tp, vc, v, kvd, j0, j1, 1, 1, f16, pf, jn); break;
					}
#undef WADD16
				}
			}
	}
	for (int b = 0; b < kn; b++)
		for (int u = 0; u < nq; u++)
			memcpy(rec + (long)(((u / group) * kn + b) * group + u % group) * R, acc + (long)(b * nq + u) * hd, (size_t)hd * sizeof(float));
	for (int b = 0; b < kn; b++) // the rows that see nothing here
		for (int r = 0; r < nr; r++)
			if (hi[r] <= lo[r])
				for (int g = 0; g < group; g++) {
					float *o = rec + (long)((r * kn + b) * group + g) * R;
					memset(o, 0, (size_t)hd * sizeof(float));
					rec_set(o, hd, -INFINITY, 0);
				}
}

// One compiled copy of each kernel per cache type.
#define PER_TYPE(NAME, TARGET, KERNEL, PARAMS, ARGS0, ARGS1)                                                                   \
	TARGET static void NAME##_f32 PARAMS { KERNEL ARGS0; }                                                                    \
	TARGET static void NAME##_f16 PARAMS { KERNEL ARGS1; }
PER_TYPE(attention_hd8, AVX2, attention_hd8,
         (float *rec, const float *q, const void *kc, const void *vc, int total, const uint8_t *mask, int heads, int kv_heads, float scale,
          int kh0, int kn, int i0, int i1, const int32_t *lo, const int32_t *hi, float *scores),
         (rec, q, kc, vc, 0, total, mask, heads, kv_heads, scale, kh0, kn, i0, i1, lo, hi, scores),
         (rec, q, kc, vc, 1, total, mask, heads, kv_heads, scale, kh0, kn, i0, i1, lo, hi, scores))
PER_TYPE(attention_avx2, AVX2, attention_avx2,
         (float *rec, const float *q, const void *kc, const void *vc, int total, const uint8_t *mask, int group, int hd, int kvd, int qd,
          int kh, int i0, int i1, const int32_t *lo, const int32_t *hi, float scale, int ahead, float *scores),
         (rec, q, kc, vc, 0, total, mask, group, hd, kvd, qd, kh, i0, i1, lo, hi, scale, ahead, scores),
         (rec, q, kc, vc, 1, total, mask, group, hd, kvd, qd, kh, i0, i1, lo, hi, scale, ahead, scores))
PER_TYPE(attention_heads_avx2, AVX2, attention_heads_avx2,
         (float *rec, const float *q, const void *kc, const void *vc, int total, const uint8_t *mask, int group, int hd, int kvd, int qd,
          int kh0, int kn, int i0, int i1, const int32_t *lo, const int32_t *hi, float scale, int ahead, float *scratch),
         (rec, q, kc, vc, 0, total, mask, group, hd, kvd, qd, kh0, kn, i0, i1, lo, hi, scale, ahead, scratch),
         (rec, q, kc, vc, 1, total, mask, group, hd, kvd, qd, kh0, kn, i0, i1, lo, hi, scale, ahead, scratch))
PER_TYPE(attention_heads512, AVX512F, attention_heads512,
         (float *rec, const float *q, const void *kc, const void *vc, int total, const uint8_t *mask, int group, int hd, int kvd, int qd,
          int kh0, int kn, int i0, int i1, const int32_t *lo, const int32_t *hi, float scale, int ahead, float *scratch),
         (rec, q, kc, vc, 0, total, mask, group, hd, kvd, qd, kh0, kn, i0, i1, lo, hi, scale, ahead, scratch),
         (rec, q, kc, vc, 1, total, mask, group, hd, kvd, qd, kh0, kn, i0, i1, lo, hi, scale, ahead, scratch))
PER_TYPE(attention_avx512, AVX512F, attention_avx512,
         (float *rec, const float *q, const void *kc, const void *vc, int total, const uint8_t *mask, int group, int hd, int kvd, int qd,
          int kh, int i0, int i1, const int32_t *lo, const int32_t *hi, float scale, int ahead, float *scores),
         (rec, q, kc, vc, 0, total, mask, group, hd, kvd, qd, kh, i0, i1, lo, hi, scale, ahead, scores),
         (rec, q, kc, vc, 1, total, mask, group, hd, kvd, qd, kh, i0, i1, lo, hi, scale, ahead, scores))
#endif

// ---- the portable loop ----

// kv_at reads element i of a KV cache layer, float32 or float16.
static AI float kv_at(const void *p, long i, int f16) { return f16 ? arb_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i]; }

// vector_portable is the record of one query vector qv (hd values) over
// slots lo..hi-1 of the cache layer from element kv (its kv head) on, row
// its mask or NULL, for any CPU; f16 is a constant in each caller.
static AI void vector_portable(float *rec, const float *qv, const void *kc, const void *vc, int f16, const uint8_t *row, int lo, int hi,
                               int kvd, long kv, int hd, float scale, float *scores) {
	float maxs = -INFINITY;
	for (int t = 0; t < hd; t++) rec[t] = 0;
	for (int j = lo; j < hi; j++) {
		if (row && !row[j]) continue;
		long o = (long)j * kvd + kv;
		float d = 0;
		for (int t = 0; t < hd; t++) d += qv[t] * kv_at(kc, o + t, f16);
		d *= scale;
		scores[j - lo] = d;
		if (d > maxs) maxs = d;
	}
	if (maxs == -INFINITY) {
		rec_set(rec, hd, -INFINITY, 0);
		return;
	}
	double sum = 0;
	for (int j = lo; j < hi; j++) {
		if (row && !row[j]) continue;
		float e = expf(scores[j - lo] - maxs);
		long o = (long)j * kvd + kv;
		for (int t = 0; t < hd; t++) rec[t] += e * kv_at(vc, o + t, f16);
		sum += e;
	}
	rec_set(rec, hd, maxs, sum);
}

static void vector_portable_f32(float *rec, const float *qv, const void *kc, const void *vc, const uint8_t *row, int lo, int hi, int kvd,
                                long kv, int hd, float scale, float *scores) {
	vector_portable(rec, qv, kc, vc, 0, row, lo, hi, kvd, kv, hd, scale, scores);
}

static void vector_portable_f16(float *rec, const float *qv, const void *kc, const void *vc, const uint8_t *row, int lo, int hi, int kvd,
                                long kv, int hd, float scale, float *scores) {
	vector_portable(rec, qv, kc, vc, 1, row, lo, hi, kvd, kv, hd, scale, scores);
}

// ---- the plan and the tasks ----

// attention_mode is 4 for attention_avx512 (head widths that are
// multiples of 16, on AVX-512; the plan makes it 5, attention_heads512,
// for a decode step's few query vectors a kv head), 3 for attn16.c's lanes kernel (heads of 8,
// many query vectors a kv head, on AVX-512), 2 for attention_hd8 (heads
// of 8), 1 for attention_avx2 (other multiples of 8; the plan makes it 6,
// attention_heads_avx2, for a decode step's), 0 for the portable loop.
static int attention_mode(int n, int hd, int heads, int kv_heads) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_lanes_block(n, heads, kv_heads, hd)) return 3;
	if (arb_simd_level() >= 1 && hd == 8) return 2;
	if (arb_simd_level() >= 2 && hd % 16 == 0 && heads / kv_heads <= 256) return 4;
	if (arb_simd_level() >= 1 && hd % 8 == 0 && heads / kv_heads <= 256) return 1;
#endif
	(void)n; (void)heads; (void)kv_heads;
	return 0;
}

// heads_block is how many kv heads a task of attention_heads512 (or
// attention_heads_avx2) takes:
// all of them where the chunks alone give each thread two tasks (a
// decode step after 4096 cached tokens of 512-slot chunks on two
// threads: each task then reads whole cache rows, in order), else the
// most that still do, halving.
static int heads_block(int nch, int kv_heads, int threads) {
	int kb = kv_heads;
	while (kb > 1 && (long)(kv_heads + kb - 1) / kb * nch < 2L * threads) kb = (kb + 1) / 2;
	return kb;
}

// attn_groups is how many groups of rows the plan's tasks take.
static AI int attn_groups(const arb_attn_args *a) { return (a->n + a->rows - 1) / a->rows; }

// block_scratch is the floats of scratch a block of the plan's kernel
// needs over tp slots (its scores and what goes with them).
static long block_scratch(const arb_attn_args *a, long tp) {
	int group = a->heads / a->kv_heads;
	switch (a->mode) {
	case 1: return (long)attn_rows(group) * group * tp;
	case 2: return (long)a->kb * a->rows * group * tp;
	case 3: return arb_lanes_scratch((int)tp, arb_lanes_block(a->n, a->heads, a->kv_heads, a->hd));
	case 4: { // a score row a query vector, or attn16.c's 16 lanes a slot, its query vectors and mask words
		long rows = (long)attn_rows(group) * group;
		return (rows > 16 ? rows : 16) * tp + 16L * a->hd + tp;
	}
	case 5: case 6: return (long)a->kb * a->rows * group * (tp + a->hd); // a score row and the value sums a query vector
	}
	return tp;
}

// arb_attention_plan plans a call of the shape in a (f16 .. scale set)
// over mask (NULL: row i sees slots 0..past+i) for threads threads: row
// i's chunks into cnt[i] and bnd[i*stride ..] (stride = a->stride, at
// least (past+n)/chunk + 2 ints a row: the caller sizes them with
// arb_attention_chunk), the kernel, the tasks (returned) and the scratch
// a task needs.
long arb_attention_plan(arb_attn_args *a, const uint8_t *mask, int threads, int32_t *bnd, int32_t *cnt) {
	int past = a->past, n = a->n, total = past + n, hd = a->hd, group = a->heads / a->kv_heads;
	int C = arb_attention_chunk(hd);
	a->mode = attention_mode(n, hd, a->heads, a->kv_heads);
	a->chunk = C;
	a->stride = total / C + 2;
	a->nch = 0;
	for (int i = 0; i < n; i++) {
		int32_t *b = bnd + (long)i * a->stride;
		int k;
		if (mask) k = row_chunks(mask + (long)i * total, total, C, b);
		else {
			int v = past + i + 1;
			k = (v + C - 1) / C;
			for (int c = 0; c < k; c++) b[c] = c * C;
			b[k] = v;
		}
		cnt[i] = k;
		if (k > a->nch) a->nch = k;
	}
	// rows a task: all of a verification pass's, a prefill's in groups;
	// for heads of 8 on AVX2, whose block holds a score row for each of
	// its query vectors, 64 vectors a kv head
	a->rows = n < ATTN_ROWS ? n : ATTN_ROWS;
	if (a->mode == 2 && a->rows * group > 64) a->rows = 64 / group > 0 ? 64 / group : 1;
	if (a->mode == 4 && n * group <= HEADS_VECTORS) a->mode = 5;
	if (a->mode == 1 && n * group <= HEADS_VECTORS) a->mode = 6;
	a->kb = a->mode == 2 ? hd8_kv_block(a->rows, group, a->kv_heads, a->seqs, threads)
	        : a->mode == 5 || a->mode == 6 ? heads_block(a->nch, a->kv_heads, threads)
	                                       : 1;
	long units = (long)(a->kv_heads + a->kb - 1) / a->kb * attn_groups(a);
	long records = (long)n * a->heads * a->nch * arb_attn_rec(hd);
	a->split = a->nch > 1 && units < 2L * threads && records <= (4L << 20);
	a->tasks = a->split ? units * a->nch : units;
	// the most slots a chunk of a group reaches over, from its first
	// rounded down to 8
	int span = 0;
	for (int g = 0; g * a->rows < n; g++) {
		int r0 = g * a->rows, r1 = r0 + a->rows < n ? r0 + a->rows : n;
		for (int c = 0; c < a->nch; c++) {
			int lo = total, hi = 0;
			for (int i = r0; i < r1; i++) {
				if (c >= cnt[i]) continue;
				const int32_t *b = bnd + (long)i * a->stride + c;
				if (b[0] < lo) lo = b[0];
				if (b[1] > hi) hi = b[1];
			}
			if (hi > lo && hi - (lo & ~7) > span) span = hi - (lo & ~7);
		}
	}
	a->span = span;
	a->ahead = total >= 1024;
	a->phase = 0;
	long tp = ((span + 7) & ~7) + 8, nv = (long)a->rows * a->kb * group, R = arb_attn_rec(hd);
	// a task's folded records, a block's records, its rows' chunk bounds,
	// then the block's own scratch
	a->scratch = 2 * nv * R + 2L * a->rows + 16 + block_scratch(a, tp);
	return a->tasks;
}

// arb_attention_records is the floats a split plan stores its records in.
long arb_attention_records(const arb_attn_args *a) { return a->split ? (long)a->n * a->heads * a->nch * arb_attn_rec(a->hd) : 0; }

// blocks computes the records of chunk c of the task's rows r0..r1-1 and
// kv heads kh0..kh0+kn-1 into pr (vector (r, h) at ((r - r0) * kn * group
// + h - kh0 * group) * rec), with the plan's kernel; lo and hi are the
// rows' chunk bounds (empty where a row has no chunk c).
static void blocks(const arb_attn_args *a, float *pr, const float *q, const void *kc, const void *vc, const uint8_t *mask, int kh0, int kn,
                   int r0, int r1, const int32_t *lo, const int32_t *hi, float *ks) {
	int hd = a->hd, heads = a->heads, group = heads / a->kv_heads, kvd = a->kv_heads * hd, qd = heads * hd, total = a->past + a->n;
	int R = arb_attn_rec(hd), f16 = a->f16;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	switch (a->mode) {
	case 1: case 4: {
		int rb = attn_rows(group);
		for (int i0 = r0; i0 < r1; i0 += rb) {
			int i1 = i0 + rb < r1 ? i0 + rb : r1;
			float *rec = pr + (long)(i0 - r0) * group * R;
			if (a->mode == 4)
				(f16 ? attention_avx512_f16 : attention_avx512_f32)(rec, q, kc, vc, total, mask, group, hd, kvd, qd, kh0, i0, i1, lo + (i0 - r0),
				                                                    hi + (i0 - r0), a->scale, a->ahead, ks);
			else
				(f16 ? attention_avx2_f16 : attention_avx2_f32)(rec, q, kc, vc, total, mask, group, hd, kvd, qd, kh0, i0, i1, lo + (i0 - r0),
				                                                hi + (i0 - r0), a->scale, a->ahead, ks);
		}
		return;
	}
	case 5:
		(f16 ? attention_heads512_f16 : attention_heads512_f32)(pr, q, kc, vc, total, mask, group, hd, kvd, qd, kh0, kn, r0, r1, lo, hi, a->scale,
		                                                        a->ahead, ks);
		return;
	case 6:
		(f16 ? attention_heads_avx2_f16 : attention_heads_avx2_f32)(pr, q, kc, vc, total, mask, group, hd, kvd, qd, kh0, kn, r0, r1, lo, hi,
		                                                            a->scale, a->ahead, ks);
		return;
	case 2:
		(f16 ? attention_hd8_f16 : attention_hd8_f32)(pr, q, kc, vc, total, mask, heads, a->kv_heads, a->scale, kh0, kn, r0, r1, lo, hi, ks);
		return;
	case 3: {
		int L = arb_lanes_block(a->n, heads, a->kv_heads, hd);
		for (int u0 = r0 * group; u0 < r1 * group; u0 += L) {
			int u1 = u0 + L < r1 * group ? u0 + L : r1 * group;
			arb_hd8_lanes(pr, q, kc, vc, f16, total, mask, heads, a->kv_heads, a->scale, kh0, u0, u1, r0, lo, hi, L, ks);
		}
		return;
	}
	}
#endif
	(void)kn;
	for (int i = r0; i < r1; i++) {
		if (hi[i - r0] <= lo[i - r0]) continue;
		const uint8_t *row = mask ? mask + (long)i * total : NULL;
		for (int g = 0; g < group; g++) {
			int h = kh0 * group + g;
			(f16 ? vector_portable_f16 : vector_portable_f32)(pr + (long)((i - r0) * group + g) * R, q + (long)i * qd + (long)h * hd, kc, vc,
			                                                  row, lo[i - r0], hi[i - r0], kvd, (long)kh0 * hd, hd, a->scale, ks);
		}
	}
}

// arb_attention runs tasks lo..hi-1 of phase a->phase of the plan a (see
// arb_attention_plan): out gets n rows of heads*hd values, the
// softmax-weighted sums of the cached values (kc, vc: one layer of the
// cache, float32, or float16 when f16) over the slots mask (NULL: causal)
// lets each row see; a row that sees no slot gets zeros. part holds a
// split plan's records (arb_attention_records floats).
void arb_attention(const arb_attn_args *a, float *out, const float *q, const void *kc, const void *vc, const uint8_t *mask,
                   const int32_t *bnd, const int32_t *cnt, float *part, long lo, long hi, float *scratch) {
	int hd = a->hd, heads = a->heads, group = heads / a->kv_heads, nch = a->nch, R = arb_attn_rec(hd), qd = heads * hd;
	int pow2 = a->mode == 2 || a->mode == 3;
	if (a->phase == 1) { // a split plan's records folded: a unit is a row's head
		for (long v = lo; v < hi; v++) {
			int i = (int)(v / heads), k = cnt[i];
			if (k < 2) continue; // its one chunk's task wrote it
			const float *p = part + v * nch * R;
			memcpy(scratch, p, (size_t)R * sizeof(float));
			for (int c = 1; c < k; c++) attn_fold(scratch, p + (long)c * R, hd, pow2);
			attn_final(out + v * hd, scratch, hd);
		}
		return;
	}
	int groups = attn_groups(a), kb = a->kb;
	for (long task = lo; task < hi; task++) {
		long t = task;
		int c0 = 0, c1 = nch;
		if (a->split) c0 = (int)(t % nch), c1 = c0 + 1, t /= nch;
		int g = (int)(t % groups), kh0 = (int)(t / groups) * kb, kn = a->kv_heads - kh0 < kb ? a->kv_heads - kh0 : kb;
		int r0 = g * a->rows, r1 = r0 + a->rows < a->n ? r0 + a->rows : a->n, nr = r1 - r0, hn = kn * group;
		long nv = (long)nr * hn;
		float *st = scratch, *pr = st + (long)a->rows * a->kb * group * R;
		int32_t *rlo = (int32_t *)(pr + (long)a->rows * a->kb * group * R), *rhi = rlo + a->rows;
		float *ks = (float *)(rhi + a->rows) + 16 - (((uintptr_t)(rhi + a->rows) / 4) & 15); // on a cache line
		for (int c = c0; c < c1; c++) {
			int any = 0;
			for (int r = 0; r < nr; r++) {
				const int32_t *b = bnd + (long)(r0 + r) * a->stride + c;
				int live = c < cnt[r0 + r];
				rlo[r] = live ? b[0] : 0, rhi[r] = live ? b[1] : 0;
				any |= live;
			}
			if (!any) break; // nor any later chunk
			blocks(a, pr, q, kc, vc, mask, kh0, kn, r0, r1, rlo, rhi, ks);
			for (int r = 0; r < nr; r++) {
				int k = cnt[r0 + r];
				if (c >= k) continue;
				for (int x = 0; x < hn; x++) {
					long v = (long)(r0 + r) * heads + kh0 * group + x;
					float *p = pr + ((long)r * hn + x) * R, *s = st + ((long)r * hn + x) * R;
					if (a->split) {
						if (k == 1) attn_final(out + v * hd, p, hd);
						else memcpy(part + (v * nch + c) * R, p, (size_t)R * sizeof(float));
					} else if (c == 0) memcpy(s, p, (size_t)R * sizeof(float));
					else attn_fold(s, p, hd, pow2);
				}
			}
		}
		for (int r = 0; r < nr; r++) {
			int k = cnt[r0 + r];
			for (int x = 0; x < hn; x++) {
				float *o = out + (long)(r0 + r) * qd + (long)(kh0 * group + x) * hd;
				if (k == 0) {
					if (c0 == 0) memset(o, 0, (size_t)hd * sizeof(float)); // sees no slot
				} else if (!a->split) attn_final(o, st + ((long)r * hn + x) * R, hd);
			}
		}
		(void)nv;
	}
}
