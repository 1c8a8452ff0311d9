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
#include "vec8.h"

// micro_avx2 computes the MR x NR tile Ap · Bp over kc steps and adds it
// to (or writes it into) C when the tile is whole, else into t.
GEMM_AVX2 static void micro_avx2(const float *Ap, const float *Bp, int kc, float *C, int ldc, int rows, int cols,
                                 int add, float *t) {
	// the C tile is read at the end, after kc steps: ask for its lines now
	// (with k of a sequence's rows, about 160, a tile's compute is short
	// enough that waiting on C from L3 was a visible share)
	if (add && rows == MR)
		for (int r = 0; r < MR; r++) {
			_mm_prefetch((const char *)(C + (long)r * ldc), _MM_HINT_T0);
			_mm_prefetch((const char *)(C + (long)r * ldc + NR - 1), _MM_HINT_T0);
		}
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

// packA_rows_avx2 is packA's whole-panel case for A stored m x k: six rows
// read eight values at a time and transposed in registers, where the
// scalar loop wrote every value at a stride of six (a third of a training
// product's time went to that loop). Leaves the last kc % 8 steps to the
// caller.
GEMM_AVX2 static int packA_rows_avx2(float *d, const float *s, long ld, int kc) {
	int p = 0;
	for (; p + 8 <= kc; p += 8) {
		__m256 r[8];
		for (int i = 0; i < MR; i++) r[i] = _mm256_loadu_ps(s + i * ld + p);
		r[6] = r[7] = _mm256_setzero_ps();
		transpose8(r);
		float *o = d + (long)p * MR;
		// eight floats per step of six: each store's last two are
		// overwritten by the next; the last step stores six
		for (int q = 0; q < 7; q++) _mm256_storeu_ps(o + q * MR, r[q]);
		_mm_storeu_ps(o + 7 * MR, _mm256_castps256_ps128(r[7]));
		_mm_storel_pi((__m64 *)(o + 7 * MR + 4), _mm256_extractf128_ps(r[7], 1));
	}
	return p;
}

// packB_rows_avx2 is packB's whole-panel case for B stored n x k (weight
// rows): sixteen rows read eight values at a time and transposed in
// registers. Leaves the last kc % 8 steps to the caller.
GEMM_AVX2 static int packB_rows_avx2(float *d, const float *s, long ld, int kc) {
	int p = 0;
	for (; p + 8 <= kc; p += 8) {
		for (int h = 0; h < 2; h++) {
			__m256 r[8];
			for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + (h * 8 + i) * ld + p);
			transpose8(r);
			for (int q = 0; q < 8; q++) _mm256_storeu_ps(d + (long)(p + q) * NR + h * 8, r[q]);
		}
	}
	return p;
}

#endif

// packA writes rows i0..i0+mc-1, k values p0..p0+kc-1 of op(A) as panels
// of MR rows: panel r holds, for each p, the MR values of its rows
// (zeros past m).
static void packA(float *dst, const float *A, int m, int k, int ta, int i0, int mc, int p0, int kc, int simd) {
	if (ta) {
		// A stored k x m: op(A)'s column p is A's row p0+p, read once,
		// contiguously, into every panel (reading panel by panel took a
		// strided pass over k rows per panel)
		// (eight steps at a time, so a panel's writes are a few
		// contiguous lines rather than one line a row at a stride that
		// maps every panel to the same cache set)
		for (int pb = 0; pb < kc; pb += 8) {
			int pe = pb + 8 < kc ? pb + 8 : kc;
			for (int ir = 0; ir < mc; ir += MR) {
				int rows = mc - ir < MR ? mc - ir : MR;
				for (int p = pb; p < pe; p++) {
					const float *s = A + (long)(p0 + p) * m + i0 + ir;
					float *d = dst + (long)ir * kc + p * MR;
					int r = 0;
					for (; r < rows; r++) d[r] = s[r];
					for (; r < MR; r++) d[r] = 0;
				}
			}
		}
		return;
	}
	for (int ir = 0; ir < mc; ir += MR) {
		float *d = dst + (long)ir * kc;
		int rows = mc - ir < MR ? mc - ir : MR, p = 0;
		const float *s = A + (long)(i0 + ir) * k + p0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
		if (simd && rows == MR) p = packA_rows_avx2(d, s, k, kc);
#endif
		for (; p < kc; p++) {
			int r = 0;
			for (; r < rows; r++) d[p * MR + r] = s[(long)r * k + p];
			for (; r < MR; r++) d[p * MR + r] = 0;
		}
	}
}

