//go:build cgo && !purego

// K-quant weights (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) repacked eight rows at a
// time, for AVX2 (arb_simd_level 1).
//
// Without them a CPU with AVX2 alone multiplied a K-quant row at a time
// against up to four activation rows (simd.c's k_tile), reducing every
// block's products across the vector: a Q4_K pass of 8 tokens on the 1B
// shape ran at about 93 GMAC/s, half the 174 the cores' int8 probe reads,
// and cost five decode steps. Here, as in q40x8.c, a 256-bit vector's
// eight 4-byte lanes hold eight rows' four weights, so each maddubs adds
// four products to each of eight rows' sums with no horizontal reduction.
//
// The arithmetic is x16.c's, lane for lane: the activations scaled per 256
// values (arb_quantize_q8k_panels), each 32-value block's exact integer
// sum multiplied into a float sum with its scale, the mins' exact sum once
// a super-block, then acc += dy * (d * fs - dmin * im) (Q6_K: each 16-value
// half's exact sum of (q - 32) * y with its scale, then acc += dy * (d *
// fs)). The integer sums are exact on both (maddubs pair sums widened
// before they could pass 16 bits), so these tiles give the sixteen-row
// tiles' results bit for bit, and TestSixteenRowsMatchEightRows holds both
// to kTilesReference.
//
// Layouts (per super-block of eight rows):
//  - Q4_K (Q5_K): eight d, eight dmin (float16), then for each sub-block j
//    its eight scales and eight mins (a byte a row), then for each 32-byte
//    chunk c of nibbles eight vectors (lane i: row i's bytes 32c+4h..+3);
//    Q5_K adds eight vectors of fifth bits (lane i: row i's qh bytes
//    4h..4h+3). 1184 (1440) bytes.
//  - Q6_K: eight d, the eight scales of each of the sixteen 16-weight
//    groups, then for each 32-weight block eight vectors of the weights as
//    unsigned bytes q (0..63). 2192 bytes.
//  - Q3_K and Q2_K: x16.c's layouts on eight rows (arb_k23_pack). 912 and
//    672 bytes, 114 and 84 a row.
#include <string.h>
#include "q40x8.h"
#include "simd.h"

enum {
	K8_Q4K = 16 + 16 + 128 + 1024,
	K8_Q5K = K8_Q4K + 256,
	K8_Q6K = 16 + 128 + 2048,
	K8_Q3K = 16 + 128 + 8 * 96,
	K8_Q2K = 16 + 16 + 128 + 8 * 64,
};

#if !X8_VNNI // once, not again in x8vnni_k.c
long arb_k8_group_bytes(int type) {
	switch (type) {
	case ARB_Q4_K: return K8_Q4K;
	case ARB_Q5_K: return K8_Q5K;
	case ARB_Q6_K: return K8_Q6K;
	case ARB_Q3_K: return K8_Q3K;
	case ARB_Q2_K: return K8_Q2K;
	}
	return 0;
}

// arb_k8_pack repacks rows (a multiple of 8) of nb super-blocks of a
// K-quant into dst (rows / 8 * nb groups of arb_k8_group_bytes: eight
// times cpu.go's repackedRowBytes).
void arb_k8_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst) {
	long gb = arb_k8_group_bytes(type);
	for (int g = 0; g < rows / 8; g++)
		for (int b = 0; b < nb; b++) {
			uint8_t *d = dst + ((long)g * nb + b) * gb;
			for (int i = 0; i < 8; i++) {
				const uint8_t *row = src + (long)(8 * g + i) * row_bytes;
				if (type == ARB_Q3_K || type == ARB_Q2_K) {
					int q3 = type == ARB_Q3_K;
					arb_k23_pack(type, row + (long)b * (q3 ? 110 : 84), 8, i, d, d + (q3 ? 16 : 32), d + (q3 ? 144 : 160));
					continue;
				}
				if (type == ARB_Q6_K) {
					const uint8_t *blk = row + (long)b * 210;
					memcpy(d + 2 * i, blk + 208, 2);
					for (int k = 0; k < 16; k++) d[16 + 8 * k + i] = blk[192 + k];
					for (int c = 0; c < 8; c++)
						for (int h = 0; h < 8; h++)
							for (int e = 0; e < 4; e++) d[144 + 256 * c + 32 * h + 4 * i + e] = arb_q6_value(blk, 32 * c + 4 * h + e);
					continue;
				}
				int q5 = type == ARB_Q5_K;
				const uint8_t *blk = row + (long)b * (q5 ? 176 : 144);
				memcpy(d + 2 * i, blk, 2);
				memcpy(d + 16 + 2 * i, blk + 2, 2);
				for (int j = 0; j < 8; j++) arb_k4_scale_min(j, blk + 4, d + 32 + 16 * j + i, d + 32 + 16 * j + 8 + i);
				for (int c = 0; c < 4; c++)
					for (int h = 0; h < 8; h++) memcpy(d + 160 + 256 * c + 32 * h + 4 * i, blk + (q5 ? 48 : 16) + 32 * c + 4 * h, 4);
				if (q5)
					for (int h = 0; h < 8; h++) memcpy(d + K8_Q4K + 32 * h + 4 * i, blk + 16 + 4 * h, 4);
			}
		}
}

