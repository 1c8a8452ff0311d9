//go:build cgo && !purego

// SIMD matrix kernels for the CPU backend, called through cgo.
//
// Two families:
//  - arb_mm_q8: quantised weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL in
//    32-value blocks; Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS in 256-value
//    super-blocks, whose sub-blocks line up with the activation blocks;
//    IQ4_NL and IQ4_XS map 4-bit indices through ggml's kvalues_iq4nl
//    table, in AVX2 with one byte shuffle) times activations
//    quantised to 8 bits per 32-value block; inner products run on integers
//    (AVX2: maddubs/madd), then one float multiply-add per block (Q8_0) or
//    per four blocks (the others) applies the scales. The 4-, 5- and
//    6-bit weights of the types with a min enter maddubs unsigned, as
//    stored, and their offset comes off the exact integer sum (offset * sum
//    of y); Q8_0 and Q6_K take the sign trick.
//  - arb_mm_f32: the float types (F32, F16, BF16); F16/BF16 rows are widened
//    to float32 once into a scratch row, then multiplied by every
//    activation row with FMA.
// Each family has an AVX2+FMA+F16C version and a portable C version, chosen
// once at run time; kernels/cpu's Go reference loops define the results.
// Rows of weights are processed against up to four activation rows at a
// time (Q8_0: eight), so a weight block is loaded once per four (eight) dot
// products.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "simd.h"

static inline float fp16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
	if (exp == 0x1f) bits = sign | 0x7f800000 | (mant << 13);
	else if (exp == 0) {
		if (mant == 0) bits = sign;
		else {
			uint32_t e = 127 - 15 + 1;
			while (!(mant & 0x400)) { mant <<= 1; e--; }
			bits = sign | (e << 23) | ((mant & 0x3ff) << 13);
		}
	} else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

// arb_f16_to_f32 is fp16_to_f32 for the repacking code (x16.c, q40x8.c).
float arb_f16_to_f32(uint16_t h) { return fp16_to_f32(h); }

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int block_bytes(int type) {
	switch (type) {
	case ARB_Q8_0: return 34;
	case ARB_Q4_0: return 18;
	case ARB_Q4_1: return 20;
	case ARB_Q5_0: return 22;
	case ARB_Q5_1: return 24;
	case ARB_IQ4_NL: return 18;
	}
	return 0;
}

// kvalues_iq4nl is the non-linear table of IQ4_NL and IQ4_XS (ggml's
// kvalues_iq4nl; kernels/quant's KValuesIQ4NL).
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// arb_iq4_table is the table for the repacked tiles (x16.c, q40x8.c).
const int8_t *arb_iq4_table(void) { return kvalues_iq4nl; }

