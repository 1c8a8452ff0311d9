//go:build cgo && !purego

// Causal attention of one query head over the rows of one unrolled level
// of the hidden-state drafter's trainer (engine/hidden), forward and
// backward, so the trainer crosses into C once per head rather than once
// per key row (its heads can be 8 values wide, so a row's work is a few
// dozen vector operations and a cgo call would cost as much).
//
// Query row t of level j reads keys 0..t of level 0 and row t of levels
// 1..j. Level 0's keys and values come transposed for this key/value head
// (kT[d*r0 + key], hd rows of r0 values), so a query's scores are hd
// broadcast multiply-adds along the keys. The extra levels' keys and
// values come packed as ek[(l-1)*R*hd + t*hd + d]. The attention weights
// of row t sit at p + t*(t+1)/2 + t*j: t+1 level-0 weights, then j.
//
// Training only: inference has its own attention kernels, whose order of
// summation is fixed for losslessness; this one makes no such promise.
#include <math.h>
#include <string.h>
#include "simd.h"
#include "tattn.h"
#include "gemm.h"

static inline long rowbase(int t, int j) { return (long)t * (t + 1) / 2 + (long)t * j; }

static float dot_generic(const float *a, const float *b, int n) {
	float s = 0;
	for (int i = 0; i < n; i++) s += a[i] * b[i];
	return s;
}

static void axpy_generic(float *y, float a, const float *x, int n) {
	for (int i = 0; i < n; i++) y[i] += a * x[i];
}

// scores_generic: s[i] = sum_d q[d] * kT[d*r0 + i] for i < n.
static void scores_generic(float *s, const float *q, const float *kT, int r0, int hd, int n) {
	for (int i = 0; i < n; i++) {
		float v = 0;
		for (int d = 0; d < hd; d++) v += q[d] * kT[(long)d * r0 + i];
		s[i] = v;
	}
}

// softmax_generic replaces s[0..n-1] by softmax(scale * s).
static void softmax_generic(float *s, int n, float scale) {
	float mx = -INFINITY;
	for (int i = 0; i < n; i++) {
		s[i] *= scale;
		if (s[i] > mx) mx = s[i];
	}
	float sum = 0;
	for (int i = 0; i < n; i++) {
		s[i] = expf(s[i] - mx);
		sum += s[i];
	}
	float inv = 1 / sum;
	for (int i = 0; i < n; i++) s[i] *= inv;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TATTN_AVX2 __attribute__((target("avx2,fma")))
#include "vec8.h"

TATTN_AVX2 static float dot_avx2(const float *a, const float *b, int n) {
	__m256 acc = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	float s = _mm_cvtss_f32(h);
	for (; i < n; i++) s += a[i] * b[i];
	return s;
}

TATTN_AVX2 static void axpy_avx2(float *y, float a, const float *x, int n) {
	__m256 va = _mm256_set1_ps(a);
	int i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	for (; i < n; i++) y[i] += a * x[i];
}

// tail_mask selects the first n < 8 lanes.
TATTN_AVX2 static inline __m256i tail_mask(int n) {
	static const int lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
	return _mm256_loadu_si256((const __m256i *)(lanes + 8 - n));
}

// dots8_avx2 adds to out[d] (d < 8) the dot products of x[0..n-1] with
// the rows t + d*ld: eight accumulators along the keys and one combined
// reduction at the end, where eight separate dot products paid eight
// horizontal sums a query row.
TATTN_AVX2 static void dots8_avx2(float *out, const float *x, const float *t, long ld, int n) {
	__m256 a[8];
	for (int d = 0; d < 8; d++) a[d] = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 xv = _mm256_loadu_ps(x + i);
		for (int d = 0; d < 8; d++) a[d] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(t + d * ld + i), a[d]);
	}
	__m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
	__m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
	__m256 h0 = _mm256_hadd_ps(h01, h23), h1 = _mm256_hadd_ps(h45, h67);
	__m256 s = _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
	float r[8];
	_mm256_storeu_ps(r, s);
	for (; i < n; i++)
		for (int d = 0; d < 8; d++) r[d] += x[i] * t[d * ld + i];
	for (int d = 0; d < 8; d++) out[d] += r[d];
}