// packB writes k values p0..p0+kc-1 of columns 0..n-1 of op(B) as panels
// of NR columns: panel c holds, for each p, the NR values of its columns
// (zeros past n).
static void packB(float *dst, const float *B, int n, int k, int tb, int j0, int nc, int p0, int kc, int simd) {
	if (!tb) {
		// B stored k x n: row p0+p read once, contiguously, into every
		// panel
		// (eight at a time, as in packA)
		for (int pb = 0; pb < kc; pb += 8) {
			int pe = pb + 8 < kc ? pb + 8 : kc;
			for (int jr = 0; jr < nc; jr += NR) {
				int cols = nc - jr < NR ? nc - jr : NR;
				for (int p = pb; p < pe; p++) {
					const float *s = B + (long)(p0 + p) * n + j0 + jr;
					float *d = dst + (long)jr * kc + p * NR;
					int c = 0;
					if (cols == NR) {
						memcpy(d, s, NR * sizeof(float));
						continue;
					}
					for (; c < cols; c++) d[c] = s[c];
					for (; c < NR; c++) d[c] = 0;
				}
			}
		}
		return;
	}
	for (int jr = 0; jr < nc; jr += NR) {
		float *d = dst + (long)jr * kc;
		int cols = nc - jr < NR ? nc - jr : NR, p = 0;
		const float *s = B + (long)(j0 + jr) * k + p0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
		if (simd && cols == NR) p = packB_rows_avx2(d, s, k, kc);
#endif
		for (; p < kc; p++) {
			int c = 0;
			for (; c < cols; c++) d[p * NR + c] = s[(long)c * k + p];
			for (; c < NR; c++) d[p * NR + c] = 0;
		}
	}
}

// arb_train_scratch returns this thread's scratch buffer (32-byte
// aligned), at least need bytes: kept between calls because a fresh buffer
// of this size comes from mmap and costs a page fault per 4 KiB, which for
// the trainer's products was as much as the arithmetic. It holds at most
// one product's panels (a few MiB), once per thread that ever multiplies;
// the trainer's attention (tattn.c) borrows it too, which is safe because
// neither calls the other.
float *arb_train_scratch(size_t need) {
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

static int use_simd(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	return arb_simd_level() >= 1; // AVX2+FMA+F16C, unless ARBORIST_SIMD=0
#else
	return 0;
#endif
}

// packed_at is where the panels of columns j0.. and k values p0.. of a
// whole pre-packed op(B) (arb_gemm_pack_b) begin: blocks of NC columns one
// after another, each its k blocks one after another, each as packB
// writes it.
static long packed_at(int k, int j0, int nc, int p0) { return (long)j0 * k + (long)p0 * ((nc + NR - 1) / NR * NR); }

// arb_gemm_packed_size is the number of floats arb_gemm_pack_b writes.
long arb_gemm_packed_size(int n, int k) { return (long)((n + NR - 1) / NR * NR) * k; }

// arb_gemm_pack_b packs all of op(B) (n columns, k values) as arb_gemm
// would block by block, so products against the same B (the trainer's
// weights, fixed between updates) skip the packing.
void arb_gemm_pack_b(float *dst, const float *B, int n, int k, int tb) {
	int simd = use_simd();
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC;
			packB(dst + packed_at(k, j0, nc, p0), B, n, k, tb, j0, nc, p0, kc, simd);
		}
	}
}

// gemm runs the product, packing B block by block, or reading the blocks
// from pre (arb_gemm_pack_b's layout) when it is not NULL.
static int gemm(const float *A, const float *B, const float *pre, float *C, int m, int n, int k, int ta, int tb,
                int accumulate) {
	if (m <= 0 || n <= 0) return 0;
	if (k <= 0) {
		if (!accumulate) memset(C, 0, sizeof(float) * (size_t)m * n);
		return 0;
	}
	int simd = use_simd();
	int kcmax = k < KC ? k : KC, mcmax = m < MC ? (m + MR - 1) / MR * MR : MC;
	int ncmax = n < NC ? (n + NR - 1) / NR * NR : NC;
	// packed B (one block of columns of one k block), packed A (one block
	// of rows), a tile for the edges; 32-byte aligned for the aligned loads
	// of B.
	size_t nb = pre ? 0 : (size_t)ncmax * kcmax, na = (size_t)mcmax * kcmax;
	size_t need = ((nb + na + MR * NR) * sizeof(float) + 31) / 32 * 32;
	float *buf = arb_train_scratch(need);
	if (!buf) return -1;
	float *Bp = buf, *Ap = buf + nb, *t = Ap + na;
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC, add = accumulate || p0 > 0;
			if (pre) Bp = (float *)pre + packed_at(k, j0, nc, p0);
			else packB(Bp, B, n, k, tb, j0, nc, p0, kc, simd);
			for (int i0 = 0; i0 < m; i0 += MC) {
				int mc = m - i0 < MC ? m - i0 : MC;
				packA(Ap, A, m, k, ta, i0, mc, p0, kc, simd);
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

int arb_gemm(const float *A, const float *B, float *C, int m, int n, int k, int ta, int tb, int accumulate) {
	return gemm(A, B, NULL, C, m, n, k, ta, tb, accumulate);
}

// arb_gemm_pb is arb_gemm against a pre-packed op(B) (arb_gemm_pack_b, 32-
// byte aligned).
int arb_gemm_pb(const float *A, const float *pre, float *C, int m, int n, int k, int ta, int accumulate) {
	return gemm(A, NULL, pre, C, m, n, k, ta, 0, accumulate);
}
