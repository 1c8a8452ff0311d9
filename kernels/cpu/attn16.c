//go:build cgo && !purego

// Attention over many query vectors at once on 512-bit vectors
// (arb_simd_level 2 and up), query vectors in lanes: the whole of a
// chunk's record for heads of width 8 (hd8_lanes), and the weights of
// attention_avx512's blocks for heads of a multiple of 16 dims
// (arb_lanes16_weights, at the end). See attn.c for the chunks and
// records.
//
// attn.c's attention_hd8 puts eight keys in a vector and each query
// vector's scores in a row of their own, which suits a decode step (a
// handful of query vectors) but not a wide pass: a 512-row prefill of the
// bench target (64 heads of 8 over 32 kv heads) kept a 2 MiB score block
// per kv head, past the second level of cache, and spent 85% of the pass
// there. Here sixteen or thirty-two query vectors of one kv head (batch
// rows times the heads that share it) sit one to a lane, and every step
// is a vertical operation over lanes: a key is eight broadcast values,
// scored against all lanes with eight multiply-adds; each lane's maximum,
// sum and weighted values accumulate slot by slot; no transpose, no
// horizontal sum. The scores of a block are 32 floats a slot, in cache.
//
// Each lane's arithmetic is attention_hd8's for its row, operation for
// operation and in the same order, so a row's record is the same bits
// whichever kernel computes it (the batch decides which): the score is
// q0*k0, then seven multiply-adds, times ARB_HD8_SCALE (the scale times
// log2 e); a slot the row does not see scores -inf (its exponential is
// exactly 0, the mask's or its chunk's bounds' alike); the exponentials
// are powers of two, exp2_8_masked's; their sum runs in double in eight
// partial sums, slot j into sum j mod 8 (slots counted from a multiple of
// 8), combined as softmax_sum combines them; the values are summed slot
// by slot with one multiply-add each. A slot outside a row's chunk adds
// 0 to its sums, which changes no bit. TestAttentionMatchesReference
// checks each row against the row alone.
#include <math.h>
#include <string.h>
#include "attn.h"
#include "simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "vec16.h"

#define AVX512F __attribute__((target("avx2,fma,f16c,avx512f")))
#define AI inline __attribute__((always_inline))
#define ARB_LANES_AHEAD 16

// lanes_sums sets sum[l], per lane l of the z-th vector of scores (a
// block's scores at S, L floats a slot, tp slots), to the sum of e^(s -
// max) over the slots, and replaces each score by its exponential; 0 for
// a lane that sees no slot (max -inf). The sum is softmax_sum's: double,
// slot j into partial sum j mod 8, then (p0+p4 + p1+p5) + (p2+p6 + p3+p7).
// With pow2 (a constant), the powers of two of softmax_sum's pow2 instead
// (exp2_16_masked: heads of width 8, scores scaled by log2 e).
AVX512F static AI void lanes_sums(float *S, int L, int tp, __m512 mx, const int pow2, double *sum) {
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
	__m512d tl = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(lo[0], lo[4]), _mm512_add_pd(lo[1], lo[5])),
	                           _mm512_add_pd(_mm512_add_pd(lo[2], lo[6]), _mm512_add_pd(lo[3], lo[7])));
	__m512d th = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(hi[0], hi[4]), _mm512_add_pd(hi[1], hi[5])),
	                           _mm512_add_pd(_mm512_add_pd(hi[2], hi[6]), _mm512_add_pd(hi[3], hi[7])));
	_mm512_storeu_pd(sum, tl);
	_mm512_storeu_pd(sum + 8, th);
}

// lanes_rows re-bases the chunks of a block's rows ra..rz (lo0[r - r0],
// hi0[r - r0]: their slots) on the block's first slot *js (live_span's)
// into lo[r - ra], hi[r - ra] (0, 0 for a row with none), and returns
// the block's slots from *js, or -1 for a block with none.
static AI int lanes_rows(const int32_t *lo0, const int32_t *hi0, int r0, int ra, int rz, int32_t *lo, int32_t *hi, int *js) {
	int a = -1, e = -1;
	for (int r = ra; r <= rz; r++) {
		int l = lo0[r - r0], h = hi0[r - r0];
		if (h <= l) continue;
		if (a < 0 || l < a) a = l;
		if (h > e) e = h;
	}
	if (e < 0) return -1;
	*js = a & ~7;
	for (int r = ra; r <= rz; r++) {
		int l = lo0[r - r0], h = hi0[r - r0];
		lo[r - ra] = h > l ? l - *js : 0, hi[r - ra] = h > l ? h - *js : 0;
	}
	return e - *js;
}

