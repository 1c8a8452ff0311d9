//go:build cgo && !purego

// Attention over many query vectors at once on 512-bit vectors
// (arb_simd_level 2 and up), query vectors in lanes: the whole of it for
// heads of width 8 (hd8_lanes), and the scores and softmax of
// attention_avx512's tasks for heads of a multiple of 16 dims
// (arb_lanes16_weights, at the end).
//
// simd.c's attention_hd8 puts eight keys in a vector and each query row's
// scores in a row of their own, which suits a decode step (a handful of
// query vectors) but not a wide pass: a 512-row prefill of the bench
// target (64 heads of 8 over 32 kv heads) keeps a 2 MiB score block per kv
// head, past the second level of cache, and spent 85% of the pass there.
// Here sixteen or thirty-two query vectors of one kv head (batch rows
// times the heads that share it) sit one to a lane, and every step is a
// vertical operation over lanes: a key is eight broadcast values, scored
// against all lanes with eight multiply-adds; each lane's maximum, sum and
// weighted values accumulate slot by slot; no transpose, no horizontal
// sum. The scores of a block are 32 floats a slot, in cache.
//
// Each lane's arithmetic is attention_hd8's for its row, operation for
// operation and in the same order, so a row's result is the same bits
// whichever kernel computes it (the batch decides which): the score is
// q0*k0, then seven multiply-adds, times ARB_HD8_SCALE (the scale times
// log2 e); a slot the row does not see scores -inf (its exponential is
// exactly 0, the mask's or the row's causal limit's alike); the
// exponentials are powers of two, exp2_8_masked's; their sum runs in
// double in eight partial sums, slot j into sum j mod 8, combined as
// softmax_inv combines them; the values are summed slot by slot with
// one multiply-add each, and the sum times 1/sum. A slot past a row's
// last adds 0 to its sums, which changes no bit.
// TestAttentionMatchesReference checks each row against the row alone.
#include <math.h>
#include <string.h>
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "vec16.h"

#define AVX512F __attribute__((target("avx2,fma,f16c,avx512f")))
#define AI inline __attribute__((always_inline))
#define ARB_LANES_AHEAD 16

// lanes_inv returns, per lane of the z-th vector of scores (a block's
// scores at S, L floats a slot, tp slots), 1/sum of e^(s - max) over the
// slots, and replaces each score by its exponential; 0 for a lane that
// sees no slot (max -inf). The sum is softmax_inv's: double, slot j into
// partial sum j mod 8, then (p0+p4 + p1+p5) + (p2+p6 + p3+p7). With pow2
// (a constant), the powers of two of softmax_inv's pow2 instead
// (exp2_16_masked: heads of width 8, scores scaled by log2 e).
AVX512F static AI __m512 lanes_inv(float *S, int L, int tp, __m512 mx, const int pow2) {
	__mmask16 dead = _mm512_cmp_ps_mask(mx, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
	mx = _mm512_mask_mov_ps(mx, dead, _mm512_setzero_ps()); // -inf - 0: every weight 0
	// the exponentials and the low eight lanes' sums, then the high eight
	// lanes' (sixteen sums and the exponential's constants at once would
	// not fit in the registers)
	__m512d lo[8], hi[8];
	for (int m = 0; m < 8; m++) lo[m] = hi[m] = _mm512_setzero_pd();
	for (int j0 = 0; j0 < tp; j0 += 8)
#pragma GCC unroll 8
		for (int m = 0; m < 8; m++) {
			float *s = S + (long)(j0 + m) * L;
			__m512 x = _mm512_sub_ps(_mm512_loadu_ps(s), mx), e = pow2 ? exp2_16_masked(x) : exp16_masked(x);
			_mm512_storeu_ps(s, e);
			lo[m] = _mm512_add_pd(lo[m], _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
		}
	for (int j0 = 0; j0 < tp; j0 += 8)
#pragma GCC unroll 8
		for (int m = 0; m < 8; m++) hi[m] = _mm512_add_pd(hi[m], _mm512_cvtps_pd(_mm256_loadu_ps(S + (long)(j0 + m) * L + 8)));
	__m512d one = _mm512_set1_pd(1.0);
	__m512d tl = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(lo[0], lo[4]), _mm512_add_pd(lo[1], lo[5])),
	                           _mm512_add_pd(_mm512_add_pd(lo[2], lo[6]), _mm512_add_pd(lo[3], lo[7])));
	__m512d th = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(hi[0], hi[4]), _mm512_add_pd(hi[1], hi[5])),
	                           _mm512_add_pd(_mm512_add_pd(hi[2], hi[6]), _mm512_add_pd(hi[3], hi[7])));
	__m256 il = _mm512_cvtpd_ps(_mm512_div_pd(one, tl)), ih = _mm512_cvtpd_ps(_mm512_div_pd(one, th));
	__m512 inv = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(il)), _mm256_castps_pd(ih), 1));
	return _mm512_mask_mov_ps(inv, dead, _mm512_setzero_ps());
}