// The blocked AVX2 passes below take the query rows eight at a time
// (QB). A row's scores, and its updates of the keys' and values'
// gradients, were one vector operation per eight keys and channel, so a
// head of width 8 waited on one chain of multiply-adds per score block and
// read and wrote every gradient row once per query row (those two were
// three quarters of the backward pass). Eight rows share each load of a
// key block, each gradient row is read and written once per eight query
// rows, and the eight accumulators are independent. Rows past a block's
// own keys are zero in the block's scratch rows, and keys past R0 are
// masked, so no row reads another's weights and nothing reads past a
// slice.
enum { QB = 8 };

// keys8 loads keys i..i+7 of a channel row of r0 keys, zeros past r0.
TATTN_AVX2 static inline __m256 keys8(const float *row, int i, int r0) {
	int avail = r0 - i;
	if (avail >= 8) return _mm256_loadu_ps(row + i);
	return _mm256_maskload_ps(row + i, tail_mask(avail));
}

// store8 writes v to keys i..i+7 of a channel row of r0 keys, none past r0.
TATTN_AVX2 static inline void store8(float *row, int i, int r0, __m256 v) {
	int avail = r0 - i;
	if (avail >= 8) _mm256_storeu_ps(row + i, v);
	else _mm256_maskstore_ps(row + i, tail_mask(avail), v);
}

// block_scores: S[r*ld + i] = sum_d x[r][d] * t[d*r0 + i] for the QB rows
// x[r] and keys i < nk (nk a multiple of 8, i < r0 for every block). The
// rows' values are first gathered channel by channel, so each broadcast
// is one load at a fixed offset.
TATTN_AVX2 static void block_scores(float *S, int ld, const float *const *x, const float *t, int r0, int hd, int nk) {
	float xb[QB * hd];
	for (int d = 0; d < hd; d++)
		for (int r = 0; r < QB; r++) xb[d * QB + r] = x[r][d];
	for (int i = 0; i < nk; i += 8) {
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
		const float *xd = xb;
		for (int d = 0; d < hd; d++, xd += QB) {
			__m256 k = keys8(t + (long)d * r0, i, r0);
			a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 0), k, a0);
			a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 1), k, a1);
			a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 2), k, a2);
			a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 3), k, a3);
			a4 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 4), k, a4);
			a5 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 5), k, a5);
			a6 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 6), k, a6);
			a7 = _mm256_fmadd_ps(_mm256_broadcast_ss(xd + 7), k, a7);
		}
		_mm256_storeu_ps(S + 0 * ld + i, a0);
		_mm256_storeu_ps(S + 1 * ld + i, a1);
		_mm256_storeu_ps(S + 2 * ld + i, a2);
		_mm256_storeu_ps(S + 3 * ld + i, a3);
		_mm256_storeu_ps(S + 4 * ld + i, a4);
		_mm256_storeu_ps(S + 5 * ld + i, a5);
		_mm256_storeu_ps(S + 6 * ld + i, a6);
		_mm256_storeu_ps(S + 7 * ld + i, a7);
	}
}

// block_update: g[d*r0 + i] += sum_r c[r][d] * W[r*ld + i] for the QB rows
// and keys i < nk: the keys' (or values') gradient rows of channel d, read
// and written once for eight query rows. Channel by channel, so the eight
// coefficients stay in registers and each key block costs eight loads of
// W (in L1) for eight multiply-adds.
TATTN_AVX2 static void block_update(float *g, int r0, int hd, const float *const *c, const float *W, int ld, int nk) {
	const float *w0 = W, *w1 = W + ld, *w2 = W + 2 * ld, *w3 = W + 3 * ld;
	const float *w4 = W + 4 * ld, *w5 = W + 5 * ld, *w6 = W + 6 * ld, *w7 = W + 7 * ld;
	for (int d = 0; d < hd; d++) {
		__m256 c0 = _mm256_set1_ps(c[0][d]), c1 = _mm256_set1_ps(c[1][d]), c2 = _mm256_set1_ps(c[2][d]);
		__m256 c3 = _mm256_set1_ps(c[3][d]), c4 = _mm256_set1_ps(c[4][d]), c5 = _mm256_set1_ps(c[5][d]);
		__m256 c6 = _mm256_set1_ps(c[6][d]), c7 = _mm256_set1_ps(c[7][d]);
		float *row = g + (long)d * r0;
		for (int i = 0; i < nk; i += 8) {
			__m256 u = _mm256_mul_ps(c0, _mm256_loadu_ps(w0 + i));
			__m256 v = _mm256_mul_ps(c1, _mm256_loadu_ps(w1 + i));
			u = _mm256_fmadd_ps(c2, _mm256_loadu_ps(w2 + i), u);
			v = _mm256_fmadd_ps(c3, _mm256_loadu_ps(w3 + i), v);
			u = _mm256_fmadd_ps(c4, _mm256_loadu_ps(w4 + i), u);
			v = _mm256_fmadd_ps(c5, _mm256_loadu_ps(w5 + i), v);
			u = _mm256_fmadd_ps(c6, _mm256_loadu_ps(w6 + i), u);
			v = _mm256_fmadd_ps(c7, _mm256_loadu_ps(w7 + i), v);
			store8(row, i, r0, _mm256_add_ps(keys8(row, i, r0), _mm256_add_ps(u, v)));
		}
	}
}