// unpack32 expands one weight block to 32 signed integers q (weight = d*q + m)
// and returns d (and m through mout).
static inline float unpack32(int type, const uint8_t *b, int8_t *q, float *mout) {
	float d = fp16_to_f32(rd16(b)), m = 0;
	switch (type) {
	case ARB_Q8_0:
		memcpy(q, b + 2, 32);
		break;
	case ARB_Q4_0:
		for (int j = 0; j < 16; j++) { q[j] = (int8_t)((b[2 + j] & 0xf) - 8); q[j + 16] = (int8_t)((b[2 + j] >> 4) - 8); }
		break;
	case ARB_Q4_1:
		m = fp16_to_f32(rd16(b + 2));
		for (int j = 0; j < 16; j++) { q[j] = (int8_t)(b[4 + j] & 0xf); q[j + 16] = (int8_t)(b[4 + j] >> 4); }
		break;
	case ARB_Q5_0: {
		uint32_t qh = rd32(b + 2);
		for (int j = 0; j < 16; j++) {
			q[j] = (int8_t)(((b[6 + j] & 0xf) | ((qh >> j) & 1) << 4) - 16);
			q[j + 16] = (int8_t)(((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16);
		}
		break;
	}
	case ARB_IQ4_NL:
		for (int j = 0; j < 16; j++) { q[j] = kvalues_iq4nl[b[2 + j] & 0xf]; q[j + 16] = kvalues_iq4nl[b[2 + j] >> 4]; }
		break;
	case ARB_Q5_1: {
		m = fp16_to_f32(rd16(b + 2));
		uint32_t qh = rd32(b + 4);
		for (int j = 0; j < 16; j++) {
			q[j] = (int8_t)((b[8 + j] & 0xf) | ((qh >> j) & 1) << 4);
			q[j + 16] = (int8_t)((b[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
		}
		break;
	}
	}
	*mout = m;
	return d;
}

// ---- portable versions ----

// amax_generic is the largest magnitude of count values.
static float amax_generic(const float *xs, int count) {
	float amax = 0;
	for (int j = 0; j < count; j++) { float a = fabsf(xs[j]); if (a > amax) amax = a; }
	return amax;
}

// q8_scaled_generic quantises 32 values to q with inverse scale id (round
// to nearest even, as kernels/cpu's Go quantiser) and returns their sum,
// and through low the sum of the first 16.
static int32_t q8_scaled_generic(const float *xs, int8_t *q, float id, int32_t *low) {
	int32_t sum = 0;
	for (int j = 0; j < 32; j++) {
		int8_t v = (int8_t)nearbyintf(xs[j] * id);
		q[j] = v;
		sum += v;
		if (j == 15) *low = sum;
	}
	return sum;
}

// q8_block_generic quantises 32 values to q with scale *d (round to
// nearest even, as kernels/cpu's Go quantiser) and returns their sum, and
// through low the sum of the first 16.
static int32_t q8_block_generic(const float *xs, int8_t *q, float *d, int32_t *low) {
	float dd = amax_generic(xs, 32) / 127;
	*d = dd;
	return q8_scaled_generic(xs, q, dd != 0 ? 1 / dd : 0, low);
}

static void quantize_q8_generic(const float *x, int count, float *d, int8_t *q, int32_t *s) {
	int32_t low;
	for (int b = 0; b < count / 32; b++) s[b] = q8_block_generic(x + b * 32, q + b * 32, d + b, &low);
}

static void mm_q8_generic(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                          const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
	int bb = block_bytes(type);
	int8_t q[32];
	for (int o = lo; o < hi; o++) {
		const uint8_t *wr = w + (long)o * row_bytes;
		for (int r = 0; r < n; r++) {
			float sum = 0;
			for (int b = 0; b < nb; b++) {
				float m;
				float d = unpack32(type, wr + b * bb, q, &m);
				const int8_t *y = yq + ((long)r * nb + b) * 32;
				int32_t s = 0;
				for (int j = 0; j < 32; j++) s += q[j] * y[j];
				sum += d * yd[r * nb + b] * (float)s + m * yd[r * nb + b] * (float)ys[r * nb + b];
			}
			out[(long)r * rows + o] = sum;
		}
	}
}

static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
	if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
	else { *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4); *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4); }
}

static int kblock_bytes(int type) { return type == ARB_Q4_K ? 144 : type == ARB_Q5_K ? 176 : 210; }

static int is_k(int type) { return type == ARB_Q4_K || type == ARB_Q5_K || type == ARB_Q6_K; }

// mm_k_generic multiplies K-quant rows by 8-bit activations in 32-value
// blocks, the sums of kernels/cpu's dotQ4K, dotQ5K and dotQ6K.
static void mm_k_generic(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                         const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
	int bb = kblock_bytes(type);
	for (int o = lo; o < hi; o++) {
		for (int r = 0; r < n; r++) {
			float sum = 0;
			for (int s = 0; s < nb / 8; s++) {
				const uint8_t *blk = w + (long)o * row_bytes + (long)s * bb;
				for (int j = 0; j < 8; j++) {
					int b = s * 8 + j;
					const int8_t *y = yq + ((long)r * nb + b) * 32;
					float dy = yd[(long)r * nb + b];
					int32_t isum = 0;
					if (type == ARB_Q6_K) {
						int half = j / 4, g = j % 4;
						const uint8_t *ql = blk + 64 * half + 32 * (g % 2), *qh = blk + 128 + 32 * half;
						const int8_t *sc = (const int8_t *)(blk + 192 + 8 * half);
						for (int l = 0; l < 32; l++) {
							int q = (int)(((ql[l] >> (4 * (g / 2))) & 0xf) | ((qh[l] >> (2 * g)) & 3) << 4) - 32;
							isum += sc[2 * g + l / 16] * q * y[l];
						}
						sum += fp16_to_f32(rd16(blk + 208)) * dy * (float)isum;
						continue;
					}
					const uint8_t *ql = blk + (type == ARB_Q4_K ? 16 : 48) + 32 * (j / 2);
					for (int l = 0; l < 32; l++) {
						int q = (ql[l] >> (4 * (j % 2))) & 0xf;
						if (type == ARB_Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
						isum += q * y[l];
					}
					int sc, m;
					scale_min_k4(j, blk + 4, &sc, &m);
					sum += fp16_to_f32(rd16(blk)) * dy * (float)(sc * isum) - fp16_to_f32(rd16(blk + 2)) * dy * (float)(m * ys[(long)r * nb + b]);
				}
			}
			out[(long)r * rows + o] = sum;
		}
	}
}

// The super-block types added after the first K-quants: Q2_K (scale and
// min per 16 values), Q3_K (signed six-bit scale per 16 values, weights
// -4..3 from two low bits and an hmask bit) and IQ4_XS (six-bit scale per
// 32 values, weights from kvalues_iq4nl).
static int is_x(int type) { return type == ARB_Q2_K || type == ARB_Q3_K || type == ARB_IQ4_XS; }

static int xblock_bytes(int type) { return type == ARB_Q2_K ? 84 : type == ARB_Q3_K ? 110 : 136; }

// q3k_scales unpacks a Q3_K super-block's 12 scale bytes into its 16
// signed scales (stored six bits - 32): scale j has its low nibble in byte
// j%8 (high nibble for j >= 8) and its top two bits at bits 2*(j/4) of
// byte 8 + j%4; four at a time, word-wide.
static inline void q3k_scales(const uint8_t *p, int8_t sc[16]) {
	uint32_t a0, a1, a2, s[4];
	memcpy(&a0, p, 4);
	memcpy(&a1, p + 4, 4);
	memcpy(&a2, p + 8, 4);
	s[0] = (a0 & 0x0f0f0f0f) | (a2 & 0x03030303) << 4;
	s[1] = (a1 & 0x0f0f0f0f) | ((a2 >> 2) & 0x03030303) << 4;
	s[2] = ((a0 >> 4) & 0x0f0f0f0f) | ((a2 >> 4) & 0x03030303) << 4;
	s[3] = ((a1 >> 4) & 0x0f0f0f0f) | ((a2 >> 6) & 0x03030303) << 4;
	memcpy(sc, s, 16);
	for (int j = 0; j < 16; j++) sc[j] = (int8_t)(sc[j] - 32);
}

// iq4xs_scale returns sub-block j's signed scale of an IQ4_XS super-block.
static inline int iq4xs_scale(const uint8_t *blk, int j) {
	return (((blk[4 + j / 2] >> (4 * (j % 2))) & 0xf) | ((rd16(blk + 2) >> (2 * j)) & 3) << 4) - 32;
}

// mm_x_generic multiplies Q2_K, Q3_K and IQ4_XS rows by 8-bit activations
// in 32-value blocks, the sums of kernels/cpu's dotQ2K, dotQ3K, dotIQ4XS.
static void mm_x_generic(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                         const float *yd, const int8_t *yq, int n, float *out, int rows) {
	int bb = xblock_bytes(type);
	int8_t sc3[16];
	for (int o = lo; o < hi; o++) {
		for (int r = 0; r < n; r++) {
			float sum = 0;
			for (int s = 0; s < nb / 8; s++) {
				const uint8_t *blk = w + (long)o * row_bytes + (long)s * bb;
				if (type == ARB_Q3_K) q3k_scales(blk + 96, sc3);
				for (int j = 0; j < 8; j++) {
					int b = s * 8 + j;
					const int8_t *y = yq + ((long)r * nb + b) * 32;
					float dy = yd[(long)r * nb + b];
					int32_t isum = 0, msum = 0;
					switch (type) {
					case ARB_Q2_K: {
						const uint8_t *qs = blk + 16 + 32 * (j / 4);
						for (int l = 0; l < 32; l++) {
							int sc = blk[2 * j + l / 16];
							isum += (sc & 0xf) * ((qs[l] >> (2 * (j % 4))) & 3) * y[l];
							msum += (sc >> 4) * y[l];
						}
						sum += fp16_to_f32(rd16(blk + 80)) * dy * (float)isum - fp16_to_f32(rd16(blk + 82)) * dy * (float)msum;
						break;
					}
					case ARB_Q3_K: {
						const uint8_t *qs = blk + 32 + 32 * (j / 4);
						for (int l = 0; l < 32; l++) {
							int q = ((qs[l] >> (2 * (j % 4))) & 3) - (((blk[l] >> j) & 1) ? 0 : 4);
							isum += sc3[2 * j + l / 16] * q * y[l];
						}
						sum += fp16_to_f32(rd16(blk + 108)) * dy * (float)isum;
						break;
					}
					default: { // IQ4_XS
						const uint8_t *qs = blk + 8 + 16 * j;
						for (int l = 0; l < 16; l++) isum += kvalues_iq4nl[qs[l] & 0xf] * y[l] + kvalues_iq4nl[qs[l] >> 4] * y[l + 16];
						sum += fp16_to_f32(rd16(blk)) * dy * (float)(iq4xs_scale(blk, j) * isum);
						break;
					}
					}
				}
			}
			out[(long)r * rows + o] = sum;
		}
	}
}

// expand_row widens one F16 or BF16 weight row to float32.
static void expand_row(int type, const uint8_t *b, int cols, float *y) {
	switch (type) {
	case ARB_F16:
		for (int i = 0; i < cols; i++) y[i] = fp16_to_f32(rd16(b + 2 * i));
		return;
	case ARB_BF16:
		for (int i = 0; i < cols; i++) { uint32_t v = (uint32_t)rd16(b + 2 * i) << 16; memcpy(y + i, &v, 4); }
		return;
	}
}

static float dot_generic(const float *a, const float *b, int n) {
	float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	int i = 0;
	for (; i + 4 <= n; i += 4) { s0 += a[i] * b[i]; s1 += a[i + 1] * b[i + 1]; s2 += a[i + 2] * b[i + 2]; s3 += a[i + 3] * b[i + 3]; }
	for (; i < n; i++) s0 += a[i] * b[i];
	return (s0 + s1) + (s2 + s3);
}

static void mm_f32_generic(int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                           const float *x, int n, float *out, int rows, float *scratch) {
	for (int o = lo; o < hi; o++) {
		const float *wr = (const float *)(w + (long)o * row_bytes);
		if (type != ARB_F32) { expand_row(type, w + (long)o * row_bytes, cols, scratch); wr = scratch; }
		for (int r = 0; r < n; r++) out[(long)r * rows + o] = dot_generic(wr, x + (long)r * cols, cols);
	}
}

// panel_offsets writes the four offsets of blocks b0..b0+cnt-1 of the
// row in slot k of a panel of P rows (its first slot at base), from the
// blocks' sums and the sums of their first sixteen values.
static inline void panel_offsets(int32_t *c, long base, int P, int k, int b0, int cnt, const int32_t *sum, const int32_t *low) {
	for (int j = 0; j < cnt; j++) {
		int32_t *cp = c + 4 * base + (long)(b0 + j) * 4 * P + k;
		cp[0] = -128 * sum[j];
		cp[P] = -8 * sum[j];
		cp[2 * P] = -32 * low[j];
		cp[3 * P] = -32 * (sum[j] - low[j]);
	}
}

// QUANTIZE_PANELS defines NAME, arb_quantize_q8_panels with BLOCK
// quantising each block.
#define QUANTIZE_PANELS(NAME, ATTR, BLOCK)                                                                   \
	ATTR static void NAME(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c) { \
		int nb = cols / 32;                                                                              \
		for (int r = lo; r < hi; r++) {                                                                  \
			int p0 = r / ARB_PANEL * ARB_PANEL, P = n - p0 < ARB_PANEL ? n - p0 : ARB_PANEL, k = r - p0;  \
			long base = (long)p0 * nb;                                                                   \
			for (int b = 0; b < nb; b++) {                                                               \
				long slot = base + (long)b * P + k;                                                      \
				int32_t low = 0, sum = BLOCK(x + (long)r * cols + b * 32, q + slot * 32, d + slot, &low);    \
				panel_offsets(c, base, P, k, b, 1, &sum, &low);                                          \
			}                                                                                            \
		}                                                                                                \
	}
QUANTIZE_PANELS(quantize_panels_generic, , q8_block_generic)

// kpanel_offsets writes the offsets of arb_quantize_q8k_panels for blocks
// b0..b0+cnt-1 (b0 and cnt even) of the row in slot k of a panel of P
// rows (its first slot at base). Of a slot's four offsets, the first of
// each even block j holds the sums of blocks j and j+1 as two int16 (low
// half: block j), the K-quants' tiles' min term (|sum| <= 32 * 127), the
// second the sums of its two 16-value halves as two int16 (Q2_K's
// 16-value mins), the last two as arb_quantize_q8_panels writes them.
static inline void kpanel_offsets(int32_t *c, long base, int P, int k, int b0, int cnt, const int32_t *sum, const int32_t *low) {
	for (int j = 0; j < cnt; j++) {
		int32_t *cp = c + 4 * base + (long)(b0 + j) * 4 * P + k;
		cp[0] = j % 2 ? 0 : (int32_t)((uint32_t)(uint16_t)sum[j] | (uint32_t)sum[j + 1] << 16);
		cp[P] = (int32_t)((uint32_t)(uint16_t)low[j] | (uint32_t)(sum[j] - low[j]) << 16);
		cp[2 * P] = -32 * low[j];
		cp[3 * P] = -32 * (sum[j] - low[j]);
	}
}

// QUANTIZE_KPANELS defines NAME, arb_quantize_q8k_panels with AMAX and
// SCALED: the panels of arb_quantize_q8_panels, but with one scale for each
// 256 values (a K-quant super-block's eight blocks), stored in each of its
// eight slots, and the offsets of kpanel_offsets.
#define QUANTIZE_KPANELS(NAME, ATTR, AMAX, SCALED)                                                         \
	ATTR static void NAME(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c) { \
		int nb = cols / 32;                                                                              \
		for (int r = lo; r < hi; r++) {                                                                  \
			int p0 = r / ARB_PANEL * ARB_PANEL, P = n - p0 < ARB_PANEL ? n - p0 : ARB_PANEL, k = r - p0;  \
			long base = (long)p0 * nb;                                                                   \
			for (int sb = 0; sb < nb / 8; sb++) {                                                        \
				const float *xs = x + (long)r * cols + sb * 256;                                         \
				float dd = AMAX(xs, 256) / 127, id = dd != 0 ? 1 / dd : 0;                               \
				int32_t sum[8], low[8];                                                                  \
				for (int j = 0; j < 8; j++) {                                                            \
					long slot = base + (long)(sb * 8 + j) * P + k;                                       \
					sum[j] = SCALED(xs + 32 * j, q + slot * 32, id, &low[j]);                            \
					d[slot] = dd;                                                                        \
				}                                                                                        \
				kpanel_offsets(c, base, P, k, sb * 8, 8, sum, low);                                      \
			}                                                                                            \
		}                                                                                                \
	}
QUANTIZE_KPANELS(quantize_kpanels_generic, , amax_generic, q8_scaled_generic)

// ---- AVX2 + FMA + F16C ----
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#include "vec8.h"
#include "vec16.h"

AVX2 static inline int32_t hsum_i32(__m256i v) {
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s4 = _mm_hadd_epi32(s4, s4);
	s4 = _mm_hadd_epi32(s4, s4);
	return _mm_cvtsi128_si32(s4);
}

// q8_scaled_avx2 is q8_scaled_generic eight lanes at a time (the same
// values).
AVX2 static inline __attribute__((always_inline)) int32_t q8_scaled_avx2(const float *xs, int8_t *q, float id, int32_t *lowp) {
	__m256 v0 = _mm256_loadu_ps(xs), v1 = _mm256_loadu_ps(xs + 8), v2 = _mm256_loadu_ps(xs + 16), v3 = _mm256_loadu_ps(xs + 24);
	__m256 mul = _mm256_set1_ps(id);
	__m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	__m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	__m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	__m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	int32_t low = hsum_i32(_mm256_add_epi32(i0, i1));
	// pack 32 int32 -> 32 int8 (packs interleave lanes; permute restores order)
	__m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
	__m256i p = _mm256_packs_epi16(p01, p23);
	p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm256_storeu_si256((__m256i *)q, p);
	*lowp = low;
	return low + hsum_i32(_mm256_add_epi32(i2, i3));
}

// amax_avx2 is amax_generic of count values (a multiple of 32), eight
// lanes at a time (the largest magnitude, whatever the order).
AVX2 static inline __attribute__((always_inline)) float amax_avx2(const float *xs, int count) {
	const __m256 signmask = _mm256_set1_ps(-0.0f);
	__m256 m = _mm256_setzero_ps();
	for (int i = 0; i < count; i += 32) {
		__m256 v0 = _mm256_loadu_ps(xs + i), v1 = _mm256_loadu_ps(xs + i + 8), v2 = _mm256_loadu_ps(xs + i + 16), v3 = _mm256_loadu_ps(xs + i + 24);
		m = _mm256_max_ps(m, _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signmask, v0), _mm256_andnot_ps(signmask, v1)),
		                                   _mm256_max_ps(_mm256_andnot_ps(signmask, v2), _mm256_andnot_ps(signmask, v3))));
	}
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
	return _mm_cvtss_f32(m4);
}

// q8_block_avx2 is q8_block_generic eight lanes at a time (the same values).
AVX2 static inline __attribute__((always_inline)) int32_t q8_block_avx2(const float *xs, int8_t *q, float *d, int32_t *lowp) {
	float dd = amax_avx2(xs, 32) / 127;
	*d = dd;
	return q8_scaled_avx2(xs, q, dd != 0 ? 1 / dd : 0, lowp);
}

AVX2 static void quantize_q8_avx2(const float *x, int count, float *d, int8_t *q, int32_t *s) {
	int32_t low;
	for (int b = 0; b < count / 32; b++) s[b] = q8_block_avx2(x + b * 32, q + b * 32, d + b, &low);
}

QUANTIZE_PANELS(quantize_panels_avx2, AVX2, q8_block_avx2)
QUANTIZE_KPANELS(quantize_kpanels_avx2, AVX2, amax_avx2, q8_scaled_avx2)

// ---- the quantisers on 512-bit vectors (arb_simd_level 2 and up) ----
//
// A pass's activations are quantised once for every product they feed.
// A block at a time, each block's largest magnitude and its two sums are
// horizontal reductions, a chain of shuffles the next block cannot
// start before (4.7% of a 128-token pass of the bench target). Here
// sixteen blocks go at once and their maxima and sums are reduced
// together (reduce16), the blocks in lanes; every value is the AVX2
// kernels' (maxima and integer sums do not depend on their order, the
// products round to nearest even as they convert, the bytes saturate as
// the packs there do).
#define AVX512BW __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

AVX512BW static inline __m512 add_i32(__m512 a, __m512 b) {
	return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

// REDUCE16 defines NAME, which folds sixteen vectors v[0..15] with OP
// into one whose lane j is OP over the lanes of v[j] (v is overwritten):
// halves, then quarters, pairs and lanes of pairs of vectors, which
// leaves block 4j + q in lane 4q + j, then a permute into order.
#define REDUCE16(NAME, OP)                                                                                       \
	AVX512BW static inline __attribute__((always_inline)) __m512 NAME(__m512 *v) {                               \
		for (int k = 0; k < 8; k++)                                                                              \
			v[k] = OP(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44), _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE)); \
		for (int k = 0; k < 4; k++)                                                                              \
			v[k] = OP(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x88), _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xDD)); \
		for (int k = 0; k < 2; k++)                                                                              \
			v[k] = OP(_mm512_shuffle_ps(v[2 * k], v[2 * k + 1], 0x44), _mm512_shuffle_ps(v[2 * k], v[2 * k + 1], 0xEE));       \
		v[0] = OP(_mm512_shuffle_ps(v[0], v[1], 0x88), _mm512_shuffle_ps(v[0], v[1], 0xDD));                      \
		return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v[0]); \
	}
