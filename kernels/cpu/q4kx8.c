//go:build cgo && !purego

// Q4_K weights repacked eight rows at a time, as q40x8.c does for Q4_0 and
// Q8_0. On a CPU whose memory keeps up (2 Zen 4 cores reading 30-39 GB/s),
// decoding a Q4_K model of the bench target's shape ran at 39% of the
// bandwidth roofline, where Q4_0's repacked rows reached 75%: the
// row-at-a-time kernel (simd.c's k_tile) spends its time reducing each
// row's sums across a vector and unpacking scales row by row.
//
// A Q4_K super-block is 256 weights of one row: a float16 scale d and
// min dmin, twelve bytes packing eight 6-bit sub-block scales and mins,
// and 128 bytes of nibbles (chunk c's 32 bytes hold sub-block 2c in their
// low nibbles and sub-block 2c+1 in their high ones). Here eight rows'
// super-blocks are stored together: their eight d and eight dmin, the
// sub-block scales and mins unpacked (sub-block j's eight rows' scales,
// then their mins, a byte each), then for each chunk eight 32-byte vectors
// whose 4-byte lane i holds row i's bytes 4h..4h+3 of the chunk. One load
// gives each lane four weights of its own row, multiplied by four
// activation bytes broadcast to every lane, so after a sub-block every
// lane holds its row's exact integer sum, and one multiply-add a sub-block
// applies d * scale and dmin * min for all eight rows. A weight is
// d * scale_j * q - dmin * min_j, so a sub-block adds
// (d * scale_j) * yd_j * sum(q * y) - (dmin * min_j) * yd_j * sum(y).
//
// Q5_K is the same with a fifth bit a weight (a 32-byte plane a row: bit j
// of byte l is weight 32j + l's), kept as a plane beside the nibbles, four
// bytes a row lane, and or-ed in as bit 4 of each weight byte.
//
// Every row is summed in the same order whatever the batch or its group,
// so a verification row equals the decode row bit for bit. These AVX2
// tiles do not run in use: where the CPU has AVX-512 VNNI, x16.c's
// sixteen-row tiles run, held to these bit for bit
// (TestSixteenRowsMatchEightRows); without it K-quants keep their file
// layout (simd.c's row kernel was as fast as these).
#include <string.h>
#include "q40x8.h"
#include "simd.h"

enum { Q4K_BYTES = 144, Q5K_BYTES = 176, Q4K_GROUP = 16 + 16 + 64 + 64 + 1024, Q5K_GROUP = Q4K_GROUP + 256 };

static inline void q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// arb_kx8_group_bytes is what eight rows' super-block take repacked
// (q5: Q5_K, else Q4_K).
long arb_kx8_group_bytes(int q5) { return q5 ? Q5K_GROUP : Q4K_GROUP; }

