//go:build cgo && !purego

// Quantised weights repacked sixteen rows at a time, for AVX-512 VNNI on
// 512-bit vectors (arb_simd_level 2 and up).
//
// The eight-row layouts of q40x8.c, q4kx8.c and q6kx8.c give each 4-byte
// lane of a 256-bit vector one row's four weights; here a 512-bit vector's
// sixteen lanes hold sixteen rows' four weights, so one vpdpbusd adds four
// products to each of sixteen rows' sums (64 multiply-adds where the
// 256-bit tiles do 32). On a core with 512-bit datapaths (AMD Zen 5, Intel
// Sapphire Rapids and later) that doubles the integer rate; on one that
// splits them in two (Zen 4) it halves the instructions for the same rate.
//
// The weights of a group are multiplied by up to eight activation rows (a
// tile) while they sit in registers and the first level of cache: each
// vector of weights is loaded once for the tile, and every activation
// word reaches vpdpbusd as a broadcast operand from memory ({1to16}), so a
// tile's inner loop is vpdpbusd and little else. A pass over W tokens runs
// ceil(W/8) tiles over each group, the group's weights read from memory
// once and from cache after that.
//
// Each lane's arithmetic is exactly that of the eight-row AVX2 tiles: the
// integer block sums are exact (so how vpdpbusd splits them does not
// matter) and the float code after them is the same operations in the same
// order, lane by lane. So a row's result is the eight-row tiles' bit for
// bit (TestSixteenRowsMatchEightRows), whatever the tile, the batch, or
// the rows beside it in the group: a verification row equals the decode
// row, which greedy identity needs.
//
// Layouts (a group is sixteen rows; rows past the matrix's last are zero,
// their outputs never stored):
//  - Q8_0, per block: the sixteen float16 scales, then eight 64-byte
//    vectors whose lane i holds row i's weight bytes 4h..4h+3 with the top
//    bit flipped (w + 128, unsigned for vpdpbusd; 128 times the activation
//    block's sum comes off the exact total). 544 bytes, the blocks' own.
//  - Q4_0, per block: the scales, then four vectors of nibble bytes as
//    q40x8.c lays them out (lane i: row i's bytes 4h..4h+3, low nibbles
//    weights 4h.., high ones 16+4h..). 288 bytes.
//  - Q4_K (and Q5_K), per super-block: sixteen d, sixteen dmin, then for
//    each sub-block j its sixteen scales and sixteen mins (a byte each),
//    then for each 32-byte chunk c of nibbles eight vectors (lane i: row
//    i's bytes 32c+4h..+3); Q5_K adds eight vectors of fifth bits (lane i:
//    row i's qh bytes 4h..4h+3). 2368 (2880) bytes.
//  - Q6_K, per super-block: sixteen d, the sixteen scales of each of the
//    sixteen 16-weight groups (a byte a row), then for each 32-weight block
//    eight vectors of the weights as unsigned bytes q (0..63); 32 times
//    each 16-value half's activation sum comes off its exact total. 4384
//    bytes.
#include <string.h>
#include "q40x8.h"
#include "simd.h"

enum {
	X16_Q80 = 32 + 512,
	X16_Q40 = 32 + 256,
	X16_Q4K = 32 + 32 + 256 + 2048,
	X16_Q5K = X16_Q4K + 512,
	X16_Q6K = 32 + 256 + 4096,
};

static long x16_group_bytes(int type) {
	switch (type) {
	case ARB_Q8_0: return X16_Q80;
	case ARB_Q4_0: return X16_Q40;
	case ARB_Q4_K: return X16_Q4K;
	case ARB_Q5_K: return X16_Q5K;
	case ARB_Q6_K: return X16_Q6K;
	}
	return 0;
}

// arb_x16_bytes is what a matrix of rows x nb blocks (super-blocks for the
// K-quants) takes repacked: rows rounded up to sixteen; 0 for a type
// without sixteen-row tiles.
long arb_x16_bytes(int type, int rows, int nb) { return (long)((rows + 15) / 16) * nb * x16_group_bytes(type); }