REDUCE16(reduce16_max, _mm512_max_ps)
REDUCE16(reduce16_add_i32, add_i32)

// q8_scaled_avx512 is q8_scaled_avx2 sixteen lanes at a time, for the
// blocks that do not make a group of sixteen.
AVX512BW static inline __attribute__((always_inline)) int32_t q8_scaled_avx512(const float *xs, int8_t *q, float id, int32_t *lowp) {
	__m512 mul = _mm512_set1_ps(id);
	__m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 16), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	_mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(i0));
	_mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(i1));
	int32_t low = _mm512_reduce_add_epi32(i0);
	*lowp = low;
	return low + _mm512_reduce_add_epi32(i1);
}

// amax_avx512 is amax_avx2 sixteen lanes at a time.
AVX512BW static inline __attribute__((always_inline)) float amax_avx512(const float *xs, int count) {
	__m512 m = _mm512_setzero_ps();
	for (int i = 0; i < count; i += 32)
		m = _mm512_max_ps(m, _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xs + i)), _mm512_abs_ps(_mm512_loadu_ps(xs + i + 16))));
	return _mm512_reduce_max_ps(m);
}

AVX512BW static inline __attribute__((always_inline)) int32_t q8_block_avx512(const float *xs, int8_t *q, float *d, int32_t *lowp) {
	float dd = amax_avx512(xs, 32) / 127;
	*d = dd;
	return q8_scaled_avx512(xs, q, dd != 0 ? 1 / dd : 0, lowp);
}

// q8_scaled16 quantises sixteen blocks of 32 values from xs, block j with
// inverse scale id[j] into slot slot0 + j*P of q, and sets sum[j] and
// low[j] to its sum and the sum of its first sixteen values.
AVX512BW static inline __attribute__((always_inline)) void q8_scaled16(const float *xs, __m512 id, int8_t *q, long slot0, int P, int32_t *sum,
                                                                       int32_t *low) {
	float ids[16];
	_mm512_storeu_ps(ids, id);
	__m512 s0[16], s1[16];
	for (int j = 0; j < 16; j++) {
		__m512 mul = _mm512_set1_ps(ids[j]);
		__m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 32 * j), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 32 * j + 16), mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		int8_t *qj = q + (slot0 + (long)j * P) * 32;
		_mm_storeu_si128((__m128i *)qj, _mm512_cvtsepi32_epi8(i0));
		_mm_storeu_si128((__m128i *)(qj + 16), _mm512_cvtsepi32_epi8(i1));
		s0[j] = _mm512_castsi512_ps(i0), s1[j] = _mm512_castsi512_ps(i1);
	}
	__m512 l = reduce16_add_i32(s0), h = reduce16_add_i32(s1);
	_mm512_storeu_ps(low, l);
	_mm512_storeu_ps(sum, add_i32(l, h));
}

// inv_scales is dd != 0 ? 1 / dd : 0 lane by lane (a NaN scale gives
// NaN, as there).
AVX512BW static inline __m512 inv_scales(__m512 dd) {
	return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(dd, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1), dd);
}

AVX512BW static void quantize_panels_avx512(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c) {
	int nb = cols / 32;
	for (int r = lo; r < hi; r++) {
		int p0 = r / ARB_PANEL * ARB_PANEL, P = n - p0 < ARB_PANEL ? n - p0 : ARB_PANEL, k = r - p0;
		long base = (long)p0 * nb;
		for (int b0 = 0; b0 < nb; b0 += 16) {
			int cnt = nb - b0 < 16 ? nb - b0 : 16;
			const float *xs = x + (long)r * cols + b0 * 32;
			long slot0 = base + (long)b0 * P + k;
			int32_t sum[16], low[16];
			if (cnt == 16) {
				__m512 m[16];
				for (int j = 0; j < 16; j++)
					m[j] = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xs + 32 * j)), _mm512_abs_ps(_mm512_loadu_ps(xs + 32 * j + 16)));
				__m512 dd = _mm512_div_ps(reduce16_max(m), _mm512_set1_ps(127));
				float dv[16];
				_mm512_storeu_ps(dv, dd);
				for (int j = 0; j < 16; j++) d[slot0 + (long)j * P] = dv[j];
				q8_scaled16(xs, inv_scales(dd), q, slot0, P, sum, low);
			} else {
				for (int j = 0; j < cnt; j++) {
					long slot = slot0 + (long)j * P;
					sum[j] = q8_block_avx512(xs + 32 * j, q + slot * 32, d + slot, &low[j]);
				}
			}
			panel_offsets(c, base, P, k, b0, cnt, sum, low);
		}
	}
}

AVX512BW static void quantize_kpanels_avx512(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c) {
	int nb = cols / 32;
	for (int r = lo; r < hi; r++) {
		int p0 = r / ARB_PANEL * ARB_PANEL, P = n - p0 < ARB_PANEL ? n - p0 : ARB_PANEL, k = r - p0;
		long base = (long)p0 * nb;
		for (int b0 = 0; b0 < nb; b0 += 16) { // two super-blocks, or the last one
			int cnt = nb - b0 < 16 ? nb - b0 : 16;
			const float *xs = x + (long)r * cols + b0 * 32;
			long slot0 = base + (long)b0 * P + k;
			float dd[2], id[2];
			for (int s = 0; s < cnt / 8; s++) dd[s] = amax_avx512(xs + 256 * s, 256) / 127, id[s] = dd[s] != 0 ? 1 / dd[s] : 0;
			int32_t sum[16], low[16];
			if (cnt == 16) {
				q8_scaled16(xs, _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(id[0]), _mm512_set1_ps(id[1])), q, slot0, P, sum, low);
			} else {
				for (int j = 0; j < cnt; j++) sum[j] = q8_scaled_avx512(xs + 32 * j, q + (slot0 + (long)j * P) * 32, id[0], &low[j]);
			}
			for (int j = 0; j < cnt; j++) d[slot0 + (long)j * P] = dd[j / 8];
			kpanel_offsets(c, base, P, k, b0, cnt, sum, low);
		}
	}
}

// load_q loads one block's 32 weights (Q4_0, Q4_1, Q5_0, Q5_1) as unsigned
// bytes, 0..15 or 0..31 with the offset not removed: it is taken off the
// integer sum afterwards (offset * sum of y).
AVX2 static inline __attribute__((always_inline)) __m256i load_q(int type, const uint8_t *b) {
	const __m256i m4 = _mm256_set1_epi8(0xf);
	switch (type) {
	case ARB_Q4_0: case ARB_Q4_1: {
		__m128i raw = _mm_loadu_si128((const __m128i *)(b + (type == ARB_Q4_0 ? 2 : 4)));
		return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
	}
	default: { // Q5_0, Q5_1: bit j of qh is the fifth bit of weight j
		int off = type == ARB_Q5_0 ? 2 : 4;
		uint32_t qh;
		memcpy(&qh, b + off, 4);
		__m128i raw = _mm_loadu_si128((const __m128i *)(b + off + 4));
		__m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), m4);
		__m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
		                                _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
		const __m256i bits = _mm256_set1_epi64x(0x8040201008040201LL);
		h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bits), bits);
		return _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(16)));
	}
	}
}

// offset returns the value subtracted from every stored weight (0 for the
// types that keep a separate min).
static inline int offset(int type) { return type == ARB_Q4_0 ? 8 : type == ARB_Q5_0 ? 16 : 0; }

// isum4 returns the four integer block sums sum_j q[j]*y[j] of weight
// blocks q0..q3 (as load_q gives them) against 128 activations y. The sums
// are exact integers, so how they are reduced does not change them.
AVX2 static inline __attribute__((always_inline)) __m128i isum4(__m256i q0, __m256i q1, __m256i q2, __m256i q3, const int8_t *y) {
	__m256i y0 = _mm256_loadu_si256((const __m256i *)y), y1 = _mm256_loadu_si256((const __m256i *)(y + 32));
	__m256i y2 = _mm256_loadu_si256((const __m256i *)(y + 64)), y3 = _mm256_loadu_si256((const __m256i *)(y + 96));
	// unsigned weights of at most 31: a 16-bit lane holds at most 2*31*127,
	// and four of them summed stay below 32767
	__m256i m0 = _mm256_maddubs_epi16(q0, y0), m1 = _mm256_maddubs_epi16(q1, y1);
	__m256i m2 = _mm256_maddubs_epi16(q2, y2), m3 = _mm256_maddubs_epi16(q3, y3);
	__m256i h = _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(m0, m1), _mm256_hadd_epi16(m2, m3)), _mm256_set1_epi16(1));
	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// isum1 is isum4 for one block.
AVX2 static inline __attribute__((always_inline)) int32_t isum1(__m256i q, const int8_t *y) {
	__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)y)), _mm256_set1_epi16(1));
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
	s4 = _mm_hadd_epi32(s4, s4);
	s4 = _mm_hadd_epi32(s4, s4);
	return _mm_cvtsi128_si32(s4);
}

// scales4 converts four blocks' fp16 scales (their first two bytes) at
// once: one packed conversion instead of four scalar ones. The values are
// exactly those of four _cvtsh_ss calls.
AVX2 static inline __m128 scales4(const uint8_t *k0, const uint8_t *k1, const uint8_t *k2, const uint8_t *k3) {
	uint16_t h0, h1, h2, h3;
	memcpy(&h0, k0, 2);
	memcpy(&h1, k1, 2);
	memcpy(&h2, k2, 2);
	memcpy(&h3, k3, 2);
	uint64_t packed = (uint64_t)h0 | (uint64_t)h1 << 16 | (uint64_t)h2 << 32 | (uint64_t)h3 << 48;
	return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)packed));
}

// PREFETCH is how far ahead of the block being multiplied the weights are
// requested from memory. A decode pass streams every weight once; measured
// on a 96 MiB Q8_0 matrix with one thread, asking 2-3 KiB ahead raised the
// kernel's streaming rate from about 70% of a plain read loop's to 90-100%
// (the hardware prefetcher alone leaves the loads waiting).
#ifndef PREFETCH
#define PREFETCH 2048
#endif

// q8_tile computes weight row o (Q4_0, Q4_1, Q5_0, Q5_1) against T
// activation rows r..r+T-1 (T = 1..4): each group of four weight blocks is
// loaded once and used for all T rows. Every row is summed in exactly the order a lone row uses, so
// a row's result does not depend on how many rows share the pass:
// verifying a draft in a batch gives bit for bit what decoding it alone
// gives, which greedy losslessness needs.
#define Q8_TILE(T)                                                                                           \
	AVX2 static inline __attribute__((always_inline)) void q8_tile##T(int type, const uint8_t *wr, int bb, int has_min, int nb,           \
	                                   const float *yd, const int8_t *yq, const int32_t *ys, int r,         \
	                                   float *out, long rows, int o) {                                      \
		__m128 acc[T];                                                                                     \
		float tail[T];                                                                                     \
		for (int k = 0; k < T; k++) { acc[k] = _mm_setzero_ps(); tail[k] = 0; }                           \
		long stride = (long)nb * 32;                                                                       \
		int off = offset(type), b = 0;                                                                     \
		for (; b + 4 <= nb; b += 4) {                                                                      \
			const uint8_t *k0 = wr + (long)b * bb, *k1 = k0 + bb, *k2 = k1 + bb, *k3 = k2 + bb;            \
			for (int pf = 0; pf < 4 * bb; pf += 64) _mm_prefetch((const char *)k0 + PREFETCH + pf, _MM_HINT_T0); \
			__m256i q0 = load_q(type, k0), q1 = load_q(type, k1), q2 = load_q(type, k2), q3 = load_q(type, k3); \
			__m128 dw = scales4(k0, k1, k2, k3);                                                           \
			for (int k = 0; k < T; k++) {                                                                  \
				__m128i s4 = isum4(q0, q1, q2, q3, yq + (long)(r + k) * stride + b * 32); \
				if (off) s4 = _mm_sub_epi32(s4, _mm_slli_epi32(_mm_loadu_si128((const __m128i *)(ys + (long)(r + k) * nb + b)), off == 8 ? 3 : 4)); \
				acc[k] = _mm_fmadd_ps(_mm_mul_ps(dw, _mm_loadu_ps(yd + (long)(r + k) * nb + b)), _mm_cvtepi32_ps(s4), acc[k]); \
			}                                                                                              \
		}                                                                                                  \
		for (int k = 0; k < T; k++) {                                                                      \
			const int8_t *y = yq + (long)(r + k) * stride;                                                 \
			const float *dy = yd + (long)(r + k) * nb;                                                     \
			for (int bt = b; bt < nb; bt++) {                                                              \
				const uint8_t *blk = wr + (long)bt * bb;                                                   \
				int32_t s = isum1(load_q(type, blk), y + bt * 32) - off * ys[(long)(r + k) * nb + bt]; \
				tail[k] += _cvtsh_ss(rd16(blk)) * dy[bt] * (float)s;                                       \
			}                                                                                              \
			float mins = 0;                                                                                \
			if (has_min)                                                                                   \
				for (int kk = 0; kk < nb; kk++) mins += _cvtsh_ss(rd16(wr + (long)kk * bb + 2)) * dy[kk] * (float)ys[(long)(r + k) * nb + kk]; \
			out[(long)(r + k) * rows + o] = hsum4(acc[k]) + tail[k] + mins;                             \
		}                                                                                                  \
	}
