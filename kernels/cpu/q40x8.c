//go:build cgo && !purego

// Q4_0 and Q8_0 weights repacked eight rows at a time, for AVX2.
//
// A Q4_0 block is a float16 scale and 16 bytes holding 32 four-bit weights
// (byte j: weight j in the low nibble, weight j+16 in the high one). The
// row-at-a-time kernel (simd.c) unpacks a row's block into 32 bytes,
// multiplies them by the 32 activation bytes and must then reduce the
// vector to one sum per block and per row. Here eight rows' blocks b are
// stored together: their eight scales, then for h = 0..3 a 32-byte vector
// whose 4-byte lane i holds bytes 4h..4h+3 of row i's block. One load
// gives, per lane, weights 4h..4h+3 of its row (low nibbles) and weights
// 16+4h..16+4h+3 (high nibbles); each multiplies four activation bytes
// broadcast to every lane, so after a block every lane holds its own row's
// integer sum: no horizontal reduction, one scale multiply-add for eight
// rows. This is the layout of the reference engine's q4_0_8x8 repack,
// written anew for Arborist's kernels.
//
// Every row is summed in the same order whatever the batch (the activation
// rows are independent loops over the same unpacked weights) and whichever
// rows share its group (lanes never mix), so a verification row equals the
// decode row bit for bit, which greedy losslessness needs. These tiles run
// at arb_simd_level 1; from level 2 on, x16.c's sixteen-row AVX-512 VNNI
// tiles run instead and give the same results.
#include <string.h>
#include "q40x8.h"
#include "simd.h"

// Both types are repacked the same way, a block being a float16 scale and
// then its weight bytes (Q4_0: 16 bytes of nibbles; Q8_0: 32 signed
// bytes): per block of eight rows, the eight scales, then one 32-byte
// vector per 4 weight bytes whose 4-byte lane i holds row i's bytes
// 4h..4h+3: 144 bytes for Q4_0, 272 for Q8_0, what the eight blocks take.
enum { GROUP_BYTES = 16 + 128, Q8_GROUP_BYTES = 16 + 256 };

// arb_x8_pack repacks rows (a multiple of 8) of nb blocks of block_bytes
// each (18: Q4_0, 34: Q8_0).
void arb_x8_pack(const uint8_t *src, long row_bytes, int rows, int nb, int block_bytes, uint8_t *dst) {
	int vecs = (block_bytes - 2) / 4, group = 16 + 32 * vecs;
	for (int g = 0; g < rows / 8; g++)
		for (int b = 0; b < nb; b++) {
			uint8_t *d = dst + ((long)g * nb + b) * group;
			for (int i = 0; i < 8; i++) {
				const uint8_t *blk = src + (long)(8 * g + i) * row_bytes + (long)b * block_bytes;
				memcpy(d + 2 * i, blk, 2);
				for (int h = 0; h < vecs; h++) memcpy(d + 16 + 32 * h + 4 * i, blk + 2 + 4 * h, 4);
			}
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "x8.h"

// nibbles40 unpacks a repacked Q4_0 block's four vectors into the eight
// of unsigned weights (low nibbles then high) both tile families multiply.
X8_AVX2 static inline __attribute__((always_inline)) void nibbles40(const uint8_t *blk, __m256i w[8]) {
	const __m256i m4 = _mm256_set1_epi8(0xf);
	for (int h = 0; h < 4; h++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * h));
		w[h] = _mm256_and_si256(v, m4);
		w[4 + h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
	}
}

// q40x8_tile computes the eight rows of group gp against activation rows
// r..r+T-1 and stores them at out[(r+k)*rows + o .. o+7].
#define Q40X8_TILE(T)                                                                                        \
	X8_AVX2 static inline __attribute__((always_inline)) void q40x8_tile##T(                             \
	    const uint8_t *gp, int nb, const float *yd, const int8_t *yq, const int32_t *ys, int r, float *out,  \
	    long rows, int o) {                                                                                  \
		__m256 acc[T];                                                                                   \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                        \
		long stride = (long)nb * 32;                                                                     \
		for (int b = 0; b < nb; b++) {                                                                   \
			const uint8_t *blk = gp + (long)b * GROUP_BYTES;                                             \
			_mm_prefetch((const char *)blk + PREFETCH, _MM_HINT_T0);                                     \
			_mm_prefetch((const char *)blk + PREFETCH + 64, _MM_HINT_T0);                                \
			_mm_prefetch((const char *)blk + PREFETCH + 128, _MM_HINT_T0);                               \
			__m256i w[8];                                                                                \
			nibbles40(blk, w);                                                                           \
			__m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));                          \
			for (int k = 0; k < T; k++) {                                                                \
				const int8_t *y = yq + (long)(r + k) * stride + (long)b * 32;                            \
				int32_t y4[8];                                                                           \
				memcpy(y4, y, 32);                                                                       \
				__m256i s32 = ISUM8_AVX2(w, y4);                                                         \
				s32 = _mm256_sub_epi32(s32, _mm256_set1_epi32(8 * ys[(long)(r + k) * nb + b]));         \
				__m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(yd[(long)(r + k) * nb + b]));               \
				acc[k] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s32), acc[k]);                           \
			}                                                                                            \
		}                                                                                                \
		for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);           \
	}