static inline void k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// q6_value is weight l (0..255) of a Q6_K super-block, as stored (0..63).
static inline uint8_t q6_value(const uint8_t *blk, int l) {
	int half = l / 128, r = l % 128, g = r / 32, k = r % 32;
	const uint8_t *ql = blk + 64 * half + 32 * (g % 2), *qh = blk + 128 + 32 * half;
	return (uint8_t)(((ql[k] >> (4 * (g / 2))) & 0xf) | ((qh[k] >> (2 * g)) & 3) << 4);
}

// arb_x16_pack repacks rows of nb blocks (super-blocks) of a type into
// dst (arb_x16_bytes of it), zero past the last row.
void arb_x16_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst) {
	long gb = x16_group_bytes(type);
	memset(dst, 0, (size_t)arb_x16_bytes(type, rows, nb));
	for (int g = 0; g < (rows + 15) / 16; g++)
		for (int b = 0; b < nb; b++) {
			uint8_t *d = dst + ((long)g * nb + b) * gb;
			for (int i = 0; i < 16 && 16 * g + i < rows; i++) {
				const uint8_t *row = src + (long)(16 * g + i) * row_bytes;
				switch (type) {
				case ARB_Q8_0: {
					const uint8_t *blk = row + (long)b * 34;
					memcpy(d + 2 * i, blk, 2);
					for (int h = 0; h < 8; h++)
						for (int e = 0; e < 4; e++) d[32 + 64 * h + 4 * i + e] = blk[2 + 4 * h + e] ^ 0x80;
					break;
				}
				case ARB_Q4_0: {
					const uint8_t *blk = row + (long)b * 18;
					memcpy(d + 2 * i, blk, 2);
					for (int h = 0; h < 4; h++) memcpy(d + 32 + 64 * h + 4 * i, blk + 2 + 4 * h, 4);
					break;
				}
				case ARB_Q4_K: case ARB_Q5_K: {
					int q5 = type == ARB_Q5_K;
					const uint8_t *blk = row + (long)b * (q5 ? 176 : 144);
					memcpy(d + 2 * i, blk, 2);
					memcpy(d + 32 + 2 * i, blk + 2, 2);
					for (int j = 0; j < 8; j++) k4_scale_min(j, blk + 4, d + 64 + 32 * j + i, d + 64 + 32 * j + 16 + i);
					for (int c = 0; c < 4; c++)
						for (int h = 0; h < 8; h++) memcpy(d + 320 + 512 * c + 64 * h + 4 * i, blk + (q5 ? 48 : 16) + 32 * c + 4 * h, 4);
					if (q5)
						for (int h = 0; h < 8; h++) memcpy(d + X16_Q4K + 64 * h + 4 * i, blk + 16 + 4 * h, 4);
					break;
				}
				case ARB_Q6_K: {
					const uint8_t *blk = row + (long)b * 210;
					memcpy(d + 2 * i, blk + 208, 2);
					for (int k = 0; k < 16; k++) d[32 + 16 * k + i] = blk[192 + k];
					for (int c = 0; c < 8; c++)
						for (int h = 0; h < 8; h++)
							for (int e = 0; e < 4; e++) d[288 + 512 * c + 64 * h + 4 * i + e] = q6_value(blk, 32 * c + 4 * h + e);
					break;
				}
				}
			}
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define X16 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define AI inline __attribute__((always_inline))

#ifndef PREFETCH16
#define PREFETCH16 2048
#endif

// dpbusd adds to each lane of acc the four products of its unsigned
// weight bytes in w and the four signed activation bytes at p, which
// reach every lane as a {1to16} broadcast memory operand (the compiler
// does not fold _mm512_set1_epi32 of a load into vpdpbusd, and a separate
// broadcast per product doubles the instructions of a tile's inner loop).
X16 static AI __m512i dpbusd(__m512i acc, __m512i w, const int8_t *p) {
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
	return acc;
}

// A tile's arguments: the group's weights, the activations (q8, see
// simd.h's arb_q8), its first activation row r, and where its outputs go.
typedef struct {
	const float *d;   // scale of each activation block
	const int8_t *q;  // the 8-bit values, 32 a block
	const int32_t *s; // the sum of each block's values
	const float *m;   // d * s of each block (the K-quants' min term)
	const int32_t *c; // four a block: -128 s, -8 s, and -32 times the sums of its two halves

	int nb;           // blocks a row
} q8in;

// store16 writes a tile row's sixteen outputs, or the first valid of them.
X16 static AI void store16(float *p, __m512 v, int valid) {
	if (valid >= 16) _mm512_storeu_ps(p, v);
	else _mm512_mask_storeu_ps(p, (__mmask16)((1u << valid) - 1), v);
}

// q80 computes a group's sixteen rows against activation rows r..r+T-1:
// for each block, each row lane's exact sum over the 32 weights of
// (w + 128) * y less 128 * sum(y), then acc += (dw * dy) * sum, as the
// eight-row tiles do.
X16 static AI void q80_tile(const uint8_t *gp, const q8in *y, int r, const int T, float *out, long rows, int o, int valid) {
	__m512 acc[8];
	for (int k = 0; k < T; k++) acc[k] = _mm512_setzero_ps();
	const int nb = y->nb;
	const long stride = (long)nb * 32;
	const int8_t *yq = y->q + (long)r * stride;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = gp + (long)b * X16_Q80;
		for (int pf = 0; pf < X16_Q80; pf += 64) _mm_prefetch((const char *)blk + PREFETCH16 + pf, _MM_HINT_T0);
		__m512i s[8];
		for (int k = 0; k < T; k++) s[k] = _mm512_set1_epi32(y->c[4 * ((long)(r + k) * nb + b)]);
		for (int h = 0; h < 8; h++) {
			__m512i w = _mm512_loadu_si512(blk + 32 + 64 * h);
			for (int k = 0; k < T; k++) s[k] = dpbusd(s[k], w, yq + k * stride + 32 * b + 4 * h);
		}
		__m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
		for (int k = 0; k < T; k++)
			acc[k] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y->d[(long)(r + k) * nb + b])), _mm512_cvtepi32_ps(s[k]), acc[k]);
	}
	for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o, acc[k], valid);
}