Q8_TILE(1)
Q8_TILE(2)
Q8_TILE(3)
Q8_TILE(4)

// iq4_lookup maps 16 packed index bytes (weight j in the low nibble of
// byte j, weight j+16 in the high one) to the 32 signed table values.
AVX2 static inline __attribute__((always_inline)) __m256i iq4_lookup(const uint8_t *p, __m256i table) {
	__m128i raw = _mm_loadu_si128((const __m128i *)p);
	__m256i idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0xf));
	return _mm256_shuffle_epi8(table, idx);
}

// q80_tile is q8_tile for Q8_0, where a block's eight partial sums are
// converted to float and accumulated with the block's combined scale in
// eight lanes, one multiply-add per block, and reduced once at the end:
// no horizontal reduction per group of blocks. Measured against q8_tile on
// one thread (1376x512, in cache): the same at one row, 15-28% faster from
// two rows on. Each row is summed in the same order whatever T, so its
// result does not depend on the batch. With nl set it serves IQ4_NL
// (18-byte blocks whose indices go through kvalues_iq4nl); nl is a
// constant wherever it is inlined, so Q8_0's code is unchanged by it.
#define Q80_TILE(T)                                                                                          \
	AVX2 static inline __attribute__((always_inline)) void q80_tile##T(int nl, const uint8_t *wr, int nb, \
	                                   const float *yd, const int8_t *yq, int r, float *out, long rows, int o) { \
		__m256 acc[T];                                                                                     \
		for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();                                          \
		const __m256i ones = _mm256_set1_epi16(1);                                                         \
		long stride = (long)nb * 32;                                                                       \
		for (int b = 0; b < nb; b++) {                                                                     \
			const uint8_t *blk = wr + (long)b * (nl ? 18 : 34);                                            \
			if ((b & 1) == 0) _mm_prefetch((const char *)blk + PREFETCH, _MM_HINT_T0);                    \
			__m256i q = nl ? iq4_lookup(blk + 2, _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl))) \
			               : _mm256_loadu_si256((const __m256i *)(blk + 2));                               \
			__m256i a = _mm256_sign_epi8(q, q);                                                            \
			__m256 dw = _mm256_set1_ps(_cvtsh_ss(rd16(blk)));                                              \
			for (int k = 0; k < T; k++) {                                                                  \
				__m256i y = _mm256_loadu_si256((const __m256i *)(yq + (long)(r + k) * stride + (long)b * 32)); \
				__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(y, q)), ones);     \
				__m256 sv = _mm256_mul_ps(dw, _mm256_broadcast_ss(yd + (long)(r + k) * nb + b));          \
				acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sv, acc[k]);                              \
			}                                                                                              \
		}                                                                                                  \
		for (int k = 0; k < T; k++) out[(long)(r + k) * rows + o] = hsum8(acc[k]);                         \
	}
Q80_TILE(1)
Q80_TILE(2)
Q80_TILE(3)
Q80_TILE(4)
Q80_TILE(8)

AVX2 static inline __attribute__((always_inline)) void q80_rows_t(int nl, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                                                                 const float *yd, const int8_t *yq, int n, float *out, int rows) {
	for (int o = lo; o < hi; o++) {
		const uint8_t *wr = w + (long)o * row_bytes;
		int r = 0;
		for (; r + 8 <= n; r += 8) q80_tile8(nl, wr, nb, yd, yq, r, out, rows, o);
		for (; r + 4 <= n; r += 4) q80_tile4(nl, wr, nb, yd, yq, r, out, rows, o);
		switch (n - r) {
		case 3: q80_tile3(nl, wr, nb, yd, yq, r, out, rows, o); break;
		case 2: q80_tile2(nl, wr, nb, yd, yq, r, out, rows, o); break;
		case 1: q80_tile1(nl, wr, nb, yd, yq, r, out, rows, o); break;
		}
	}
}

AVX2 static void q80_rows(const uint8_t *w, long row_bytes, int lo, int hi, int nb, const float *yd, const int8_t *yq,
                          int n, float *out, int rows) {
	q80_rows_t(0, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows);
}

// nl_rows is q80_rows for IQ4_NL: the same tiles, each block's indices
// mapped through the table (one shuffle) once for all T rows.
AVX2 static void nl_rows(const uint8_t *w, long row_bytes, int lo, int hi, int nb, const float *yd, const int8_t *yq,
                         int n, float *out, int rows) {
	q80_rows_t(1, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows);
}

// q8_rows runs the tiles over weight rows lo..hi-1; it is inlined once per
// weight type below, so load_q's switch on the type folds away.
AVX2 static inline __attribute__((always_inline)) void q8_rows(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                                                              const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
	int bb = block_bytes(type);
	int has_min = type == ARB_Q4_1 || type == ARB_Q5_1;
	for (int o = lo; o < hi; o++) {
		const uint8_t *wr = w + (long)o * row_bytes;
		int r = 0;
		for (; r + 4 <= n; r += 4) q8_tile4(type, wr, bb, has_min, nb, yd, yq, ys, r, out, rows, o);
		switch (n - r) {
		case 3: q8_tile3(type, wr, bb, has_min, nb, yd, yq, ys, r, out, rows, o); break;
		case 2: q8_tile2(type, wr, bb, has_min, nb, yd, yq, ys, r, out, rows, o); break;
		case 1: q8_tile1(type, wr, bb, has_min, nb, yd, yq, ys, r, out, rows, o); break;
		}
	}
}


// k4_scales unpacks a Q4_K/Q5_K super-block's 12 packed scale bytes into
// its eight 6-bit scales and eight 6-bit mins, four bytes to a word: sc[0]
// holds the scales of sub-blocks 0..3, sc[1] those of 4..7, and m the same
// for the mins. The values are those of scale_min_k4, unpacked with a few
// word-wide masks and shifts instead of byte by byte.
static inline void k4_scales(const uint8_t *q, uint32_t sc[2], uint32_t m[2]) {
	uint32_t u0, u1, u2;
	memcpy(&u0, q, 4);
	memcpy(&u1, q + 4, 4);
	memcpy(&u2, q + 8, 4);
	sc[0] = u0 & 0x3f3f3f3f;
	m[0] = u1 & 0x3f3f3f3f;
	sc[1] = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
	m[1] = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
}

// k_tile is q8_tile for the K-quants: weight row o against T activation
// rows, half a super-block (four 32-value sub-blocks) at a time. The
// sub-block scales multiply the exact integer sums (Q4_K, Q5_K: through
// the madd that finishes the reduction; Q6_K: through the madd of each
// 16-value half), then one float multiply-add per four blocks.
#define K_TILE(T)                                                                                            \
	AVX2 static inline __attribute__((always_inline)) void k_tile##T(int type, const uint8_t *wr, int nb,   \
	                                   const float *yd, const int8_t *yq, const int32_t *ys, int r,         \
	                                   float *out, long rows, int o) {                                      \
		__m128 acc[T];                                                                                     \
		for (int k = 0; k < T; k++) acc[k] = _mm_setzero_ps();                                             \
		long stride = (long)nb * 32;                                                                       \
		int bb = kblock_bytes(type);                                                                       \
		const __m256i m4 = _mm256_set1_epi8(0xf), ones = _mm256_set1_epi16(1);                            \
		for (int s = 0; s < nb / 8; s++) {                                                                 \
			const uint8_t *blk = wr + (long)s * bb;                                                        \
			for (int pf = 0; pf < bb; pf += 64) _mm_prefetch((const char *)blk + PREFETCH + pf, _MM_HINT_T0); \
			uint32_t kscale[2] = {0, 0}, kmin[2] = {0, 0};                                                 \
			if (type != ARB_Q6_K) k4_scales(blk + 4, kscale, kmin);                                        \
			for (int h = 0; h < 2; h++) {                                                                  \
				__m256i q0, q1, q2, q3, a0, a1, a2, a3, sv0, sv1, sv2, sv3, scv;                           \
				__m128 d4, dm4;                                                                            \
				__m128i mins4;                                                                             \
				if (type == ARB_Q6_K) {                                                                    \
					const uint8_t *ql = blk + 64 * h, *qhp = blk + 128 + 32 * h;                           \
					const int8_t *sc = (const int8_t *)(blk + 192 + 8 * h);                                \
					__m256i a = _mm256_loadu_si256((const __m256i *)ql), c = _mm256_loadu_si256((const __m256i *)(ql + 32)); \
					__m256i hh = _mm256_loadu_si256((const __m256i *)qhp), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32); \
					q0 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(hh, m2), 4)), off); \
					q1 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2), m2), 4)), off); \
					q2 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 4), m2), 4)), off); \
					q3 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 6), m2), 4)), off); \
					a0 = _mm256_sign_epi8(q0, q0); a1 = _mm256_sign_epi8(q1, q1);                          \
					a2 = _mm256_sign_epi8(q2, q2); a3 = _mm256_sign_epi8(q3, q3);                          \
					/* sv_g: scale 2g on the first 16 values' pair sums, 2g+1 on the last 16 */             \
					__m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)sc))); \
					sv0 = _mm256_shuffle_epi8(s16, _mm256_setr_epi64x(0x0100010001000100LL, 0x0100010001000100LL, 0x0302030203020302LL, 0x0302030203020302LL)); \
					sv1 = _mm256_shuffle_epi8(s16, _mm256_setr_epi64x(0x0504050405040504LL, 0x0504050405040504LL, 0x0706070607060706LL, 0x0706070607060706LL)); \
					sv2 = _mm256_shuffle_epi8(s16, _mm256_setr_epi64x(0x0908090809080908LL, 0x0908090809080908LL, 0x0b0a0b0a0b0a0b0aLL, 0x0b0a0b0a0b0a0b0aLL)); \
					sv3 = _mm256_shuffle_epi8(s16, _mm256_setr_epi64x(0x0d0c0d0c0d0c0d0cLL, 0x0d0c0d0c0d0c0d0cLL, 0x0f0e0f0e0f0e0f0eLL, 0x0f0e0f0e0f0e0f0eLL)); \
					d4 = _mm_set1_ps(_cvtsh_ss(rd16(blk + 208)));                                          \
					scv = ones; dm4 = d4; mins4 = _mm_setzero_si128();                                     \
				} else {                                                                                   \
					const uint8_t *ql = blk + (type == ARB_Q4_K ? 16 : 48) + 64 * h;                       \
					__m256i c0 = _mm256_loadu_si256((const __m256i *)ql), c1 = _mm256_loadu_si256((const __m256i *)(ql + 32)); \
					q0 = _mm256_and_si256(c0, m4); q1 = _mm256_and_si256(_mm256_srli_epi16(c0, 4), m4);    \
					q2 = _mm256_and_si256(c1, m4); q3 = _mm256_and_si256(_mm256_srli_epi16(c1, 4), m4);    \
					if (type == ARB_Q5_K) {                                                                \
						__m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16)), sixteen = _mm256_set1_epi8(16); \
						__m256i b0 = _mm256_set1_epi8((char)(1 << (4 * h))), b1 = _mm256_set1_epi8((char)(2 << (4 * h))); \
						__m256i b2 = _mm256_set1_epi8((char)(4 << (4 * h))), b3 = _mm256_set1_epi8((char)(8 << (4 * h))); \
						q0 = _mm256_or_si256(q0, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen)); \
						q1 = _mm256_or_si256(q1, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen)); \
						q2 = _mm256_or_si256(q2, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b2), b2), sixteen)); \
						q3 = _mm256_or_si256(q3, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b3), b3), sixteen)); \
					}                                                                                      \
					/* four scales as 16-bit pairs (s0 s0 s1 s1 ..., both halves), four mins as int32 */ \
					__m128i sp = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)kscale[h]),                       \
					                              _mm_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1)); \
					scv = _mm256_broadcastsi128_si256(sp);                                                 \
					mins4 = _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)kmin[h]));                            \
					d4 = _mm_set1_ps(_cvtsh_ss(rd16(blk)));                                                \
					dm4 = _mm_set1_ps(_cvtsh_ss(rd16(blk + 2)));                                           \
					a0 = a1 = a2 = a3 = sv0 = sv1 = sv2 = sv3 = ones;                                      \
				}                                                                                          \
				int b = s * 8 + 4 * h;                                                                     \
				for (int k = 0; k < T; k++) {                                                              \
					const int8_t *y = yq + (long)(r + k) * stride + (long)b * 32;                          \
					__m256i y0 = _mm256_loadu_si256((const __m256i *)y), y1 = _mm256_loadu_si256((const __m256i *)(y + 32)); \
					__m256i y2 = _mm256_loadu_si256((const __m256i *)(y + 64)), y3 = _mm256_loadu_si256((const __m256i *)(y + 96)); \
					__m128 dy4 = _mm_loadu_ps(yd + (long)(r + k) * nb + b);                                \
					__m256i hs;                                                                            \
					if (type == ARB_Q6_K) {                                                                \
						__m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(y0, q0)), sv0); \
						__m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(y1, q1)), sv1); \
						__m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(a2, _mm256_sign_epi8(y2, q2)), sv2); \
						__m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(a3, _mm256_sign_epi8(y3, q3)), sv3); \
						hs = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));      \
					} else {                                                                               \
						__m256i m0 = _mm256_maddubs_epi16(q0, y0), m1 = _mm256_maddubs_epi16(q1, y1);      \
						__m256i m2 = _mm256_maddubs_epi16(q2, y2), m3 = _mm256_maddubs_epi16(q3, y3);      \
						hs = _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(m0, m1), _mm256_hadd_epi16(m2, m3)), scv); \
					}                                                                                      \
					__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(hs), _mm256_extracti128_si256(hs, 1)); \
					acc[k] = _mm_fmadd_ps(_mm_mul_ps(d4, dy4), _mm_cvtepi32_ps(s4), acc[k]);              \
					if (type != ARB_Q6_K) {                                                                \
						__m128i mn = _mm_mullo_epi32(mins4, _mm_loadu_si128((const __m128i *)(ys + (long)(r + k) * nb + b))); \
						acc[k] = _mm_fnmadd_ps(_mm_mul_ps(dm4, dy4), _mm_cvtepi32_ps(mn), acc[k]);        \
					}                                                                                      \
				}                                                                                          \
			}                                                                                              \
		}                                                                                                  \
		for (int k = 0; k < T; k++) {                                                                      \
			out[(long)(r + k) * rows + o] = hsum4(acc[k]);                                              \
		}                                                                                                  \
	}
