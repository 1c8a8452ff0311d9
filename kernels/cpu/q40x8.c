//go:build cgo && !purego

// Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL and IQ4_XS weights repacked eight
// rows at a time, for AVX2.
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

// Q5_0, Q4_1 and Q5_1 are repacked as x16.c repacks them for sixteen
// rows: the eight scales (Q4_1, Q5_1: then the eight mins), Q4_0's four
// vectors of nibbles, and (Q5_0, Q5_1) a vector of fifth bits whose lane
// i holds row i's four bytes e, bit h of byte e the fifth bit of weight
// 4h+e and bit 4+h that of weight 16+4h+e: 176, 160 and 192 bytes, what
// the eight blocks take.
enum { Q50_GROUP_BYTES = 16 + 128 + 32, Q41_GROUP_BYTES = 16 + 16 + 128, Q51_GROUP_BYTES = Q41_GROUP_BYTES + 32 };

// IQ4_NL is repacked as Q4_0 (its nibbles index the IQ4 table). IQ4_XS,
// per 32-weight block of its super-blocks: the eight rows' block scales
// d * (ls - 32) as float32 (exact), then Q4_0's four vectors: 160 bytes.
enum { IQ4XS_GROUP_BYTES = 32 + 128 };

#if !X8_VNNI // once, not again in x8vnni_q40.c
// arb_x8_group_bytes is what a group of eight rows takes a block
// (super-block for the K-quants) in the eight-row layouts: q40x8.c's
// sizes, k8.c's for the K-quants; 0 for a type without them. The Go side
// sizes the copies with its own table (cpu.go's repackedRowBytes), which
// TestRepackedSizes holds to this one.
long arb_x8_group_bytes(int type) {
	switch (type) {
	case ARB_Q4_0: case ARB_IQ4_NL: return GROUP_BYTES;
	case ARB_Q8_0: return Q8_GROUP_BYTES;
	case ARB_Q5_0: return Q50_GROUP_BYTES;
	case ARB_Q4_1: return Q41_GROUP_BYTES;
	case ARB_Q5_1: return Q51_GROUP_BYTES;
	case ARB_IQ4_XS: return 8 * IQ4XS_GROUP_BYTES;
	}
	return arb_k8_group_bytes(type);
}