// q40 is q80 for Q4_0: unsigned nibbles, 8 times the block's activation
// sum off the total.
X16 static AI void q40_tile(const uint8_t *gp, const q8in *y, int r, const int T, float *out, long rows, int o, int valid) {
	__m512 acc[8];
	for (int k = 0; k < T; k++) acc[k] = _mm512_setzero_ps();
	const int nb = y->nb;
	const long stride = (long)nb * 32;
	const int8_t *yq = y->q + (long)r * stride;
	const __m512i m4 = _mm512_set1_epi8(0xf);
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = gp + (long)b * X16_Q40;
		for (int pf = 0; pf < X16_Q40; pf += 64) _mm_prefetch((const char *)blk + PREFETCH16 + pf, _MM_HINT_T0);
		__m512i s[8];
		for (int k = 0; k < T; k++) s[k] = _mm512_set1_epi32(y->c[4 * ((long)(r + k) * nb + b) + 1]);
		for (int h = 0; h < 4; h++) {
			__m512i v = _mm512_loadu_si512(blk + 32 + 64 * h);
			__m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
			for (int k = 0; k < T; k++) {
				s[k] = dpbusd(s[k], lo, yq + k * stride + 32 * b + 4 * h);
				s[k] = dpbusd(s[k], hi, yq + k * stride + 32 * b + 16 + 4 * h);
			}
		}
		__m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
		for (int k = 0; k < T; k++)
			acc[k] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y->d[(long)(r + k) * nb + b])), _mm512_cvtepi32_ps(s[k]), acc[k]);
	}
	for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o, acc[k], valid);
}