K_TILE(1)
K_TILE(2)
K_TILE(3)
K_TILE(4)

AVX2 static inline __attribute__((always_inline)) void k_rows(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                                                             const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
	for (int o = lo; o < hi; o++) {
		const uint8_t *wr = w + (long)o * row_bytes;
		int r = 0;
		for (; r + 4 <= n; r += 4) k_tile4(type, wr, nb, yd, yq, ys, r, out, rows, o);
		switch (n - r) {
		case 3: k_tile3(type, wr, nb, yd, yq, ys, r, out, rows, o); break;
		case 2: k_tile2(type, wr, nb, yd, yq, ys, r, out, rows, o); break;
		case 1: k_tile1(type, wr, nb, yd, yq, ys, r, out, rows, o); break;
		}
	}
}

// pairs16 is the shuffle that spreads 16-bit value 2g over the low lane
// and value 2g+1 over the high lane of a vector holding eight 16-bit
// values in both lanes: the scales of a 32-value block's two 16-value
// groups, lined up with maddubs's pair sums.
AVX2 static inline __m256i pairs16(int g) {
	return _mm256_set_m128i(_mm_set1_epi16((short)((4 * g + 2) | (4 * g + 3) << 8)), _mm_set1_epi16((short)((4 * g) | (4 * g + 1) << 8)));
}

// q3k_scales_v is q3k_scales kept in a register (byte j = scale j), so
// the scales reach the multiplies without a trip through memory.
AVX2 static inline __m128i q3k_scales_v(const uint8_t *p) {
	uint32_t a0, a1, a2;
	memcpy(&a0, p, 4);
	memcpy(&a1, p + 4, 4);
	memcpy(&a2, p + 8, 4);
	__m128i v = _mm_setr_epi32((int)((a0 & 0x0f0f0f0f) | (a2 & 0x03030303) << 4), (int)((a1 & 0x0f0f0f0f) | ((a2 >> 2) & 0x03030303) << 4),
	                           (int)(((a0 >> 4) & 0x0f0f0f0f) | ((a2 >> 4) & 0x03030303) << 4), (int)(((a1 >> 4) & 0x0f0f0f0f) | ((a2 >> 6) & 0x03030303) << 4));
	return _mm_sub_epi8(v, _mm_set1_epi8(32));
}


// x_tile is k_tile for Q2_K, Q3_K and IQ4_XS: weight row o against T
// activation rows, half a super-block (four 32-value blocks) at a time. The
// weights of a block are unpacked once for all T rows; each block's
// integer sum carries its group scales through the madd that widens the
// pair sums (Q2_K's mins through a second maddubs), then one float
// multiply-add per four blocks (two for Q2_K). Every row is summed in the
// same order whatever T, so a row's result does not depend on the batch.
#define X_TILE(T)                                                                                            \
	AVX2 static inline __attribute__((always_inline)) void x_tile##T(int type, const uint8_t *wr, int nb,   \
	                                   const float *yd, const int8_t *yq, int r, float *out, long rows, int o) { \
		__m128 acc[T];                                                                                     \
		for (int k = 0; k < T; k++) acc[k] = _mm_setzero_ps();                                             \
		long stride = (long)nb * 32;                                                                       \
		int bb = xblock_bytes(type);                                                                       \
		const __m256i m2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);                               \
		const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)); \
		for (int s = 0; s < nb / 8; s++) {                                                                 \
			const uint8_t *blk = wr + (long)s * bb;                                                        \
			for (int pf = 0; pf < bb; pf += 64) _mm_prefetch((const char *)blk + PREFETCH + pf, _MM_HINT_T0); \
			__m128i sc3 = _mm_setzero_si128();                                                             \
			__m128 d4, dm4 = _mm_setzero_ps();                                                             \
			if (type == ARB_Q2_K) {                                                                        \
				d4 = _mm_set1_ps(_cvtsh_ss(rd16(blk + 80)));                                               \
				dm4 = _mm_set1_ps(_cvtsh_ss(rd16(blk + 82)));                                              \
			} else if (type == ARB_Q3_K) {                                                                 \
				sc3 = q3k_scales_v(blk + 96);                                                              \
				d4 = _mm_set1_ps(_cvtsh_ss(rd16(blk + 108)));                                              \
			} else                                                                                         \
				d4 = _mm_set1_ps(_cvtsh_ss(rd16(blk)));                                                    \
			for (int h = 0; h < 2; h++) {                                                                  \
				__m256i q[4], a[4], sv[4], mv[4];                                                          \
				if (type == ARB_Q2_K) {                                                                    \
					__m256i c = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * h));                  \
					__m128i raw = _mm_loadl_epi64((const __m128i *)(blk + 8 * h));                          \
					__m128i lo4 = _mm_and_si128(raw, _mm_set1_epi8(0xf));                                   \
					__m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(lo4));                     \
					__m256i mb = _mm256_broadcastsi128_si256(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xf))); \
					for (int g = 0; g < 4; g++) {                                                          \
						q[g] = _mm256_and_si256(_mm256_srli_epi16(c, 2 * g), m2);                          \
						sv[g] = _mm256_shuffle_epi8(s16, pairs16(g));                                      \
						mv[g] = _mm256_shuffle_epi8(mb, _mm256_set_m128i(_mm_set1_epi8((char)(2 * g + 1)), _mm_set1_epi8((char)(2 * g)))); \
						a[g] = q[g];                                                                       \
					}                                                                                      \
				} else if (type == ARB_Q3_K) {                                                             \
					__m256i c = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * h));                  \
					__m256i hm = _mm256_loadu_si256((const __m256i *)blk), four = _mm256_set1_epi8(4);      \
					__m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_srli_si128(sc3, 8) : sc3)); \
					for (int g = 0; g < 4; g++) {                                                          \
						__m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + g)));                         \
						__m256i hb = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);                    \
						q[g] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(c, 2 * g), m2), _mm256_andnot_si256(hb, four)); \
						a[g] = _mm256_sign_epi8(q[g], q[g]);                                               \
						sv[g] = _mm256_shuffle_epi8(s16, pairs16(g));                                      \
						mv[g] = ones;                                                                      \
					}                                                                                      \
				} else {                                                                                   \
					for (int g = 0; g < 4; g++) {                                                          \
						q[g] = iq4_lookup(blk + 8 + 64 * h + 16 * g, table);                               \
						a[g] = _mm256_sign_epi8(q[g], q[g]);                                               \
						sv[g] = _mm256_set1_epi16((short)iq4xs_scale(blk, 4 * h + g));                    \
						mv[g] = ones;                                                                      \
					}                                                                                      \
				}                                                                                          \
				int b = s * 8 + 4 * h;                                                                     \
				for (int k = 0; k < T; k++) {                                                              \
					const int8_t *y = yq + (long)(r + k) * stride + (long)b * 32;                          \
					__m128 dy4 = _mm_loadu_ps(yd + (long)(r + k) * nb + b);                                \
					__m256i p[4], mm[4];                                                                   \
					for (int g = 0; g < 4; g++) {                                                          \
						__m256i yg = _mm256_loadu_si256((const __m256i *)(y + 32 * g));                    \
						if (type == ARB_Q2_K) {                                                            \
							p[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], yg), sv[g]);               \
							mm[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(mv[g], yg), ones);              \
						} else                                                                             \
							p[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(a[g], _mm256_sign_epi8(yg, q[g])), sv[g]); \
					}                                                                                      \
					__m256i hs = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3])); \
					__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(hs), _mm256_extracti128_si256(hs, 1)); \
					acc[k] = _mm_fmadd_ps(_mm_mul_ps(d4, dy4), _mm_cvtepi32_ps(s4), acc[k]);              \
					if (type == ARB_Q2_K) {                                                                \
						__m256i hm4 = _mm256_hadd_epi32(_mm256_hadd_epi32(mm[0], mm[1]), _mm256_hadd_epi32(mm[2], mm[3])); \
						__m128i m4s = _mm_add_epi32(_mm256_castsi256_si128(hm4), _mm256_extracti128_si256(hm4, 1)); \
						acc[k] = _mm_fnmadd_ps(_mm_mul_ps(dm4, dy4), _mm_cvtepi32_ps(m4s), acc[k]);       \
					}                                                                                      \
				}                                                                                          \
			}                                                                                              \
		}                                                                                                  \
		for (int k = 0; k < T; k++) {                                                                      \
			out[(long)(r + k) * rows + o] = hsum4(acc[k]);                                              \
		}                                                                                                  \
	}
X_TILE(1)
X_TILE(2)
X_TILE(3)
X_TILE(4)

