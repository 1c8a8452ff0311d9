// Eight-wide AVX2 helpers shared by the C kernels: exp8_masked (inference's
// softmax and SiLU, the trainer's attention, softmax and SiLU), the
// horizontal sums hsum4 and hsum8, and transpose8 (repacking weights,
// packing the trainer's products).
// Included inside each file's x86-64 section, after <immintrin.h>.
#ifndef ARB_VEC8_H
#define ARB_VEC8_H

// exp8_masked returns e^x for 8 floats (Cephes' single-precision
// polynomial after reduction by ln 2, within 2 ulp on the softmax range);
// -inf and anything below -87.3 give exactly 0.
__attribute__((target("avx2,fma"))) static inline __m256 exp8_masked(__m256 x) {
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


// exp2_8_masked returns 2^x for 8 floats x <= 0 (Cephes' exp2f: 1 + r *
// P(r) on r = x - round(x), within 2 ulp, times 2^round(x)); -inf and
// anything below -126 give exactly 0. The softmax of heads of width 8
// runs on it, with the scores scaled by log2(e) beforehand, which saves
// the exponential's own scaling and its two-step reduction by ln 2.
// vec16.h's exp2_16_masked is the same lane for lane.
__attribute__((target("avx2,fma"))) static inline __m256 exp2_8_masked(__m256 x) {
	__m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_GE_OQ);
	x = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
	__m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_sub_ps(x, n);
	__m256 p = _mm256_set1_ps(1.535336188319500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.339887440266574e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(9.618437357674640e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.550332471162809e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(2.402264791363012e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(6.931472028550421e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	__m256i pow2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(pow2)), live);
}

// hsum4 is the sum of a vector's four lanes, (v0+v2) + (v1+v3): the one
// horizontal reduction every kernel's epilogue uses.
__attribute__((target("avx2,fma"))) static inline float hsum4(__m128 s) {
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// hsum8 is the sum of a vector's eight lanes: its halves added, then hsum4.
__attribute__((target("avx2,fma"))) static inline float hsum8(__m256 v) {
	return hsum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// transpose8 transposes an 8x8 block of floats held as 8 rows.
__attribute__((target("avx2,fma"))) static inline void transpose8(__m256 r[8]) {
	__m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
	__m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
	__m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
	__m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
	__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
	__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
	__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
	r[0] = _mm256_permute2f128_ps(u0, u4, 0x20); r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
	r[2] = _mm256_permute2f128_ps(u2, u6, 0x20); r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
	r[4] = _mm256_permute2f128_ps(u0, u4, 0x31); r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
	r[6] = _mm256_permute2f128_ps(u2, u6, 0x31); r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#endif
