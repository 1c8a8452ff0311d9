//go:build cgo && !purego

// SIMD matrix kernels for the CPU backend, called through cgo.
//
// Two families:
//  - arb_mm_q8: weights in 32-value blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1)
//    times activations quantised to 8 bits per 32-value block; inner
//    products run on integers (AVX2: maddubs/madd), one float multiply-add
//    per block. The 4- and 5-bit weights enter maddubs unsigned, as stored,
//    and their offset comes off the exact integer sum (offset * sum of y);
//    Q8_0 takes the sign trick.
//  - arb_mm_f32: everything else; each weight row is expanded to float32 once
//    into a scratch row, then multiplied by every activation row with FMA.
// Each family has an AVX2+FMA+F16C version and a portable C version, chosen
// once at run time; kernels/cpu's Go reference loops define the results.
// Rows of weights are processed against up to four activation rows at a
// time, so a weight block is loaded once per four dot products.
#include <math.h>
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

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static int block_bytes(int type) {
	switch (type) {
	case ARB_Q8_0: return 34;
	case ARB_Q4_0: return 18;
	case ARB_Q4_1: return 20;
	case ARB_Q5_0: return 22;
	case ARB_Q5_1: return 24;
	}
	return 0;
}

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

static void quantize_q8_generic(const float *x, int count, float *d, int8_t *q, int32_t *s) {
	for (int b = 0; b < count / 32; b++) {
		const float *xs = x + b * 32;
		float amax = 0;
		for (int j = 0; j < 32; j++) { float a = fabsf(xs[j]); if (a > amax) amax = a; }
		float dd = amax / 127, id = dd != 0 ? 1 / dd : 0;
		int32_t sum = 0;
		for (int j = 0; j < 32; j++) { int8_t v = (int8_t)nearbyintf(xs[j] * id); q[b * 32 + j] = v; sum += v; }
		d[b] = dd;
		s[b] = sum;
	}
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

// expand_row writes one weight row as float32 (types without a q8 kernel).
static void expand_row(int type, const uint8_t *b, int cols, float *y) {
	switch (type) {
	case ARB_F16:
		for (int i = 0; i < cols; i++) y[i] = fp16_to_f32(rd16(b + 2 * i));
		return;
	case ARB_BF16:
		for (int i = 0; i < cols; i++) { uint32_t v = (uint32_t)rd16(b + 2 * i) << 16; memcpy(y + i, &v, 4); }
		return;
	case ARB_Q4_K: case ARB_Q5_K:
		for (int blk = 0; blk < cols / 256; blk++, y += 256) {
			const uint8_t *p = b + blk * (type == ARB_Q4_K ? 144 : 176);
			float d = fp16_to_f32(rd16(p)), dmin = fp16_to_f32(rd16(p + 2));
			const uint8_t *sc = p + 4, *qh = p + 16, *ql = p + (type == ARB_Q4_K ? 16 : 48);
			for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32) {
				float dd[2], mm[2];
				for (int k = 0; k < 2; k++) {
					int jj = is + k;
					uint8_t s, m;
					if (jj < 4) { s = sc[jj] & 63; m = sc[jj + 4] & 63; }
					else { s = (sc[jj + 4] & 0xf) | ((sc[jj - 4] >> 6) << 4); m = (sc[jj + 4] >> 4) | ((sc[jj] >> 6) << 4); }
					dd[k] = d * s; mm[k] = dmin * m;
				}
				uint8_t u1 = (uint8_t)(1 << (j / 32)), u2 = (uint8_t)(2 << (j / 32));
				for (int l = 0; l < 32; l++) {
					int h1 = 0, h2 = 0;
					if (type == ARB_Q5_K) { h1 = (qh[l] & u1) ? 16 : 0; h2 = (qh[l] & u2) ? 16 : 0; }
					y[j + l] = dd[0] * (float)((ql[l] & 0xf) + h1) - mm[0];
					y[j + 32 + l] = dd[1] * (float)((ql[l] >> 4) + h2) - mm[1];
				}
			}
		}
		return;
	case ARB_Q6_K:
		for (int blk = 0; blk < cols / 256; blk++, y += 256) {
			const uint8_t *p = b + blk * 210, *ql = p, *qh = p + 128;
			const int8_t *sc = (const int8_t *)(p + 192);
			float d = fp16_to_f32(rd16(p + 208));
			for (int nn = 0; nn < 256; nn += 128, ql += 64, qh += 32, sc += 8) {
				for (int l = 0; l < 32; l++) {
					int is = l / 16;
					int q1 = (int)((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
					int q2 = (int)((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
					int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
					int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
					y[nn + l] = d * sc[is] * q1;
					y[nn + l + 32] = d * sc[is + 2] * q2;
					y[nn + l + 64] = d * sc[is + 4] * q3;
					y[nn + l + 96] = d * sc[is + 6] * q4;
				}
			}
		}
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

// ---- AVX2 + FMA + F16C ----
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum8(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

AVX2 static void quantize_q8_avx2(const float *x, int count, float *d, int8_t *q, int32_t *s) {
	const __m256 signmask = _mm256_set1_ps(-0.0f);
	for (int b = 0; b < count / 32; b++) {
		const float *xs = x + b * 32;
		__m256 v0 = _mm256_loadu_ps(xs), v1 = _mm256_loadu_ps(xs + 8), v2 = _mm256_loadu_ps(xs + 16), v3 = _mm256_loadu_ps(xs + 24);
		__m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(signmask, v0), _mm256_andnot_ps(signmask, v1)),
		                         _mm256_max_ps(_mm256_andnot_ps(signmask, v2), _mm256_andnot_ps(signmask, v3)));
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		float amax = _mm_cvtss_f32(m4);
		float dd = amax / 127, id = dd != 0 ? 1 / dd : 0;
		__m256 mul = _mm256_set1_ps(id);
		__m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
		__m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
		__m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
		__m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
		__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
		s4 = _mm_hadd_epi32(s4, s4);
		s4 = _mm_hadd_epi32(s4, s4);
		// pack 32 int32 -> 32 int8 (packs interleave lanes; permute restores order)
		__m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
		__m256i p = _mm256_packs_epi16(p01, p23);
		p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *)(q + b * 32), p);
		d[b] = dd;
		s[b] = _mm_cvtsi128_si32(s4);
	}
}

// load_q loads one block's 32 weights as bytes: signed for Q8_0; unsigned
// (0..15 or 0..31, offset not removed) for the 4- and 5-bit types, whose
// offset is taken off the integer sum afterwards (offset * sum of y).
AVX2 static inline __attribute__((always_inline)) __m256i load_q(int type, const uint8_t *b) {
	const __m256i m4 = _mm256_set1_epi8(0xf);
	switch (type) {
	case ARB_Q8_0:
		return _mm256_loadu_si256((const __m256i *)(b + 2));
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
// blocks q0..q3 (as load_q gives them; a0..a3 their absolute values, used
// by Q8_0) against 128 activations y. The sums are exact integers, so how
// they are reduced does not change them.
AVX2 static inline __attribute__((always_inline)) __m128i isum4(int type, __m256i q0, __m256i q1, __m256i q2, __m256i q3,
                                  __m256i a0, __m256i a1, __m256i a2, __m256i a3, const int8_t *y) {
	__m256i y0 = _mm256_loadu_si256((const __m256i *)y), y1 = _mm256_loadu_si256((const __m256i *)(y + 32));
	__m256i y2 = _mm256_loadu_si256((const __m256i *)(y + 64)), y3 = _mm256_loadu_si256((const __m256i *)(y + 96));
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i h;
	if (type == ARB_Q8_0) {
		// |q| * sign(y, q): each 16-bit pair sum stays within int16
		__m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(y0, q0)), ones);
		__m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(y1, q1)), ones);
		__m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(a2, _mm256_sign_epi8(y2, q2)), ones);
		__m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(a3, _mm256_sign_epi8(y3, q3)), ones);
		h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
	} else {
		// unsigned weights of at most 31: a 16-bit lane holds at most
		// 2*31*127, and four of them summed stay below 32767
		__m256i m0 = _mm256_maddubs_epi16(q0, y0), m1 = _mm256_maddubs_epi16(q1, y1);
		__m256i m2 = _mm256_maddubs_epi16(q2, y2), m3 = _mm256_maddubs_epi16(q3, y3);
		h = _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(m0, m1), _mm256_hadd_epi16(m2, m3)), ones);
	}
	(void)a0; (void)a1; (void)a2; (void)a3;
	return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// isum1 is isum4 for one block.