// q4k computes a group's sixteen Q4_K (Q5_K when q5) rows against
// activation rows r..r+T-1: each sub-block j gives each lane its row's
// exact sum of q * y, then acc += (d * scale_j) * (dy * sum) and
// acc -= (dmin * min_j) * (dy * sum(y)), as q4kx8.c's tiles do.
X16 static AI void q4k_tile(const int q5, const uint8_t *gp, const q8in *y, int r, const int T, float *out, long rows, int o,
                            int valid) {
	__m512 acc[8];
	for (int k = 0; k < T; k++) acc[k] = _mm512_setzero_ps();
	const int nsb = y->nb / 8;
	const long nb = y->nb, stride = nb * 32;
	const long GB = q5 ? X16_Q5K : X16_Q4K;
	const int8_t *yq = y->q + (long)r * stride;
	const __m512i m4 = _mm512_set1_epi8(0xf), bit = _mm512_set1_epi8(1);
	for (int sb = 0; sb < nsb; sb++) {
		const uint8_t *blk = gp + (long)sb * GB;
		for (int pf = 0; pf < GB; pf += 64) _mm_prefetch((const char *)blk + PREFETCH16 + pf, _MM_HINT_T0);
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
		__m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
		for (int j = 0; j < 8; j++) {
			int c = j / 2, e = j % 2;
			__m512 dsc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 64 + 32 * j)))));
			__m512 dmm = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 80 + 32 * j)))));
			long b = (long)sb * 8 + j;
			__m512i s[8];
			for (int k = 0; k < T; k++) s[k] = _mm512_setzero_si512();
			for (int h = 0; h < 8; h++) {
				__m512i v = _mm512_loadu_si512(blk + 320 + 512 * c + 64 * h);
				__m512i w = e ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
				if (q5) { // bit j of each qh byte is its weight's fifth bit, moved to bit 4
					__m512i qh = _mm512_loadu_si512(blk + X16_Q4K + 64 * h);
					w = _mm512_or_si512(w, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, j), bit), 4));
				}
				for (int k = 0; k < T; k++) s[k] = dpbusd(s[k], w, yq + k * stride + 32 * b + 4 * h);
			}
			for (int k = 0; k < T; k++) {
				long i = (long)(r + k) * nb + b;
				acc[k] = _mm512_fmadd_ps(dsc, _mm512_mul_ps(_mm512_set1_ps(y->d[i]), _mm512_cvtepi32_ps(s[k])), acc[k]);
				acc[k] = _mm512_fnmadd_ps(dmm, _mm512_set1_ps(y->m[i]), acc[k]);
			}
		}
	}
	for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o, acc[k], valid);
}

// q6k computes a group's sixteen Q6_K rows against activation rows
// r..r+T-1: each 16-weight half of a block gives each lane its row's exact
// sum of (q - 32) * y (the stored q against y, less 32 times the half's
// activation sum), times the half's scale; then acc += (d * dy) * sum, as
// q6kx8.c's tiles do.
X16 static AI void q6k_tile(const uint8_t *gp, const q8in *y, int r, const int T, float *out, long rows, int o, int valid) {
	__m512 acc[8];
	for (int k = 0; k < T; k++) acc[k] = _mm512_setzero_ps();
	const int nsb = y->nb / 8;
	const long nb = y->nb, stride = nb * 32;
	const int8_t *yq = y->q + (long)r * stride;
	for (int sb = 0; sb < nsb; sb++) {
		const uint8_t *blk = gp + (long)sb * X16_Q6K;
		for (int pf = 0; pf < X16_Q6K; pf += 64) _mm_prefetch((const char *)blk + PREFETCH16 + pf, _MM_HINT_T0);
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
		for (int c = 0; c < 8; c++) {
			__m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + 32 * c)));
			__m512i sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 48 + 32 * c)));
			long b = (long)sb * 8 + c;
			__m512i lo[8], hi[8];
			for (int k = 0; k < T; k++) {
				long i = (long)(r + k) * nb + b;
				lo[k] = _mm512_set1_epi32(y->c[4 * i + 2]);
				hi[k] = _mm512_set1_epi32(y->c[4 * i + 3]);
			}
			for (int h = 0; h < 4; h++) {
				__m512i w0 = _mm512_loadu_si512(blk + 288 + 512 * c + 64 * h);
				__m512i w1 = _mm512_loadu_si512(blk + 288 + 512 * c + 64 * (h + 4));
				for (int k = 0; k < T; k++) {
					lo[k] = dpbusd(lo[k], w0, yq + k * stride + 32 * b + 4 * h);
					hi[k] = dpbusd(hi[k], w1, yq + k * stride + 32 * b + 16 + 4 * h);
				}
			}
			for (int k = 0; k < T; k++) {
				__m512i is = _mm512_add_epi32(_mm512_mullo_epi32(lo[k], sc0), _mm512_mullo_epi32(hi[k], sc1));
				__m512 dy = _mm512_mul_ps(d, _mm512_set1_ps(y->d[(long)(r + k) * nb + b]));
				acc[k] = _mm512_fmadd_ps(dy, _mm512_cvtepi32_ps(is), acc[k]);
			}
		}
	}
	for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o, acc[k], valid);
}