// pad keeps the first n values of a block row and zeros it up to nk.
static inline void pad(float *row, int n, int nk) { memset(row + n, 0, sizeof(float) * (size_t)(nk - n)); }

// rowdots: out[d] += sum_i w[i] * t[d*r0 + i] for d < hd and keys i < nk
// (nk a multiple of 8; w zero past the row's own keys).
TATTN_AVX2 static void rowdots(float *out, const float *w, const float *t, int r0, int hd, int nk) {
	int d = 0;
	int n = nk < r0 ? nk : r0 / 8 * 8; // whole vectors inside every channel row
	for (; d + 8 <= hd; d += 8) dots8_avx2(out + d, w, t + (long)d * r0, r0, n);
	for (; d < hd; d++) out[d] += dot_avx2(w, t + (long)d * r0, n);
	for (int i = n; i < nk && i < r0; i++)
		for (d = 0; d < hd; d++) out[d] += w[i] * t[(long)d * r0 + i];
}

// block_softmax replaces each of the QB rows S[r*ld + 0..L-1] (L a
// multiple of 8, -inf past a row's own weights) by softmax(scale * row).
// The rows go through each pass side by side: one row's exp polynomial is
// a chain of dependent operations, and a short row alone left the pass
// waiting on it (the softmax was a third of the forward pass).
TATTN_AVX2 static void block_softmax(float *S, int ld, int L, float scale) {
	__m256 vs = _mm256_set1_ps(scale), vm[QB], acc[QB];
	for (int r = 0; r < QB; r++) vm[r] = _mm256_set1_ps(-INFINITY);
	for (int i = 0; i < L; i += 8)
		for (int r = 0; r < QB; r++) {
			float *x = S + (long)r * ld + i;
			__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), vs);
			_mm256_storeu_ps(x, v);
			vm[r] = _mm256_max_ps(vm[r], v);
		}
	for (int r = 0; r < QB; r++) {
		__m256 m = _mm256_max_ps(vm[r], _mm256_permute2f128_ps(vm[r], vm[r], 1));
		m = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0x4e));
		vm[r] = _mm256_max_ps(m, _mm256_shuffle_ps(m, m, 0xb1));
		acc[r] = _mm256_setzero_ps();
	}
	for (int i = 0; i < L; i += 8)
		for (int r = 0; r < QB; r++) {
			float *x = S + (long)r * ld + i;
			__m256 e = exp8_masked(_mm256_sub_ps(_mm256_loadu_ps(x), vm[r])); // -inf gives 0
			_mm256_storeu_ps(x, e);
			acc[r] = _mm256_add_ps(acc[r], e);
		}
	for (int r = 0; r < QB; r++) {
		float a[8];
		_mm256_storeu_ps(a, acc[r]);
		float sum = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
		acc[r] = _mm256_set1_ps(1 / sum);
	}
	for (int i = 0; i < L; i += 8)
		for (int r = 0; r < QB; r++) {
			float *x = S + (long)r * ld + i;
			_mm256_storeu_ps(x, _mm256_mul_ps(_mm256_loadu_ps(x), acc[r]));
		}
}