// lanes_setup puts query vectors u0..u1-1 of kv head kh (vector u: row
// u / group, head kh * group + u % group, hd dims) one to a lane of L:
// lane l's dim d at qt[stride * d + l] (0 for a lane past u1 - u0), and
// in llo[l], lhi[l] the slots of its row's chunk, counted from the
// block's first (lo[r], hi[r] for row ra + r; 0, 0 for an empty lane).
// With a mask (row ra + r's from that slot at mask + r*total), vis[j]
// (j < jn) gets bit l where lane l's row sees slot j inside its chunk.
static AI void lanes_setup(float *qt, int stride, int32_t *llo, int32_t *lhi, uint32_t *vis, const float *q, const uint8_t *mask,
                           int total, int group, int kh, int qd, int hd, int u0, int u1, int ra, const int32_t *lo, const int32_t *hi,
                           int jn, int L) {
	for (int l = 0; l < L; l++) {
		int u = u0 + l;
		const float *qv = u < u1 ? q + (long)(u / group) * qd + (long)(kh * group + u % group) * hd : NULL;
		for (int d = 0; d < hd; d++) qt[(long)stride * d + l] = qv ? qv[d] : 0;
		llo[l] = qv ? lo[u / group - ra] : 0;
		lhi[l] = qv ? hi[u / group - ra] : 0;
	}
	if (mask) {
		memset(vis, 0, (size_t)jn * sizeof(uint32_t));
		for (int i = u0 / group; i <= (u1 - 1) / group; i++) {
			int a = i * group > u0 ? i * group - u0 : 0, b = (i + 1) * group < u1 ? (i + 1) * group - u0 : u1 - u0;
			uint32_t bits = (uint32_t)(((1ull << b) - 1) & ~((1ull << a) - 1));
			const uint8_t *row = mask + (long)(i - ra) * total;
			for (int j = lo[i - ra]; j < hi[i - ra]; j++)
				if (row[j]) vis[j] |= bits;
		}
	}
}

// seen_lanes is the lanes that see slot j: those whose chunk holds it
// and whose row's mask (vis, where there is one) shows it.
AVX512F static AI __mmask16 seen_lanes(const uint32_t *vis, int z, __m512i lov, __m512i hiv, int j) {
	if (vis) return (__mmask16)(vis[j] >> (16 * z));
	__m512i jv = _mm512_set1_epi32(j);
	return _mm512_cmple_epi32_mask(lov, jv) & _mm512_cmpgt_epi32_mask(hiv, jv);
}

