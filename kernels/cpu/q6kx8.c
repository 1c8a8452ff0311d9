//go:build cgo && !purego

// Q6_K weights repacked eight rows at a time (q4kx8.c does Q4_K). A Q6_K
// super-block is 256 weights of one row: four low bits (ql) and two high
// bits (qh) a weight, sixteen signed 8-bit scales (one per 16 weights)
// and a float16 d; weight = d * scale * (q - 32). Here eight rows'
// super-blocks are stored together: their eight d, their scales (scale k
// of the eight rows, a byte each), then for each 32-weight block eight
// 32-byte vectors whose 4-byte lane i holds row i's weights 4h..4h+3,
// unpacked to signed bytes q - 32. Each block gives every lane its row's
// exact integer sum of scale * (q - 32) * y, as the row kernels do (sign
// trick: |q - 32| against y carrying q's sign, summed per 16 weights and
// multiplied by their scale), then one multiply-add by d * yd for the
// eight rows. Rows are summed in the same order whatever the batch or
// group; these AVX2 tiles are the tests' reference for x16.c's sixteen-row
// VNNI tiles, which run in use (as for Q4_K: see q4kx8.c).
#include <string.h>
#include "q40x8.h"
#include "simd.h"

enum { Q6K_BYTES = 210, Q6K_GROUP = 16 + 128 + 2048 };

long arb_q6k_group_bytes(void) { return Q6K_GROUP; }

// q6k_value is weight l (0..255) of a Q6_K super-block, q - 32.
static inline int8_t q6k_value(const uint8_t *blk, int l) {
	int half = l / 128, r = l % 128, g = r / 32, k = r % 32;
	const uint8_t *ql = blk + 64 * half + 32 * (g % 2), *qh = blk + 128 + 32 * half;
	return (int8_t)((((ql[k] >> (4 * (g / 2))) & 0xf) | ((qh[k] >> (2 * g)) & 3) << 4) - 32);
}

// arb_q6k_pack repacks rows (a multiple of 8) of nsb Q6_K super-blocks.
void arb_q6k_pack(const uint8_t *src, long row_bytes, int rows, int nsb, uint8_t *dst) {
	for (int g = 0; g < rows / 8; g++)
		for (int s = 0; s < nsb; s++) {
			uint8_t *d = dst + ((long)g * nsb + s) * Q6K_GROUP;
			for (int i = 0; i < 8; i++) {
				const uint8_t *blk = src + (long)(8 * g + i) * row_bytes + (long)s * Q6K_BYTES;
				memcpy(d + 2 * i, blk + 208, 2);
				for (int k = 0; k < 16; k++) d[16 + 8 * k + i] = blk[192 + k];
				for (int b = 0; b < 8; b++)
					for (int h = 0; h < 8; h++)
						for (int e = 0; e < 4; e++) d[144 + 256 * b + 32 * h + 4 * i + e] = (uint8_t)q6k_value(blk, 32 * b + 4 * h + e);
			}
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "x8.h"

// ISUM4 is a lane's exact sum over h = 0..3 of |q| times four broadcast
// activation bytes carrying q's sign: maddubs pairs (|q| <= 32 against
// bytes of at most 127: four pair sums stay below 32767) then one madd.
#define ISUM4_AVX2(a, q, y4)                                                                                \
	({                                                                                                   \
		__m256i s16 = _mm256_maddubs_epi16((a)[0], _mm256_sign_epi8(_mm256_set1_epi32((y4)[0]), (q)[0])); \
		for (int h = 1; h < 4; h++)                                                                      \
			s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16((a)[h], _mm256_sign_epi8(_mm256_set1_epi32((y4)[h]), (q)[h]))); \
		_mm256_madd_epi16(s16, _mm256_set1_epi16(1));                                                    \
	})

// Q6KX8_TILE defines NAME##T: the eight rows of group gp against
// activation rows r..r+T-1, stored at out[(r+k)*rows + o .. o+7] (ys, the
// activation blocks' sums, is unused: the weights carry no offset here).
#define Q6KX8_TILE(NAME, ATTR, ISUM, T)                                                                     \
	ATTR static inline __attribute__((always_inline)) void NAME##T(const uint8_t *gp, int nsb, const float *yd, \
	                                                              const int8_t *yq, const int32_t *ys, int r, \
	                                                              float *out, long rows, int o) {         \
		__m256 acc[T];                                                                                   \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                        \
		long nb = (long)nsb * 8, stride = nb * 32;                                                       \
		for (int s = 0; s < nsb; s++) {                                                                  \
			const uint8_t *blk = gp + (long)s * Q6K_GROUP;                                               \
			for (int pf = 0; pf < Q6K_GROUP; pf += 64) _mm_prefetch((const char *)blk + PREFETCH + pf, _MM_HINT_T0); \
			__m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));                           \
			for (int b = 0; b < 8; b++) {                                                                \
				__m256i q[8], a[8];                                                                      \
				for (int h = 0; h < 8; h++) {                                                            \
					q[h] = _mm256_loadu_si256((const __m256i *)(blk + 144 + 256 * b + 32 * h));          \
					a[h] = _mm256_abs_epi8(q[h]);                                                        \
				}                                                                                        \
				__m256i sc0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 16 + 16 * b)));  \
				__m256i sc1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 24 + 16 * b)));  \
				for (int k = 0; k < T; k++) {                                                            \
					int32_t y4[8];                                                                       \
					memcpy(y4, yq + (long)(r + k) * stride + ((long)s * 8 + b) * 32, 32);                \
					__m256i lo = ISUM(a, q, y4), hi = ISUM(a + 4, q + 4, y4 + 4);                        \
					__m256i is = _mm256_add_epi32(_mm256_mullo_epi32(lo, sc0), _mm256_mullo_epi32(hi, sc1)); \
					__m256 dy = _mm256_mul_ps(d, _mm256_set1_ps(yd[(long)(r + k) * nb + (long)s * 8 + b])); \
					acc[k] = _mm256_fmadd_ps(dy, _mm256_cvtepi32_ps(is), acc[k]);                        \
				}                                                                                        \
			}                                                                                            \
		}                                                                                                \
		for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);           \
	}

Q6KX8_TILE(q6kx8_tile, X8_AVX2, ISUM4_AVX2, 1)
Q6KX8_TILE(q6kx8_tile, X8_AVX2, ISUM4_AVX2, 2)
Q6KX8_TILE(q6kx8_tile, X8_AVX2, ISUM4_AVX2, 3)
Q6KX8_TILE(q6kx8_tile, X8_AVX2, ISUM4_AVX2, 4)

X8_ROWS(mm_q6kx8, X8_AVX2, q6kx8_tile, Q6K_GROUP)
#endif

// arb_mm_q6kx8 is arb_mm_kx8 (q4kx8.c) for repacked Q6_K.
int arb_mm_q6kx8(const uint8_t *packed, int glo, int ghi, int nsb, const float *yd, const int8_t *yq, int n, float *out,
                 int rows) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	return x8_run(mm_q6kx8, packed, glo, ghi, nsb, yd, yq, NULL, n, out, rows);
#endif
	return -1;
}