// lanes_setup puts query vectors u0..u1-1 of kv head kh (vector u: row
// u / group, head kh * group + u % group, hd dims) one to a lane of L:
// lane l's dim d at qt[stride * d + l] (0 for a lane past u1 - u0), and
// in lim[l] the slots its row sees (past + row + 1; all total with a
// mask, 0 for an empty lane). With a mask, vis[j] (j below the largest
// lim) gets bit l where lane l's row sees slot j. It returns that largest
// lim.
static AI int lanes_setup(float *qt, int stride, int32_t *lim, uint32_t *vis, const float *q, const uint8_t *mask, int past,
                          int total, int group, int kh, int qd, int hd, int u0, int u1, int L) {
	int jmax = 0;
	for (int l = 0; l < L; l++) {
		int u = u0 + l;
		const float *qv = u < u1 ? q + (long)(u / group) * qd + (long)(kh * group + u % group) * hd : NULL;
		for (int d = 0; d < hd; d++) qt[(long)stride * d + l] = qv ? qv[d] : 0;
		lim[l] = qv ? (mask ? total : past + u / group + 1) : 0;
		if (lim[l] > jmax) jmax = lim[l];
	}
	if (mask) {
		memset(vis, 0, (size_t)jmax * sizeof(uint32_t));
		for (int i = u0 / group; i <= (u1 - 1) / group; i++) {
			int a = i * group > u0 ? i * group - u0 : 0, b = (i + 1) * group < u1 ? (i + 1) * group - u0 : u1 - u0;
			uint32_t bits = (uint32_t)(((1ull << b) - 1) & ~((1ull << a) - 1));
			const uint8_t *row = mask + (long)i * total;
			for (int j = 0; j < jmax; j++)
				if (row[j]) vis[j] |= bits;
		}
	}
	return jmax;
}