#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "x8.h"

#define AI inline __attribute__((always_inline))

// word is the four activation bytes at p in every lane.
#define word(p) _mm256_set1_epi32(*(const int32_t *)(p))

// The activations come in panels (arb_quantize_q8k_panels): for the
// panel of T rows that starts at row r, block b of its row k is slot
// b*T + k, 32 bytes a slot, a scale a slot and four offsets a slot (x16.c).

// K8_PANEL declares, in every tile, the activation panel from row R of
// arb_quantize_q8k_panels's output (NB blocks of 32 a row): its quants
// q, its super-blocks' scales dy and its offsets c.
#define K8_PANEL(YQ, YD, YC, R, NB)                  \
	const int8_t *q = (YQ) + (long)(R) * (NB) * 32; \
	const float *dy = (YD) + (long)(R) * (NB);      \
	const int32_t *c = (YC) + 4 * (long)(R) * (NB)

// q4k_close adds a Q4_K/Q5_K super-block's float sums fs (T rows) into
// acc: acc += dy * (d * fs - dmin * im), im each row's exact sum of its
// blocks' mins times their activation sums (pairs: word 0 of the even
// blocks' slots, two blocks' sums).
X8_AVX2 static AI void q4k_close(const uint8_t *blk, const __m256 *fs, const int32_t *pairs, const float *dy, const int T, __m256 *acc) {
	__m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
	__m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
	__m256i mp[4]; // lane i: row i's mins of blocks 2t and 2t+1 as two int16
	for (int t = 0; t < 4; t++)
		mp[t] = _mm256_or_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * t) + 8))),
		                        _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * t + 1) + 8))), 16));
	for (int k = 0; k < T; k++) {
		__m256i im = _mm256_setzero_si256();
		for (int t = 0; t < 4; t++) im = _mm256_add_epi32(im, _mm256_madd_epi16(mp[t], _mm256_set1_epi32(pairs[8 * t * T + k])));
		__m256 v = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(im), _mm256_mul_ps(d, fs[k]));
		acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dy[k]), v, acc[k]);
	}
}