AVX2 static inline __attribute__((always_inline)) void x_rows(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                                                             const float *yd, const int8_t *yq, int n, float *out, int rows) {
	for (int o = lo; o < hi; o++) {
		const uint8_t *wr = w + (long)o * row_bytes;
		int r = 0;
		for (; r + 4 <= n; r += 4) x_tile4(type, wr, nb, yd, yq, r, out, rows, o);
		switch (n - r) {
		case 3: x_tile3(type, wr, nb, yd, yq, r, out, rows, o); break;
		case 2: x_tile2(type, wr, nb, yd, yq, r, out, rows, o); break;
		case 1: x_tile1(type, wr, nb, yd, yq, r, out, rows, o); break;
		}
	}
}

AVX2 static void mm_q8_avx2(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                            const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
	switch (type) {
	case ARB_Q8_0: q80_rows(w, row_bytes, lo, hi, nb, yd, yq, n, out, rows); break;
	case ARB_Q4_0: q8_rows(ARB_Q4_0, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q4_1: q8_rows(ARB_Q4_1, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q5_0: q8_rows(ARB_Q5_0, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q5_1: q8_rows(ARB_Q5_1, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q4_K: k_rows(ARB_Q4_K, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q5_K: k_rows(ARB_Q5_K, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q6_K: k_rows(ARB_Q6_K, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	}
}

// mm_x_avx2 is mm_q8_avx2 for the types added later (Q2_K, Q3_K, IQ4_XS,
// IQ4_NL), kept apart so that the earlier types' machine code stays
// exactly what it was.
AVX2 static void mm_x_avx2(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                           const float *yd, const int8_t *yq, int n, float *out, int rows) {
	switch (type) {
	case ARB_Q2_K: x_rows(ARB_Q2_K, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows); break;
	case ARB_Q3_K: x_rows(ARB_Q3_K, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows); break;
	case ARB_IQ4_XS: x_rows(ARB_IQ4_XS, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows); break;
	case ARB_IQ4_NL: nl_rows(w, row_bytes, lo, hi, nb, yd, yq, n, out, rows); break;
	}
}


AVX2 static void expand_f16_avx2(const uint8_t *b, int cols, float *y) {
	int i = 0;
	for (; i + 8 <= cols; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i))));
	for (; i < cols; i++) y[i] = fp16_to_f32(rd16(b + 2 * i));
}

// expand_bf16_avx2 is expand_row's BF16 case eight at a time: a bfloat16
// is a float32's high half, so widening is a shift, exact either way.
AVX2 static void expand_bf16_avx2(const uint8_t *b, int cols, float *y) {
	int i = 0;
	for (; i + 8 <= cols; i += 8)
		_mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 2 * i))), 16));
	if (i < cols) expand_row(ARB_BF16, b + 2 * i, cols - i, y + i);
}

// F32_TILE computes RB weight rows (wr[b], as float32) against T
// activation rows (x[t]) into out[t*rows + o + b]. Each dot product is
// the one this backend has always computed, lane for lane and add for
// add: four accumulators over each 32 values, the rest of the eights into
// the first, their sum ((s0+s1)+(s2+s3)) reduced by hsum8, the last few
// values added one at a time; so a result does not depend on the tile.
// But each vector of weights is loaded once for the T rows of
// activations and each vector of activations once for the RB rows of
// weights, where a dot product at a time loads two vectors for every
// multiply-add.
#define F32_TILE(NAME, ATTR, RB, T)                                                                            \
	ATTR static inline __attribute__((always_inline)) void NAME(const float *const *wr, const float *const *x, int cols, \
	                                                           float *out, long rows, int o) {               \
		__m256 acc[RB][T][4];                                                                             \
		for (int b = 0; b < RB; b++)                                                                      \
			for (int t = 0; t < T; t++)                                                                   \
				for (int c = 0; c < 4; c++) acc[b][t][c] = _mm256_setzero_ps();                           \
		int i = 0;                                                                                        \
		for (; i + 32 <= cols; i += 32)                                                                   \
			for (int c = 0; c < 4; c++) {                                                                 \
				__m256 xv[T];                                                                             \
				/* in registers: the compiler would fold the loads into the multiply-adds, loading */   \
				/* each activation vector once for every row of weights */                               \
				for (int t = 0; t < T; t++) {                                                             \
					xv[t] = _mm256_loadu_ps(x[t] + i + 8 * c);                                            \
					__asm__("" : "+x"(xv[t]));                                                            \
				}                                                                                         \
				for (int b = 0; b < RB; b++) {                                                            \
					__m256 wv = _mm256_loadu_ps(wr[b] + i + 8 * c);                                       \
					for (int t = 0; t < T; t++) acc[b][t][c] = _mm256_fmadd_ps(wv, xv[t], acc[b][t][c]);  \
				}                                                                                         \
			}                                                                                             \
		for (; i + 8 <= cols; i += 8)                                                                     \
			for (int b = 0; b < RB; b++)                                                                  \
				for (int t = 0; t < T; t++)                                                               \
					acc[b][t][0] = _mm256_fmadd_ps(_mm256_loadu_ps(wr[b] + i), _mm256_loadu_ps(x[t] + i), acc[b][t][0]); \
		for (int b = 0; b < RB; b++)                                                                      \
			for (int t = 0; t < T; t++) {                                                                 \
				float s = hsum8(_mm256_add_ps(_mm256_add_ps(acc[b][t][0], acc[b][t][1]), _mm256_add_ps(acc[b][t][2], acc[b][t][3]))); \
				for (int k = i; k < cols; k++) s += wr[b][k] * x[t][k];                                   \
				out[(long)t * rows + o + b] = s;                                                          \
			}                                                                                             \
	}

// The AVX2 tiles: one row of weights by up to three of activations with
// AVX2's sixteen registers (12 accumulators).
F32_TILE(f32_tile1x1, AVX2, 1, 1)
F32_TILE(f32_tile1x2, AVX2, 1, 2)
F32_TILE(f32_tile1x3, AVX2, 1, 3)

// F32Z_TILE is F32_TILE on 512-bit vectors, the same bits: a 512-bit
// accumulator holds two of F32_TILE's (lanes 0-7 its accumulator c, 8-15
// c+1) and takes the sixteen products of values 16h..16h+15 of each 32,
// which are the products F32_TILE gives those two, lane for lane; a
// remaining eight go into the low half (masked); the halves' sums are
// F32_TILE's s0+s1 and s2+s3. Twice the multiply-adds an instruction, so
// four rows of weights by three of activations fit AVX-512's 32 registers
// (24 accumulators) and a 64-row pass of F32, F16 or BF16 weights is no
// longer held to 256-bit vectors' rate.
#define AVX512FZ __attribute__((target("avx2,fma,f16c,avx512f,avx512vl")))
#define F32Z_TILE(NAME, RB, T)                                                                                \
	AVX512FZ static inline __attribute__((always_inline)) void NAME(const float *const *wr, const float *const *x, int cols, \
	                                                               float *out, long rows, int o) {           \
		__m512 acc[RB][T][2];                                                                             \
		for (int b = 0; b < RB; b++)                                                                      \
			for (int t = 0; t < T; t++) acc[b][t][0] = acc[b][t][1] = _mm512_setzero_ps();               \
		int i = 0;                                                                                        \
		for (; i + 32 <= cols; i += 32)                                                                   \
			for (int h = 0; h < 2; h++) {                                                                 \
				__m512 xv[T];                                                                             \
				for (int t = 0; t < T; t++) {                                                             \
					xv[t] = _mm512_loadu_ps(x[t] + i + 16 * h);                                           \
					__asm__("" : "+v"(xv[t]));                                                            \
				}                                                                                         \
				for (int b = 0; b < RB; b++) {                                                            \
					__m512 wv = _mm512_loadu_ps(wr[b] + i + 16 * h);                                      \
					__asm__("" : "+v"(wv)); /* and each weight vector once for all T */                  \
					for (int t = 0; t < T; t++) acc[b][t][h] = _mm512_fmadd_ps(wv, xv[t], acc[b][t][h]);  \
				}                                                                                         \
			}                                                                                             \
		for (; i + 8 <= cols; i += 8)                                                                     \
			for (int b = 0; b < RB; b++)                                                                  \
				for (int t = 0; t < T; t++)                                                               \
					acc[b][t][0] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(0xFF, wr[b] + i),          \
					                                     _mm512_maskz_loadu_ps(0xFF, x[t] + i), acc[b][t][0], 0xFF); \
		for (int b = 0; b < RB; b++)                                                                      \
			for (int t = 0; t < T; t++) {                                                                 \
				__m256 s01 = _mm256_add_ps(_mm512_castps512_ps256(acc[b][t][0]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[b][t][0]), 1))); \
				__m256 s23 = _mm256_add_ps(_mm512_castps512_ps256(acc[b][t][1]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[b][t][1]), 1))); \
				float s = hsum8(_mm256_add_ps(s01, s23));                                                 \
				for (int k = i; k < cols; k++) s += wr[b][k] * x[t][k];                                   \
				out[(long)t * rows + o + b] = s;                                                          \
			}                                                                                             \
	}
F32Z_TILE(f32z_tile1x1, 1, 1)
F32Z_TILE(f32z_tile1x2, 1, 2)
F32Z_TILE(f32z_tile1x3, 1, 3)
F32Z_TILE(f32z_tile4x1, 4, 1)
F32Z_TILE(f32z_tile4x2, 4, 2)
F32Z_TILE(f32z_tile4x3, 4, 3)

// F32_ROWS defines NAME: weight rows lo..hi-1 (F16 and BF16 widened to
// float32 into scratch, RB rows of cols at a time) against the n rows of
// activations, RB by three at a time. TILE##RT names the tiles.
#define F32_ROWS(NAME, ATTR, RB, TILE, TILE1)                                                                \
	ATTR static void NAME(int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols, const float *x, int n, \
	                      float *out, int rows, float *scratch) {                                            \
		for (int o = lo; o < hi; o += RB) {                                                               \
			int rb = hi - o < RB ? hi - o : RB;                                                           \
			const float *wr[RB];                                                                          \
			for (int b = 0; b < rb; b++) {                                                                \
				const uint8_t *src = w + (long)(o + b) * row_bytes;                                       \
				wr[b] = (const float *)src;                                                               \
				if (type == ARB_F16) expand_f16_avx2(src, cols, scratch + (long)b * cols);                \
				else if (type == ARB_BF16) expand_bf16_avx2(src, cols, scratch + (long)b * cols);            \
				if (type != ARB_F32) wr[b] = scratch + (long)b * cols;                                    \
			}                                                                                             \
			for (int r = 0; r < n; r += 3) {                                                              \
				const float *xs[3];                                                                       \
				int t = n - r < 3 ? n - r : 3;                                                            \
				for (int k = 0; k < t; k++) xs[k] = x + (long)(r + k) * cols;                             \
				float *ot = out + (long)r * rows;                                                         \
				if (rb == RB) {                                                                           \
					TILE(wr, xs, cols, ot, rows, o, t);                                                   \
				} else {                                                                                  \
					for (int b = 0; b < rb; b++) TILE1((wr + b), xs, cols, ot, rows, o + b, t);           \
				}                                                                                         \
			}                                                                                             \
		}                                                                                                 \
	}
#define F32_PICK(P, wr, xs, cols, ot, rows, o, t)                                                             \
	switch (t) {                                                                                              \
	case 3: P##x3(wr, xs, cols, ot, rows, o); break;                                                          \
	case 2: P##x2(wr, xs, cols, ot, rows, o); break;                                                          \
	default: P##x1(wr, xs, cols, ot, rows, o); break;                                                         \
	}
#define F32_T1(wr, xs, cols, ot, rows, o, t) F32_PICK(f32_tile1, wr, xs, cols, ot, rows, o, t)
F32_ROWS(mm_f32_avx2, AVX2, 1, F32_T1, F32_T1)
#define F32_Z1(wr, xs, cols, ot, rows, o, t) F32_PICK(f32z_tile1, wr, xs, cols, ot, rows, o, t)
#define F32_Z4(wr, xs, cols, ot, rows, o, t) F32_PICK(f32z_tile4, wr, xs, cols, ot, rows, o, t)
F32_ROWS(mm_f32_z, AVX512FZ, 4, F32_Z4, F32_Z1)

static int level = -1;