// hd8_lanes runs tasks lo..hi-1 of arb_attention_lanes with NZ vectors
// of sixteen lanes a block (a constant in each caller).
AVX512F static AI void hd8_lanes(float *out, const float *q, const void *kc, const void *vc, int f16, int past, int n,
                                 const uint8_t *mask, int heads, int kv_heads, float scale, int lo, int hi, float *scratch,
                                 const int NZ) {
	const int L = 16 * NZ;
	int total = past + n, group = heads / kv_heads, kvd = kv_heads * 8, qd = heads * 8;
	int nvec = n * group, blocks = (nvec + L - 1) / L;
	const __m512 vscale = _mm512_set1_ps(ARB_HD8_SCALE(scale)), ninf = _mm512_set1_ps(-INFINITY);
	for (int task = lo; task < hi; task++) {
		int kh = task / blocks, u0 = task % blocks * L, u1 = u0 + L < nvec ? u0 + L : nvec;
		// lane l is query vector u0+l: row (u0+l)/group, head kh*group + (u0+l)%group
		int32_t lim[32];
		float qt[8][32] __attribute__((aligned(64)));
		// the scratch: tp slots of L scores, then the mask's lanes a slot
		// (tp is at most total rounded up to 8, so vis can sit past it)
		float *S = scratch;
		uint32_t *vis = (uint32_t *)(S + (long)((total + 7) & ~7) * L);
		int jmax = lanes_setup(&qt[0][0], 32, lim, vis, q, mask, past, total, group, kh, qd, 8, u0, u1, L);
		int tp = (jmax + 7) & ~7;
		float *kf = (float *)(vis + total), *vf = kf + (long)total * 8;
		const float *kb = (const float *)kc + kh * 8, *vb = (const float *)vc + kh * 8;
		long ks = kvd;
		if (f16) { // the head's keys and values widened once, for broadcast loads
			for (int j = 0; j < jmax; j++) {
				_mm256_storeu_ps(kf + 8 * j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)kc + (long)j * kvd + kh * 8))));
				_mm256_storeu_ps(vf + 8 * j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)vc + (long)j * kvd + kh * 8))));
			}
			kb = kf, vb = vf, ks = 8;
		}
		__m512 Q[2][8], mx[2], limv[2];
		for (int z = 0; z < NZ; z++) {
			for (int d = 0; d < 8; d++) Q[z][d] = _mm512_load_ps(&qt[d][16 * z]);
			mx[z] = ninf;
			limv[z] = _mm512_castsi512_ps(_mm512_loadu_si512(lim + 16 * z));
		}
		// scores, -inf where not seen, and each lane's maximum
		for (int j = 0; j < jmax; j++) {
			const float *k = kb + (long)j * ks;
			// a float32 cache's rows are a kv width apart (1 KiB in the
			// bench target), which the hardware's prefetch did not follow:
			// the keys requested ARB_LANES_AHEAD slots ahead, and the
			// slot's values now, for the sums below
			if (!f16) {
				_mm_prefetch((const char *)(k + ARB_LANES_AHEAD * ks), _MM_HINT_T0);
				_mm_prefetch((const char *)(vb + (long)j * ks), _MM_HINT_T0);
			}
			__m512 s[2];
			for (int z = 0; z < NZ; z++) s[z] = _mm512_mul_ps(Q[z][0], _mm512_set1_ps(k[0]));
			for (int d = 1; d < 8; d++) {
				__m512 kd = _mm512_set1_ps(k[d]);
				for (int z = 0; z < NZ; z++) s[z] = _mm512_fmadd_ps(Q[z][d], kd, s[z]);
			}
			for (int z = 0; z < NZ; z++) {
				__mmask16 seen = mask ? (__mmask16)(vis[j] >> (16 * z)) : _mm512_cmpgt_epi32_mask(_mm512_castps_si512(limv[z]), _mm512_set1_epi32(j));
				s[z] = _mm512_mask_mov_ps(ninf, seen, _mm512_mul_ps(s[z], vscale));
				mx[z] = _mm512_max_ps(mx[z], s[z]);
				_mm512_storeu_ps(S + (long)j * L + 16 * z, s[z]);
			}
		}
		for (int j = jmax; j < tp; j++)
			for (int z = 0; z < NZ; z++) _mm512_storeu_ps(S + (long)j * L + 16 * z, ninf);
		// exponentials and 1/sum, lane by lane
		__m512 inv[2];
		for (int z = 0; z < NZ; z++) inv[z] = lanes_inv(S + 16 * z, L, tp, mx[z], 1);
		// the weighted sums of the values, slot by slot
		__m512 acc[2][8];
		for (int z = 0; z < NZ; z++)
			for (int d = 0; d < 8; d++) acc[z][d] = _mm512_setzero_ps();
		for (int j = 0; j < jmax; j++) {
			const float *v = vb + (long)j * ks;
			__m512 e[2];
			for (int z = 0; z < NZ; z++) e[z] = _mm512_loadu_ps(S + (long)j * L + 16 * z);
			for (int d = 0; d < 8; d++) {
				__m512 vd = _mm512_set1_ps(v[d]);
				for (int z = 0; z < NZ; z++) acc[z][d] = _mm512_fmadd_ps(e[z], vd, acc[z][d]);
			}
		}
		for (int z = 0; z < NZ; z++)
			for (int d = 0; d < 8; d++) _mm512_store_ps(&qt[d][16 * z], _mm512_mul_ps(acc[z][d], inv[z]));
		for (int u = u0; u < u1; u++) {
			float *o = out + (long)(u / group) * qd + (long)(kh * group + u % group) * 8;
			for (int d = 0; d < 8; d++) o[d] = qt[d][u - u0];
		}
	}
}