// q4k8_tile computes the eight rows of group gp (Q4_K, or Q5_K when q5)
// against activation rows r..r+T-1 (a panel) into out[(r+k)*rows + o..].
X8_AVX2 static AI void q4k8_tile(const int q5, const uint8_t *gp, int nb, const int8_t *yq, const float *yd, const int32_t *yc, int r,
                                 const int T, float *out, long rows, int o, int nta) {
	__m256 acc[4];
	for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();
	const long GB = q5 ? K8_Q5K : K8_Q4K;
	K8_PANEL(yq, yd, yc, r, nb);
	const __m256i m4 = _mm256_set1_epi8(0xf), sixteen = _mm256_set1_epi8(16), ones = _mm256_set1_epi16(1);
	for (int sb = 0; sb < nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * GB;
		for (long pf = 0; pf < GB; pf += 64) X8_PREFETCH(blk + PREFETCH + pf, nta);
		const int32_t *pairs = c; // word 0 of the even blocks' slots: two blocks' activation sums
		__m256 fs[4];
		for (int k = 0; k < T; k++) fs[k] = _mm256_setzero_ps();
		for (int j = 0; j < 8; j++) {
			int ch = j / 2, e = j % 2;
			__m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * j))));
			__m256i s[4], s16[4];
			for (int k = 0; k < T; k++) s[k] = _mm256_setzero_si256();
			for (int h = 0; h < 8; h++) {
				__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 160 + 256 * ch + 32 * h));
				__m256i w = e ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
				if (q5) { // bit j of each qh byte is its weight's fifth bit: 16 added where it is set
					__m256i bit = _mm256_set1_epi8((char)(1 << j)), qh = _mm256_loadu_si256((const __m256i *)(blk + K8_Q4K + 32 * h));
					w = _mm256_or_si256(w, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), sixteen));
				}
				for (int k = 0; k < T; k++) {
#if X8_VNNI
					// four rows: vpdpbusd; fewer ran slower than maddubs on
					// the Zen 5 measured (docs/PERFORMANCE.md)
					if (T >= 4) {
						s[k] = X8_DP(s[k], w, word(q + 32 * k + 4 * h));
						continue;
					}
#endif
					__m256i p = _mm256_maddubs_epi16(w, word(q + 32 * k + 4 * h));
					s16[k] = h % 4 == 0 ? p : _mm256_add_epi16(s16[k], p);
					// pair sums reach 2*15*127 (Q5_K: 2*31*127): four fit 16 bits
					if (h % 4 == 3) s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(s16[k], ones));
				}
			}
			for (int k = 0; k < T; k++) fs[k] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s[k]), fs[k]);
			q += 32 * T, c += 4 * T;
		}
		q4k_close(blk, fs, pairs, dy, T, acc);
		dy += 8 * T;
	}
	for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);
}

// KEEP pins an integer sum in a register as it grows, so the compiler
// neither spills nor regroups the sums (any grouping gives the same exact
// integers, but a regrouped tree outgrows the sixteen vector registers).
#define KEEP(v) __asm__("" : "+x"(v))

// q4k_tile4 is q4k8_tile for Q4_K against a panel of T = 2..4 rows (a
// prefill or a verification pass): weights of at most 15 keep a
// sub-block's eight maddubs pair sums (2*15*127 each) within 16 bits, so
// each row's sum of a sub-block is one 16-bit chain widened once, where
// q4k8_tile widens every four (for Q5_K's 31). The sums are named
// registers, each pinned as it grows (KEEP), so the four rows' chains
// stay in registers. Integer sums are exact, and the float steps are
// q4k8_tile's in its order: the same bits.
#define Q4K_ROWS(X) X(0) X(1) X(2) X(3)
X8_AVX2 static AI void q4k_tile4(const uint8_t *gp, int nb, const int8_t *yq, const float *yd, const int32_t *yc, int r, const int T,
                                 float *out, long rows, int o, int nta) {
	__m256 acc[4];
	for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();
	K8_PANEL(yq, yd, yc, r, nb);
	const __m256i m4 = _mm256_set1_epi8(0xf), ones = _mm256_set1_epi16(1);
	for (int sb = 0; sb < nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * K8_Q4K;
		const int32_t *pairs = c;
		__m256 fs0 = _mm256_setzero_ps(), fs1 = fs0, fs2 = fs0, fs3 = fs0;
		for (int j = 0; j < 8; j++) {
			int ch = j / 2, e = j % 2;
			__m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * j))));
			__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
			for (int h = 0; h < 8; h++) {
				// the super-block's lines ahead, spread over its steps
				if (h % 2 == 0 && h < 6 && 64 * (3 * j + h / 2) < K8_Q4K) X8_PREFETCH(blk + PREFETCH + 64 * (3 * j + h / 2), nta);
				__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 160 + 256 * ch + 32 * h));
				__m256i w = e ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
#define Q4K_STEP(k)                                                                               \
	if (k < T) {                                                                              \
		a##k = _mm256_add_epi16(a##k, _mm256_maddubs_epi16(w, word(q + 32 * k + 4 * h))); \
		KEEP(a##k);                                                                       \
	}
				Q4K_ROWS(Q4K_STEP)
#undef Q4K_STEP
			}