// arb_x8_pack repacks rows (a multiple of 8, row_bytes each) of nb blocks
// of 32 weights of a type (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS)
// into the eight-row groups the AVX2 tiles read (eight times cpu.go's
// repackedRowBytes a group's block); the type decides the block's bytes,
// as for arb_x16_pack.
void arb_x8_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst) {
	if (type == ARB_IQ4_XS) { // nb blocks of 32 are nb/8 super-blocks of 136 bytes
		for (int g = 0; g < rows / 8; g++)
			for (int b = 0; b < nb; b++) {
				uint8_t *d = dst + ((long)g * nb + b) * IQ4XS_GROUP_BYTES;
				for (int i = 0; i < 8; i++) {
					const uint8_t *sb = src + (long)(8 * g + i) * row_bytes + (long)(b / 8) * 136;
					int j = b % 8, sh = sb[2] | sb[3] << 8;
					int ls = ((sb[4 + j / 2] >> (4 * (j % 2))) & 0xf) | ((sh >> (2 * j)) & 3) << 4;
					float dl = arb_f16_to_f32((uint16_t)(sb[0] | sb[1] << 8)) * (float)(ls - 32);
					memcpy(d + 4 * i, &dl, 4);
					for (int h = 0; h < 4; h++) memcpy(d + 32 + 32 * h + 4 * i, sb + 8 + 16 * j + 4 * h, 4);
				}
			}
		return;
	}
	int block_bytes = (int)(row_bytes / nb); // a block type's rows are whole blocks
	int legacy = type == ARB_Q5_0 || type == ARB_Q4_1 || type == ARB_Q5_1;
	int vecs = (block_bytes - 2) / 4, group = legacy ? 8 * block_bytes : 16 + 32 * vecs;
	int mn = type != ARB_Q5_0, q5 = type != ARB_Q4_1, head = 2 + 2 * mn, at = 16 + 16 * mn;
	for (int g = 0; g < rows / 8; g++)
		for (int b = 0; b < nb; b++) {
			uint8_t *d = dst + ((long)g * nb + b) * group;
			for (int i = 0; i < 8; i++) {
				const uint8_t *blk = src + (long)(8 * g + i) * row_bytes + (long)b * block_bytes;
				memcpy(d + 2 * i, blk, 2);
				if (!legacy) {
					for (int h = 0; h < vecs; h++) memcpy(d + 16 + 32 * h + 4 * i, blk + 2 + 4 * h, 4);
					continue;
				}
				if (mn) memcpy(d + 16 + 2 * i, blk + 2, 2);
				for (int h = 0; h < 4; h++) memcpy(d + at + 32 * h + 4 * i, blk + head + 4 * q5 + 4 * h, 4);
				if (!q5) continue;
				arb_fifth_bits(blk + head, d + at + 128 + 4 * i);
			}
		}
}
#endif

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
	    long rows, int o, int nta) {                                                                         \
		__m256 acc[T];                                                                                   \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                        \
		long stride = (long)nb * 32;                                                                     \
		for (int b = 0; b < nb; b++) {                                                                   \
			const uint8_t *blk = gp + (long)b * GROUP_BYTES;                                             \
			X8_PREFETCH(blk + PREFETCH, nta);                                                            \
			X8_PREFETCH(blk + PREFETCH + 64, nta);                                                       \
			X8_PREFETCH(blk + PREFETCH + 128, nta);                                                      \
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
// Each row's integer sum is kept one chain of adds by an empty asm on it:
// integer adds reassociate freely, and GCC 12 at -O3 had turned the four
// rows' eight adds a block into 32 separate products summed at the end,
// spilled to the stack; held to the chain, the 1376x512 product of eight
// activation rows (BenchmarkMatMul/Q8_0/n=8, two threads, Zen 3) ran in
// 69 us where it had taken 90 (medians of five interleaved runs), sixteen
// rows in 134 where 153. The sums are exact either way: the same bits.
#define Q80X8_TILE(T)                                                                                        \
	X8_AVX2 static inline __attribute__((always_inline)) void q80x8_tile##T(                             \
	    const uint8_t *gp, int nb, const float *yd, const int8_t *yq, const int32_t *ys, int r, float *out,  \
	    long rows, int o, int nta) {                                                                         \
		__m256 acc[T];                                                                                   \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                        \
		const __m256i ones = _mm256_set1_epi16(1);                                                       \
		long stride = (long)nb * 32;                                                                     \
		for (int b = 0; b < nb; b++) {                                                                   \
			const uint8_t *blk = gp + (long)b * Q8_GROUP_BYTES;                                          \
			for (int pf = 0; pf < Q8_GROUP_BYTES; pf += 64) X8_PREFETCH(blk + PREFETCH + pf, nta);     \
			__m256i s[T];                                                                                \
			for (int k = 0; k < T; k++) s[k] = _mm256_setzero_si256();                                   \
			for (int h = 0; h < 8; h++) {                                                                \
				__m256i w = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * h));                    \
				__m256i a = _mm256_sign_epi8(w, w);                                                      \
				for (int k = 0; k < T; k++) {                                                            \
					int32_t y4;                                                                          \
					memcpy(&y4, yq + (long)(r + k) * stride + (long)b * 32 + 4 * h, 4);                  \
					s[k] = X8_DOTS_T(T, s[k], a, _mm256_sign_epi8(_mm256_set1_epi32(y4), w), ones);      \
					__asm__("" : "+x"(s[k])); /* each row's sum one chain (below) */                      \
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

// q50x8_tile is q40x8_tile for Q5_0 (q5, no min), Q4_1 (a min) and
// Q5_1 (both), in x16.c's arithmetic lane for lane, so the two widths
// give the same bits: the weights unsigned (the fifth bit adds 16 where
// it is set), their pair sums added four at a time in 16 bits (2*31*127
// each at most) before madd widens them; Q5_0 takes 16 times the block's
// activation sum off the exact total, then acc += (d * dy) * sum; Q4_1 and
// Q5_1 add their min's share after it: acc += dy * (d * sum + m * sy).
X8_AVX2 static inline __attribute__((always_inline)) void q50x8_tile(const int type, const uint8_t *gp, int nb, const float *yd,
                                                                     const int8_t *yq, const int32_t *ys, int r, const int T,
                                                                     float *out, long rows, int o, int nta) {
	const int mn = type != ARB_Q5_0, q5 = type != ARB_Q4_1, at = 16 + 16 * mn;
	const long GB = type == ARB_Q5_0 ? Q50_GROUP_BYTES : type == ARB_Q4_1 ? Q41_GROUP_BYTES : Q51_GROUP_BYTES;
	__m256 acc[4];
	for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0xf), sixteen = _mm256_set1_epi8(16), ones = _mm256_set1_epi16(1);
	long stride = (long)nb * 32;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = gp + (long)b * GB;
		for (long pf = 0; pf < GB; pf += 64) X8_PREFETCH(blk + PREFETCH + pf, nta);
		__m256i w[8];
		__m256i fifth = q5 ? _mm256_loadu_si256((const __m256i *)(blk + at + 128)) : _mm256_setzero_si256();
		for (int h = 0; h < 4; h++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)(blk + at + 32 * h));
			w[h] = _mm256_and_si256(v, m4);
			w[4 + h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
			if (q5) {
				__m256i lo = _mm256_set1_epi8((char)(1 << h)), hi = _mm256_set1_epi8((char)(16 << h));
				w[h] = _mm256_or_si256(w[h], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(fifth, lo), lo), sixteen));
				w[4 + h] = _mm256_or_si256(w[4 + h], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(fifth, hi), hi), sixteen));
			}
		}
		__m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
		__m256 mw = mn ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16))) : _mm256_setzero_ps();
		for (int k = 0; k < T; k++) {
			const int8_t *y = yq + (long)(r + k) * stride + (long)b * 32;
			int32_t y4[8];
			memcpy(y4, y, 32);
			__m256i s32;
#if X8_VNNI
			__m256i sa = X8_DP(_mm256_setzero_si256(), w[0], _mm256_set1_epi32(y4[0])), sb = X8_DP(_mm256_setzero_si256(), w[4], _mm256_set1_epi32(y4[4]));
			for (int h = 1; h < 4; h++) {
				sa = X8_DP(sa, w[h], _mm256_set1_epi32(y4[h]));
				sb = X8_DP(sb, w[4 + h], _mm256_set1_epi32(y4[4 + h]));
			}
			s32 = _mm256_add_epi32(sa, sb);
			(void)ones;
#else
			__m256i s16a = _mm256_maddubs_epi16(w[0], _mm256_set1_epi32(y4[0])), s16b = _mm256_maddubs_epi16(w[4], _mm256_set1_epi32(y4[4]));
			for (int h = 1; h < 4; h++) {
				s16a = _mm256_add_epi16(s16a, _mm256_maddubs_epi16(w[h], _mm256_set1_epi32(y4[h])));
				s16b = _mm256_add_epi16(s16b, _mm256_maddubs_epi16(w[4 + h], _mm256_set1_epi32(y4[4 + h])));
			}
			s32 = _mm256_add_epi32(_mm256_madd_epi16(s16a, ones), _mm256_madd_epi16(s16b, ones));
#endif
			int32_t sy = ys[(long)(r + k) * nb + b];
			float dy = yd[(long)(r + k) * nb + b];
			if (!mn) {
				s32 = _mm256_sub_epi32(s32, _mm256_set1_epi32(16 * sy));
				acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dy)), _mm256_cvtepi32_ps(s32), acc[k]);
			} else {
				__m256 v = _mm256_fmadd_ps(mw, _mm256_set1_ps((float)sy), _mm256_mul_ps(dw, _mm256_cvtepi32_ps(s32)));
				acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dy), v, acc[k]);
			}
		}
	}
	for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);
}
// iq4x8_tile is q80x8_tile for IQ4_NL (IQ4_XS when xs: float32 block
// scales): each nibble indexes the IQ4 table, whose signed values take
// the sign trick, each pair sum (at most 2*127*127) widened at once; as
// x16.c's tile, lane for lane.
X8_AVX2 static inline __attribute__((always_inline)) void iq4x8_tile(const int xs, const uint8_t *gp, int nb, const float *yd,
                                                                     const int8_t *yq, int r, const int T, float *out, long rows,
                                                                     int o, int nta) {
	const long GB = xs ? IQ4XS_GROUP_BYTES : GROUP_BYTES, at = xs ? 32 : 16;
	__m256 acc[4];
	for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();
	const __m256i m4 = _mm256_set1_epi8(0xf), ones = _mm256_set1_epi16(1);
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)arb_iq4_table()));
	long stride = (long)nb * 32;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = gp + (long)b * GB;
		for (long pf = 0; pf < GB; pf += 64) X8_PREFETCH(blk + PREFETCH + pf, nta);
		__m256i w[8], a[8];
		for (int h = 0; h < 4; h++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)(blk + at + 32 * h));
			w[h] = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
			w[4 + h] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
		}
		for (int h = 0; h < 8; h++) a[h] = _mm256_sign_epi8(w[h], w[h]);
		__m256 dw = xs ? _mm256_loadu_ps((const float *)blk) : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
		for (int k = 0; k < T; k++) {
			const int8_t *y = yq + (long)(r + k) * stride + (long)b * 32;
			__m256i s = _mm256_setzero_si256();
			for (int h = 0; h < 8; h++) {
				int32_t y4;
				memcpy(&y4, y + 4 * (h % 4) + 16 * (h / 4), 4);
				s = X8_DOTS_T(T, s, a[h], _mm256_sign_epi8(_mm256_set1_epi32(y4), w[h]), ones);
			}
			acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(yd[(long)(r + k) * nb + b])), _mm256_cvtepi32_ps(s), acc[k]);
		}
	}
	for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);
}

