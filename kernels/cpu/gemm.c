//go:build cgo && !purego

// A packed, cache-blocked float32 matrix product for training (the
// hidden-state drafter's trainer): C (m x n) = or += op(A) · op(B), where
// op(A) is A (m x k) or, with ta, A stored k x m and read transposed, and
// op(B) is B (k x n) or, with tb, B stored n x k (weight rows) read
// transposed. The transposes cost nothing extra: they are folded into the
// packing every blocked product does anyway, so the trainer's backward pass
// (dx = dy · W, dW = dy^T · x) needs no transposed copies.
//
// It is NOT used by the forward pass. Inference keeps arb_mm_f32, whose
// every output is one dot product summed in one fixed order whatever the
// batch, because greedy speculative decoding is lossless only when a
// verification row equals the decode row bit for bit. Training has no such
// rule, so this kernel follows the layout of BLIS-style products: k in
// blocks of KC, rows in blocks of MC packed into panels of MR rows (MR
// values per k step), columns packed into panels of NR (NR values per k
// step); the micro-kernel keeps an MR x NR tile of C in registers and per k
// step loads two vectors of B, broadcasts MR values of A and issues 2*MR
// FMAs, so it runs at the FMA rate rather than the load rate of a dot
// product (the 3 x 4 dot-product tiles before reached about half of it).
#include <stdlib.h>
#include <string.h>
#include "gemm.h"
#include "simd.h"

#ifndef KC
#define KC 256
#endif
#ifndef MC
#define MC 96
#endif
#ifndef NC
#define NC 512
#endif
enum { MR = 6, NR = 16 };

// opA returns op(A)[i][p].
static inline float opA(const float *A, int m, int k, int ta, int i, int p) {
	return ta ? A[(long)p * m + i] : A[(long)i * k + p];
}

// packA writes rows i0..i0+mc-1, k values p0..p0+kc-1 of op(A) as panels
// of MR rows: panel r holds, for each p, the MR values of its rows
// (zeros past m).
static void packA(float *dst, const float *A, int m, int k, int ta, int i0, int mc, int p0, int kc) {
	for (int ir = 0; ir < mc; ir += MR) {
		float *d = dst + (long)ir * kc;
		int rows = mc - ir < MR ? mc - ir : MR;
		if (ta) {
			for (int p = 0; p < kc; p++) {
				const float *s = A + (long)(p0 + p) * m + i0 + ir;
				int r = 0;
				for (; r < rows; r++) d[p * MR + r] = s[r];
				for (; r < MR; r++) d[p * MR + r] = 0;
			}
		} else {
			for (int r = 0; r < MR; r++) {
				if (r < rows) {
					const float *s = A + (long)(i0 + ir + r) * k + p0;
					for (int p = 0; p < kc; p++) d[p * MR + r] = s[p];
				} else {
					for (int p = 0; p < kc; p++) d[p * MR + r] = 0;
				}
			}
		}
	}
}

// packB writes k values p0..p0+kc-1 of columns 0..n-1 of op(B) as panels
// of NR columns: panel c holds, for each p, the NR values of its columns
// (zeros past n).
static void packB(float *dst, const float *B, int n, int k, int tb, int j0, int nc, int p0, int kc) {
	for (int jr = 0; jr < nc; jr += NR) {
		float *d = dst + (long)jr * kc;
		int cols = nc - jr < NR ? nc - jr : NR;
		if (tb) {
			for (int c = 0; c < NR; c++) {
				if (c < cols) {
					const float *s = B + (long)(j0 + jr + c) * k + p0;
					for (int p = 0; p < kc; p++) d[p * NR + c] = s[p];
				} else {
					for (int p = 0; p < kc; p++) d[p * NR + c] = 0;
				}
			}
		} else {
			for (int p = 0; p < kc; p++) {
				const float *s = B + (long)(p0 + p) * n + j0 + jr;
				int c = 0;
				for (; c < cols; c++) d[p * NR + c] = s[c];
				for (; c < NR; c++) d[p * NR + c] = 0;
			}
		}
	}
}

// store adds (or writes, when !add) an MR x NR tile t to C at (i, j),
// rows below rows and columns below cols only.
static inline void store(float *C, int ldc, const float *t, int rows, int cols, int add) {
	for (int r = 0; r < rows; r++) {
		float *c = C + (long)r * ldc;
		if (add)
			for (int q = 0; q < cols; q++) c[q] += t[r * NR + q];
		else
			for (int q = 0; q < cols; q++) c[q] = t[r * NR + q];
	}
}