#define Q4K_SUM(k) \
	if (k < T) fs##k = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(_mm256_madd_epi16(a##k, ones)), fs##k);
			Q4K_ROWS(Q4K_SUM)
#undef Q4K_SUM
			q += 32 * T, c += 4 * T;
		}
		__m256 fs[4] = {fs0, fs1, fs2, fs3};
		q4k_close(blk, fs, pairs, dy, T, acc);
		dy += 8 * T;
	}
	for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);
}

// q4k8_tile1 is q4k8_tile for one activation row (a decode step): each
// load of a chunk's nibbles serves both of its sub-blocks (low nibbles
// block 2ch, high ones 2ch+1), whose sums run as two independent chains,
// and every integer sum is pinned in a register as it grows (KEEP), so
// the compiler neither spills nor regroups them. Integer sums are exact,
// and the float steps are q4k8_tile's in its order: the same bits.
X8_AVX2 static AI void q4k8_tile1(const int q5, const uint8_t *gp, int nb, const int8_t *yq, const float *yd, const int32_t *yc, int r,
                                  float *out, long rows, int o, int nta) {
	__m256 acc = _mm256_setzero_ps();
	const long GB = q5 ? K8_Q5K : K8_Q4K, PL = (GB + 255) / 256;
	K8_PANEL(yq, yd, yc, r, nb);
	const __m256i m4 = _mm256_set1_epi8(0xf), sixteen = _mm256_set1_epi8(16), ones = _mm256_set1_epi16(1);
	for (int sb = 0; sb < nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * GB;
		const int32_t *pairs = c;
		__m256 fs = _mm256_setzero_ps();
		for (int ch = 0; ch < 4; ch++) {
			const int8_t *qa = q + 64 * ch, *qb = qa + 32;
			__m256i slo = _mm256_setzero_si256(), shi = _mm256_setzero_si256();
			for (int hq = 0; hq < 8; hq += 4) {
				__m256i plo = _mm256_setzero_si256(), phi = _mm256_setzero_si256();
				for (int h = hq; h < hq + 4; h++) {
					// the super-block's lines ahead, spread over its chunks: a
					// burst of them at its start measured slower from memory
					if (h < PL && 64 * (PL * ch + h) < GB) X8_PREFETCH(blk + PREFETCH + 64 * (PL * ch + h), nta);
					__m256i v = _mm256_loadu_si256((const __m256i *)(blk + 160 + 256 * ch + 32 * h));
					__m256i wa = _mm256_and_si256(v, m4), wb = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
					if (q5) {
						__m256i qh = _mm256_loadu_si256((const __m256i *)(blk + K8_Q4K + 32 * h));
						__m256i ba = _mm256_set1_epi8((char)(1 << (2 * ch))), bb = _mm256_set1_epi8((char)(2 << (2 * ch)));
						wa = _mm256_or_si256(wa, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, ba), ba), sixteen));
						wb = _mm256_or_si256(wb, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bb), bb), sixteen));
					}
					plo = _mm256_add_epi16(plo, _mm256_maddubs_epi16(wa, word(qa + 4 * h)));
					phi = _mm256_add_epi16(phi, _mm256_maddubs_epi16(wb, word(qb + 4 * h)));
					KEEP(plo);
					KEEP(phi);
				}
				slo = _mm256_add_epi32(slo, _mm256_madd_epi16(plo, ones));
				shi = _mm256_add_epi32(shi, _mm256_madd_epi16(phi, ones));
				KEEP(slo);
				KEEP(shi);
			}
			__m256 sca = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * ch)))));
			__m256 scb = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 32 + 16 * (2 * ch + 1)))));
			fs = _mm256_fmadd_ps(sca, _mm256_cvtepi32_ps(slo), fs);
			fs = _mm256_fmadd_ps(scb, _mm256_cvtepi32_ps(shi), fs);
		}
		q += 32 * 8, c += 4 * 8;
		q4k_close(blk, &fs, pairs, dy, 1, &acc);
		dy += 8;
	}
	_mm256_storeu_ps(out + (long)r * rows + o, acc);
}

