// The quantised weight layouts of kernels/quant, unpacked 32 weights at a
// time, and the integer dot product of such a chunk with 8-bit activations.
//
// Plain C so that the same code compiles twice: as CUDA device functions in
// arborist.cu, and on the host in hostcheck.c, which a Go test (no GPU
// needed) runs against quant.Dequantize and a float64 reference.

#ifndef ARBORIST_QUANT_CUH
#define ARBORIST_QUANT_CUH

#include <stdint.h>

#ifdef __CUDACC__
#define QDEV static __device__ __forceinline__
#define VSUB4(a, b) __vsubss4((a), (b))
#define DP4A(a, b, c) __dp4a((a), (b), (c))
QDEV float qf16(const uint8_t *p) { return __half2float(__ushort_as_half(*(const uint16_t *)p)); }
#else
#include <math.h>
#include <string.h>
#define QDEV static inline
// per-byte signed subtraction (no byte saturates in the uses below)
QDEV int VSUB4(int a, int b) {
	uint32_t r = 0;
	for (int i = 0; i < 4; i++) {
		int8_t x = (int8_t)(a >> (8 * i)), y = (int8_t)(b >> (8 * i));
		r |= (uint32_t)(uint8_t)(int8_t)(x - y) << (8 * i);
	}
	return (int)r;
}
QDEV int DP4A(int a, int b, int c) {
	for (int i = 0; i < 4; i++) c += (int8_t)(a >> (8 * i)) * (int8_t)(b >> (8 * i));
	return c;
}
QDEV float qf16(const uint8_t *p) {
	uint16_t h = (uint16_t)(p[0] | p[1] << 8);
	int e = (h >> 10) & 31, m = h & 1023;
	float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
	return (h & 0x8000) ? -v : v;
}
#endif

// Four bytes at an even (not necessarily 4-byte aligned) address.
QDEV int ld32(const uint8_t *p) {
	const uint16_t *h = (const uint16_t *)p;
	return (int)((uint32_t)h[0] | ((uint32_t)h[1] << 16));
}

// A chunk: 32 consecutive weights of a row as signed 8-bit integers q
// (packed four to an int) with w_j = a_{j/16} * q_j + b; two scales because
// Q6_K changes scale every 16 weights.
typedef struct {
	int q[8];
	float a0, a1, b;
} Chunk;

// Weight j of a chunk.
QDEV float chunk_weight(const Chunk *ch, int j) {
	return (j < 16 ? ch->a0 : ch->a1) * (float)(int8_t)(ch->q[j / 4] >> (8 * (j % 4))) + ch->b;
}

// The chunk's dot product with 32 activations quantised to 8 bits: xq (as
// eight ints), their scale xd and xs = xd * sum(xq).
QDEV float chunk_dot(const Chunk *ch, const int *xq, float xd, float xs) {
	int s0 = 0, s1 = 0;
	for (int k = 0; k < 4; k++) s0 = DP4A(ch->q[k], xq[k], s0);
	for (int k = 4; k < 8; k++) s1 = DP4A(ch->q[k], xq[k], s1);
	return xd * (ch->a0 * (float)s0 + ch->a1 * (float)s1) + ch->b * xs;
}

// Q4_K/Q5_K: the j-th six-bit (scale, min) pair of the 12 packed bytes q
// (quant.ScaleMinK4).
QDEV void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// Q8_0 (34 bytes per 32 weights): d f16, qs[32] int8; w = d*q.
QDEV void unpack_q8_0(const uint8_t *row, int c, Chunk *ch) {
	const uint8_t *b = row + (size_t)c * 34;
	ch->a0 = ch->a1 = qf16(b);
	ch->b = 0.f;
	for (int k = 0; k < 8; k++) ch->q[k] = ld32(b + 2 + 4 * k);
}