Q40X8_TILE(1)
Q40X8_TILE(2)
Q40X8_TILE(3)
Q40X8_TILE(4)

// q80x8_tile is q40x8_tile for repacked Q8_0: the weights are signed, so
// each product takes the sign trick (|w| times y with w's sign), and each
// 16-bit pair sum (at most 2*128*127) is widened at once; ys is unused.
#define Q80X8_TILE(T)                                                                                        \
	X8_AVX2 static inline __attribute__((always_inline)) void q80x8_tile##T(                             \
	    const uint8_t *gp, int nb, const float *yd, const int8_t *yq, const int32_t *ys, int r, float *out,  \
	    long rows, int o) {                                                                                  \
		__m256 acc[T];                                                                                   \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                        \
		const __m256i ones = _mm256_set1_epi16(1);                                                       \
		long stride = (long)nb * 32;                                                                     \
		for (int b = 0; b < nb; b++) {                                                                   \
			const uint8_t *blk = gp + (long)b * Q8_GROUP_BYTES;                                          \
			for (int pf = 0; pf < Q8_GROUP_BYTES; pf += 64) _mm_prefetch((const char *)blk + PREFETCH + pf, _MM_HINT_T0); \
			__m256i s[T];                                                                                \
			for (int k = 0; k < T; k++) s[k] = _mm256_setzero_si256();                                   \
			for (int h = 0; h < 8; h++) {                                                                \
				__m256i w = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * h));                    \
				__m256i a = _mm256_sign_epi8(w, w);                                                      \
				for (int k = 0; k < T; k++) {                                                            \
					int32_t y4;                                                                          \
					memcpy(&y4, yq + (long)(r + k) * stride + (long)b * 32 + 4 * h, 4);                  \
					__m256i p = _mm256_maddubs_epi16(a, _mm256_sign_epi8(_mm256_set1_epi32(y4), w));     \
					s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(p, ones));                           \
				}                                                                                        \
			}                                                                                            \
			__m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));                          \
			for (int k = 0; k < T; k++)                                                                  \
				acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yd[(long)(r + k) * nb + b])), _mm256_cvtepi32_ps(s[k]), acc[k]); \
		}                                                                                                \
		for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);           \
	}
Q80X8_TILE(1)
Q80X8_TILE(2)
Q80X8_TILE(3)
Q80X8_TILE(4)

X8_ROWS(mm_q40x8, X8_AVX2, q40x8_tile, GROUP_BYTES)
X8_ROWS(mm_q80x8, X8_AVX2, q80x8_tile, Q8_GROUP_BYTES)
#endif

// arb_mm_x8 multiplies groups glo..ghi-1 of a repacked matrix (q4: Q4_0,
// else Q8_0) by n activation rows quantised to 8 bits (yd scales, yq
// values, ys block sums); out[r*rows + o]. It returns -1 where the CPU
// lacks AVX2, FMA or F16C (the caller packs only where it has them).
int arb_mm_x8(int q4, const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
              const int32_t *ys, int n, float *out, int rows) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	return x8_run(q4 ? mm_q40x8 : mm_q80x8, packed, glo, ghi, nb, yd, yq, ys, n, out, rows);
#endif
	return -1;
}