// X16_ROWS defines NAME: groups glo..ghi-1 of a repacked matrix (each
// taking nb / PER blocks of GB bytes: PER is 8 for the super-block types)
// against the n activation rows, eight at a time, then the rest in one
// tile. The activation rows go in spans of about X16_SPAN bytes, each over
// every group before the next: a span stays in the core's L2 while the
// groups' weights stream past it (128 rows of 8192 activations, 1 MiB,
// would not, and their tiles ran 10% slower).
#ifndef X16_SPAN
#define X16_SPAN (256 << 10)
#endif
#define X16_ROWS(NAME, TILE, GB, PER)                                                                         \
	X16 static void NAME(const uint8_t *packed, int glo, int ghi, const q8in *y, int n, float *out, int rows) { \
		int span = X16_SPAN / (32 * y->nb) / 8 * 8;                                                      \
		if (span < 8) span = 8;                                                                          \
		for (int r0 = 0; r0 < n; r0 += span) {                                                           \
			int r1 = r0 + span < n ? r0 + span : n;                                                      \
			for (int g = glo; g < ghi; g++) {                                                            \
				const uint8_t *gp = packed + (long)g * (y->nb / (PER)) * (GB);                           \
				int o = 16 * g, valid = rows - o, r = r0;                                                \
				for (; r + 8 <= r1; r += 8) TILE(gp, y, r, 8, out, rows, o, valid);                      \
				switch (r1 - r) {                                                                        \
				case 7: TILE(gp, y, r, 7, out, rows, o, valid); break;                                   \
				case 6: TILE(gp, y, r, 6, out, rows, o, valid); break;                                   \
				case 5: TILE(gp, y, r, 5, out, rows, o, valid); break;                                   \
				case 4: TILE(gp, y, r, 4, out, rows, o, valid); break;                                   \
				case 3: TILE(gp, y, r, 3, out, rows, o, valid); break;                                   \
				case 2: TILE(gp, y, r, 2, out, rows, o, valid); break;                                   \
				case 1: TILE(gp, y, r, 1, out, rows, o, valid); break;                                   \
				}                                                                                        \
			}                                                                                            \
		}                                                                                                \
	}

#define q4k_tile0(...) q4k_tile(0, __VA_ARGS__)
#define q4k_tile1(...) q4k_tile(1, __VA_ARGS__)
X16_ROWS(mm_q80x16, q80_tile, X16_Q80, 1)
X16_ROWS(mm_q40x16, q40_tile, X16_Q40, 1)
X16_ROWS(mm_q4kx16, q4k_tile0, X16_Q4K, 8)
X16_ROWS(mm_q5kx16, q4k_tile1, X16_Q5K, 8)
X16_ROWS(mm_q6kx16, q6k_tile, X16_Q6K, 8)
#endif

int arb_mm_x16(int type, const uint8_t *packed, int glo, int ghi, const float *yd, const int8_t *yq, const int32_t *ys,
               const float *ym, const int32_t *yc, int nb, int n, float *out, int rows) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() < 2) return -1;
	q8in y = {yd, yq, ys, ym, yc, nb};
	switch (type) {
	case ARB_Q8_0: mm_q80x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q4_0: mm_q40x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q4_K: mm_q4kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q5_K: mm_q5kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q6_K: mm_q6kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	}
#endif
	return -1;
}
