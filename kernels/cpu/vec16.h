// Sixteen-wide AVX-512 helpers shared by the C kernels: exp16_masked
// (the softmax of attn16.c's kernels, the SiLU gate) and exp2_16_masked
// (the softmax of heads of width 8). Included inside
// each file's x86-64 section, after <immintrin.h>.
#ifndef ARB_VEC16_H
#define ARB_VEC16_H

// exp16_masked is vec8.h's exp8_masked on sixteen lanes: the same
// operations, lane for lane (0 below -87.3, -inf included).
__attribute__((target("avx2,fma,avx512f"))) static inline __attribute__((always_inline)) __m512 exp16_masked(__m512 x) {
	__mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
	x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	__m512i pow2 = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
	return _mm512_maskz_mov_ps(live, _mm512_mul_ps(p, _mm512_castsi512_ps(pow2)));
}

// exp2_16_masked is vec8.h's exp2_8_masked on sixteen lanes, lane for
// lane: the product p * 2^n is taken by vscalefps, which rounds the exact
// product once, as the multiply by the exact power of two there does
// (n >= -126, so that power is a normal float).
__attribute__((target("avx2,fma,avx512f"))) static inline __attribute__((always_inline)) __m512 exp2_16_masked(__m512 x) {
	__mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
	x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
	__m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_sub_ps(x, n);
	__m512 p = _mm512_set1_ps(1.535336188319500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.339887440266574e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.618437357674640e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.550332471162809e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.402264791363012e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.931472028550421e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
}

#endif