AVX512F static void hd8_lanes16(float *out, const float *q, const void *kc, const void *vc, int f16, int past, int n,
                                const uint8_t *mask, int heads, int kv_heads, float scale, int lo, int hi, float *scratch) {
	if (f16) hd8_lanes(out, q, kc, vc, 1, past, n, mask, heads, kv_heads, scale, lo, hi, scratch, 1);
	else hd8_lanes(out, q, kc, vc, 0, past, n, mask, heads, kv_heads, scale, lo, hi, scratch, 1);
}

AVX512F static void hd8_lanes32(float *out, const float *q, const void *kc, const void *vc, int f16, int past, int n,
                                const uint8_t *mask, int heads, int kv_heads, float scale, int lo, int hi, float *scratch) {
	if (f16) hd8_lanes(out, q, kc, vc, 1, past, n, mask, heads, kv_heads, scale, lo, hi, scratch, 2);
	else hd8_lanes(out, q, kc, vc, 0, past, n, mask, heads, kv_heads, scale, lo, hi, scratch, 2);
}

// score_lanes16 sets s[x], x < NS, to the scores of the sixteen query
// vectors of qt (dim d of lane l at qt[16*d + l]) against the keys k[x]
// (hd floats each), a lane a vector: lane l of s[x] is score_heads16's
// dot product of lane l's vector with key x, add for add. There, lane m
// of sixteen partial sums is q[m]*k[m] and then a multiply-add for each
// later q[t+m]*k[t+m]; the sums are added half onto half (fold16: b_m =
// a_m + a_m+8), then as hsum8 adds eight (c_m = b_m + b_m+4, then c_0 +
// c_2 and c_1 + c_3, then those two). Here each partial sum is a vector
// over the lanes and the same additions are vertical.
AVX512F static AI void score_lanes16(__m512 *s, const float *qt, const float *const *k, int hd, const int NS) {
	__m512 d[2][4];
#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) { // d_h = c_h + c_h+2
		__m512 c[2][4];
#pragma GCC unroll 2
		for (int cc = 0; cc < 2; cc++) { // c_m = b_m + b_m+4, m = h + 2cc
			__m512 b[2][4];
#pragma GCC unroll 2
			for (int bb = 0; bb < 2; bb++) { // b_m = a_m + a_m+8, m = h + 2cc + 4bb
				__m512 a[2][4];
#pragma GCC unroll 2
				for (int aa = 0; aa < 2; aa++) {
					int m = h + 2 * cc + 4 * bb + 8 * aa;
					__m512 qv = _mm512_loadu_ps(qt + 16 * m);
#pragma GCC unroll 4
					for (int x = 0; x < NS; x++) a[aa][x] = _mm512_mul_ps(qv, _mm512_set1_ps(k[x][m]));
#pragma GCC unroll 16
					for (int t = 16; t < hd; t += 16) {
						qv = _mm512_loadu_ps(qt + 16 * (t + m));
#pragma GCC unroll 4
						for (int x = 0; x < NS; x++) a[aa][x] = _mm512_fmadd_ps(qv, _mm512_set1_ps(k[x][t + m]), a[aa][x]);
					}
					if (hd == 16) // a product alone: kept from being fused into the sum that follows
#pragma GCC unroll 4
						for (int x = 0; x < NS; x++) __asm__("" : "+v"(a[aa][x]));
				}
#pragma GCC unroll 4
				for (int x = 0; x < NS; x++) b[bb][x] = _mm512_add_ps(a[0][x], a[1][x]);
			}
#pragma GCC unroll 4
			for (int x = 0; x < NS; x++) c[cc][x] = _mm512_add_ps(b[0][x], b[1][x]);
		}
#pragma GCC unroll 4
		for (int x = 0; x < NS; x++) d[h][x] = _mm512_add_ps(c[0][x], c[1][x]);
	}