AVX2 static inline __attribute__((always_inline)) int32_t isum1(int type, __m256i q, const int8_t *y) {
	__m256i yv = _mm256_loadu_si256((const __m256i *)y), p;
	if (type == ARB_Q8_0) p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(yv, q));
	else p = _mm256_maddubs_epi16(q, yv);
	p = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
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
#define PREFETCH 2048

// q8_tile computes weight row o against T activation rows r..r+T-1
// (T = 1..4): each group of four weight blocks is loaded once and used for
// all T rows. Every row is summed in exactly the order a lone row uses, so
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
			__m256i a0 = q0, a1 = q1, a2 = q2, a3 = q3;                                                    \
			if (type == ARB_Q8_0) {                                                                        \
				a0 = _mm256_sign_epi8(q0, q0); a1 = _mm256_sign_epi8(q1, q1);                              \
				a2 = _mm256_sign_epi8(q2, q2); a3 = _mm256_sign_epi8(q3, q3);                              \
			}                                                                                              \
			__m128 dw = scales4(k0, k1, k2, k3);                                                           \
			for (int k = 0; k < T; k++) {                                                                  \
				__m128i s4 = isum4(type, q0, q1, q2, q3, a0, a1, a2, a3, yq + (long)(r + k) * stride + b * 32); \
				if (off) s4 = _mm_sub_epi32(s4, _mm_slli_epi32(_mm_loadu_si128((const __m128i *)(ys + (long)(r + k) * nb + b)), off == 8 ? 3 : 4)); \
				acc[k] = _mm_fmadd_ps(_mm_mul_ps(dw, _mm_loadu_ps(yd + (long)(r + k) * nb + b)), _mm_cvtepi32_ps(s4), acc[k]); \
			}                                                                                              \
		}                                                                                                  \
		for (int k = 0; k < T; k++) {                                                                      \
			const int8_t *y = yq + (long)(r + k) * stride;                                                 \
			const float *dy = yd + (long)(r + k) * nb;                                                     \
			for (int bt = b; bt < nb; bt++) {                                                              \
				const uint8_t *blk = wr + (long)bt * bb;                                                   \
				int32_t s = isum1(type, load_q(type, blk), y + bt * 32) - off * ys[(long)(r + k) * nb + bt]; \
				tail[k] += _cvtsh_ss(rd16(blk)) * dy[bt] * (float)s;                                       \
			}                                                                                              \
			float mins = 0;                                                                                \
			if (has_min)                                                                                   \
				for (int kk = 0; kk < nb; kk++) mins += _cvtsh_ss(rd16(wr + (long)kk * bb + 2)) * dy[kk] * (float)ys[(long)(r + k) * nb + kk]; \
			__m128 t = _mm_add_ps(acc[k], _mm_movehl_ps(acc[k], acc[k]));                                  \
			t = _mm_add_ss(t, _mm_movehdup_ps(t));                                                         \
			out[(long)(r + k) * rows + o] = _mm_cvtss_f32(t) + tail[k] + mins;                             \
		}                                                                                                  \
	}