// q6k8_tile is q4k8_tile for Q6_K: each 16-weight half of a block gives
// each lane its row's exact sum of (q - 32) * y (the stored q against y,
// less 32 times the half's activation sum), into the super-block's float
// sum with the half's scale; then acc += dy * (d * fs).
X8_AVX2 static AI void q6k8_tile(const uint8_t *gp, int nb, const int8_t *yq, const float *yd, const int32_t *yc, int r, const int T,
                                 float *out, long rows, int o, int nta) {
	__m256 acc[4];
	for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();
	K8_PANEL(yq, yd, yc, r, nb);
	const __m256i ones = _mm256_set1_epi16(1);
	for (int sb = 0; sb < nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * K8_Q6K;
		for (long pf = 0; pf < K8_Q6K; pf += 64) X8_PREFETCH(blk + PREFETCH + pf, nta);
		__m256 fs[4];
		for (int k = 0; k < T; k++) fs[k] = _mm256_setzero_ps();
		for (int ch = 0; ch < 8; ch++) {
			for (int half = 0; half < 2; half++) {
				__m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 16 + 8 * (2 * ch + half)))));
				__m256i s[4];
				for (int k = 0; k < T; k++) s[k] = _mm256_set1_epi32(c[(2 + half) * T + k]);
				for (int h = 0; h < 4; h += 2) {
					// pair sums reach 2*63*127: two fit 16 bits
					__m256i w0 = _mm256_loadu_si256((const __m256i *)(blk + 144 + 256 * ch + 32 * (h + 4 * half)));
					__m256i w1 = _mm256_loadu_si256((const __m256i *)(blk + 144 + 256 * ch + 32 * (h + 1 + 4 * half)));
					for (int k = 0; k < T; k++) {
						const int8_t *y = q + 32 * k + 16 * half + 4 * h;
#if X8_VNNI
						// three rows and more: vpdpbusd (as q4k8_tile)
						if (T >= 3) {
							s[k] = X8_DP(X8_DP(s[k], w0, word(y)), w1, word(y + 4));
							continue;
						}
#endif
						__m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w0, word(y)), _mm256_maddubs_epi16(w1, word(y + 4)));
						s[k] = _mm256_add_epi32(s[k], _mm256_madd_epi16(p, ones));
					}
				}
				for (int k = 0; k < T; k++) fs[k] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s[k]), fs[k]);
			}
			q += 32 * T, c += 4 * T;
		}
		__m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
		for (int k = 0; k < T; k++) acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dy[k]), _mm256_mul_ps(d, fs[k]), acc[k]);
		dy += 8 * T;
	}
	for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);
}

// k238_tile is x16.c's k23_tile on eight rows (Q3_K when q3, else
// Q2_K): each half's four maddubs pair sums (2*7*127 at most) added in 16
// bits, then widened.
X8_AVX2 static AI void k238_tile(const int q3, const uint8_t *gp, int nb, const int8_t *yq, const float *yd, const int32_t *yc, int r,
                                 const int T, float *out, long rows, int o, int nta) {
	__m256 acc[4];
	for (int k = 0; k < T; k++) acc[k] = _mm256_setzero_ps();
	const long GB = q3 ? K8_Q3K : K8_Q2K, SC = q3 ? 16 : 32, PL = q3 ? 144 : 160, PER = q3 ? 96 : 64;
	K8_PANEL(yq, yd, yc, r, nb);
	const __m256i m2 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1), m4 = _mm256_set1_epi32(0xf), ones = _mm256_set1_epi16(1);
	for (int sb = 0; sb < nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * GB;
		for (long pf = 0; pf < GB; pf += 64) X8_PREFETCH(blk + PREFETCH + pf, nta);
		const int32_t *c0 = c; // word 1 of each block's slots: its halves' activation sums
		__m256 fs[4];
		for (int k = 0; k < T; k++) fs[k] = _mm256_setzero_ps();
		for (int ch = 0; ch < 8; ch++) {
			__m256i hb = q3 ? _mm256_loadu_si256((const __m256i *)(blk + PL + PER * ch + 64)) : _mm256_setzero_si256();
			for (int half = 0; half < 2; half++) {
				const uint8_t *sp = blk + SC + 8 * (2 * ch + half);
				__m256 sc = q3 ? _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)sp)))
				               : _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sp)), m4));
				__m256i pl = _mm256_loadu_si256((const __m256i *)(blk + PL + PER * ch + 32 * half)), w[4];
				for (int s4 = 0; s4 < 4; s4++) {
					w[s4] = _mm256_and_si256(_mm256_srli_epi32(pl, 2 * s4), m2);
					if (q3) w[s4] = _mm256_or_si256(w[s4], _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hb, 4 * half + s4), m1), 2));
				}
				for (int k = 0; k < T; k++) {
					const int8_t *yk = q + 32 * k + 16 * half;
#if X8_VNNI
					__m256i s = X8_DP(_mm256_setzero_si256(), w[0], word(yk));
					for (int s4 = 1; s4 < 4; s4++) s = X8_DP(s, w[s4], word(yk + 4 * s4));
					(void)ones;
#else
					__m256i p = _mm256_maddubs_epi16(w[0], word(yk));
					for (int s4 = 1; s4 < 4; s4++) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[s4], word(yk + 4 * s4)));
					__m256i s = _mm256_madd_epi16(p, ones);
