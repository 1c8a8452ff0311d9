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

GEMM_AVX2 static inline void store_acc(__m256 acc[MR][2], float *C, int ldc, int rows, int cols, int add, float *t);

// prefetch_c asks for the lines of the C tile the micro-kernels read at
// the end, after kc steps: with k of a sequence's rows, about 160, a
// tile's compute is short enough that waiting on C from L3 was a visible
// share.
static inline void prefetch_c(const float *C, int ldc, int rows, int add) {
	if (add && rows == MR)
		for (int r = 0; r < MR; r++) {
			__builtin_prefetch(C + (long)r * ldc);
			__builtin_prefetch(C + (long)r * ldc + NR - 1);
		}
}

// micro_avx2 computes the MR x NR tile Ap · Bp over kc steps and adds it
// to (or writes it into) C when the tile is whole, else into t.
GEMM_AVX2 static void micro_avx2(const float *Ap, const float *Bp, int kc, float *C, int ldc, int rows, int cols,
                                 int add, float *t) {
	prefetch_c(C, ldc, rows, add);
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
	store_acc(acc, C, ldc, rows, cols, add, t);
}

// store_acc adds (or writes) the micro-kernels' MR x NR tile of
// accumulators to C, through t where the tile is cut by C's edges.
GEMM_AVX2 static inline void store_acc(__m256 acc[MR][2], float *C, int ldc, int rows, int cols, int add, float *t) {
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

// The bfloat16 tiles (arb_simd_level 3: AVX-512 BF16 with VL). Each
// packed float32 panel (kc steps of w values, w = MR or NR) is rounded to
// bfloat16 (to nearest even) as hc = ceil(kc/2) steps of w pairs: pair c
// of step p holds the values of steps p and p + hc (zero past kc), two
// bfloat16 in 32 bits. A and B pair the same steps, so vdpbf16ps, which
// adds a[2i]b[2i] + a[2i+1]b[2i+1] into float32 lane i, sums the same
// products as the float32 tile in half the instructions: on Zen 4 it
// issues two 256-bit vdpbf16ps a cycle against two 256-bit FMAs, 16
// multiply-adds each against 8 (measured: 108 against 58 GMAC/s a core).
// The sums stay float32; only the inputs lose bits (8 of mantissa).
#define GEMM_BF16 __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bf16")))

// panel_bf16 rounds the packed float32 panel src (kc steps of w values)
// to dst (hc steps of w pairs), as above.
GEMM_BF16 static void panel_bf16(uint32_t *dst, const float *src, int kc, int w) {
	int hc = (kc + 1) / 2;
	for (int p = 0; p < hc; p++) {
		const float *r0 = src + (long)p * w, *r1 = p + hc < kc ? src + (long)(p + hc) * w : NULL;
		uint32_t *o = dst + (long)p * w;
		for (int c = 0; c < w; c += 8) {
			int n = w - c < 8 ? w - c : 8;
			__mmask8 mk = (__mmask8)((1u << n) - 1);
			__m256 a = _mm256_maskz_loadu_ps(mk, r0 + c);
			__m256 b = r1 ? _mm256_maskz_loadu_ps(mk, r1 + c) : _mm256_setzero_ps();
			__m128i x = (__m128i)_mm256_cvtneps_pbh(a), y = (__m128i)_mm256_cvtneps_pbh(b);
			__m128i lo = _mm_unpacklo_epi16(x, y), hi = _mm_unpackhi_epi16(x, y);
			_mm_mask_storeu_epi32(o + c, (__mmask8)(mk & 15), lo);
			if (n > 4) _mm_mask_storeu_epi32(o + c + 4, (__mmask8)(mk >> 4), hi);
		}
	}
}

// micro_bf16 is micro_avx2 over bfloat16 pair panels (hc steps).
GEMM_BF16 static void micro_bf16(const uint32_t *Ap, const uint32_t *Bp, int hc, float *C, int ldc, int rows, int cols,
                                 int add, float *t) {
	prefetch_c(C, ldc, rows, add);
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	for (int p = 0; p < hc; p++) {
		const int *a = (const int *)Ap + p * MR;
		__m256bh b0 = (__m256bh)_mm256_load_si256((const __m256i *)(Bp + p * NR));
		__m256bh b1 = (__m256bh)_mm256_load_si256((const __m256i *)(Bp + p * NR + 8)), x;
		x = (__m256bh)_mm256_set1_epi32(a[0]); c00 = _mm256_dpbf16_ps(c00, x, b0); c01 = _mm256_dpbf16_ps(c01, x, b1);
		x = (__m256bh)_mm256_set1_epi32(a[1]); c10 = _mm256_dpbf16_ps(c10, x, b0); c11 = _mm256_dpbf16_ps(c11, x, b1);
		x = (__m256bh)_mm256_set1_epi32(a[2]); c20 = _mm256_dpbf16_ps(c20, x, b0); c21 = _mm256_dpbf16_ps(c21, x, b1);
		x = (__m256bh)_mm256_set1_epi32(a[3]); c30 = _mm256_dpbf16_ps(c30, x, b0); c31 = _mm256_dpbf16_ps(c31, x, b1);
		x = (__m256bh)_mm256_set1_epi32(a[4]); c40 = _mm256_dpbf16_ps(c40, x, b0); c41 = _mm256_dpbf16_ps(c41, x, b1);
		x = (__m256bh)_mm256_set1_epi32(a[5]); c50 = _mm256_dpbf16_ps(c50, x, b0); c51 = _mm256_dpbf16_ps(c51, x, b1);
	}
	__m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
	store_acc(acc, C, ldc, rows, cols, add, t);
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

// arb_gemm_bf16 says whether bf16 products run as such here (AVX-512
// BF16, arb_simd_level 3); elsewhere they run in float32.
int arb_gemm_bf16(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	return arb_simd_level() >= 3;
#else
	return 0;
#endif
}

// steps is how many packed steps kc values of k take: kc, or as bfloat16
// pairs ceil(kc/2).
static inline int steps(int kc, int bf) { return bf ? (kc + 1) / 2 : kc; }

// ksteps is the steps of all of k's blocks (KC is even, so only the last
// block can have an odd pair).
static long ksteps(int k, int bf) { return bf ? (long)(k / KC) * (KC / 2) + steps(k % KC, 1) : k; }

// kc_max and nc_max are the largest k block and column block (in whole
// panels) a product of k values and n columns packs B into.
static inline int kc_max(int k) { return k < KC ? k : KC; }
static inline int nc_max(int n) { return n < NC ? (n + NR - 1) / NR * NR : NC; }

// packed_at is where the panels of columns j0.. and k values p0.. of a
// whole pre-packed op(B) (arb_gemm_pack_b) begin, in 32-bit units (a
// float, or a bfloat16 pair): blocks of NC columns one after another, each
// its k blocks one after another, each as packB writes it (rounded to
// pairs by panel_bf16 when bf).
static long packed_at(int k, int j0, int nc, int p0, int bf) {
	return (long)j0 * ksteps(k, bf) + ksteps(p0, bf) * ((nc + NR - 1) / NR * NR);
}

// arb_gemm_packed_size is the number of 32-bit units arb_gemm_pack_b
// writes.
long arb_gemm_packed_size(int n, int k, int bf) {
	bf = bf && arb_gemm_bf16();
	return (long)((n + NR - 1) / NR * NR) * ksteps(k, bf);
}

// to_pairs rounds the float32 panels of one packed block (width w, kc
// steps, count values of width) to bfloat16 pair panels.
static void to_pairs(uint32_t *dst, const float *src, int count, int w, int kc) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	int hc = steps(kc, 1);
	for (int i = 0; i < count; i += w) panel_bf16(dst + (long)i * hc, src + (long)i * kc, kc, w);
#else
	(void)dst, (void)src, (void)count, (void)w, (void)kc;
#endif
}

// arb_gemm_pack_b packs all of op(B) (n columns, k values) as arb_gemm
// would block by block, so products against the same B (the trainer's
// weights, fixed between updates) skip the packing; with bf (where
// arb_gemm_bf16) as bfloat16 pairs. Returns -1 when the scratch for that
// cannot be had.
int arb_gemm_pack_b(void *dst, const float *B, int n, int k, int tb, int bf) {
	int simd = use_simd();
	bf = bf && arb_gemm_bf16();
	float *tmp = NULL;
	if (bf) {
		tmp = arb_train_scratch(sizeof(float) * (size_t)nc_max(n) * kc_max(k));
		if (!tmp) return -1;
	}
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC;
			if (!bf) {
				packB((float *)dst + packed_at(k, j0, nc, p0, 0), B, n, k, tb, j0, nc, p0, kc, simd);
				continue;
			}
			packB(tmp, B, n, k, tb, j0, nc, p0, kc, simd);
			to_pairs((uint32_t *)dst + packed_at(k, j0, nc, p0, 1), tmp, nc, NR, kc);
		}
	}
	return 0;
}