// arb_simd_level picks the kernels once: 3 where the CPU has AVX2, FMA,
// F16C, AVX-512 VNNI (with F, BW and VL) and AVX-512 BF16 (the training
// products' bfloat16 tiles, gemm.c), 2 with all but BF16, 1 with AVX2, FMA
// and F16C alone, else 0 (the portable C ones). ARBORIST_SIMD=0, 1 or 2
// caps it, so the tests run the lower levels' kernels on a CPU that has
// the higher ones.
int arb_simd_level(void) {
	if (level < 0) {
		const char *e = getenv("ARBORIST_SIMD");
		__builtin_cpu_init();
		int l = 0;
		if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
			l = 1;
			if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
			    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
				l = 2;
				if (__builtin_cpu_supports("avx512bf16")) l = 3;
			}
		}
		if (e && e[0] >= '0' && e[0] < '0' + l) l = e[0] - '0';
		level = l;
	}
	return level;
}

static int avx_vnni = -1, avx_vnni_cpu = -1;

// arb_avx_vnni_cpu is read once too: arb_mm_x8_vnni and arb_mm_k8_vnni
// ask it on every product.
int arb_avx_vnni_cpu(void) {
	if (avx_vnni_cpu < 0) {
		__builtin_cpu_init();
		avx_vnni_cpu = arb_simd_level() >= 1 && __builtin_cpu_supports("avxvnni");
	}
	return avx_vnni_cpu;
}

// arb_avx_vnni says, once, whether the eight-row tiles (arb_simd_level 1)
// run their AVX-VNNI compilation: where the CPU has it, unless
// ARBORIST_AVXVNNI=0 (with ARBORIST_SIMD=1, the AVX2 tiles of a CPU
// without it).
int arb_avx_vnni(void) {
	if (avx_vnni < 0) {
		const char *e = getenv("ARBORIST_AVXVNNI");
		avx_vnni = arb_avx_vnni_cpu() && !(e && e[0] == '0');
	}
	return avx_vnni;
}
#else
int arb_simd_level(void) { return 0; }
int arb_avx_vnni_cpu(void) { return 0; }
int arb_avx_vnni(void) { return 0; }
#endif

void arb_quantize_q8(const float *x, int count, float *d, int8_t *q, int32_t *s) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) { quantize_q8_avx2(x, count, d, q, s); return; }
#endif
	quantize_q8_generic(x, count, d, q, s);
}

// arb_quantize_q8_panels quantises rows lo..hi-1 of n rows of cols values
// (x: all n rows) as arb_quantize_q8 does, into the panels the
// sixteen-row tiles read (x16.c): the rows in panels of ARB_PANEL (the
// last of the rest when n is not a multiple), and within a panel of P rows,
// block b of row k at slot b*P + k: q (32 bytes a slot) and d; c holds
// four a slot, [b][j][k] within the panel, the offsets the tiles
// start from: -128 s, -8 s, and -32 times the sums of each half.
void arb_quantize_q8_panels(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) { quantize_panels_avx512(x, n, cols, lo, hi, q, d, c); return; }
	if (arb_simd_level() >= 1) { quantize_panels_avx2(x, n, cols, lo, hi, q, d, c); return; }
#endif
	quantize_panels_generic(x, n, cols, lo, hi, q, d, c);
}

// arb_quantize_q8k_panels quantises rows lo..hi-1 of n rows of cols values
// (x: all n rows; cols a multiple of 256) into the panels of
// arb_quantize_q8_panels with one scale for each 256 values, for the
// K-quants' sixteen-row tiles: q and d as there (d the same for a
// super-block's eight slots), c as QUANTIZE_KPANELS says.
void arb_quantize_q8k_panels(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) { quantize_kpanels_avx512(x, n, cols, lo, hi, q, d, c); return; }
	if (arb_simd_level() >= 1) { quantize_kpanels_avx2(x, n, cols, lo, hi, q, d, c); return; }
#endif
	quantize_kpanels_generic(x, n, cols, lo, hi, q, d, c);
}

void arb_mm_q8(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
               const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) {
		if (is_x(type) || type == ARB_IQ4_NL) mm_x_avx2(type, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows);
		else mm_q8_avx2(type, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows);
		return;
	}
#endif
	if (is_k(type)) mm_k_generic(type, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows);
	else if (is_x(type)) mm_x_generic(type, w, row_bytes, lo, hi, nb, yd, yq, n, out, rows);
	else mm_q8_generic(type, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows);
}

void arb_mm_f32(int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                const float *x, int n, float *out, int rows, float *scratch) {
	arb_mm_f32_at(arb_simd_level(), type, w, row_bytes, lo, hi, cols, x, n, out, rows, scratch);
}

// arb_mm_f32_at is arb_mm_f32 with the kernels of SIMD level lvl (at most
// arb_simd_level()), so a test can hold one level's tiles to another's.
void arb_mm_f32_at(int lvl, int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                   const float *x, int n, float *out, int rows, float *scratch) {
	if (lvl > arb_simd_level()) lvl = arb_simd_level();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (lvl >= 2) { mm_f32_z(type, w, row_bytes, lo, hi, cols, x, n, out, rows, scratch); return; }
	if (lvl >= 1) { mm_f32_avx2(type, w, row_bytes, lo, hi, cols, x, n, out, rows, scratch); return; }
#endif
	mm_f32_generic(type, w, row_bytes, lo, hi, cols, x, n, out, rows, scratch);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// silu_mul_avx2 is arb_silu_mul 8 at a time, with exp8_masked (within 2 ulp
// of expf). Every element goes through the same vector arithmetic, the last
// few too, so a row's result never depends on how many rows share the call.
AVX2 static void silu_mul_avx2(float *g, const float *u, long count) {
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= count; i += 8) {
		__m256 x = _mm256_loadu_ps(g + i);
		__m256 e = exp8_masked(_mm256_sub_ps(zero, x));
		_mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
	}
	if (i < count) { // the same arithmetic for the last few, so no element depends on where it falls
		float tg[8] = {0}, tu[8] = {0};
		memcpy(tg, g + i, (count - i) * sizeof(float));
		memcpy(tu, u + i, (count - i) * sizeof(float));
		__m256 x = _mm256_loadu_ps(tg);
		__m256 e = exp8_masked(_mm256_sub_ps(zero, x));
		_mm256_storeu_ps(tg, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(tu)));
		memcpy(g + i, tg, (count - i) * sizeof(float));
	}
}

// silu_mul_avx512 is silu_mul_avx2 sixteen lanes at a time, the same bits
// (exp16_masked is exp8_masked lane for lane; the last few values are
// masked lanes of the same arithmetic). Four vectors of g and u are
// loaded before any is stored: a pass's g and u are page-aligned buffers,
// a multiple of 4 KiB apart, and with a load after each store the loads
// waited on stores they only seemed to overlap (in a 128-token pass of
// llama-3.2-1b it took twice the AVX2 kernel's time; loads first, 0.7x).
AVX512BW static void silu_mul_avx512(float *g, const float *u, long count) {
	const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
	long i = 0;
	for (; i + 64 <= count; i += 64) {
		__m512 x[4], uv[4];
		for (int k = 0; k < 4; k++) x[k] = _mm512_loadu_ps(g + i + 16 * k), uv[k] = _mm512_loadu_ps(u + i + 16 * k);
		for (int k = 0; k < 4; k++)
			x[k] = _mm512_mul_ps(_mm512_div_ps(x[k], _mm512_add_ps(one, exp16_masked(_mm512_sub_ps(zero, x[k])))), uv[k]);
		for (int k = 0; k < 4; k++) _mm512_storeu_ps(g + i + 16 * k, x[k]);
	}
	for (; i < count; i += 16) {
		__mmask16 m = count - i >= 16 ? 0xFFFF : (__mmask16)((1u << (count - i)) - 1);
		__m512 x = _mm512_maskz_loadu_ps(m, g + i);
		__m512 e = exp16_masked(_mm512_sub_ps(zero, x));
		_mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, u + i)));
	}
}
#endif

// arb_silu_mul: g[i] = silu(g[i]) * u[i].
void arb_silu_mul(float *g, const float *u, long count) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) {
		silu_mul_avx512(g, u, count);
		return;
	}
	if (arb_simd_level() >= 1) {
		silu_mul_avx2(g, u, count);
		return;
	}
#endif
	for (long i = 0; i < count; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

// rms_scale is the factor RMSNorm multiplies a row by, from the sum of
// its squares: as the Go kernel computes it (the mean in float32, its
// square root in double).
static inline float rms_scale(double sum, int dim, float eps) {
	float mean = (float)(sum / dim);
	return 1.0f / (float)sqrt((double)(mean + eps));
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// rmsnorm_avx2 is arb_rmsnorm eight values at a time: each square in
// float32, summed in double in four partial sums (values 4i..4i+3 of each
// eight into sums 0..3 of two pairs), combined in a fixed order; a row's
// result depends only on the row.
AVX2 static void rmsnorm_avx2(float *out, const float *x, const float *w, int rows, int dim, float eps) {
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (long)r * dim;
		float *o = out + (long)r * dim;
		__m256d s0 = _mm256_setzero_pd(), s1 = s0;
		int i = 0;
		for (; i + 8 <= dim; i += 8) {
			__m256 v = _mm256_loadu_ps(xr + i), q = _mm256_mul_ps(v, v);
			s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(q)));
			s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(q, 1)));
		}
		double sd[4];
		_mm256_storeu_pd(sd, _mm256_add_pd(s0, s1));
		double sum = (sd[0] + sd[1]) + (sd[2] + sd[3]);
		for (; i < dim; i++) sum += (double)(xr[i] * xr[i]);
		float scale = rms_scale(sum, dim, eps);
		__m256 vs = _mm256_set1_ps(scale);
		for (i = 0; i + 8 <= dim; i += 8)
			_mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), vs), _mm256_loadu_ps(w + i)));
		for (; i < dim; i++) o[i] = xr[i] * scale * w[i];
	}
}

AVX2 static void add_avx2(float *x, const float *y, long n) {
	long i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
	for (; i < n; i++) x[i] += y[i];
}
#endif

// arb_rmsnorm sets each of rows rows of dim values to x * w / rms(x):
// out = x * (1 / sqrt(mean(x^2) + eps)) * w, the sum of squares in double.
void arb_rmsnorm(float *out, const float *x, const float *w, int rows, int dim, float eps) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) {
		rmsnorm_avx2(out, x, w, rows, dim, eps);
		return;
	}
#endif
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (long)r * dim;
		double sum = 0;
		for (int i = 0; i < dim; i++) sum += (double)(xr[i] * xr[i]);
		float scale = rms_scale(sum, dim, eps);
		for (int i = 0; i < dim; i++) out[(long)r * dim + i] = xr[i] * scale * w[i];
	}
}

// arb_add: x[i] += y[i], i < n (exact float adds: the same bits however
// they are grouped).
void arb_add(float *x, const float *y, long n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) {
		add_avx2(x, y, n);
		return;
	}
#endif
	for (long i = 0; i < n; i++) x[i] += y[i];
}