// Q4_0 (18 bytes per 32): d f16, qs[16]: weights 0..15 in the low nibbles,
// 16..31 in the high ones; w = d*(q-8).
QDEV void unpack_q4_0(const uint8_t *row, int c, Chunk *ch) {
	const uint8_t *b = row + (size_t)c * 18;
	ch->a0 = ch->a1 = qf16(b);
	ch->b = 0.f;
	for (int k = 0; k < 4; k++) {
		int v = ld32(b + 2 + 4 * k);
		ch->q[k] = VSUB4(v & 0x0F0F0F0F, 0x08080808);
		ch->q[k + 4] = VSUB4((v >> 4) & 0x0F0F0F0F, 0x08080808);
	}
}

// Q4_K (144 bytes per 256): d, dmin f16; scales[12]; qs[128]. Sub-block s
// (32 weights) is the low (s even) or high (s odd) nibbles of
// qs[32*(s/2)..]; w = d*sc*q - dmin*m.
QDEV void unpack_q4_k(const uint8_t *row, int c, Chunk *ch) {
	const uint8_t *b = row + (size_t)(c / 8) * 144;
	int s = c % 8, sc, m;
	scale_min_k4(s, b + 4, &sc, &m);
	ch->a0 = ch->a1 = qf16(b) * (float)sc;
	ch->b = -(qf16(b + 2) * (float)m);
	const uint8_t *q = b + 16 + 32 * (s / 2);
	int sh = 4 * (s % 2);
	for (int k = 0; k < 8; k++) ch->q[k] = (ld32(q + 4 * k) >> sh) & 0x0F0F0F0F;
}

// Q5_K (176 bytes per 256): d, dmin f16; scales[12]; qh[32]; qs[128]. As
// Q4_K, plus the fifth bit of weight l of sub-block s at bit s of qh[l].
QDEV void unpack_q5_k(const uint8_t *row, int c, Chunk *ch) {
	const uint8_t *b = row + (size_t)(c / 8) * 176;
	int s = c % 8, sc, m;
	scale_min_k4(s, b + 4, &sc, &m);
	ch->a0 = ch->a1 = qf16(b) * (float)sc;
	ch->b = -(qf16(b + 2) * (float)m);
	const uint8_t *qh = b + 16;
	const uint8_t *ql = b + 48 + 32 * (s / 2);
	int sh = 4 * (s % 2);
	for (int k = 0; k < 8; k++) {
		int lo = (ld32(ql + 4 * k) >> sh) & 0x0F0F0F0F;
		int hi = ((ld32(qh + 4 * k) >> s) & 0x01010101) << 4;
		ch->q[k] = lo | hi;
	}
}

// Q6_K (210 bytes per 256): ql[128], qh[64], scales[16] int8, d f16. In
// half h = s/4, quarter k = s%4 of a super-block, weight l has its low
// nibble in ql[64h + 32(k&1) + l] (the high nibble when k >= 2), its top two
// bits at bits 2k of qh[32h + l], and scale scales[8h + 2k + l/16];
// w = d*sc*(q-32).
QDEV void unpack_q6_k(const uint8_t *row, int c, Chunk *ch) {
	const uint8_t *b = row + (size_t)(c / 8) * 210;
	int s = c % 8, h = s / 4, k = s % 4;
	float d = qf16(b + 208);
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * k);
	ch->a0 = d * (float)sc[0];
	ch->a1 = d * (float)sc[1];
	ch->b = 0.f;
	const uint8_t *ql = b + 64 * h + 32 * (k & 1);
	const uint8_t *qh = b + 128 + 32 * h;
	int sh = 4 * (k >> 1);
	for (int j = 0; j < 8; j++) {
		int lo = (ld32(ql + 4 * j) >> sh) & 0x0F0F0F0F;
		int hi = ((ld32(qh + 4 * j) >> (2 * k)) & 0x03030303) << 4;
		ch->q[j] = VSUB4(lo | hi, 0x20202020);
	}
}

#endif
