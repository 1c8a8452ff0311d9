//go:build cgo && !purego

// Elementwise math of the hidden-state drafter's trainer (engine/hidden):
// the softmax of a row of logits and the SiLU gate, 8 at a time with
// exp8_masked (within 2 ulp of expf). The trainer called math.Exp once per
// element, in float64, a tenth of its time. Training only: inference has
// its own softmax and SiLU, with their batch-invariance rules.
#include <math.h>
#include <string.h>
#include "simd.h"
#include "tmath.h"

static double softmax_generic(float *x, int n, double *mean) {
	float mx = -INFINITY;
	for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
	double sum = 0, ez = 0;
	for (int i = 0; i < n; i++) {
		float e = expf(x[i] - mx);
		sum += e;
		ez += (double)e * x[i];
		x[i] = e;
	}
	float inv = (float)(1 / sum);
	for (int i = 0; i < n; i++) x[i] *= inv;
	*mean = ez / sum;
	return mx + log(sum);
}

static void silu_gate_generic(float *s, float *sg, const float *g, const float *u, long n) {
	for (long i = 0; i < n; i++) {
		float v = 1 / (1 + expf(-g[i]));
		sg[i] = v;
		s[i] = g[i] * v * u[i];
	}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "vec8.h"
#define TMATH_AVX2 __attribute__((target("avx2,fma")))

TMATH_AVX2 static inline double hsum_pd(__m256d v) {
	__m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
	return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

TMATH_AVX2 static double softmax_avx2(float *x, int n, double *mean) {
	if (n < 8) return softmax_generic(x, n, mean);
	__m256 vm = _mm256_loadu_ps(x);
	int i = 8;
	for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
	float m8[8], mx;
	_mm256_storeu_ps(m8, vm);
	mx = m8[0];
	for (int k = 1; k < 8; k++) mx = m8[k] > mx ? m8[k] : mx;
	for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
	__m256 vmax = _mm256_set1_ps(mx);
	__m256d s0 = _mm256_setzero_pd(), s1 = s0, z0 = s0, z1 = s0;
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 z = _mm256_loadu_ps(x + i), e = exp8_masked(_mm256_sub_ps(z, vmax));
		_mm256_storeu_ps(x + i, e);
		__m256d el = _mm256_cvtps_pd(_mm256_castps256_ps128(e)), eh = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
		s0 = _mm256_add_pd(s0, el);
		s1 = _mm256_add_pd(s1, eh);
		z0 = _mm256_fmadd_pd(el, _mm256_cvtps_pd(_mm256_castps256_ps128(z)), z0);
		z1 = _mm256_fmadd_pd(eh, _mm256_cvtps_pd(_mm256_extractf128_ps(z, 1)), z1);
	}
	double tail = 0, tailz = 0;
	for (; i < n; i++) { // the last few in scalar (training has no batch-invariance rule)
		float e = expf(x[i] - mx);
		tail += e;
		tailz += (double)e * x[i];
		x[i] = e;
	}
	double sum = hsum_pd(_mm256_add_pd(s0, s1)) + tail, ez = hsum_pd(_mm256_add_pd(z0, z1)) + tailz;
	__m256 inv = _mm256_set1_ps((float)(1 / sum));
	for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
	for (; i < n; i++) x[i] *= (float)(1 / sum);
	*mean = ez / sum;
	return mx + log(sum);
}

TMATH_AVX2 static void silu_gate_avx2(float *s, float *sg, const float *g, const float *u, long n) {
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(g + i);
		__m256 v = _mm256_div_ps(one, _mm256_add_ps(one, exp8_masked(_mm256_sub_ps(zero, x))));
		_mm256_storeu_ps(sg + i, v);
		_mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_mul_ps(x, v), _mm256_loadu_ps(u + i)));
	}
	silu_gate_generic(s + i, sg + i, g + i, u + i, n - i);
}

#define SIMD() (arb_simd_level() >= 1)
#else
#define SIMD() 0
#define softmax_avx2 softmax_generic
#define silu_gate_avx2 silu_gate_generic
#endif

// arb_softmax replaces x[0..n-1] by softmax(x) and returns log sum exp(x);
// mean gets sum softmax(x)_i x_i (a distribution's sum p log p is then
// mean - lse, with no logarithm per entry). Sums in double.
double arb_softmax(float *x, int n, double *mean) {
	if (n <= 0) {
		*mean = 0;
		return -INFINITY;
	}
	return SIMD() ? softmax_avx2(x, n, mean) : softmax_generic(x, n, mean);
}

// arb_silu_gate: sg = sigmoid(g), s = g * sg * u, the SiLU gate with the
// sigmoid kept for the backward pass.
void arb_silu_gate(float *s, float *sg, const float *g, const float *u, long n) {
	if (SIMD()) silu_gate_avx2(s, sg, g, u, n);
	else silu_gate_generic(s, sg, g, u, n);
}