// X8_TILES defines NAME##1..4, the tiles of 1 to 4 activation rows
// X8_ROWS runs, each CALL(T).
#define X8_TILE(NAME, T, CALL)                                                                               \
	X8_AVX2 static inline __attribute__((always_inline)) void NAME##T(const uint8_t *gp, int nb, const float *yd, const int8_t *yq, \
	                                                                  const int32_t *ys, int r, float *out, long rows, int o, \
	                                                                  int nta) {                                              \
		(void)ys;                                                                                            \
		CALL(T);                                                                                             \
	}
#define X8_TILES(NAME, CALL) X8_TILE(NAME, 1, CALL) X8_TILE(NAME, 2, CALL) X8_TILE(NAME, 3, CALL) X8_TILE(NAME, 4, CALL)
#define IQ4NL8(T) iq4x8_tile(0, gp, nb, yd, yq, r, T, out, rows, o, nta)
#define IQ4XS8(T) iq4x8_tile(1, gp, nb, yd, yq, r, T, out, rows, o, nta)
#define Q508(T) q50x8_tile(ARB_Q5_0, gp, nb, yd, yq, ys, r, T, out, rows, o, nta)
#define Q418(T) q50x8_tile(ARB_Q4_1, gp, nb, yd, yq, ys, r, T, out, rows, o, nta)
#define Q518(T) q50x8_tile(ARB_Q5_1, gp, nb, yd, yq, ys, r, T, out, rows, o, nta)
X8_TILES(iq4nlx8_tile_, IQ4NL8)
X8_TILES(iq4xsx8_tile_, IQ4XS8)
X8_TILES(q50x8_tile_, Q508)
X8_TILES(q41x8_tile_, Q418)
X8_TILES(q51x8_tile_, Q518)