// hd8_lanes computes the records of query vectors u0..u1-1 of kv head
// kh with NZ vectors of sixteen lanes (a constant in each caller): row
// r's chunk is slots lo[r - r0] .. hi[r - r0]-1, and vector u's record
// goes to rec + (u - r0*group) * rec. A float16 cache's keys and values
// are widened eight slots at a time into a block of the first level of
// cache, whose values the multiply-adds broadcast, never a head at once.
AVX512F static AI void hd8_lanes(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                 int heads, int kv_heads, float scale, int kh, int u0, int u1, int r0, const int32_t *lo0,
                                 const int32_t *hi0, float *scratch, const int NZ) {
	const int L = 16 * NZ;
	int group = heads / kv_heads, kvd = kv_heads * 8, qd = heads * 8, R = arb_attn_rec(8);
	int ra = u0 / group, rz = (u1 - 1) / group, js;
	int32_t lo[32], hi[32], llo[32], lhi[32];
	int jn = lanes_rows(lo0, hi0, r0, ra, rz, lo, hi, &js);
	if (jn < 0) return;
	int tp = (jn + 7) & ~7, left = total - js;
	const __m512 vscale = _mm512_set1_ps(ARB_HD8_SCALE(scale)), ninf = _mm512_set1_ps(-INFINITY);
	// the scratch: the mask's lanes a slot, then tp slots of L scores
	uint32_t *vis = mask ? (uint32_t *)scratch : NULL;
	float *S = scratch + ((jn + 15) & ~15);
	float qt[8][32] __attribute__((aligned(64)));
	lanes_setup(&qt[0][0], 32, llo, lhi, vis, q, mask ? mask + (long)ra * total + js : NULL, total, group, kh, qd, 8, u0, u1, ra, lo, hi,
	            jn, L);
	long ko = (long)js * kvd + kh * 8; // slot js of the kv head
	const float *kf = (const float *)kc + ko, *vf = (const float *)vc + ko;
	const uint16_t *kh16 = (const uint16_t *)kc + ko, *vh16 = (const uint16_t *)vc + ko;
	float blk[8][8] __attribute__((aligned(32))); // eight slots of a float16 cache, widened
	__m512 Q[2][8], mx[2];
	__m512i lov[2], hiv[2];
	for (int z = 0; z < NZ; z++) {
		for (int d = 0; d < 8; d++) Q[z][d] = _mm512_load_ps(&qt[d][16 * z]);
		mx[z] = ninf;
		lov[z] = _mm512_loadu_si512(llo + 16 * z);
		hiv[z] = _mm512_loadu_si512(lhi + 16 * z);
	}
	// scores, -inf where not seen, and each lane's maximum
	for (int j = 0; j < jn; j++) {
		const float *k;
		if (f16) {
			if ((j & 7) == 0)
				for (int u = 0; u < 8; u++) {
					// the rows 32 ahead requested, a kv width apart
					_mm_prefetch((const char *)(kh16 + (long)(j + 32 + u) * kvd), _MM_HINT_T0);
					__m256 w = j + u < left ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kh16 + (long)(j + u) * kvd))) : _mm256_setzero_ps();
					_mm256_store_ps(blk[u], w);
				}
			k = blk[j & 7];
		} else {
			k = kf + (long)j * kvd;
			// a float32 cache's rows are a kv width apart (1 KiB in the
			// bench target), which the hardware's prefetch did not follow:
			// the keys requested ARB_LANES_AHEAD slots ahead, and the
			// slot's values now, for the sums below
			_mm_prefetch((const char *)(k + ARB_LANES_AHEAD * kvd), _MM_HINT_T0);
			_mm_prefetch((const char *)(vf + (long)j * kvd), _MM_HINT_T0);
		}
		__m512 s[2];
		for (int z = 0; z < NZ; z++) s[z] = _mm512_mul_ps(Q[z][0], _mm512_set1_ps(k[0]));
		for (int d = 1; d < 8; d++) {
			__m512 kd = _mm512_set1_ps(k[d]);
			for (int z = 0; z < NZ; z++) s[z] = _mm512_fmadd_ps(Q[z][d], kd, s[z]);
		}
		for (int z = 0; z < NZ; z++) {
			s[z] = _mm512_mask_mov_ps(ninf, seen_lanes(vis, z, lov[z], hiv[z], j), _mm512_mul_ps(s[z], vscale));
			mx[z] = _mm512_max_ps(mx[z], s[z]);
			_mm512_storeu_ps(S + (long)j * L + 16 * z, s[z]);
		}
	}
	for (int j = jn; j < tp; j++)
		for (int z = 0; z < NZ; z++) _mm512_storeu_ps(S + (long)j * L + 16 * z, ninf);
	// exponentials and sums, lane by lane
	double sum[32];
	for (int z = 0; z < NZ; z++) lanes_sums(S + 16 * z, L, tp, mx[z], 1, sum + 16 * z);
	// the weighted sums of the values, slot by slot
	__m512 acc[2][8];
	for (int z = 0; z < NZ; z++)
		for (int d = 0; d < 8; d++) acc[z][d] = _mm512_setzero_ps();
	for (int j = 0; j < jn; j++) {
		const float *v;
		if (f16) {
			if ((j & 7) == 0)
				for (int u = 0; u < 8; u++) {
					_mm_prefetch((const char *)(vh16 + (long)(j + 32 + u) * kvd), _MM_HINT_T0);
					__m256 w = j + u < left ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vh16 + (long)(j + u) * kvd))) : _mm256_setzero_ps();
					_mm256_store_ps(blk[u], w);
				}
			v = blk[j & 7];
		} else {
			v = vf + (long)j * kvd;
		}
		__m512 e[2];
		for (int z = 0; z < NZ; z++) e[z] = _mm512_loadu_ps(S + (long)j * L + 16 * z);
		for (int d = 0; d < 8; d++) {
			__m512 vd = _mm512_set1_ps(v[d]);
			for (int z = 0; z < NZ; z++) acc[z][d] = _mm512_fmadd_ps(e[z], vd, acc[z][d]);
		}
	}
	float mxs[32];
	for (int z = 0; z < NZ; z++) {
		for (int d = 0; d < 8; d++) _mm512_store_ps(&qt[d][16 * z], acc[z][d]);
		_mm512_storeu_ps(mxs + 16 * z, mx[z]);
	}
	for (int u = u0; u < u1; u++) {
		float *o = rec + (long)(u - r0 * group) * R;
		for (int d = 0; d < 8; d++) o[d] = qt[d][u - u0];
		o[R - 4] = mxs[u - u0];
		memcpy(o + R - 2, &sum[u - u0], sizeof(double));
	}
}