#pragma GCC unroll 4
	for (int x = 0; x < NS; x++) s[x] = _mm512_add_ps(d[0][x], d[1][x]);
}

// lanes16_slots scores NS slots from j (score_lanes16), scales them, sets
// the ones a lane does not see to -inf, stores them at S + 16j and folds
// them into each lane's maximum. The keys of a float16 cache are widened
// into kb first (NS * hd floats).
AVX512F static AI void lanes16_slots(float *S, __m512 *mx, const float *qt, const void *kc, int f16, long k0, int kvd, int hd, int j,
                                     const uint32_t *vis, __m512i limv, float scale, float *kb, const int NS) {
	const float *k[4];
	for (int x = 0; x < NS; x++) {
		long at = k0 + (long)(j + x) * kvd;
		if (f16) {
			for (int t = 0; t < hd; t += 16)
				_mm512_storeu_ps(kb + x * hd + t, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)kc + at + t))));
			k[x] = kb + x * hd;
		} else {
			k[x] = (const float *)kc + at;
		}
	}
	__m512 s[4];
	score_lanes16(s, qt, k, hd, NS);
	for (int x = 0; x < NS; x++) {
		__mmask16 seen = vis ? (__mmask16)vis[j + x] : _mm512_cmpgt_epi32_mask(limv, _mm512_set1_epi32(j + x));
		s[x] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), seen, _mm512_mul_ps(s[x], _mm512_set1_ps(scale)));
		*mx = _mm512_max_ps(*mx, s[x]);
		_mm512_storeu_ps(S + 16L * (j + x), s[x]);
	}
}

// lanes16_weights is arb_lanes16_weights for heads of hd dims (a
// constant in the copies below): the task's vectors into lanes
// (lanes_setup, whose largest lim is lmax), the slots four at a time,
// then the rest; lanes_inv's softmax.
AVX512F static AI void lanes16_weights(float *S, float *inv, float *qt, uint32_t *vis, const float *q, const void *kc, int f16, int past,
                                       int total, const uint8_t *mask, int group, int hd, int kvd, int qd, int kh, int i0, int i1,
                                       int lmax, float scale) {
	int tp = (lmax + 7) & ~7;
	int32_t lim[16];
	lanes_setup(qt, 16, lim, vis, q, mask, past, total, group, kh, qd, hd, i0 * group, i1 * group, 16); // lmax slots
	float kb[4 * 256];
	__m512 mx = _mm512_set1_ps(-INFINITY);
	__m512i limv = _mm512_loadu_si512(lim);
	const uint32_t *v = mask ? vis : NULL;
	long k0 = (long)kh * hd;
	int j = 0;
	for (; j + 4 <= lmax; j += 4) lanes16_slots(S, &mx, qt, kc, f16, k0, kvd, hd, j, v, limv, scale, kb, 4);
	for (; j < lmax; j++) lanes16_slots(S, &mx, qt, kc, f16, k0, kvd, hd, j, v, limv, scale, kb, 1);
	for (; j < tp; j++) _mm512_storeu_ps(S + 16L * j, _mm512_set1_ps(-INFINITY));
	_mm512_storeu_ps(inv, lanes_inv(S, 16, tp, mx, 0));
}

// One copy for heads of 64 and of 128 (the width a constant, so a
// slot's multiply-adds unroll and the partial sums stay in registers) and
// one for any multiple of 16.
#define LANES16_WEIGHTS(NAME, HD)                                                                                                \
	AVX512F static void NAME(float *S, float *inv, float *qt, uint32_t *vis, const float *q, const void *kc, int f16, int past,  \
	                         int total, const uint8_t *mask, int group, int hd, int kvd, int qd, int kh, int i0, int i1, int lmax, \
	                         float scale) {                                                                                        \
		lanes16_weights(S, inv, qt, vis, q, kc, f16, past, total, mask, group, HD, kvd, qd, kh, i0, i1, lmax, scale);           \
	}
