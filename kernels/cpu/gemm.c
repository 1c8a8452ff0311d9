//go:build cgo && !purego

// A cache-blocked float32 matrix product for training (the hidden-state
// drafter's trainer): C (m x n) = or += A (m x k) · B^T, B stored n x k.
//
// It is NOT used by the forward pass. Inference keeps arb_mm_f32, whose
// every output is one dot product summed in one fixed order whatever the
// batch, because greedy speculative decoding is lossless only when a
// verification row equals the decode row bit for bit. Training has no such
// rule, so this kernel blocks k (KC values at a time, partial sums added
// into C) and computes 3 x 4 outputs per pass over the k block: 7 loads
// feed 12 FMAs, where a dot product needs 2 loads per FMA and so runs at
// half the FMA rate at best.
#include <string.h>
#include "gemm.h"

enum { KC = 256, NB = 96 };

static void tile_generic(const float *A, const float *B, float *C, int i0, int ni, int j0, int nj,
                         int k0, int kc, int k, int ldc, int add) {
	for (int i = i0; i < i0 + ni; i++) {
		for (int j = j0; j < j0 + nj; j++) {
			const float *a = A + (long)i * k + k0, *b = B + (long)j * k + k0;
			float s = 0;
			for (int t = 0; t < kc; t++) s += a[t] * b[t];
			float *c = C + (long)i * ldc + j;
			*c = add ? *c + s : s;
		}
	}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GEMM_AVX2 __attribute__((target("avx2,fma")))

GEMM_AVX2 static inline float hsum(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// tile34 computes the 3 x 4 outputs C[i0..i0+2][j0..j0+3] over k values
// k0..k0+kc-1.
GEMM_AVX2 static void tile34(const float *A, const float *B, float *C, int i0, int j0, int k0, int kc, int k,
                             int ldc, int add) {
	const float *a0 = A + (long)i0 * k + k0, *a1 = a0 + k, *a2 = a1 + k;
	const float *b0 = B + (long)j0 * k + k0, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00;
	__m256 c10 = c00, c11 = c00, c12 = c00, c13 = c00;
	__m256 c20 = c00, c21 = c00, c22 = c00, c23 = c00;
	int t = 0;
	for (; t + 8 <= kc; t += 8) {
		__m256 x0 = _mm256_loadu_ps(a0 + t), x1 = _mm256_loadu_ps(a1 + t), x2 = _mm256_loadu_ps(a2 + t);
		__m256 y = _mm256_loadu_ps(b0 + t);
		c00 = _mm256_fmadd_ps(x0, y, c00); c10 = _mm256_fmadd_ps(x1, y, c10); c20 = _mm256_fmadd_ps(x2, y, c20);
		y = _mm256_loadu_ps(b1 + t);
		c01 = _mm256_fmadd_ps(x0, y, c01); c11 = _mm256_fmadd_ps(x1, y, c11); c21 = _mm256_fmadd_ps(x2, y, c21);
		y = _mm256_loadu_ps(b2 + t);
		c02 = _mm256_fmadd_ps(x0, y, c02); c12 = _mm256_fmadd_ps(x1, y, c12); c22 = _mm256_fmadd_ps(x2, y, c22);
		y = _mm256_loadu_ps(b3 + t);
		c03 = _mm256_fmadd_ps(x0, y, c03); c13 = _mm256_fmadd_ps(x1, y, c13); c23 = _mm256_fmadd_ps(x2, y, c23);
	}
	float s[12] = {hsum(c00), hsum(c01), hsum(c02), hsum(c03), hsum(c10), hsum(c11), hsum(c12), hsum(c13),
	               hsum(c20), hsum(c21), hsum(c22), hsum(c23)};
	for (; t < kc; t++) {
		const float *as[3] = {a0, a1, a2}, *bs[4] = {b0, b1, b2, b3};
		for (int r = 0; r < 3; r++)
			for (int q = 0; q < 4; q++) s[r * 4 + q] += as[r][t] * bs[q][t];
	}
	for (int r = 0; r < 3; r++) {
		float *c = C + (long)(i0 + r) * ldc + j0;
		for (int q = 0; q < 4; q++) c[q] = add ? c[q] + s[r * 4 + q] : s[r * 4 + q];
	}
}

// dot1 is one output over the k block, for the edges of the tiling.
GEMM_AVX2 static void edge(const float *A, const float *B, float *C, int i0, int ni, int j0, int nj, int k0, int kc,
                           int k, int ldc, int add) {
	for (int i = i0; i < i0 + ni; i++) {
		for (int j = j0; j < j0 + nj; j++) {
			const float *a = A + (long)i * k + k0, *b = B + (long)j * k + k0;
			__m256 acc = _mm256_setzero_ps();
			int t = 0;
			for (; t + 8 <= kc; t += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + t), _mm256_loadu_ps(b + t), acc);
			float s = hsum(acc);
			for (; t < kc; t++) s += a[t] * b[t];
			float *c = C + (long)i * ldc + j;
			*c = add ? *c + s : s;
		}
	}
}

GEMM_AVX2 static void gemm_avx2(const float *A, const float *B, float *C, int m, int jlo, int jhi, int k, int ldc,
                                int accumulate) {
	for (int k0 = 0; k0 < k; k0 += KC) {
		int kc = k - k0 < KC ? k - k0 : KC, add = accumulate || k0 > 0;
		for (int jb = jlo; jb < jhi; jb += NB) {
			int je = jb + NB < jhi ? jb + NB : jhi, j4 = jb + (je - jb) / 4 * 4;
			int i = 0;
			for (; i + 3 <= m; i += 3) {
				for (int j = jb; j < j4; j += 4) tile34(A, B, C, i, j, k0, kc, k, ldc, add);
				if (j4 < je) edge(A, B, C, i, 3, j4, je - j4, k0, kc, k, ldc, add);
			}
			if (i < m) edge(A, B, C, i, m - i, jb, je - jb, k0, kc, k, ldc, add);
		}
	}
}

static int have_avx2(void) {
	static int level = -1;
	if (level < 0) {
		__builtin_cpu_init();
		level = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	return level;
}
#endif

void arb_gemm_nt(const float *A, const float *B, float *C, int m, int jlo, int jhi, int k, int ldc, int accumulate,
                 int portable) {
	if (m <= 0 || jhi <= jlo) return;
	if (k <= 0) {
		if (!accumulate)
			for (int i = 0; i < m; i++) memset(C + (long)i * ldc + jlo, 0, sizeof(float) * (jhi - jlo));
		return;
	}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (!portable && have_avx2()) { gemm_avx2(A, B, C, m, jlo, jhi, k, ldc, accumulate); return; }
#endif
	for (int k0 = 0; k0 < k; k0 += KC) {
		int kc = k - k0 < KC ? k - k0 : KC;
		tile_generic(A, B, C, 0, m, jlo, jhi - jlo, k0, kc, k, ldc, accumulate || k0 > 0);
	}
}