// rope_pair rotates one pair by (c, s) as the Go kernel does: each
// product rounded on its own, then the difference and the sum. It is
// built for the baseline instruction set and never inlined into the AVX2
// kernel, where GCC would fuse a product into the subtraction.
static __attribute__((noinline)) void rope_pair(float *a, float *b, float c, float s) {
	float x0 = *a, x1 = *b;
	*a = x0 * c - x1 * s;
	*b = x0 * s + x1 * c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// mul_kept is a * b, kept from being fused into the add or subtract that
// follows (GCC contracts a*b - c*d into a multiply-add in functions
// built for FMA), so every product rounds as rope_pair's does.
AVX2 static inline __m256 mul_kept(__m256 a, __m256 b) {
	__m256 p = _mm256_mul_ps(a, b);
	__asm__("" : "+x"(p));
	return p;
}

// rope_avx2 is arb_rope eight values at a time, the same bits as
// rope_pair: pairs (i, i+half) are two vectors of halves; adjacent pairs
// (2i, 2i+1) are one vector, with the angles duplicated across each pair
// and the pair's values swapped for the cross products (x0*c - x1*s is
// x0*c + -(x1*s), and x1*c + x0*s is x0*s + x1*c, exactly).
AVX2 static void rope_avx2(float *x, int rows, int heads, int hd, int rope_dim, int neox, const float *cos, const float *sin) {
	int half = rope_dim / 2;
	const __m256 even_neg = _mm256_castsi256_ps(_mm256_setr_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0));
	const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
	for (int r = 0; r < rows; r++) {
		const float *c = cos + (long)r * half, *s = sin + (long)r * half;
		for (int h = 0; h < heads; h++) {
			float *v = x + ((long)r * heads + h) * hd;
			int i = 0;
			if (neox) {
				for (; i + 8 <= half; i += 8) {
					__m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
					__m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
					_mm256_storeu_ps(v + i, _mm256_sub_ps(mul_kept(a, cv), mul_kept(b, sv)));
					_mm256_storeu_ps(v + i + half, _mm256_add_ps(mul_kept(a, sv), mul_kept(b, cv)));
				}
				for (; i < half; i++) rope_pair(v + i, v + i + half, c[i], s[i]);
			} else {
				for (; i + 4 <= half; i += 4) {
					__m256 p = _mm256_loadu_ps(v + 2 * i);
					__m256 cv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c + i)), dup);
					__m256 sv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + i)), dup);
					__m256 sw = _mm256_permute_ps(p, 0xB1); // (x1, x0) of each pair
					__m256 cross = _mm256_xor_ps(mul_kept(sw, sv), even_neg);
					_mm256_storeu_ps(v + 2 * i, _mm256_add_ps(mul_kept(p, cv), cross));
				}
				for (; i < half; i++) rope_pair(v + 2 * i, v + 2 * i + 1, c[i], s[i]);
			}
		}
	}
}
#endif

// arb_rope rotates the first rope_dim values of each of heads heads (hd
// values each) of rows rows of x by the row's angles (cos and sin, rope_dim
// / 2 of each a row): pairs (i, i + rope_dim/2) when neox, else (2i,
// 2i+1). The results are the Go kernel's bit for bit.
void arb_rope(float *x, int rows, int heads, int hd, int rope_dim, int neox, const float *cos, const float *sin) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) {
		rope_avx2(x, rows, heads, hd, rope_dim, neox, cos, sin);
		return;
	}
#endif
	int half = rope_dim / 2;
	for (int r = 0; r < rows; r++)
		for (int h = 0; h < heads; h++) {
			float *v = x + ((long)r * heads + h) * hd;
			for (int i = 0; i < half; i++)
				if (neox) rope_pair(v + i, v + i + half, cos[(long)r * half + i], sin[(long)r * half + i]);
				else rope_pair(v + 2 * i, v + 2 * i + 1, cos[(long)r * half + i], sin[(long)r * half + i]);
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// f32_to_f16_avx2 is arb_f32_to_f16 eight values at a time with F16C:
// vcvtps2ph rounds to nearest even, with subnormals and overflow to
// infinity as quant.F32ToF16 does; a NaN keeps part of its payload there,
// so NaN lanes are set to the quiet NaN 0x7e00 with their sign.
AVX2 static void f32_to_f16_avx2(uint16_t *dst, const float *src, long n) {
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(src + i);
		__m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256i un = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
		__m128i nan = _mm_packs_epi32(_mm256_castsi256_si128(un), _mm256_extracti128_si256(un, 1));
		__m128i quiet = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
		_mm_storeu_si128((__m128i *)(dst + i), _mm_blendv_epi8(h, quiet, nan));
	}
	if (i < n) { // the last few through a padded copy, the same arithmetic
		float t[8] = {0};
		uint16_t o[8];
		memcpy(t, src + i, (size_t)(n - i) * sizeof(float));
		f32_to_f16_avx2(o, t, 8);
		memcpy(dst + i, o, (size_t)(n - i) * sizeof(uint16_t));
	}
}
#endif

// arb_f32_to_f16 converts n floats to IEEE half floats as
// quant.F32ToF16 does, bit for bit; it returns -1 (and converts nothing)
// where the CPU has no F16C, for the caller to convert in Go.
int arb_f32_to_f16(uint16_t *dst, const float *src, long n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) {
		f32_to_f16_avx2(dst, src, n);
		return 0;
	}
#endif
	(void)dst; (void)src; (void)n;
	return -1;
}

// arb_read_sum streams through n words (a multiple of 16) and returns a sum
// that depends on every one, so the reads cannot be skipped: the inner loop
// of the memory bandwidth measurement. It reads four streams at once, a
// quarter of the words each: on a Zen 5 core one stream read 36-42 GB/s
// on two cores where four read 44-52 in the same rounds (eight no more),
// and the products' kernels, which stream their weights with prefetches
// ahead, had read faster than the one-stream probe.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
AVX2 static uint64_t read_sum_avx2(const uint64_t *p, long n) {
	__m256i a[8];
	for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_si256();
	long q = n / 4 / 16 * 16;
	for (long i = 0; i < q; i += 16)
		for (int s = 0; s < 4; s++) {
			const uint64_t *w = p + s * q + i;
			a[2 * s] = _mm256_xor_si256(a[2 * s], _mm256_loadu_si256((const __m256i *)w));
			a[2 * s + 1] = _mm256_xor_si256(a[2 * s + 1], _mm256_loadu_si256((const __m256i *)(w + 4)));
			a[2 * s] = _mm256_xor_si256(a[2 * s], _mm256_loadu_si256((const __m256i *)(w + 8)));
			a[2 * s + 1] = _mm256_xor_si256(a[2 * s + 1], _mm256_loadu_si256((const __m256i *)(w + 12)));
		}
	for (long i = 4 * q; i + 4 <= n; i += 4) a[0] = _mm256_xor_si256(a[0], _mm256_loadu_si256((const __m256i *)(p + i)));
	__m256i x = a[0];
	for (int k = 1; k < 8; k++) x = _mm256_xor_si256(x, a[k]);
	uint64_t out[4];
	_mm256_storeu_si256((__m256i *)out, x);
	return out[0] ^ out[1] ^ out[2] ^ out[3];
}
#endif

uint64_t arb_read_sum(const uint64_t *p, long n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) return read_sum_avx2(p, n);
#endif
	uint64_t s = 0;
	for (long i = 0; i < n; i++) s ^= p[i];
	return s;
}

// arb_peak_i8 and arb_peak_f32 run iters rounds of independent chains of
// the matrix kernels' inner operations (int8: maddubs, added in 16 bits
// four at a time, then madd on 256-bit vectors, as the AVX2 tiles use
// them, vpdpbusd on 256-bit vectors where the AVX-VNNI tiles run, or on
// 512-bit vectors where the AVX-512 VNNI tiles run; float32: FMA), enough
// chains to hide their latency, and return a value that depends on every
// result. They measure the compute ceiling the kernels can approach:
// arb_peak_i8_macs() int8 multiply-adds (8 * 128, 8 * 32 with AVX-VNNI,
// or 8 * 64 with AVX-512 VNNI), or 10 * 8 float ones, per round.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The AVX2 chains are the eight-row tiles' (k8.c, q40x8.c): four maddubs
// pair sums added in 16 bits, then one madd widens them into the sum.
AVX2 static int64_t peak_i8_avx2(long iters) {
	__m256i a = _mm256_set1_epi8(3), c = _mm256_set1_epi8(5), ones = _mm256_set1_epi16(1);
	__m256i b[8], s[8];
	for (int k = 0; k < 8; k++) { b[k] = _mm256_set1_epi8((char)(k + 1)); s[k] = _mm256_setzero_si256(); }
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 8; k++) { // four products no other chain shares
			__m256i p = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(a, b[k]), _mm256_maddubs_epi16(b[k], a)),
			                             _mm256_add_epi16(_mm256_maddubs_epi16(c, b[k]), _mm256_maddubs_epi16(b[k], c)));
			s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(p, ones));
		}
		__asm__ volatile("" : "+x"(a), "+x"(c));
	}
	__m256i t = s[0];
	for (int k = 1; k < 8; k++) t = _mm256_add_epi32(t, s[k]);
	return _mm256_extract_epi32(t, 0);
}

// peak_i8_avxvnni is peak_i8_avx2 with the AVX-VNNI tiles' operation
// (vpdpbusd on 256-bit vectors: 32 multiply-adds each).
__attribute__((target("avx2,avxvnni"))) static int64_t peak_i8_avxvnni(long iters) {
	__m256i a = _mm256_set1_epi8(3);
	__m256i b[8], s[8];
	for (int k = 0; k < 8; k++) { b[k] = _mm256_set1_epi8((char)(k + 1)); s[k] = _mm256_setzero_si256(); }
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 8; k++) s[k] = _mm256_dpbusd_avx_epi32(s[k], a, b[k]);
		__asm__ volatile("" : "+x"(a));
	}
	__m256i t = s[0];
	for (int k = 1; k < 8; k++) t = _mm256_add_epi32(t, s[k]);
	return _mm256_extract_epi32(t, 0);
}

// peak_i8_vnni is peak_i8_avx2 with the VNNI tiles' operation (vpdpbusd
// on 512-bit vectors: 64 multiply-adds each, one instruction).
__attribute__((target("avx2,avx512f,avx512vl,avx512bw,avx512vnni"))) static int64_t peak_i8_vnni(long iters) {
	__m512i a = _mm512_set1_epi8(3);
	__m512i b[8], s[8];
	for (int k = 0; k < 8; k++) { b[k] = _mm512_set1_epi8((char)(k + 1)); s[k] = _mm512_setzero_si512(); }
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 8; k++) s[k] = _mm512_dpbusd_epi32(s[k], a, b[k]);
		__asm__ volatile("" : "+v"(a));
	}
	__m512i t = s[0];
	for (int k = 1; k < 8; k++) t = _mm512_add_epi32(t, s[k]);
	return _mm512_reduce_add_epi32(t);
}

AVX2 static int64_t peak_f32_avx2(long iters) {
	__m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f), s[10];
	for (int k = 0; k < 10; k++) s[k] = _mm256_set1_ps((float)k);
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 10; k++) s[k] = _mm256_fmadd_ps(s[k], m, c);
		__asm__ volatile("" : "+x"(m));
	}
	__m256 t = s[0];
	for (int k = 1; k < 10; k++) t = _mm256_add_ps(t, s[k]);
	return (int64_t)_mm256_cvtss_f32(t);
}
#endif

int arb_peak_i8_macs(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) return 8 * 64;
	if (arb_avx_vnni()) return 8 * 32;
	if (arb_simd_level() >= 1) return 8 * 128;
#endif
	return 8 * 32;
}

int64_t arb_peak_i8(long iters) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) return peak_i8_vnni(iters);
	if (arb_avx_vnni()) return peak_i8_avxvnni(iters);
	if (arb_simd_level() >= 1) return peak_i8_avx2(iters);
#endif
	int32_t s[8] = {0};
	volatile int8_t a = 3;
	for (long i = 0; i < iters; i++)
		for (int k = 0; k < 8; k++)
			for (int j = 0; j < 32; j++) s[k] += a * (int8_t)(k + j);
	return s[0] + s[7];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// peak_f32_avx512 is peak_f32_avx2 on 512-bit vectors, as the float
// products' tiles run from level 2.
__attribute__((target("avx2,fma,avx512f"))) static int64_t peak_f32_avx512(long iters) {
	__m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f), s[10];
	for (int k = 0; k < 10; k++) s[k] = _mm512_set1_ps((float)k);
	for (long i = 0; i < iters; i++) {
		for (int k = 0; k < 10; k++) s[k] = _mm512_fmadd_ps(s[k], m, c);
		__asm__ volatile("" : "+v"(m));
	}
	__m512 t = s[0];
	for (int k = 1; k < 10; k++) t = _mm512_add_ps(t, s[k]);
	return (int64_t)_mm512_reduce_add_ps(t);
}
#endif

int arb_peak_f32_macs(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) return 10 * 16;
#endif
	return 10 * 8;
}

int64_t arb_peak_f32(long iters) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2) return peak_f32_avx512(iters);
	if (arb_simd_level() >= 1) return peak_f32_avx2(iters);
#endif
	float s[10] = {0};
	volatile float m = 0.999f;
	for (long i = 0; i < iters; i++)
		for (int k = 0; k < 10; k++)
			for (int j = 0; j < 8; j++) s[k] = s[k] * m + 0.001f;
	return (int64_t)(s[0] + s[9]);
}