#endif
					if (q3) s = _mm256_add_epi32(_mm256_set1_epi32(c[(2 + half) * T + k] / 8), s);
					fs[k] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(s), fs[k]);
				}
			}
			q += 32 * T, c += 4 * T;
		}
		__m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
		if (q3) {
			for (int k = 0; k < T; k++) acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dy[k]), _mm256_mul_ps(d, fs[k]), acc[k]);
		} else {
			__m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16)));
			for (int k = 0; k < T; k++) {
				__m256i im = _mm256_setzero_si256();
				for (int ch = 0; ch < 8; ch++) {
					__m256i mp = _mm256_or_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + SC + 16 * ch))), 4),
					                             _mm256_slli_epi32(_mm256_srli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + SC + 16 * ch + 8))), 4), 16));
					im = _mm256_add_epi32(im, _mm256_madd_epi16(mp, _mm256_set1_epi32(c0[4 * ch * T + T + k])));
				}
				__m256 v = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(im), _mm256_mul_ps(d, fs[k]));
				acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dy[k]), v, acc[k]);
			}
		}
		dy += 8 * T;
	}
	for (int k = 0; k < T; k++) _mm256_storeu_ps(out + (long)(r + k) * rows + o, acc[k]);
}

// K8_ROWS defines NAME: groups glo..ghi-1 against the n activation rows,
// a panel (ARB_PANEL rows, the last the rest) a tile; and NAME##_nta,
// whose tiles request their weights non-temporally (X8_PREFETCH), which
// arb_mm_k8 runs where it streams and one tile reads a group (ARB_PANEL
// rows or fewer). Two functions, as X8_ROWS defines.
#define K8_ROWS(NAME, GB, CALL) K8_ROWS_AS(NAME, GB, CALL, 0) K8_ROWS_AS(NAME##_nta, GB, CALL, 1)
#define K8_ROWS_AS(NAME, GB, CALL, NTA)                                                                     \
	X8_AVX2 static void NAME(const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd,   \
	                         const int32_t *yc, int nb, int n, float *out, int rows) {                     \
		const int nta = NTA;                                                                            \
		for (int g = glo; g < ghi; g++) {                                                               \
			const uint8_t *gp = packed + (long)g * (nb / 8) * (GB);                                     \
			for (int r = 0; r < n; r += ARB_PANEL) {                                                    \
				switch (n - r < ARB_PANEL ? n - r : ARB_PANEL) {                                        \
				case 4: CALL(4); break;                                                                 \
				case 3: CALL(3); break;                                                                 \
				case 2: CALL(2); break;                                                                 \
				default: CALL(1); break;                                                                \
				}                                                                                       \
			}                                                                                           \
		}                                                                                               \
	}