// micro_generic is the portable micro-kernel: t = Ap · Bp over kc steps.
static void micro_generic(const float *Ap, const float *Bp, int kc, float *t) {
	memset(t, 0, sizeof(float) * MR * NR);
	for (int p = 0; p < kc; p++)
		for (int r = 0; r < MR; r++) {
			float a = Ap[p * MR + r];
			for (int q = 0; q < NR; q++) t[r * NR + q] += a * Bp[p * NR + q];
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GEMM_AVX2 __attribute__((target("avx2,fma")))

// micro_avx2 computes the MR x NR tile Ap · Bp over kc steps and adds it
// to (or writes it into) C when the tile is whole, else into t.
GEMM_AVX2 static void micro_avx2(const float *Ap, const float *Bp, int kc, float *C, int ldc, int rows, int cols,
                                 int add, float *t) {
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	for (int p = 0; p < kc; p++) {
		const float *a = Ap + p * MR;
		__m256 b0 = _mm256_load_ps(Bp + p * NR), b1 = _mm256_load_ps(Bp + p * NR + 8), x;
		x = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
		x = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
		x = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
		x = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
		x = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
		x = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
	}
	__m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
	if (rows == MR && cols == NR) {
		for (int r = 0; r < MR; r++) {
			float *c = C + (long)r * ldc;
			if (add) {
				_mm256_storeu_ps(c, _mm256_add_ps(_mm256_loadu_ps(c), acc[r][0]));
				_mm256_storeu_ps(c + 8, _mm256_add_ps(_mm256_loadu_ps(c + 8), acc[r][1]));
			} else {
				_mm256_storeu_ps(c, acc[r][0]);
				_mm256_storeu_ps(c + 8, acc[r][1]);
			}
		}
		return;
	}
	for (int r = 0; r < MR; r++) {
		_mm256_storeu_ps(t + r * NR, acc[r][0]);
		_mm256_storeu_ps(t + r * NR + 8, acc[r][1]);
	}
	store(C, ldc, t, rows, cols, add);
}

#endif

// scratch returns this thread's packing buffer, at least need bytes: kept
// between calls because a fresh buffer of this size comes from mmap and
// costs a page fault per 4 KiB, which for the trainer's products was as
// much as the arithmetic. It holds at most one product's panels (a few
// MiB), once per thread that ever multiplies.
static float *scratch(size_t need) {
	static __thread float *buf;
	static __thread size_t cap;
	if (need > cap) {
		free(buf);
		cap = 0;
		buf = aligned_alloc(32, need);
		if (!buf) return NULL;
		cap = need;
	}
	return buf;
}

int arb_gemm(const float *A, const float *B, float *C, int m, int n, int k, int ta, int tb, int accumulate) {
	if (m <= 0 || n <= 0) return 0;
	if (k <= 0) {
		if (!accumulate) memset(C, 0, sizeof(float) * (size_t)m * n);
		return 0;
	}
	int simd = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	simd = arb_simd_level() >= 1; // AVX2+FMA+F16C, unless ARBORIST_SIMD=0
#endif
	int kcmax = k < KC ? k : KC, mcmax = m < MC ? (m + MR - 1) / MR * MR : MC;
	int ncmax = n < NC ? (n + NR - 1) / NR * NR : NC;
	// packed B (one block of columns of one k block), packed A (one block
	// of rows), a tile for the edges; 32-byte aligned for the aligned loads
	// of B.
	size_t nb = (size_t)ncmax * kcmax, na = (size_t)mcmax * kcmax;
	size_t need = ((nb + na + MR * NR) * sizeof(float) + 31) / 32 * 32;
	float *buf = scratch(need);
	if (!buf) return -1;
	float *Bp = buf, *Ap = buf + nb, *t = Ap + na;
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC, add = accumulate || p0 > 0;
			packB(Bp, B, n, k, tb, j0, nc, p0, kc);
			for (int i0 = 0; i0 < m; i0 += MC) {
				int mc = m - i0 < MC ? m - i0 : MC;
				packA(Ap, A, m, k, ta, i0, mc, p0, kc);
				for (int jr = 0; jr < nc; jr += NR) {
					int cols = nc - jr < NR ? nc - jr : NR;
					const float *bp = Bp + (long)jr * kc;
					for (int ir = 0; ir < mc; ir += MR) {
						int rows = mc - ir < MR ? mc - ir : MR;
						const float *ap = Ap + (long)ir * kc;
						float *c = C + (long)(i0 + ir) * n + j0 + jr;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
						if (simd) {
							micro_avx2(ap, bp, kc, c, n, rows, cols, add, t);
							continue;
						}
#endif
						micro_generic(ap, bp, kc, t);
						store(c, n, t, rows, cols, add);
					}
				}
			}
		}
	}
	return 0;
}