LANES16_WEIGHTS(lanes16_weights64, 64)
LANES16_WEIGHTS(lanes16_weights128, 128)
LANES16_WEIGHTS(lanes16_weights_any, hd)
#endif

// arb_lanes16_weights is, for attention_avx512's task of kv head kh and
// rows i0..i1-1 (nq = (i1 - i0) * group query vectors, at most 16; heads
// of a multiple of 16 dims, at most 256), its scores, softmax and 1/sums
// with the query vectors in the lanes of 512-bit vectors: vector u's
// weight of slot j at S[16j + u] (j < lmax, the rest of the (lmax + 7) &
// ~7 slots 0) and its 1/sum at inv[u] (0 for a row that sees no slot). A
// slot is scored once for all sixteen vectors, with no horizontal sums,
// and each weight and 1/sum is the same bits as attention_avx512's own
// (scores score_heads16's, the softmax softmax_inv's as lanes_inv
// computes it). qt is 16 * hd floats of scratch, vis one word a slot (with
// a mask). It returns -1 where the kernel does not apply.
int arb_lanes16_weights(float *S, float *inv, float *qt, uint32_t *vis, const float *q, const void *kc, int f16, int past, int total,
                        const uint8_t *mask, int group, int hd, int kvd, int qd, int kh, int i0, int i1, int lmax, float scale) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2 && hd % 16 == 0 && hd <= 256 && (i1 - i0) * group <= 16) {
		(hd == 64 ? lanes16_weights64 : hd == 128 ? lanes16_weights128 : lanes16_weights_any)(S, inv, qt, vis, q, kc, f16, past, total,
		                                                                                     mask, group, hd, kvd, qd, kh, i0, i1, lmax, scale);
		return 0;
	}
#endif
	(void)S; (void)inv; (void)qt; (void)vis; (void)q; (void)kc; (void)f16; (void)past; (void)total; (void)mask; (void)group;
	(void)hd; (void)kvd; (void)qd; (void)kh; (void)i0; (void)i1; (void)lmax; (void)scale;
	return -1;
}

// arb_lanes_block is how many query vectors (rows times the heads that
// share a kv head) a task of arb_attention_lanes takes: 32, or 16 when
// there are no more than 16; 0 where the kernel does not apply (no
// AVX-512, heads not of width 8, or fewer than ARB_LANES_MIN vectors,
// where simd.c's attention_hd8 is faster).
int arb_lanes_block(int n, int heads, int kv_heads, int hd) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	int nvec = n * (heads / kv_heads);
	if (arb_simd_level() >= 2 && hd == 8 && nvec >= ARB_LANES_MIN) return nvec <= 16 ? 16 : 32;
#endif
	(void)n; (void)heads; (void)kv_heads; (void)hd;
	return 0;
}

// arb_lanes_scratch is the floats of scratch a task needs: the block's
// scores, a mask word a slot, and the head's keys and values widened
// from float16.
long arb_lanes_scratch(int past, int n, int block) {
	long total = past + n;
	return ((total + 7) & ~7) * block + total + 16 * total;
}

// arb_attention_lanes computes tasks lo..hi-1 (task = kv head * blocks +
// block of arb_lanes_block query vectors) of arb_attention for heads of
// width 8; arb_lanes_block must not be 0 for the shape.
void arb_attention_lanes(float *out, const float *q, const void *kc, const void *vc, int f16, int past, int n,
                         const uint8_t *mask, int heads, int kv_heads, float scale, int lo, int hi, float *scratch) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_lanes_block(n, heads, kv_heads, 8) == 16) hd8_lanes16(out, q, kc, vc, f16, past, n, mask, heads, kv_heads, scale, lo, hi, scratch);
	else hd8_lanes32(out, q, kc, vc, f16, past, n, mask, heads, kv_heads, scale, lo, hi, scratch);
#else
	(void)out; (void)q; (void)kc; (void)vc; (void)f16; (void)past; (void)n; (void)mask; (void)heads; (void)kv_heads;
	(void)scale; (void)lo; (void)hi; (void)scratch;
#endif
}