Q8_TILE(1)
Q8_TILE(2)
Q8_TILE(3)
Q8_TILE(4)

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

AVX2 static void mm_q8_avx2(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
                            const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
	switch (type) {
	case ARB_Q8_0: q8_rows(ARB_Q8_0, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q4_0: q8_rows(ARB_Q4_0, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q4_1: q8_rows(ARB_Q4_1, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q5_0: q8_rows(ARB_Q5_0, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	case ARB_Q5_1: q8_rows(ARB_Q5_1, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	default: q8_rows(type, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); break;
	}
}

AVX2 static float dot_avx2(const float *a, const float *b, int n) {
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	int i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	for (; i < n; i++) s += a[i] * b[i];
	return s;
}

// store32 converts 32 bytes holding values 0..255 (u8) to float, scales
// them by d and subtracts m: y[i] = d*q[i] - m, for i < 32.
AVX2 static inline void store32(float *y, __m256i q, float d, float m) {
	__m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
	__m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
	_mm256_storeu_ps(y + 0, _mm256_fmsub_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), vm));
	_mm256_storeu_ps(y + 8, _mm256_fmsub_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), vm));
	_mm256_storeu_ps(y + 16, _mm256_fmsub_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), vm));
	_mm256_storeu_ps(y + 24, _mm256_fmsub_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), vm));
}