// gemm runs the product, packing B block by block, or reading the blocks
// from pre (arb_gemm_pack_b's layout, with the same bf) when it is not
// NULL; with bf (where arb_gemm_bf16) on bfloat16 pairs.
static int gemm(const float *A, const float *B, const void *pre, float *C, int m, int n, int k, int ta, int tb,
                int accumulate, int bf) {
	if (m <= 0 || n <= 0) return 0;
	if (k <= 0) {
		if (!accumulate) memset(C, 0, sizeof(float) * (size_t)m * n);
		return 0;
	}
	int simd = use_simd();
	bf = bf && arb_gemm_bf16();
	int kcmax = kc_max(k), mcmax = m < MC ? (m + MR - 1) / MR * MR : MC;
	int ncmax = nc_max(n), hcmax = steps(kcmax, bf);
	// packed B (one block of columns of one k block), packed A (one block
	// of rows), a tile for the edges, and with bf the float32 panels the
	// pairs are rounded from; 32-byte aligned for the aligned loads of B.
	size_t nb = pre ? 0 : (size_t)ncmax * hcmax, na = (size_t)mcmax * hcmax;
	size_t nfb = bf && !pre ? (size_t)ncmax * kcmax : 0, nfa = bf ? (size_t)mcmax * kcmax : 0;
	size_t need = ((nb + na + MR * NR + nfb + nfa) * sizeof(float) + 31) / 32 * 32;
	float *buf = arb_train_scratch(need);
	if (!buf) return -1;
	float *Bp = buf, *Ap = buf + nb, *t = Ap + na, *Bf = t + MR * NR, *Af = Bf + nfb;
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC, add = accumulate || p0 > 0, hc = steps(kc, bf);
			if (pre) Bp = (float *)pre + packed_at(k, j0, nc, p0, bf);
			else if (!bf) packB(Bp, B, n, k, tb, j0, nc, p0, kc, simd);
			else {
				packB(Bf, B, n, k, tb, j0, nc, p0, kc, simd);
				to_pairs((uint32_t *)Bp, Bf, nc, NR, kc);
			}
			for (int i0 = 0; i0 < m; i0 += MC) {
				int mc = m - i0 < MC ? m - i0 : MC;
				if (!bf) packA(Ap, A, m, k, ta, i0, mc, p0, kc, simd);
				else {
					packA(Af, A, m, k, ta, i0, mc, p0, kc, simd);
					to_pairs((uint32_t *)Ap, Af, mc, MR, kc);
				}
				for (int jr = 0; jr < nc; jr += NR) {
					int cols = nc - jr < NR ? nc - jr : NR;
					const float *bp = Bp + (long)jr * hc;
					for (int ir = 0; ir < mc; ir += MR) {
						int rows = mc - ir < MR ? mc - ir : MR;
						const float *ap = Ap + (long)ir * hc;
						float *c = C + (long)(i0 + ir) * n + j0 + jr;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
						if (bf) {
							micro_bf16((const uint32_t *)ap, (const uint32_t *)bp, hc, c, n, rows, cols, add, t);
							continue;
						}
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

int arb_gemm(const float *A, const float *B, float *C, int m, int n, int k, int ta, int tb, int accumulate, int bf) {
	return gemm(A, B, NULL, C, m, n, k, ta, tb, accumulate, bf);
}

// arb_gemm_pb is arb_gemm against a pre-packed op(B) (arb_gemm_pack_b with
// the same bf, 32-byte aligned).
int arb_gemm_pb(const float *A, const void *pre, float *C, int m, int n, int k, int ta, int accumulate, int bf) {
	return gemm(A, NULL, pre, C, m, n, k, ta, 0, accumulate, bf);
}