// arb_kx8_pack repacks rows (a multiple of 8) of nsb Q4_K (q5: Q5_K)
// super-blocks.
void arb_kx8_pack(int q5, const uint8_t *src, long row_bytes, int rows, int nsb, uint8_t *dst) {
	long group = q5 ? Q5K_GROUP : Q4K_GROUP, bytes = q5 ? Q5K_BYTES : Q4K_BYTES;
	int qs = q5 ? 48 : 16; // the nibbles' offset in a super-block
	for (int g = 0; g < rows / 8; g++)
		for (int s = 0; s < nsb; s++) {
			uint8_t *d = dst + ((long)g * nsb + s) * group;
			for (int i = 0; i < 8; i++) {
				const uint8_t *blk = src + (long)(8 * g + i) * row_bytes + (long)s * bytes;
				memcpy(d + 2 * i, blk, 2);
				memcpy(d + 16 + 2 * i, blk + 2, 2);
				for (int j = 0; j < 8; j++) q4k_scale_min(j, blk + 4, d + 32 + 16 * j + i, d + 32 + 16 * j + 8 + i);
				for (int c = 0; c < 4; c++)
					for (int h = 0; h < 8; h++) memcpy(d + 160 + 256 * c + 32 * h + 4 * i, blk + qs + 32 * c + 4 * h, 4);
				if (q5)
					for (int h = 0; h < 8; h++) memcpy(d + Q4K_GROUP + 32 * h + 4 * i, blk + 16 + 4 * h, 4);
			}
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "x8.h"

// ISUM8_AVX2_Q5 is x8.h's ISUM8_AVX2 for five-bit weights (at most 31: a
// pair sum reaches 2*31*127, so the 16-bit sums are widened every four).
#define ISUM8_AVX2_Q5(w, y4)                                                                                \
	({                                                                                                   \
		__m256i a16 = _mm256_maddubs_epi16((w)[0], _mm256_set1_epi32((y4)[0]));                          \
		__m256i b16 = _mm256_maddubs_epi16((w)[4], _mm256_set1_epi32((y4)[4]));                          \
		for (int h = 1; h < 4; h++) {                                                                    \
			a16 = _mm256_add_epi16(a16, _mm256_maddubs_epi16((w)[h], _mm256_set1_epi32((y4)[h])));       \
			b16 = _mm256_add_epi16(b16, _mm256_maddubs_epi16((w)[4 + h], _mm256_set1_epi32((y4)[4 + h]))); \
		}                                                                                                \
		_mm256_add_epi32(_mm256_madd_epi16(a16, _mm256_set1_epi16(1)), _mm256_madd_epi16(b16, _mm256_set1_epi16(1))); \
	})

// Q4KX8_TILE defines NAME##T: the eight rows of group gp against activation
// rows r..r+T-1, stored at out[(r+k)*rows + o .. o+7].
#define Q4KX8_TILE(NAME, ATTR, ISUM, Q5, T)                                                                 \
	ATTR static inline __attribute__((always_inline)) void NAME##T(const uint8_t *gp, int nsb, const float *yd, \
	                                                              const int8_t *yq, const int32_t *ys, int r, \
	                                                              float *out, long rows, int o) {         \
		__m256 acc[T];                                                                                   \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                        \
		const __m256i m4 = _mm256_set1_epi8(0xf);                                                        \
		long nb = (long)nsb * 8, stride = nb * 32;                                                       \
		const long GB = Q5 ? Q5K_GROUP : Q4K_GROUP;                                                      \
		const __m256i bit = _mm256_set1_epi8(1);                                                         \
		for (int s = 0; s < nsb; s++) {                                                                  \
			const uint8_t *blk = gp + (long)s * GB;                                                      \
			for (int pf = 0; pf < GB; pf += 64) _mm_prefetch((const char *)blk + PREFETCH + pf, _MM_HINT_T0); \
			__m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));                           \
			__m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));                 \
			__m256i qh[8];                                                                               \
			if (Q5)                                                                                      \
				for (int h = 0; h < 8; h++) qh[h] = _mm256_loadu_si256((const __m256i *)(blk + Q4K_GROUP + 32 * h)); \
			for (int c = 0; c < 4; c++) {                                                                \
				__m256i lo[8], hi[8];                                                                    \
				for (int h = 0; h < 8; h++) {                                                            \
					__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 160 + 256 * c + 32 * h));     \
					lo[h] = _mm256_and_si256(v, m4);                                                     \
					hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);                               \
					if (Q5) { /* bit 2c (2c+1) of each qh byte is its weight's fifth bit, moved to bit 4 */ \
						lo[h] = _mm256_or_si256(lo[h], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[h], 2 * c), bit), 4)); \
						hi[h] = _mm256_or_si256(hi[h], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[h], 2 * c + 1), bit), 4)); \
					}                                                                                    \
				}                                                                                        \
				__m256 dsc[2], dmm[2];                                                                   \
				for (int e = 0; e < 2; e++) {                                                            \
					int j = 2 * c + e;                                                                   \
					__m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * j))); \
					__m256i mn = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 40 + 16 * j))); \
					dsc[e] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));                                   \
					dmm[e] = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(mn));                                \
				}                                                                                        \
				for (int k = 0; k < T; k++) {                                                            \
					for (int e = 0; e < 2; e++) {                                                        \
						long b = (long)s * 8 + 2 * c + e;                                                \
						int32_t y4[8];                                                                   \
						memcpy(y4, yq + (long)(r + k) * stride + b * 32, 32);                            \
						__m256i is = e ? ISUM(hi, y4) : ISUM(lo, y4);                                    \
						float dy = yd[(long)(r + k) * nb + b];                                           \
						acc[k] = _mm256_fmadd_ps(dsc[e], _mm256_mul_ps(_mm256_set1_ps(dy), _mm256_cvtepi32_ps(is)), acc[k]); \
						acc[k] = _mm256_fnmadd_ps(dmm[e], _mm256_set1_ps(dy * (float)ys[(long)(r + k) * nb + b]), acc[k]); \
					}                                                                                    \
				}                                                                                        \
			}                                                                                            \
		}                                                                                                \
		for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);           \
	}

Q4KX8_TILE(q4kx8_tile, X8_AVX2, ISUM8_AVX2, 0, 1)
Q4KX8_TILE(q4kx8_tile, X8_AVX2, ISUM8_AVX2, 0, 2)
Q4KX8_TILE(q4kx8_tile, X8_AVX2, ISUM8_AVX2, 0, 3)
Q4KX8_TILE(q4kx8_tile, X8_AVX2, ISUM8_AVX2, 0, 4)
Q4KX8_TILE(q5kx8_tile, X8_AVX2, ISUM8_AVX2_Q5, 1, 1)
Q4KX8_TILE(q5kx8_tile, X8_AVX2, ISUM8_AVX2_Q5, 1, 2)
Q4KX8_TILE(q5kx8_tile, X8_AVX2, ISUM8_AVX2_Q5, 1, 3)
Q4KX8_TILE(q5kx8_tile, X8_AVX2, ISUM8_AVX2_Q5, 1, 4)

X8_ROWS(mm_q4kx8, X8_AVX2, q4kx8_tile, Q4K_GROUP)
X8_ROWS(mm_q5kx8, X8_AVX2, q5kx8_tile, Q5K_GROUP)
#endif

// arb_mm_kx8 multiplies groups glo..ghi-1 of a repacked Q4_K (q5: Q5_K)
// matrix (nsb super-blocks a row) by n activation rows quantised to 8
// bits. -1 without AVX2.
int arb_mm_kx8(int q5, const uint8_t *packed, int glo, int ghi, int nsb, const float *yd, const int8_t *yq,
               const int32_t *ys, int n, float *out, int rows) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	return x8_run(q5 ? mm_q5kx8 : mm_q4kx8, packed, glo, ghi, nsb, yd, yq, ys, n, out, rows);
#endif
	return -1;
}
