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

TATTN_AVX2 static void scores_avx2(float *s, const float *q, const float *kT, int r0, int hd, int n) {
	int i = 0;
	// four blocks of keys at once: four independent chains of hd
	// multiply-adds (one chain waited on each FMA's latency)
	for (; i + 32 <= n; i += 32) {
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		for (int d = 0; d < hd; d++) {
			__m256 qd = _mm256_set1_ps(q[d]);
			const float *k = kT + (long)d * r0 + i;
			a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k), a0);
			a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + 8), a1);
			a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + 16), a2);
			a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + 24), a3);
		}
		_mm256_storeu_ps(s + i, a0);
		_mm256_storeu_ps(s + i + 8, a1);
		_mm256_storeu_ps(s + i + 16, a2);
		_mm256_storeu_ps(s + i + 24, a3);
	}
	for (; i + 8 <= n; i += 8) {
		__m256 acc = _mm256_setzero_ps();
		for (int d = 0; d < hd; d++) acc = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), _mm256_loadu_ps(kT + (long)d * r0 + i), acc);
		_mm256_storeu_ps(s + i, acc);
	}
	for (; i < n; i++) {
		float v = 0;
		for (int d = 0; d < hd; d++) v += q[d] * kT[(long)d * r0 + i];
		s[i] = v;
	}
}

// softmax_avx2 replaces s[0..n-1] by softmax(scale * s), 8 at a time with
// exp8_masked (the libm expf per weight was a quarter of the pass).
TATTN_AVX2 static void softmax_avx2(float *s, int n, float scale) {
	__m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(-INFINITY);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), vs);
		_mm256_storeu_ps(s + i, x);
		vm = _mm256_max_ps(vm, x);
	}
	float m8[8], mx = -INFINITY;
	_mm256_storeu_ps(m8, vm);
	for (int k = 0; k < 8; k++) mx = m8[k] > mx ? m8[k] : mx;
	for (int k = i; k < n; k++) {
		s[k] *= scale;
		mx = s[k] > mx ? s[k] : mx;
	}
	__m256 vmax = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 e = exp8_masked(_mm256_sub_ps(_mm256_loadu_ps(s + i), vmax));
		_mm256_storeu_ps(s + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	_mm256_storeu_ps(m8, acc);
	float sum = ((m8[0] + m8[4]) + (m8[1] + m8[5])) + ((m8[2] + m8[6]) + (m8[3] + m8[7]));
	for (int k = i; k < n; k++) {
		s[k] = expf(s[k] - mx);
		sum += s[k];
	}
	__m256 inv = _mm256_set1_ps(1 / sum);
	for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), inv));
	for (; i < n; i++) s[i] *= 1 / sum;
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

// axpys8_avx2: rows y + d*ld (d < 8) += a[d] * x[0..n-1], one pass over x.
TATTN_AVX2 static void axpys8_avx2(float *y, long ld, const float *a, const float *x, int n) {
	__m256 av[8];
	for (int d = 0; d < 8; d++) av[d] = _mm256_set1_ps(a[d]);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 xv = _mm256_loadu_ps(x + i);
		for (int d = 0; d < 8; d++) {
			float *yd = y + d * ld + i;
			_mm256_storeu_ps(yd, _mm256_fmadd_ps(av[d], xv, _mm256_loadu_ps(yd)));
		}
	}
	for (; i < n; i++)
		for (int d = 0; d < 8; d++) y[d * ld + i] += a[d] * x[i];
}

#define SIMD() (arb_simd_level() >= 1) /* AVX2+FMA+F16C, unless ARBORIST_SIMD=0 */
#define DOT(simd, a, b, n) ((simd) ? dot_avx2(a, b, n) : dot_generic(a, b, n))
#define AXPY(simd, y, a, x, n) ((simd) ? axpy_avx2(y, a, x, n) : axpy_generic(y, a, x, n))
#define SCORES(simd, s, q, kT, r0, hd, n) ((simd) ? scores_avx2(s, q, kT, r0, hd, n) : scores_generic(s, q, kT, r0, hd, n))
#define SOFTMAX(simd, s, n, scale) ((simd) ? softmax_avx2(s, n, scale) : softmax_generic(s, n, scale))
#else
#define SIMD() 0
#define DOT(simd, a, b, n) dot_generic(a, b, n)
#define AXPY(simd, y, a, x, n) axpy_generic(y, a, x, n)
#define SCORES(simd, s, q, kT, r0, hd, n) scores_generic(s, q, kT, r0, hd, n)
#define SOFTMAX(simd, s, n, scale) softmax_generic(s, n, scale)
#endif