AVX512F static void hd8_lanes16(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                int heads, int kv_heads, float scale, int kh, int u0, int u1, int r0, const int32_t *lo,
                                const int32_t *hi, float *scratch) {
	if (f16) hd8_lanes(rec, q, kc, vc, 1, total, mask, heads, kv_heads, scale, kh, u0, u1, r0, lo, hi, scratch, 1);
	else hd8_lanes(rec, q, kc, vc, 0, total, mask, heads, kv_heads, scale, kh, u0, u1, r0, lo, hi, scratch, 1);
}

AVX512F static void hd8_lanes32(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask,
                                int heads, int kv_heads, float scale, int kh, int u0, int u1, int r0, const int32_t *lo,
                                const int32_t *hi, float *scratch) {
	if (f16) hd8_lanes(rec, q, kc, vc, 1, total, mask, heads, kv_heads, scale, kh, u0, u1, r0, lo, hi, scratch, 2);
	else hd8_lanes(rec, q, kc, vc, 0, total, mask, heads, kv_heads, scale, kh, u0, u1, r0, lo, hi, scratch, 2);
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
// them into each lane's maximum. The keys (slot j's at kc + j*kvd) of a
// float16 cache are widened into kb first (NS * hd floats, in the first
// level of cache: the values the multiply-adds broadcast).
AVX512F static AI void lanes16_slots(float *S, __m512 *mx, const float *qt, const void *kc, int f16, int kvd, int hd, int j,
                                     const uint32_t *vis, __m512i lov, __m512i hiv, float scale, float *kb, const int NS) {
	const float *k[4];
	for (int x = 0; x < NS; x++) {
		long at = (long)(j + x) * kvd;
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
		s[x] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), seen_lanes(vis, 0, lov, hiv, j + x), _mm512_mul_ps(s[x], _mm512_set1_ps(scale)));
		*mx = _mm512_max_ps(*mx, s[x]);
		_mm512_storeu_ps(S + 16L * (j + x), s[x]);
	}
}

// lanes16_weights is arb_lanes16_weights for heads of hd dims (a
// constant in the copies below): the block's vectors into lanes
// (lanes_setup), the slots four at a time, then the rest; lanes_sums's
// softmax.
AVX512F static AI void lanes16_weights(float *S, float *mxo, double *sm, float *qt, uint32_t *vis, const float *q, const void *kc, int f16,
                                       const uint8_t *mask, int total, int group, int hd, int kvd, int qd, int kh, int i0, int i1,
                                       const int32_t *lo, const int32_t *hi, int jn, float scale) {
	int tp = (jn + 7) & ~7;
	int32_t llo[16], lhi[16];
	lanes_setup(qt, 16, llo, lhi, mask ? vis : NULL, q, mask, total, group, kh, qd, hd, i0 * group, i1 * group, i0, lo, hi, jn, 16);
	float kb[4 * 256];
	__m512 mx = _mm512_set1_ps(-INFINITY);
	__m512i lov = _mm512_loadu_si512(llo), hiv = _mm512_loadu_si512(lhi);
	const uint32_t *v = mask ? vis : NULL;
	int j = 0;
	for (; j + 4 <= jn; j += 4) lanes16_slots(S, &mx, qt, kc, f16, kvd, hd, j, v, lov, hiv, scale, kb, 4);
	for (; j < jn; j++) lanes16_slots(S, &mx, qt, kc, f16, kvd, hd, j, v, lov, hiv, scale, kb, 1);
	for (; j < tp; j++) _mm512_storeu_ps(S + 16L * j, _mm512_set1_ps(-INFINITY));
	_mm512_storeu_ps(mxo, mx);
	lanes_sums(S, 16, tp, mx, 0, sm);
}

// One copy for heads of 64 and of 128 (the width a constant, so a
// slot's multiply-adds unroll and the partial sums stay in registers) and
// one for any multiple of 16.
#define LANES16_WEIGHTS(NAME, HD)                                                                                                   \
	AVX512F static void NAME(float *S, float *mx, double *sm, float *qt, uint32_t *vis, const float *q, const void *kc, int f16,      \
	                         const uint8_t *mask, int total, int group, int hd, int kvd, int qd, int kh, int i0, int i1,             \
	                         const int32_t *lo, const int32_t *hi, int jn, float scale) {                                             \
		lanes16_weights(S, mx, sm, qt, vis, q, kc, f16, mask, total, group, HD, kvd, qd, kh, i0, i1, lo, hi, jn, scale);           \
	}