// tattn_fwd_avx2 is arb_tattn_fwd by blocks of QB query rows; S is
// scratch of QB rows of ld >= R + j rounded up to 8 values.
TATTN_AVX2 static void tattn_fwd_avx2(const float *q, int qs, const float *kT, const float *vT, int r0, int hd,
                                      const float *ek, const float *ev, int j, int R, float scale, float *p, float *o,
                                      int os, float *S, int ld) {
	for (int t0 = 0; t0 < R; t0 += QB) {
		int nr = R - t0 < QB ? R - t0 : QB, nk = (t0 + nr + 7) / 8 * 8, L = (t0 + nr + j + 7) / 8 * 8;
		const float *x[QB];
		for (int r = 0; r < QB; r++) x[r] = q + (long)(t0 + (r < nr ? r : nr - 1)) * qs;
		block_scores(S, ld, x, kT, r0, hd, nk);
		// row t's weights: t+1 scores of level 0's keys, then its j extra
		// levels', then -inf (rows past R: zeros, discarded)
		for (int r = 0; r < QB; r++) {
			float *sr = S + (long)r * ld;
			if (r >= nr) {
				pad(sr, 0, L);
				continue;
			}
			int t = t0 + r;
			for (int l = 1; l <= j; l++) sr[t + l] = dot_avx2(x[r], ek + ((long)(l - 1) * R + t) * hd, hd);
			for (int i = t + 1 + j; i < L; i++) sr[i] = -INFINITY;
		}
		block_softmax(S, ld, L, scale);
		for (int r = 0; r < nr; r++) {
			int t = t0 + r;
			float *pr = p + rowbase(t, j), *sr = S + (long)r * ld, *ov = o + (long)t * os;
			memcpy(pr, sr, sizeof(float) * (size_t)(t + 1 + j));
			pad(sr, t + 1, nk);
			memset(ov, 0, sizeof(float) * (size_t)hd);
			rowdots(ov, sr, vT, r0, hd, nk);
			for (int l = 1; l <= j; l++) axpy_avx2(ov, pr[t + l], ev + ((long)(l - 1) * R + t) * hd, hd);
		}
	}
}

// tattn_bwd_avx2 is arb_tattn_bwd by blocks of QB query rows; DS and PB
// are scratch of QB rows of ld >= R rounded up to 8 values each.
TATTN_AVX2 static void tattn_bwd_avx2(const float *q, int qs, const float *kT, const float *vT, int r0, int hd,
                                      const float *ek, const float *ev, int j, int R, float scale, const float *p,
                                      const float *dout, int ds, float *dq, int dqs, float *dkT, float *dvT,
                                      float *dek, float *dev, float *dp, float *DS, float *PB, int ld) {
	for (int t0 = 0; t0 < R; t0 += QB) {
		int nr = R - t0 < QB ? R - t0 : QB, nk = (t0 + nr + 7) / 8 * 8;
		const float *x[QB], *dov[QB];
		for (int r = 0; r < QB; r++) {
			int t = t0 + (r < nr ? r : nr - 1);
			x[r] = q + (long)t * qs;
			dov[r] = dout + (long)t * ds;
		}
		// dp_i = do . v_i for level 0's keys
		block_scores(DS, ld, dov, vT, r0, hd, nk);
		for (int r = 0; r < QB; r++) {
			float *dsr = DS + (long)r * ld, *pb = PB + (long)r * ld;
			if (r >= nr) { // a row past R: adds nothing
				pad(dsr, 0, nk);
				pad(pb, 0, nk);
				continue;
			}
			int t = t0 + r, n = t + 1 + j;
			const float *pr = p + rowbase(t, j);
			memcpy(dp, dsr, sizeof(float) * (size_t)(t + 1));
			for (int l = 1; l <= j; l++) {
				long e = ((long)(l - 1) * R + t) * hd;
				axpy_avx2(dev + e, pr[t + l], dov[r], hd);
				dp[t + l] = dot_avx2(dov[r], ev + e, hd);
			}
			// the scores' gradient: p_i (dp_i - p . dp) scale
			float c = dot_avx2(pr, dp, n);
			for (int i = 0; i < n; i++) dp[i] = pr[i] * (dp[i] - c) * scale;
			memcpy(dsr, dp, sizeof(float) * (size_t)(t + 1));
			pad(dsr, t + 1, nk);
			memcpy(pb, pr, sizeof(float) * (size_t)(t + 1));
			pad(pb, t + 1, nk);
			// dq += sum_i ds_i k_i
			float *dqv = dq + (long)t * dqs;
			rowdots(dqv, dsr, kT, r0, hd, nk);
			for (int l = 1; l <= j; l++) {
				long e = ((long)(l - 1) * R + t) * hd;
				axpy_avx2(dqv, dp[t + l], ek + e, hd);
				axpy_avx2(dek + e, dp[t + l], x[r], hd);
			}
		}
		// dv_i += sum_r p_ri do_r; dk_i += sum_r ds_ri q_r
		block_update(dvT, r0, hd, dov, PB, ld, nk);
		block_update(dkT, r0, hd, x, DS, ld, nk);
	}
}