// store16s converts 16 signed bytes to float times d: y[i] = d*q[i].
AVX2 static inline void store16s(float *y, __m128i q, float d) {
	__m256 vd = _mm256_set1_ps(d);
	_mm256_storeu_ps(y, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
	_mm256_storeu_ps(y + 8, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))));
}

// expand_k_avx2 expands Q4_K, Q5_K and Q6_K rows with byte-wide SIMD; the
// layouts are those of expand_row (and quant.DequantizeBlock).
AVX2 static int expand_k_avx2(int type, const uint8_t *b, int cols, float *y) {
	const __m256i m4 = _mm256_set1_epi8(0xf);
	switch (type) {
	case ARB_Q4_K: case ARB_Q5_K:
		for (int blk = 0; blk < cols / 256; blk++, y += 256) {
			const uint8_t *p = b + blk * (type == ARB_Q4_K ? 144 : 176);
			float d = fp16_to_f32(rd16(p)), dmin = fp16_to_f32(rd16(p + 2));
			const uint8_t *sc = p + 4, *ql = p + (type == ARB_Q4_K ? 16 : 48);
			__m256i qh = type == ARB_Q5_K ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
			for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32) {
				float dd[2], mm[2];
				for (int k = 0; k < 2; k++) {
					int jj = is + k;
					uint8_t s, m;
					if (jj < 4) { s = sc[jj] & 63; m = sc[jj + 4] & 63; }
					else { s = (sc[jj + 4] & 0xf) | ((sc[jj - 4] >> 6) << 4); m = (sc[jj + 4] >> 4) | ((sc[jj] >> 6) << 4); }
					dd[k] = d * s; mm[k] = dmin * m;
				}
				__m256i q = _mm256_loadu_si256((const __m256i *)ql);
				__m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
				if (type == ARB_Q5_K) {
					// fifth bits: bit (j/32) of qh[l] for the low half, bit (j/32 + 1) for the high half
					__m256i b1 = _mm256_set1_epi8((char)(1 << (j / 32))), b2 = _mm256_set1_epi8((char)(2 << (j / 32)));
					lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), _mm256_set1_epi8(16)));
					hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b2), b2), _mm256_set1_epi8(16)));
				}
				store32(y + j, lo, dd[0], mm[0]);
				store32(y + j + 32, hi, dd[1], mm[1]);
			}
		}
		return 1;
	case ARB_Q6_K:
		for (int blk = 0; blk < cols / 256; blk++, y += 256) {
			const uint8_t *p = b + blk * 210, *ql = p, *qh = p + 128;
			const int8_t *sc = (const int8_t *)(p + 192);
			float d = fp16_to_f32(rd16(p + 208));
			const __m256i m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
			for (int nn = 0; nn < 256; nn += 128, ql += 64, qh += 32, sc += 8) {
				__m256i a = _mm256_loadu_si256((const __m256i *)ql), c = _mm256_loadu_si256((const __m256i *)(ql + 32));
				__m256i h = _mm256_loadu_si256((const __m256i *)qh);
				__m256i q1 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4)), off);
				__m256i q2 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4)), off);
				__m256i q3 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4)), off);
				__m256i q4 = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4)), off);
				__m256i qs[4] = {q1, q2, q3, q4};
				for (int g = 0; g < 4; g++) {
					// 32 values; the first 16 use scale sc[2g], the next 16 sc[2g+1]
					store16s(y + nn + 32 * g, _mm256_castsi256_si128(qs[g]), d * sc[2 * g]);
					store16s(y + nn + 32 * g + 16, _mm256_extracti128_si256(qs[g], 1), d * sc[2 * g + 1]);
				}
			}
		}
		return 1;
	}
	return 0;
}