LANES16_WEIGHTS(lanes16_weights64, 64)
LANES16_WEIGHTS(lanes16_weights128, 128)
LANES16_WEIGHTS(lanes16_weights_any, hd)
#endif

// arb_lanes16_weights is, for attention_avx512's block of kv head kh and
// rows i0..i1-1 (nq = (i1 - i0) * group query vectors, at most 16; heads
// of a multiple of 16 dims, at most 256), its weights, maxima and sums
// with the query vectors in the lanes of 512-bit vectors: slots counted
// from the block's first (slot j's keys at kc + j*kvd; row i's mask from
// it at mask + (i - i0)*total; its chunk lo[i-i0] .. hi[i-i0]-1, all
// below jn), vector u's weight of slot j at S[16j + u] (the rest of the
// (jn + 7) & ~7 slots 0), its largest score at mx[u] and its sum at
// sm[u] (-inf and 0 for a vector that sees no slot). A slot is scored
// once for all sixteen vectors, with no horizontal sums, and each weight
// and sum is the same bits as attention_avx512's own (scores
// score_heads16's, the softmax softmax_sum's as lanes_sums computes it).
// qt is 16 * hd floats of scratch, vis one word a slot (with a mask). It
// returns -1 where the kernel does not apply.
int arb_lanes16_weights(float *S, float *mx, double *sm, float *qt, uint32_t *vis, const float *q, const void *kc, int f16,
                        const uint8_t *mask, int total, int group, int hd, int kvd, int qd, int kh, int i0, int i1,
                        const int32_t *lo, const int32_t *hi, int jn, float scale) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() >= 2 && hd % 16 == 0 && hd <= 256 && (i1 - i0) * group <= 16) {
		(hd == 64 ? lanes16_weights64 : hd == 128 ? lanes16_weights128 : lanes16_weights_any)(S, mx, sm, qt, vis, q, kc, f16, mask, total,
		                                                                                     group, hd, kvd, qd, kh, i0, i1, lo, hi, jn, scale);
		return 0;
	}
#endif
	(void)S; (void)mx; (void)sm; (void)qt; (void)vis; (void)q; (void)kc; (void)f16; (void)mask; (void)total; (void)group;
	(void)hd; (void)kvd; (void)qd; (void)kh; (void)i0; (void)i1; (void)lo; (void)hi; (void)jn; (void)scale;
	return -1;
}

// arb_lanes_block is how many query vectors (rows times the heads that
// share a kv head) a block of arb_hd8_lanes takes: 32, or 16 when there
// are no more than 16; 0 where the kernel does not apply (no AVX-512,
// heads not of width 8, or fewer than ARB_LANES_MIN vectors, where attn.c's
// attention_hd8 is faster).
int arb_lanes_block(int n, int heads, int kv_heads, int hd) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	int nvec = n * (heads / kv_heads);
	if (arb_simd_level() >= 2 && hd == 8 && nvec >= ARB_LANES_MIN) return nvec <= 16 ? 16 : 32;
#endif
	(void)n; (void)heads; (void)kv_heads; (void)hd;
	return 0;
}

// arb_lanes_scratch is the floats of scratch a block of arb_hd8_lanes
// needs over span slots: a mask word a slot, then the block's scores.
long arb_lanes_scratch(int span, int block) {
	long tp = ((long)span + 15) & ~15L;
	return tp + tp * block;
}

// arb_hd8_lanes computes the records of query vectors u0..u1-1 (vector
// u: row u / group, head kh * group + u % group) of kv head kh, heads of
// width 8, L of them (arb_lanes_block) a block: row r's chunk is slots
// lo[r - r0] .. hi[r - r0]-1 (mask: row r's at mask + r*total), and vector
// u's record goes to rec + (u - r0*group) * arb_attn_rec(8).
void arb_hd8_lanes(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask, int heads,
                   int kv_heads, float scale, int kh, int u0, int u1, int r0, const int32_t *lo, const int32_t *hi, int L,
                   float *scratch) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (L == 16) hd8_lanes16(rec, q, kc, vc, f16, total, mask, heads, kv_heads, scale, kh, u0, u1, r0, lo, hi, scratch);
	else hd8_lanes32(rec, q, kc, vc, f16, total, mask, heads, kv_heads, scale, kh, u0, u1, r0, lo, hi, scratch);
#else
	(void)rec; (void)q; (void)kc; (void)vc; (void)f16; (void)total; (void)mask; (void)heads; (void)kv_heads; (void)scale;
	(void)kh; (void)u0; (void)u1; (void)r0; (void)lo; (void)hi; (void)L; (void)scratch;
#endif
}