X8_ROWS(mm_q40x8, X8_AVX2, q40x8_tile, GROUP_BYTES)
X8_ROWS(mm_q80x8, X8_AVX2, q80x8_tile, Q8_GROUP_BYTES)
X8_ROWS(mm_q50x8, X8_AVX2, q50x8_tile_, Q50_GROUP_BYTES)
X8_ROWS(mm_q41x8, X8_AVX2, q41x8_tile_, Q41_GROUP_BYTES)
X8_ROWS(mm_q51x8, X8_AVX2, q51x8_tile_, Q51_GROUP_BYTES)
X8_ROWS(mm_iq4nlx8, X8_AVX2, iq4nlx8_tile_, GROUP_BYTES)
X8_ROWS(mm_iq4xsx8, X8_AVX2, iq4xsx8_tile_, IQ4XS_GROUP_BYTES)
#endif

// mm_x8 is arb_mm_x8 with this compilation's tiles.
static int mm_x8(int type, const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
                 const int32_t *ys, int n, float *out, int rows, int stream) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	switch (type) {
	case ARB_Q4_0: return x8_run(mm_q40x8, mm_q40x8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	case ARB_Q8_0: return x8_run(mm_q80x8, mm_q80x8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	case ARB_Q5_0: return x8_run(mm_q50x8, mm_q50x8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	case ARB_Q4_1: return x8_run(mm_q41x8, mm_q41x8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	case ARB_Q5_1: return x8_run(mm_q51x8, mm_q51x8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	case ARB_IQ4_NL: return x8_run(mm_iq4nlx8, mm_iq4nlx8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	case ARB_IQ4_XS: return x8_run(mm_iq4xsx8, mm_iq4xsx8_nta, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	}
#else
	(void)type; (void)packed; (void)glo; (void)ghi; (void)nb; (void)yd; (void)yq; (void)ys; (void)n; (void)out; (void)rows; (void)stream;
#endif
	return -1;
}

#if X8_VNNI
// arb_mm_x8_vnni is arb_mm_x8 on the AVX-VNNI tiles; -1 where the CPU
// lacks AVX-VNNI.
int arb_mm_x8_vnni(int type, const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
                   const int32_t *ys, int n, float *out, int rows, int stream) {
	if (!arb_avx_vnni_cpu()) return -1;
	return mm_x8(type, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
}
#else
// arb_mm_x8 multiplies groups glo..ghi-1 of a repacked matrix of type
// (Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS) by n activation rows
// quantised to 8 bits (yd scales, yq values, ys block sums); out[r*rows +
// o]; stream as arb_mm_x16 takes it (X8_ROWS); with vnni on the AVX-VNNI
// tiles (the same bits). It returns -1 where the CPU lacks AVX2, FMA or
// F16C (the caller packs only where it has them) or AVX-VNNI when vnni
// asks for it, or type has no eight-row tiles here.
int arb_mm_x8(int type, const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
              const int32_t *ys, int n, float *out, int rows, int stream, int vnni) {
	if (vnni) return arb_mm_x8_vnni(type, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
	return mm_x8(type, packed, glo, ghi, nb, yd, yq, ys, n, out, rows, stream);
}
#endif