// arb_tattn_fwd computes, for rows t < R, the attention weights p (softmax
// of the scaled scores) and the output o[t*os + d].
void arb_tattn_fwd(const float *q, int qs, const float *kT, const float *vT, int r0, int hd, const float *ek,
                   const float *ev, int j, int R, float scale, float *p, float *o, int os) {
	int simd = SIMD();
	for (int t = 0; t < R; t++) {
		const float *qv = q + (long)t * qs;
		float *pr = p + rowbase(t, j);
		int n = t + 1 + j;
		SCORES(simd, pr, qv, kT, r0, hd, t + 1);
		for (int l = 1; l <= j; l++) pr[t + l] = DOT(simd, qv, ek + ((long)(l - 1) * R + t) * hd, hd);
		SOFTMAX(simd, pr, n, scale);
		float *ov = o + (long)t * os;
		int d = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
		if (simd)
			for (; d + 8 <= hd; d += 8) {
				memset(ov + d, 0, 8 * sizeof(float));
				dots8_avx2(ov + d, pr, vT + (long)d * r0, r0, t + 1);
			}
#endif
		for (; d < hd; d++) ov[d] = DOT(simd, pr, vT + (long)d * r0, t + 1);
		for (int l = 1; l <= j; l++) AXPY(simd, ov, pr[t + l], ev + ((long)(l - 1) * R + t) * hd, hd);
	}
}

// arb_tattn_bwd adds the gradients of the loss through the head's
// attention, given dout (the output's gradient, row stride ds): to dq
// (row stride dqs), to level 0's transposed dkT and dvT, and to the packed
// extra levels' dek and dev. dp is scratch of R + j values.
void arb_tattn_bwd(const float *q, int qs, const float *kT, const float *vT, int r0, int hd, const float *ek,
                   const float *ev, int j, int R, float scale, const float *p, const float *dout, int ds, float *dq,
                   int dqs, float *dkT, float *dvT, float *dek, float *dev, float *dp) {
	int simd = SIMD();
	for (int t = 0; t < R; t++) {
		const float *pr = p + rowbase(t, j), *qv = q + (long)t * qs, *dov = dout + (long)t * ds;
		float *dqv = dq + (long)t * dqs;
		int n = t + 1 + j;
		// dp_i = do . v_i; dv_i += p_i do
		SCORES(simd, dp, dov, vT, r0, hd, t + 1);
		int d0 = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
		if (simd)
			for (; d0 + 8 <= hd; d0 += 8) axpys8_avx2(dvT + (long)d0 * r0, r0, dov + d0, pr, t + 1);
#endif
		for (int d = d0; d < hd; d++) AXPY(simd, dvT + (long)d * r0, dov[d], pr, t + 1);
		for (int l = 1; l <= j; l++) {
			long e = ((long)(l - 1) * R + t) * hd;
			AXPY(simd, dev + e, pr[t + l], dov, hd);
			dp[t + l] = DOT(simd, dov, ev + e, hd);
		}
		// the scores' gradient: p_i (dp_i - p . dp) scale
		float c = DOT(simd, pr, dp, n);
		for (int i = 0; i < n; i++) dp[i] = pr[i] * (dp[i] - c) * scale;
		// dq += sum_i ds_i k_i; dk_i += ds_i q
		d0 = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
		if (simd)
			for (; d0 + 8 <= hd; d0 += 8) {
				dots8_avx2(dqv + d0, dp, kT + (long)d0 * r0, r0, t + 1);
				axpys8_avx2(dkT + (long)d0 * r0, r0, qv + d0, dp, t + 1);
			}
#endif
		for (int d = d0; d < hd; d++) {
			dqv[d] += DOT(simd, dp, kT + (long)d * r0, t + 1);
			AXPY(simd, dkT + (long)d * r0, qv[d], dp, t + 1);
		}
		for (int l = 1; l <= j; l++) {
			long e = ((long)(l - 1) * R + t) * hd;
			AXPY(simd, dqv, dp[t + l], ek + e, hd);
			AXPY(simd, dek + e, dp[t + l], qv, hd);
		}
	}
}