AVX2 static void expand_f16_avx2(const uint8_t *b, int cols, float *y) {
	int i = 0;
	for (; i + 8 <= cols; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i))));
	for (; i < cols; i++) y[i] = fp16_to_f32(rd16(b + 2 * i));
}

AVX2 static void mm_f32_avx2(int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                             const float *x, int n, float *out, int rows, float *scratch) {
	for (int o = lo; o < hi; o++) {
		const float *wr = (const float *)(w + (long)o * row_bytes);
		if (type == ARB_F16) { expand_f16_avx2(w + (long)o * row_bytes, cols, scratch); wr = scratch; }
		else if (type != ARB_F32) {
			if (!expand_k_avx2(type, w + (long)o * row_bytes, cols, scratch)) expand_row(type, w + (long)o * row_bytes, cols, scratch);
			wr = scratch;
		}
		for (int r = 0; r < n; r++) out[(long)r * rows + o] = dot_avx2(wr, x + (long)r * cols, cols);
	}
}

static int level = -1;

int arb_simd_level(void) {
	if (level < 0) {
		__builtin_cpu_init();
		level = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) ? 1 : 0;
	}
	return level;
}
#else
int arb_simd_level(void) { return 0; }
#endif

void arb_quantize_q8(const float *x, int count, float *d, int8_t *q, int32_t *s) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) { quantize_q8_avx2(x, count, d, q, s); return; }
#endif
	quantize_q8_generic(x, count, d, q, s);
}

void arb_mm_q8(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
               const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) { mm_q8_avx2(type, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows); return; }
#endif
	mm_q8_generic(type, w, row_bytes, lo, hi, nb, yd, yq, ys, n, out, rows);
}

void arb_mm_f32(int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                const float *x, int n, float *out, int rows, float *scratch) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) { mm_f32_avx2(type, w, row_bytes, lo, hi, cols, x, n, out, rows, scratch); return; }
#endif
	mm_f32_generic(type, w, row_bytes, lo, hi, cols, x, n, out, rows, scratch);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// exp8_masked returns e^x for 8 floats (Cephes' single-precision
// polynomial after reduction by ln 2, within 2 ulp on the softmax range);
// -inf and anything below -87.3 give exactly 0.
AVX2 static inline __m256 exp8_masked(__m256 x) {
	__m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(pow2)), live);
}

// attention_avx2 is arb_attention for head widths that are multiples of 8.
AVX2 static void attention_avx2(float *out, const float *q, const float *kc, const float *vc, int past, int n,
                                const uint8_t *mask, int heads, int kv_heads, int hd, float scale,
                                int lo, int hi, float *scores) {
	int total = past + n, group = heads / kv_heads, kvd = kv_heads * hd, qd = heads * hd;
	for (int task = lo; task < hi; task++) {
		int i = task / heads, h = task % heads, kh = h / group;
		const float *qv = q + (long)i * qd + h * hd;
		const uint8_t *row = mask ? mask + (long)i * total : NULL;
		int limit = row ? total : past + i + 1;
		float maxs = -INFINITY;
		for (int j = 0; j < limit; j++) {
			if (row && !row[j]) { scores[j] = -INFINITY; continue; }
			const float *kv = kc + (long)j * kvd + kh * hd;
			__m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qv), _mm256_loadu_ps(kv));
			for (int t = 8; t < hd; t += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qv + t), _mm256_loadu_ps(kv + t), acc);
			float d = hsum8(acc) * scale;
			scores[j] = d;
			if (d > maxs) maxs = d;
		}
		float *o = out + (long)i * qd + h * hd;
		for (int t = 0; t < hd; t++) o[t] = 0;
		if (maxs == -INFINITY) continue;
		// exponentials 8 at a time; masked slots (-inf) give exactly 0, so
		// a row sums the same whether it is decoded alone or in a batch
		__m256 vmax = _mm256_set1_ps(maxs);
		__m256d s0 = _mm256_setzero_pd(), s1 = s0;
		int j = 0;
		for (; j + 8 <= limit; j += 8) {
			__m256 e = exp8_masked(_mm256_sub_ps(_mm256_loadu_ps(scores + j), vmax));
			_mm256_storeu_ps(scores + j, e);
			s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
			s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
		}
		if (j < limit) {
			float tmp[8];
			for (int k = 0; k < 8; k++) tmp[k] = j + k < limit ? scores[j + k] : -INFINITY;
			__m256 e = exp8_masked(_mm256_sub_ps(_mm256_loadu_ps(tmp), vmax));
			_mm256_storeu_ps(tmp, e);
			for (int k = 0; j + k < limit; k++) scores[j + k] = tmp[k];
			s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
			s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
		}
		double sd[4];
		_mm256_storeu_pd(sd, _mm256_add_pd(s0, s1));
		double sum = (sd[0] + sd[1]) + (sd[2] + sd[3]);
		__m256 inv = _mm256_set1_ps((float)(1.0 / sum));
		for (int t = 0; t < hd; t += 8) {
			__m256 acc = _mm256_setzero_ps();
			for (int j = 0; j < limit; j++) {
				if (row && !row[j]) continue;
				acc = _mm256_fmadd_ps(_mm256_set1_ps(scores[j]), _mm256_loadu_ps(vc + (long)j * kvd + kh * hd + t), acc);
			}
			_mm256_storeu_ps(o + t, _mm256_mul_ps(acc, inv));
		}
	}
}
#endif