#define SIMD() (arb_simd_level() >= 1) /* AVX2+FMA+F16C, unless ARBORIST_SIMD=0 */
#else
#define SIMD() 0
#endif

// arb_tattn_fwd computes, for rows t < R, the attention weights p (softmax
// of the scaled scores) and the output o[t*os + d].
void arb_tattn_fwd(const float *q, int qs, const float *kT, const float *vT, int r0, int hd, const float *ek,
                   const float *ev, int j, int R, float scale, float *p, float *o, int os) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (SIMD()) {
		int ld = (R + j + 7) / 8 * 8;
		float *S = arb_train_scratch(sizeof(float) * (size_t)QB * ld);
		if (S) {
			tattn_fwd_avx2(q, qs, kT, vT, r0, hd, ek, ev, j, R, scale, p, o, os, S, ld);
			return;
		}
	}
#endif
	// portable: a row at a time (also where the scratch cannot be had)
	for (int t = 0; t < R; t++) {
		const float *qv = q + (long)t * qs;
		float *pr = p + rowbase(t, j);
		int n = t + 1 + j;
		scores_generic(pr, qv, kT, r0, hd, t + 1);
		for (int l = 1; l <= j; l++) pr[t + l] = dot_generic(qv, ek + ((long)(l - 1) * R + t) * hd, hd);
		softmax_generic(pr, n, scale);
		float *ov = o + (long)t * os;
		for (int d = 0; d < hd; d++) ov[d] = dot_generic(pr, vT + (long)d * r0, t + 1);
		for (int l = 1; l <= j; l++) axpy_generic(ov, pr[t + l], ev + ((long)(l - 1) * R + t) * hd, hd);
	}
}

// arb_tattn_bwd adds the gradients of the loss through the head's
// attention, given dout (the output's gradient, row stride ds): to dq
// (row stride dqs), to level 0's transposed dkT and dvT, and to the packed
// extra levels' dek and dev. dp is scratch of R + j values.
void arb_tattn_bwd(const float *q, int qs, const float *kT, const float *vT, int r0, int hd, const float *ek,
                   const float *ev, int j, int R, float scale, const float *p, const float *dout, int ds, float *dq,
                   int dqs, float *dkT, float *dvT, float *dek, float *dev, float *dp) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (SIMD()) {
		int ld = (R + 7) / 8 * 8;
		float *DS = arb_train_scratch(sizeof(float) * (size_t)2 * QB * ld);
		if (DS) {
			tattn_bwd_avx2(q, qs, kT, vT, r0, hd, ek, ev, j, R, scale, p, dout, ds, dq, dqs, dkT, dvT, dek, dev, dp, DS,
			               DS + (size_t)QB * ld, ld);
			return;
		}
	}
#endif
	// portable: a row at a time (also where the scratch cannot be had)
	for (int t = 0; t < R; t++) {
		const float *pr = p + rowbase(t, j), *qv = q + (long)t * qs, *dov = dout + (long)t * ds;
		float *dqv = dq + (long)t * dqs;
		int n = t + 1 + j;
		// dp_i = do . v_i; dv_i += p_i do
		scores_generic(dp, dov, vT, r0, hd, t + 1);
		for (int d = 0; d < hd; d++) axpy_generic(dvT + (long)d * r0, dov[d], pr, t + 1);
		for (int l = 1; l <= j; l++) {
			long e = ((long)(l - 1) * R + t) * hd;
			axpy_generic(dev + e, pr[t + l], dov, hd);
			dp[t + l] = dot_generic(dov, ev + e, hd);
		}
		// the scores' gradient: p_i (dp_i - p . dp) scale
		float c = dot_generic(pr, dp, n);
		for (int i = 0; i < n; i++) dp[i] = pr[i] * (dp[i] - c) * scale;
		// dq += sum_i ds_i k_i; dk_i += ds_i q
		for (int d = 0; d < hd; d++) {
			dqv[d] += dot_generic(dp, kT + (long)d * r0, t + 1);
			axpy_generic(dkT + (long)d * r0, qv[d], dp, t + 1);
		}
		for (int l = 1; l <= j; l++) {
			long e = ((long)(l - 1) * R + t) * hd;
			axpy_generic(dqv, dp[t + l], ek + e, hd);
			axpy_generic(dek + e, dp[t + l], qv, hd);
		}
	}
}