// a decode step's row through q4k8_tile1; panels of Q4_K through
// q4k_tile4, or q4k8_tile where it has vpdpbusd for four rows
#define K45(Q5, T, PANEL) ((T) == 1 ? q4k8_tile1(Q5, gp, nb, yq, yd, yc, r, out, rows, 8 * g, nta) : PANEL)
#if X8_VNNI
#define Q4K8(T) K45(0, T, q4k8_tile(0, gp, nb, yq, yd, yc, r, T, out, rows, 8 * g, nta))
#else
#define Q4K8(T) K45(0, T, q4k_tile4(gp, nb, yq, yd, yc, r, T, out, rows, 8 * g, nta))
#endif
#define Q5K8(T) K45(1, T, q4k8_tile(1, gp, nb, yq, yd, yc, r, T, out, rows, 8 * g, nta))
#define Q6K8(T) q6k8_tile(gp, nb, yq, yd, yc, r, T, out, rows, 8 * g, nta)
#define Q3K8(T) k238_tile(1, gp, nb, yq, yd, yc, r, T, out, rows, 8 * g, nta)
#define Q2K8(T) k238_tile(0, gp, nb, yq, yd, yc, r, T, out, rows, 8 * g, nta)
K8_ROWS(mm_q4k8, K8_Q4K, Q4K8)
K8_ROWS(mm_q5k8, K8_Q5K, Q5K8)
K8_ROWS(mm_q6k8, K8_Q6K, Q6K8)
K8_ROWS(mm_q3k8, K8_Q3K, Q3K8)
K8_ROWS(mm_q2k8, K8_Q2K, Q2K8)
#endif

// mm_k8 is arb_mm_k8 with this compilation's tiles.
static int mm_k8(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc, int nb,
                 int n, float *out, int rows, int stream) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() < 1) return -1;
	int s = stream && n <= ARB_PANEL;
	switch (type) {
	case ARB_Q4_K: (s ? mm_q4k8_nta : mm_q4k8)(packed, glo, ghi, yq, yd, yc, nb, n, out, rows); return 0;
	case ARB_Q5_K: (s ? mm_q5k8_nta : mm_q5k8)(packed, glo, ghi, yq, yd, yc, nb, n, out, rows); return 0;
	case ARB_Q6_K: (s ? mm_q6k8_nta : mm_q6k8)(packed, glo, ghi, yq, yd, yc, nb, n, out, rows); return 0;
	case ARB_Q3_K: (s ? mm_q3k8_nta : mm_q3k8)(packed, glo, ghi, yq, yd, yc, nb, n, out, rows); return 0;
	case ARB_Q2_K: (s ? mm_q2k8_nta : mm_q2k8)(packed, glo, ghi, yq, yd, yc, nb, n, out, rows); return 0;
	}
#else
	(void)type; (void)packed; (void)glo; (void)ghi; (void)yq; (void)yd; (void)yc; (void)nb; (void)n; (void)out; (void)rows; (void)stream;
#endif
	return -1;
}

#if X8_VNNI
// arb_mm_k8_vnni is arb_mm_k8 on the AVX-VNNI tiles; -1 where the CPU
// lacks AVX-VNNI.
int arb_mm_k8_vnni(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc,
                   int nb, int n, float *out, int rows, int stream) {
	if (!arb_avx_vnni_cpu()) return -1;
	return mm_k8(type, packed, glo, ghi, yq, yd, yc, nb, n, out, rows, stream);
}
#else
// arb_mm_k8 multiplies groups glo..ghi-1 (of eight rows) of a K-quant
// matrix repacked by arb_k8_pack by n activation rows quantised by
// arb_quantize_q8k_panels (yq, yd, yc; nb blocks of 32 a row), into
// out[r*rows + o]; stream as arb_mm_x16 takes it (K8_ROWS); with vnni on
// the AVX-VNNI tiles (the same bits). It returns -1 where the CPU lacks
// AVX2, FMA or F16C, or AVX-VNNI when vnni asks for it, or type has no
// eight-row tiles.
int arb_mm_k8(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc, int nb,
              int n, float *out, int rows, int stream, int vnni) {
	if (vnni) return arb_mm_k8_vnni(type, packed, glo, ghi, yq, yd, yc, nb, n, out, rows, stream);
	return mm_k8(type, packed, glo, ghi, yq, yd, yc, nb, n, out, rows, stream);
}
#endif