// arb_attention computes tasks lo..hi-1 (task = row*heads + head) of
// softmax(q.K^T * scale, masked) . V. mask, when not NULL, has n rows of
// past+n bytes; without it row i sees slots 0..past+i. A row that sees no
// slot gets zeros. The softmax sum accumulates in double, as ggml does.
void arb_attention(float *out, const float *q, const float *kc, const float *vc, int past, int n,
                   const uint8_t *mask, int heads, int kv_heads, int hd, float scale,
                   int lo, int hi, float *scores) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (hd % 8 == 0 && arb_simd_level() >= 1) {
		attention_avx2(out, q, kc, vc, past, n, mask, heads, kv_heads, hd, scale, lo, hi, scores);
		return;
	}
#endif
	int total = past + n, group = heads / kv_heads, kvd = kv_heads * hd, qd = heads * hd;
	for (int task = lo; task < hi; task++) {
		int i = task / heads, h = task % heads, kh = h / group;
		const float *qv = q + (long)i * qd + h * hd;
		const uint8_t *row = mask ? mask + (long)i * total : NULL;
		int limit = row ? total : past + i + 1;
		float maxs = -INFINITY;
		for (int j = 0; j < limit; j++) {
			if (row && !row[j]) { scores[j] = -INFINITY; continue; }
			const float *kv = kc + (long)j * kvd + kh * hd;
			float d = 0;
			for (int t = 0; t < hd; t++) d += qv[t] * kv[t];
			d *= scale;
			scores[j] = d;
			if (d > maxs) maxs = d;
		}
		float *o = out + (long)i * qd + h * hd;
		for (int t = 0; t < hd; t++) o[t] = 0;
		if (maxs == -INFINITY) continue;
		double sum = 0;
		for (int j = 0; j < limit; j++) {
			if (row && !row[j]) continue;
			float e = expf(scores[j] - maxs);
			scores[j] = e;
			sum += e;
		}
		float inv = (float)(1.0 / sum);
		for (int j = 0; j < limit; j++) {
			if (row && !row[j]) continue;
			float p = scores[j] * inv;
			const float *vv = vc + (long)j * kvd + kh * hd;
			for (int t = 0; t < hd; t++) o[t] += p * vv[t];
		}
	}
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
#endif

// arb_silu_mul: g[i] = silu(g[i]) * u[i].
void arb_silu_mul(float *g, const float *u, long count) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 1) {
		silu_mul_avx2(g, u, count);
		return;
	}
#endif
	for (long i = 0; i < count; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

// arb_read_sum streams through n words (a multiple of 16) and returns a sum
// that depends on every one, so the reads cannot be skipped: the inner loop
// of the memory bandwidth measurement.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
AVX2 static uint64_t read_sum_avx2(const uint64_t *p, long n) {
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	for (long i = 0; i + 16 <= n; i += 16) {
		a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
		a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
		a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
		a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
	}
	__m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
	uint64_t out[4];
	_mm256_storeu_si256((__m256i *)out, a);
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
