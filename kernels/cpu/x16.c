//go:build cgo && !purego

// Quantised weights repacked sixteen rows at a time, for AVX-512 VNNI on
// 512-bit vectors (arb_simd_level 2 and up).
//
// The eight-row layouts of q40x8.c give each 4-byte lane of a 256-bit
// vector one row's four weights; here a 512-bit vector's
// sixteen lanes hold sixteen rows' four weights, so one vpdpbusd adds four
// products to each of sixteen rows' sums (64 multiply-adds where the
// 256-bit tiles do 32). On a core with 512-bit datapaths (AMD Zen 5, Intel
// Sapphire Rapids and later) that doubles the integer rate; on one that
// splits them in two (Zen 4) it halves the instructions for the same rate.
//
// The weights of a group are multiplied by up to eight activation rows (a
// tile) while they sit in registers and the first level of cache: each
// vector of weights is loaded once for the tile, and every activation
// word is broadcast to the sixteen lanes by a load, so a tile's inner loop
// is vpdpbusd and broadcast loads. A pass over W tokens runs
// ceil(W/8) tiles over each group, the group's weights read from memory
// once and from cache after that.
//
// The integer block sums are exact (so how vpdpbusd splits them does not
// matter), and the float code after them is the same operations in the
// same order in every lane, whatever the tile: so a row's result depends
// neither on the tile, nor on the batch, nor on the rows beside it in the
// group, and a verification row equals the decode row, which greedy
// identity needs. For every type a lane's float code is that of the
// eight-row AVX2 tiles (q40x8.c, k8.c), so the two widths give the same
// bits: for Q4_0 and Q8_0 TestSixteenRowsMatchEightRows holds them to
// each other, for the other block types to legacyTilesReference and
// iq4TilesReference, for the K-quants, on activations scaled per 256
// values (see q4k_tile), to kTilesReference (q40x8_test.go).
//
// Layouts (a group is sixteen rows; rows past the matrix's last are zero,
// their outputs never stored):
//  - Q8_0, per block: the sixteen float16 scales, then eight 64-byte
//    vectors whose lane i holds row i's weight bytes 4h..4h+3 with the top
//    bit flipped (w + 128, unsigned for vpdpbusd; 128 times the activation
//    block's sum comes off the exact total). 544 bytes, the blocks' own.
//  - Q4_0, per block: the scales, then four vectors of nibble bytes as
//    q40x8.c lays them out (lane i: row i's bytes 4h..4h+3, low nibbles
//    weights 4h.., high ones 16+4h..). 288 bytes.
//  - Q5_0, per block: Q4_0's, then a vector of fifth bits (lane i: row
//    i's four bytes e, bit h of byte e the fifth bit of weight 4h+e and
//    bit 4+h that of weight 16+4h+e: the bits of the nibbles in the h-th
//    vector). 352 bytes, the blocks' own.
//  - Q4_1 (and Q5_1), per block: the sixteen float16 scales, the sixteen
//    mins, Q4_0's four vectors of nibbles (and Q5_0's vector of fifth
//    bits). 320 (384) bytes, the blocks' own.
//  - IQ4_NL, per block: Q4_0's layout (the nibbles index the IQ4 table).
//    IQ4_XS, per 32-weight block of its super-blocks: the sixteen rows'
//    block scales d * (ls - 32) as float32 (exact: a float16 times a
//    six-bit integer), then Q4_0's four vectors of nibbles. 288 (320)
//    bytes.
//  - Q4_K (and Q5_K), per super-block: sixteen d, sixteen dmin, then for
//    each sub-block j its sixteen scales and sixteen mins (a byte each),
//    then for each 32-byte chunk c of nibbles eight vectors (lane i: row
//    i's bytes 32c+4h..+3); Q5_K adds eight vectors of fifth bits (lane i:
//    row i's qh bytes 4h..4h+3). 2368 (2880) bytes.
//  - Q3_K, per super-block: sixteen d, the sixteen scales of each of the
//    sixteen 16-weight groups (signed, a byte a row), then for each
//    32-weight block c three vectors: two of the low two bits (lane i:
//    row i's dword m, bits 2s of byte e the weight 16m+4s+e) and one of
//    the third bits (lane i: bit k of byte e the weight 4k+e's). 1824
//    bytes, 114 a row (the file's 110).
//  - Q2_K, per super-block: sixteen d, sixteen dmin, the sixteen groups'
//    scale bytes (low nibble the scale, high the min; a byte a row), then
//    for each 32-weight block the two vectors of two-bit weights as Q3_K
//    lays them. 1344 bytes, the file's 84 a row.
//  - Q6_K, per super-block: sixteen d, the sixteen scales of each of the
//    sixteen 16-weight groups (a byte a row), then for each 32-weight block
//    eight vectors of the weights as unsigned bytes q (0..63); 32 times
//    each 16-value half's activation sum comes off its exact total. 4384
//    bytes.
#include <string.h>
#include "q40x8.h"
#include "simd.h"

enum {
	X16_Q80 = 32 + 512,
	X16_Q40 = 32 + 256,
	X16_Q50 = 32 + 256 + 64,
	X16_Q41 = 32 + 32 + 256,
	X16_Q51 = X16_Q41 + 64,
	X16_IQ4XS = 64 + 256, // a 32-weight block's; a super-block takes eight
	X16_Q4K = 32 + 32 + 256 + 2048,
	X16_Q5K = X16_Q4K + 512,
	X16_Q6K = 32 + 256 + 4096,
	X16_Q3K = 32 + 256 + 8 * 192,
	X16_Q2K = 32 + 32 + 256 + 8 * 128,
};

static long x16_group_bytes(int type) {
	switch (type) {
	case ARB_Q8_0: return X16_Q80;
	case ARB_Q4_0: return X16_Q40;
	case ARB_Q5_0: return X16_Q50;
	case ARB_Q4_1: return X16_Q41;
	case ARB_Q5_1: return X16_Q51;
	case ARB_IQ4_NL: return X16_Q40;
	case ARB_IQ4_XS: return 8 * X16_IQ4XS;
	case ARB_Q4_K: return X16_Q4K;
	case ARB_Q5_K: return X16_Q5K;
	case ARB_Q6_K: return X16_Q6K;
	case ARB_Q3_K: return X16_Q3K;
	case ARB_Q2_K: return X16_Q2K;
	}
	return 0;
}

// arb_fifth_bits writes a Q5_0 or Q5_1 block's fifth bits (qh, 32 bits
// little-endian) as the repacked layouts hold them, four bytes e: bit h of
// byte e the fifth bit of weight 4h+e, bit 4+h that of weight 16+4h+e
// (for q40x8.c too).
void arb_fifth_bits(const uint8_t *qh4, uint8_t *out) {
	uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
	for (int e = 0; e < 4; e++) {
		uint8_t bits = 0;
		for (int h = 0; h < 4; h++) bits |= (uint8_t)(((qh >> (4 * h + e)) & 1) << h | ((qh >> (16 + 4 * h + e)) & 1) << (4 + h));
		out[e] = bits;
	}
}

// q2_planes writes a row's 32 two-bit weights u (0..3) of one block as
// the Q3_K and Q2_K layouts hold them: dword m of the row's lane (rows
// lanes a vector, vectors 4 * rows bytes apart), bits 2s of byte e the
// weight 16m+4s+e.
static void q2_planes(uint8_t *d, int rows, int i, const uint8_t *u) {
	for (int m = 0; m < 2; m++)
		for (int e = 0; e < 4; e++) {
			uint8_t v = 0;
			for (int s = 0; s < 4; s++) v |= (uint8_t)(u[16 * m + 4 * s + e] << (2 * s));
			d[4 * rows * m + 4 * i + e] = v;
		}
}

// arb_k23_pack writes row i of a group's Q3_K or Q2_K super-block blk at d in
// the layouts above, for groups of rows rows (16 here, 8 in k8.c): the
// scales at scales (a byte a group and row), the blocks' vectors from
// planes on, per block 3 (Q3_K) or 2 vectors of 4 * rows bytes.
void arb_k23_pack(int type, const uint8_t *blk, int rows, int i, uint8_t *d, uint8_t *scales, uint8_t *planes) {
	int q3 = type == ARB_Q3_K, per = (q3 ? 3 : 2) * 4 * rows;
	if (q3) {
		memcpy(d + 2 * i, blk + 108, 2);
		const uint8_t *p = blk + 96;
		for (int j = 0; j < 16; j++) {
			int lo = j >= 8 ? p[j % 8] >> 4 : p[j % 8] & 0xf, hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
			scales[rows * j + i] = (uint8_t)(int8_t)((lo | hi << 4) - 32);
		}
	} else {
		memcpy(d + 2 * i, blk + 80, 2);
		memcpy(d + 2 * rows + 2 * i, blk + 82, 2);
		for (int j = 0; j < 16; j++) scales[rows * j + i] = blk[j];
	}
	const uint8_t *qs = blk + (q3 ? 32 : 16);
	for (int c = 0; c < 8; c++) {
		uint8_t u[32];
		int n = c / 4, j = c % 4;
		for (int l = 0; l < 32; l++) u[l] = (qs[32 * n + l] >> (2 * j)) & 3;
		uint8_t *pc = planes + (long)c * per;
		q2_planes(pc, rows, i, u);
		if (q3)
			for (int e = 0; e < 4; e++) {
				uint8_t v = 0;
				for (int k = 0; k < 8; k++) v |= (uint8_t)(((blk[4 * k + e] >> c) & 1) << k);
				pc[8 * rows + 4 * i + e] = v;
			}
	}
}

// arb_x16_bytes is what a matrix of rows x nb blocks (super-blocks for the
// K-quants) takes repacked: rows rounded up to sixteen; 0 for a type
// without sixteen-row tiles.
long arb_x16_bytes(int type, int rows, int nb) { return (long)((rows + 15) / 16) * nb * x16_group_bytes(type); }

// arb_k4_scale_min unpacks the j-th six-bit (scale, min) pair of a Q4_K or
// Q5_K super-block's twelve packed scale bytes q (for k8.c too).
void arb_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// arb_q6_value is weight l (0..255) of a Q6_K super-block, as stored
// (0..63) (for k8.c too).
uint8_t arb_q6_value(const uint8_t *blk, int l) {
	int half = l / 128, r = l % 128, g = r / 32, k = r % 32;
	const uint8_t *ql = blk + 64 * half + 32 * (g % 2), *qh = blk + 128 + 32 * half;
	return (uint8_t)(((ql[k] >> (4 * (g / 2))) & 0xf) | ((qh[k] >> (2 * g)) & 3) << 4);
}

// arb_x16_pack repacks rows of nb blocks (super-blocks) of a type into
// dst (arb_x16_bytes of it), zero past the last row.
void arb_x16_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst) {
	long gb = x16_group_bytes(type);
	memset(dst, 0, (size_t)arb_x16_bytes(type, rows, nb));
	for (int g = 0; g < (rows + 15) / 16; g++)
		for (int b = 0; b < nb; b++) {
			uint8_t *d = dst + ((long)g * nb + b) * gb;
			for (int i = 0; i < 16 && 16 * g + i < rows; i++) {
				const uint8_t *row = src + (long)(16 * g + i) * row_bytes;
				switch (type) {
				case ARB_Q8_0: {
					const uint8_t *blk = row + (long)b * 34;
					memcpy(d + 2 * i, blk, 2);
					for (int h = 0; h < 8; h++)
						for (int e = 0; e < 4; e++) d[32 + 64 * h + 4 * i + e] = blk[2 + 4 * h + e] ^ 0x80;
					break;
				}
				case ARB_Q4_0: {
					const uint8_t *blk = row + (long)b * 18;
					memcpy(d + 2 * i, blk, 2);
					for (int h = 0; h < 4; h++) memcpy(d + 32 + 64 * h + 4 * i, blk + 2 + 4 * h, 4);
					break;
				}
				case ARB_Q5_0: case ARB_Q4_1: case ARB_Q5_1: {
					// the scale (and min), the nibbles, the fifth bits
					int mn = type != ARB_Q5_0, q5 = type != ARB_Q4_1, head = 2 + 2 * mn, at = 32 + 32 * mn;
					const uint8_t *blk = row + (long)b * (head + 4 * q5 + 16);
					memcpy(d + 2 * i, blk, 2);
					if (mn) memcpy(d + 32 + 2 * i, blk + 2, 2);
					for (int h = 0; h < 4; h++) memcpy(d + at + 64 * h + 4 * i, blk + head + 4 * q5 + 4 * h, 4);
					if (!q5) break;
					arb_fifth_bits(blk + head, d + at + 256 + 4 * i);
					break;
				}
				case ARB_IQ4_NL: {
					const uint8_t *blk = row + (long)b * 18;
					memcpy(d + 2 * i, blk, 2);
					for (int h = 0; h < 4; h++) memcpy(d + 32 + 64 * h + 4 * i, blk + 2 + 4 * h, 4);
					break;
				}
				case ARB_IQ4_XS: {
					const uint8_t *blk = row + (long)b * 136;
					float dd = arb_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
					int sh = blk[2] | blk[3] << 8;
					for (int j = 0; j < 8; j++) {
						uint8_t *dj = d + (long)j * X16_IQ4XS;
						int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 0xf) | ((sh >> (2 * j)) & 3) << 4;
						float dl = dd * (float)(ls - 32);
						memcpy(dj + 4 * i, &dl, 4);
						for (int h = 0; h < 4; h++) memcpy(dj + 64 + 64 * h + 4 * i, blk + 8 + 16 * j + 4 * h, 4);
					}
					break;
				}
				case ARB_Q4_K: case ARB_Q5_K: {
					int q5 = type == ARB_Q5_K;
					const uint8_t *blk = row + (long)b * (q5 ? 176 : 144);
					memcpy(d + 2 * i, blk, 2);
					memcpy(d + 32 + 2 * i, blk + 2, 2);
					for (int j = 0; j < 8; j++) arb_k4_scale_min(j, blk + 4, d + 64 + 32 * j + i, d + 64 + 32 * j + 16 + i);
					for (int c = 0; c < 4; c++)
						for (int h = 0; h < 8; h++) memcpy(d + 320 + 512 * c + 64 * h + 4 * i, blk + (q5 ? 48 : 16) + 32 * c + 4 * h, 4);
					if (q5)
						for (int h = 0; h < 8; h++) memcpy(d + X16_Q4K + 64 * h + 4 * i, blk + 16 + 4 * h, 4);
					break;
				}
				case ARB_Q3_K: case ARB_Q2_K: {
					const uint8_t *blk = row + (long)b * (type == ARB_Q3_K ? 110 : 84);
					int q3 = type == ARB_Q3_K;
					arb_k23_pack(type, blk, 16, i, d, d + (q3 ? 32 : 64), d + (q3 ? 288 : 320));
					break;
				}
				case ARB_Q6_K: {
					const uint8_t *blk = row + (long)b * 210;
					memcpy(d + 2 * i, blk + 208, 2);
					for (int k = 0; k < 16; k++) d[32 + 16 * k + i] = blk[192 + k];
					for (int c = 0; c < 8; c++)
						for (int h = 0; h < 8; h++)
							for (int e = 0; e < 4; e++) d[288 + 512 * c + 64 * h + 4 * i + e] = arb_q6_value(blk, 32 * c + 4 * h + e);
					break;
				}
				}
			}
		}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define X16 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define AI inline __attribute__((always_inline))

#ifndef PREFETCH16
#define PREFETCH16 2048
#endif

// bcast is the activation word at p in every lane, by a load of its own:
// on Zen 5 a vpdpbusd with a {1to16} memory operand ran at half the rate
// of a separate vpbroadcastd and a register vpdpbusd (9.8 against 4.6
// cycles for eight).
#define bcast(p) _mm512_set1_epi32(*(const int32_t *)(p))

// q8in is the activations as the tiles read them (arb_quantize_q8_panels):
// quantised to 8 bits in blocks of 32, in panels of ARB_PANEL rows (the
// last panel the rest), a panel's blocks stored together so that a tile's
// rows of block b are one run of 32 bytes a row and their scales and
// offsets runs of a value a row: the tile addresses all of them
// from one pointer, with constant offsets (with the eight pointers a tile
// of eight rows took in the row-by-row layout, the compiler spilled them).
typedef struct {
	const int8_t *q;  // the 8-bit values, 32 a slot
	const float *d;   // scale of each slot
	const int32_t *c; // four a slot: -128 s, -8 s, and -32 times the sums of its halves (the K-quants': QUANTIZE_KPANELS)
	int nb;           // blocks a row
	int stream;       // the weights stream past the caches where one tile reads them (pf_once)
} q8in;

// panel is the part of q8in holding the panel of T rows that starts at
// row r (a multiple of ARB_PANEL): block b of its row k is slot b*T + k.
typedef struct {
	const int8_t *q;
	const float *d;
	const int32_t *c;
} panel;

X16 static AI panel panel_at(const q8in *y, int r) {
	long base = (long)r * y->nb;
	panel p = {y->q + base * 32, y->d + base, y->c + 4 * base};
	return p;
}

// store16 writes a tile row's sixteen outputs, or the first valid of them.
X16 static AI void store16(float *p, __m512 v, int valid) {
	if (valid >= 16) _mm512_storeu_ps(p, v);
	else _mm512_mask_storeu_ps(p, (__mmask16)((1u << valid) - 1), v);
}

// The tiles compute G groups' sixteen rows (G is 1 or 2; the second
// group's data follows the first's at gs bytes) against activation rows
// r..r+T-1, each broadcast activation word serving both groups: a core
// loads two vectors a cycle, and at one broadcast per vpdpbusd the loads,
// not the products, bounded a tile (one group by eight rows of Q8_0 ran
// at 356 GMAC/s on one core, two groups by four at 385). What a tile
// prefetches is its pfplan.

// pfplan is what a tile prefetches: its groups' next blocks, to the first
// level of cache (non-temporally with nta: pf_once), when own (the first
// tile over them in a span of activation rows: they come from memory
// then, from cache for the tiles after it); and the nxb bytes at nx, the
// next pair of groups', to the second level, a slice with each block.
// The first tile over a pair is bound by the memory's latency, the others
// by the products, so the others fetch the next pair's weights while
// they compute: at 32 tokens (eight tiles a pair) a pass had run its
// products at about three quarters of their in-cache rate.
typedef struct {
	int own;
	const uint8_t *nx;
	long nxb;
	int nta;    // own's prefetches non-temporal (pf_once)
	long ahead; // how far on own's prefetches reach, in bytes
} pfplan;

// pf_block is a tile's prefetches as it starts block b of n (blk: the
// block of its first group, gs bytes a group, gb bytes a block): its G
// groups' blocks pf.ahead bytes on to L1 when pf.own, and slice b of n
// of pf's next bytes to L2.
X16 static AI void pf_block(pfplan pf, const uint8_t *blk, int G, long gs, long gb, int b, int n) {
	// one loop a hint, the choice outside them: one loop choosing the
	// hint request by request made the bench target's 8-token passes,
	// which do not stream, 6% slower in the wide tile
	if (pf.own && pf.nta)
		for (int g = 0; g < G; g++)
			for (long at = 0; at < gb; at += 64) _mm_prefetch((const char *)blk + g * gs + pf.ahead + at, _MM_HINT_NTA);
	else if (pf.own)
		for (int g = 0; g < G; g++)
			for (long at = 0; at < gb; at += 64) _mm_prefetch((const char *)blk + g * gs + pf.ahead + at, _MM_HINT_T0);
	if (!pf.nx) return;
	for (long a = pf.nxb * b / n, e = pf.nxb * (b + 1) / n; a < e; a += 64) _mm_prefetch((const char *)pf.nx + a, _MM_HINT_T1);
}

// pf_wide is the prefetches of a tile that alone reads its groups'
// weights (pf_once), its own requests ahead bytes on: PREFETCH16, or a
// wide tile's AHEAD (X16_ROWSW).
X16 static AI pfplan pf_wide(const q8in *y, long ahead) {
	pfplan p = {1, 0, 0, y->stream, ahead};
	return p;
}

// q80: for each block, each row lane's exact sum over the 32 weights of
// (w + 128) * y less 128 * sum(y), then acc += (dw * dy) * sum, as the
// eight-row tiles do. T is up to 2 * ARB_PANEL rows (the wide tile, one
// group): TA in the panel at r, TB in the next.
X16 static AI void q80_tile(const int G, const uint8_t *gp, long gs, const q8in *y, int r, const int T, pfplan pf, float *out,
                            long rows, int o, int valid) {
	__m512 acc[2][2 * ARB_PANEL];
	const int TA = T > ARB_PANEL ? ARB_PANEL : T, TB = T - TA;
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) acc[g][k] = _mm512_setzero_ps();
	panel p = panel_at(y, r), p2 = TB ? panel_at(y, r + TA) : p;
	for (int b = 0; b < y->nb; b++, p.q += 32 * TA, p.d += TA, p.c += 4 * TA, p2.q += 32 * TB, p2.d += TB, p2.c += 4 * TB) {
		const uint8_t *blk = gp + (long)b * X16_Q80;
		pf_block(pf, blk, G, gs, X16_Q80, b, y->nb);
		__m512i s[2][2 * ARB_PANEL];
		for (int k = 0; k < T; k++) s[0][k] = s[1][k] = _mm512_set1_epi32(k < TA ? p.c[k] : p2.c[k - TA]);
		for (int h = 0; h < 8; h++) {
			__m512i w[2];
			for (int g = 0; g < G; g++) w[g] = _mm512_loadu_si512(blk + g * gs + 32 + 64 * h);
			for (int k = 0; k < T; k++) {
				__m512i yk = bcast(k < TA ? p.q + 32 * k + 4 * h : p2.q + 32 * (k - TA) + 4 * h);
				for (int g = 0; g < G; g++) s[g][k] = _mm512_dpbusd_epi32(s[g][k], w[g], yk);
			}
		}
		for (int g = 0; g < G; g++) {
			__m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + g * gs)));
			for (int k = 0; k < T; k++)
				acc[g][k] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(k < TA ? p.d[k] : p2.d[k - TA])), _mm512_cvtepi32_ps(s[g][k]), acc[g][k]);
		}
	}
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o + 16 * g, acc[g][k], valid - 16 * g);
}

// q40 is q80 for Q4_0: unsigned nibbles, 8 times the block's activation
// sum off the total; for Q5_0 (q5) each nibble gets its fifth bit (16
// added where it is set) and 16 times the sum comes off. With a min (mn:
// Q4_1, and Q5_1 with q5) nothing comes off: the row's value is d*q + m,
// and acc += dy * (d * sum + m * sy), sy the block's exact activation sum
// (-1/8 of the panel's -8 sy). For IQ4_NL (iq 1; IQ4_XS, iq 2, with
// float32 block scales) each nibble indexes the IQ4 table, offset by 128
// into unsigned bytes, and 128 times the sum comes off.
X16 static AI void q40_tile(const int q5, const int mn, const int iq, const int G, const uint8_t *gp, long gs, const q8in *y, int r,
                            const int T, pfplan pf, float *out, long rows, int o, int valid) {
	__m512 acc[2][ARB_PANEL];
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) acc[g][k] = _mm512_setzero_ps();
	panel p = panel_at(y, r);
	const __m512i m4 = _mm512_set1_epi8(0xf), sixteen = _mm512_set1_epi8(16);
	const __m512i table = iq ? _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)arb_iq4_table())), _mm512_set1_epi8((char)0x80))
	                         : _mm512_setzero_si512();
	const long GB = iq ? (iq == 2 ? X16_IQ4XS : X16_Q40) : mn ? (q5 ? X16_Q51 : X16_Q41) : (q5 ? X16_Q50 : X16_Q40);
	const long at = mn || iq == 2 ? 64 : 32; // the nibbles, after the scales (and mins)
	for (int b = 0; b < y->nb; b++, p.q += 32 * T, p.d += T, p.c += 4 * T) {
		const uint8_t *blk = gp + (long)b * GB;
		pf_block(pf, blk, G, gs, GB, b, y->nb);
		__m512i s[2][ARB_PANEL], fifth[2];
		for (int k = 0; k < T; k++)
			s[0][k] = s[1][k] = iq ? _mm512_set1_epi32(p.c[k]) : mn ? _mm512_setzero_si512() : _mm512_set1_epi32(q5 ? 2 * p.c[T + k] : p.c[T + k]);
		if (q5)
			for (int g = 0; g < G; g++) fifth[g] = _mm512_loadu_si512(blk + g * gs + at + 256);
		for (int h = 0; h < 4; h++) {
			__m512i lo[2], hi[2];
			for (int g = 0; g < G; g++) {
				__m512i v = _mm512_loadu_si512(blk + g * gs + at + 64 * h);
				lo[g] = _mm512_and_si512(v, m4);
				hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
				if (iq) lo[g] = _mm512_shuffle_epi8(table, lo[g]), hi[g] = _mm512_shuffle_epi8(table, hi[g]);
				if (q5) {
					lo[g] = _mm512_mask_add_epi8(lo[g], _mm512_test_epi8_mask(fifth[g], _mm512_set1_epi8((char)(1 << h))), lo[g], sixteen);
					hi[g] = _mm512_mask_add_epi8(hi[g], _mm512_test_epi8_mask(fifth[g], _mm512_set1_epi8((char)(16 << h))), hi[g], sixteen);
				}
			}
			for (int k = 0; k < T; k++) {
				__m512i yl = bcast(p.q + 32 * k + 4 * h), yh = bcast(p.q + 32 * k + 16 + 4 * h);
				for (int g = 0; g < G; g++) {
					s[g][k] = _mm512_dpbusd_epi32(s[g][k], lo[g], yl);
					s[g][k] = _mm512_dpbusd_epi32(s[g][k], hi[g], yh);
				}
			}
		}
		for (int g = 0; g < G; g++) {
			__m512 dw = iq == 2 ? _mm512_loadu_ps(blk + g * gs) : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + g * gs)));
			if (!mn) {
				for (int k = 0; k < T; k++)
					acc[g][k] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(p.d[k])), _mm512_cvtepi32_ps(s[g][k]), acc[g][k]);
				continue;
			}
			__m512 mw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + g * gs + 32)));
			for (int k = 0; k < T; k++) {
				__m512 v = _mm512_fmadd_ps(mw, _mm512_set1_ps((float)(-p.c[T + k] / 8)), _mm512_mul_ps(dw, _mm512_cvtepi32_ps(s[g][k])));
				acc[g][k] = _mm512_fmadd_ps(_mm512_set1_ps(p.d[k]), v, acc[g][k]);
			}
		}
	}
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o + 16 * g, acc[g][k], valid - 16 * g);
}

// The K-quants' tiles read activations scaled per 256 values
// (arb_quantize_q8k_panels), one scale dy for the super-block, as
// llama.cpp's K-quant dot products do. Their float work then comes once a
// 32-value block and once a super-block, not three times a block: with
// activations scaled per 32 values, every block had needed its own float
// multiply, multiply-add and min term, and on a core whose two multiply
// pipes run both vpdpbusd and the float multiplies those three took 27%
// of a tile's issue slots (Q4_K, one core of a Zen 5: 71% of the probe's
// rate against 83-85% now). Each block's exact integer sum goes into a
// float sum with its scale by one multiply-add (integers below 2^27, so
// the sum is that of exact integers, rounded once a step); the mins' sum
// is exact, two blocks a vpdpwssd. A lane's operations and their order do
// not depend on the tile, the batch or the rows beside it, so a row's
// result does not either (kTilesReference in q40x8_test.go is each step
// in Go, and TestSixteenRowsMatchEightRows holds the tiles to it).

// q4k, for Q4_K (Q5_K when q5): over each super-block, each lane's float
// sum fs of sc_j times its row's exact sum of q * y in block j, and its
// exact sum im of min_j times block j's activation sum; then
// acc += dy * (d * fs - dmin * im). T is up to 2 * ARB_PANEL rows (the
// wide tile, one group): TA in the panel at r, TB in the next.
X16 static AI void q4k_tile(const int q5, const int G, const uint8_t *gp, long gs, const q8in *y, int r, const int T, pfplan pf,
                            float *out, long rows, int o, int valid) {
	__m512 acc[2][2 * ARB_PANEL];
	const int TA = T > ARB_PANEL ? ARB_PANEL : T, TB = T - TA; // rows in the first panel and in the next
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) acc[g][k] = _mm512_setzero_ps();
	const long GB = q5 ? X16_Q5K : X16_Q4K;
	panel p = panel_at(y, r), p2 = TB ? panel_at(y, r + TA) : p;
	const __m512i m4 = _mm512_set1_epi8(0xf), sixteen = _mm512_set1_epi8(16);
	for (int sb = 0; sb < y->nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * GB;
		pf_block(pf, blk, G, gs, GB, sb, y->nb / 8);
		const int32_t *pairs = p.c, *pairs2 = p2.c; // word 0 of the even blocks' slots: two blocks' activation sums
		__m512 fs[2][2 * ARB_PANEL];
		for (int g = 0; g < G; g++)
			for (int k = 0; k < T; k++) fs[g][k] = _mm512_setzero_ps();
		for (int j = 0; j < 8; j++) {
			int c = j / 2, e = j % 2;
			__m512 sc[2];
			for (int g = 0; g < G; g++)
				sc[g] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + g * gs + 64 + 32 * j))));
			__m512i s[2][2 * ARB_PANEL];
			for (int g = 0; g < G; g++)
				for (int k = 0; k < T; k++) s[g][k] = _mm512_setzero_si512();
			for (int h = 0; h < 8; h++) {
				__m512i w[2];
				for (int g = 0; g < G; g++) {
					__m512i v = _mm512_loadu_si512(blk + g * gs + 320 + 512 * c + 64 * h);
					w[g] = e ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
					if (q5) { // bit j of each qh byte is its weight's fifth bit: 16 added where it is set
						__mmask64 hb = _mm512_test_epi8_mask(_mm512_loadu_si512(blk + g * gs + X16_Q4K + 64 * h), _mm512_set1_epi8((char)(1 << j)));
						w[g] = _mm512_mask_add_epi8(w[g], hb, w[g], sixteen);
					}
				}
				for (int k = 0; k < T; k++) {
					__m512i yk = bcast(k < TA ? p.q + 32 * k + 4 * h : p2.q + 32 * (k - TA) + 4 * h);
					for (int g = 0; g < G; g++) s[g][k] = _mm512_dpbusd_epi32(s[g][k], w[g], yk);
				}
			}
			for (int g = 0; g < G; g++)
				for (int k = 0; k < T; k++) fs[g][k] = _mm512_fmadd_ps(sc[g], _mm512_cvtepi32_ps(s[g][k]), fs[g][k]);
			p.q += 32 * TA, p.c += 4 * TA, p2.q += 32 * TB, p2.c += 4 * TB;
		}
		for (int g = 0; g < G; g++) {
			const uint8_t *gb = blk + g * gs;
			__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
			__m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32)));
			__m512i mp[4]; // lane i: row i's mins of blocks 2t and 2t+1 as two int16
			for (int t = 0; t < 4; t++)
				mp[t] = _mm512_or_si512(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gb + 80 + 64 * t))),
				                        _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gb + 112 + 64 * t))), 16));
			for (int k = 0; k < T; k++) {
				__m512i im = _mm512_setzero_si512();
				for (int t = 0; t < 4; t++) im = _mm512_dpwssd_epi32(im, mp[t], _mm512_set1_epi32(k < TA ? pairs[8 * t * TA + k] : pairs2[8 * t * TB + k - TA]));
				__m512 v = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(im), _mm512_mul_ps(d, fs[g][k]));
				acc[g][k] = _mm512_fmadd_ps(_mm512_set1_ps(k < TA ? p.d[k] : p2.d[k - TA]), v, acc[g][k]);
			}
		}
		p.d += 8 * TA, p2.d += 8 * TB;
	}
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o + 16 * g, acc[g][k], valid - 16 * g);
}

// q6k: each 16-weight half of a block gives each lane its row's exact sum
// of (q - 32) * y (the stored q against y, less 32 times the half's
// activation sum), which goes into the super-block's float sum fs with the
// half's scale; then acc += dy * (d * fs).
X16 static AI void q6k_tile(const int G, const uint8_t *gp, long gs, const q8in *y, int r, const int T, pfplan pf, float *out,
                            long rows, int o, int valid) {
	__m512 acc[2][2 * ARB_PANEL];
	const int TA = T > ARB_PANEL ? ARB_PANEL : T, TB = T - TA; // rows in the first panel and in the next (q4k's wide tile)
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) acc[g][k] = _mm512_setzero_ps();
	panel p = panel_at(y, r), p2 = TB ? panel_at(y, r + TA) : p;
	for (int sb = 0; sb < y->nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * X16_Q6K;
		pf_block(pf, blk, G, gs, X16_Q6K, sb, y->nb / 8);
		__m512 fs[2][2 * ARB_PANEL];
		for (int g = 0; g < G; g++)
			for (int k = 0; k < T; k++) fs[g][k] = _mm512_setzero_ps();
		for (int c = 0; c < 8; c++) {
			for (int half = 0; half < 2; half++) {
				__m512 sc[2];
				__m512i s[2][2 * ARB_PANEL];
				for (int g = 0; g < G; g++) {
					sc[g] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + g * gs + 32 + 32 * c + 16 * half))));
					for (int k = 0; k < T; k++) s[g][k] = _mm512_set1_epi32(k < TA ? p.c[(2 + half) * TA + k] : p2.c[(2 + half) * TB + k - TA]);
				}
				for (int h = 0; h < 4; h++) {
					__m512i w[2];
					for (int g = 0; g < G; g++) w[g] = _mm512_loadu_si512(blk + g * gs + 288 + 512 * c + 64 * (h + 4 * half));
					for (int k = 0; k < T; k++) {
						__m512i yk = bcast(k < TA ? p.q + 32 * k + 16 * half + 4 * h : p2.q + 32 * (k - TA) + 16 * half + 4 * h);
						for (int g = 0; g < G; g++) s[g][k] = _mm512_dpbusd_epi32(s[g][k], w[g], yk);
					}
				}
				for (int g = 0; g < G; g++)
					for (int k = 0; k < T; k++) fs[g][k] = _mm512_fmadd_ps(sc[g], _mm512_cvtepi32_ps(s[g][k]), fs[g][k]);
			}
			p.q += 32 * TA, p.c += 4 * TA, p2.q += 32 * TB, p2.c += 4 * TB;
		}
		for (int g = 0; g < G; g++) {
			__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + g * gs)));
			for (int k = 0; k < T; k++)
				acc[g][k] = _mm512_fmadd_ps(_mm512_set1_ps(k < TA ? p.d[k] : p2.d[k - TA]), _mm512_mul_ps(d, fs[g][k]), acc[g][k]);
		}
		p.d += 8 * TA, p2.d += 8 * TB;
	}
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o + 16 * g, acc[g][k], valid - 16 * g);
}

// q3k: each 16-weight half of a block gives each lane its row's exact
// sum of (u - 4) * y (u the weight's three bits, unsigned; 4 times the
// half's activation sum off), into the super-block's float sum with the
// half's scale; then acc += dy * (d * fs), as q6k. q2k (Q2_K): the exact
// sum of u * y into fs with the half's scale, each half's min times its
// activation sum into an exact im, then acc += dy * (d * fs - dmin * im),
// as q4k.
X16 static AI void k23_tile(const int q3, const int G, const uint8_t *gp, long gs, const q8in *y, int r, const int T, pfplan pf,
                            float *out, long rows, int o, int valid) {
	__m512 acc[2][ARB_PANEL];
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) acc[g][k] = _mm512_setzero_ps();
	const long GB = q3 ? X16_Q3K : X16_Q2K, SC = q3 ? 32 : 64, PL = q3 ? 288 : 320, PER = q3 ? 192 : 128;
	panel p = panel_at(y, r);
	const __m512i m2 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(1), m4 = _mm512_set1_epi32(0xf);
	for (int sb = 0; sb < y->nb / 8; sb++) {
		const uint8_t *blk = gp + (long)sb * GB;
		pf_block(pf, blk, G, gs, GB, sb, y->nb / 8);
		const int32_t *c0 = p.c; // word 1 of each block's slots: its halves' activation sums
		__m512 fs[2][ARB_PANEL];
		for (int g = 0; g < G; g++)
			for (int k = 0; k < T; k++) fs[g][k] = _mm512_setzero_ps();
		for (int c = 0; c < 8; c++) {
			__m512i hb[2];
			if (q3)
				for (int g = 0; g < G; g++) hb[g] = _mm512_loadu_si512(blk + g * gs + PL + PER * c + 128);
			for (int half = 0; half < 2; half++) {
				__m512 sc[2];
				__m512i s[2][ARB_PANEL], pl[2];
				for (int g = 0; g < G; g++) {
					__m512i raw = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + g * gs + SC + 16 * (2 * c + half))));
					sc[g] = q3 ? _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + g * gs + SC + 16 * (2 * c + half)))))
					           : _mm512_cvtepi32_ps(_mm512_and_si512(raw, m4));
					pl[g] = _mm512_loadu_si512(blk + g * gs + PL + PER * c + 64 * half);
					for (int k = 0; k < T; k++) s[g][k] = q3 ? _mm512_set1_epi32(p.c[(2 + half) * T + k] / 8) : _mm512_setzero_si512();
				}
				for (int s4 = 0; s4 < 4; s4++) {
					__m512i w[2];
					for (int g = 0; g < G; g++) {
						w[g] = _mm512_and_si512(_mm512_srli_epi32(pl[g], 2 * s4), m2);
						if (q3) w[g] = _mm512_or_si512(w[g], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb[g], 4 * half + s4), m1), 2));
					}
					for (int k = 0; k < T; k++) {
						__m512i yk = bcast(p.q + 32 * k + 16 * half + 4 * s4);
						for (int g = 0; g < G; g++) s[g][k] = _mm512_dpbusd_epi32(s[g][k], w[g], yk);
					}
				}
				for (int g = 0; g < G; g++)
					for (int k = 0; k < T; k++) fs[g][k] = _mm512_fmadd_ps(sc[g], _mm512_cvtepi32_ps(s[g][k]), fs[g][k]);
			}
			p.q += 32 * T, p.c += 4 * T;
		}
		for (int g = 0; g < G; g++) {
			const uint8_t *gb = blk + g * gs;
			__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
			if (q3) {
				for (int k = 0; k < T; k++) acc[g][k] = _mm512_fmadd_ps(_mm512_set1_ps(p.d[k]), _mm512_mul_ps(d, fs[g][k]), acc[g][k]);
				continue;
			}
			__m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32)));
			__m512i mp[8]; // lane i: row i's mins of block c's two halves as two int16
			for (int c = 0; c < 8; c++)
				mp[c] = _mm512_or_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gb + SC + 32 * c))), 4),
				                        _mm512_slli_epi32(_mm512_srli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(gb + SC + 32 * c + 16))), 4), 16));
			for (int k = 0; k < T; k++) {
				__m512i im = _mm512_setzero_si512();
				for (int c = 0; c < 8; c++) im = _mm512_dpwssd_epi32(im, mp[c], _mm512_set1_epi32(c0[4 * c * T + T + k]));
				__m512 v = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(im), _mm512_mul_ps(d, fs[g][k]));
				acc[g][k] = _mm512_fmadd_ps(_mm512_set1_ps(p.d[k]), v, acc[g][k]);
			}
		}
		p.d += 8 * T;
	}
	for (int g = 0; g < G; g++)
		for (int k = 0; k < T; k++) store16(out + (long)(r + k) * rows + o + 16 * g, acc[g][k], valid - 16 * g);
}

// X16_ROWS defines NAME: groups glo..ghi-1 of a repacked matrix (each
// taking nb / PER blocks of GB bytes: PER is 8 for the super-block types)
// against the n activation rows, two groups by TMAX rows a tile (then the
// rest in one tile), an odd last group alone; one group a tile below
// X16_PAIRS rows. The activation rows go in
// spans of about X16_SPAN bytes, each over every group before the next: a
// span stays in the core's L2 while the groups' weights stream past it
// (128 rows of 8192 activations, 1 MiB, would not, and their tiles ran
// 10% slower).
#ifndef X16_SPAN
#define X16_SPAN (256 << 10)
#endif
// X16_PAIRS is the fewest activation rows the tiles take two groups for:
// below it a product streams its weights from memory, and the two groups'
// two streams read slower than one (a decode step's Q4_K product, one
// thread: 26 GB/s with pairs, 38 GB/s group by group, the read loop 42).
#ifndef X16_PAIRS
#define X16_PAIRS 4
#endif
// X16_WIDE: with a WIDE tile (X16_ROWSW, WMAX rows at most), four rows
// up to WMAX go in one tile a group (from five rows, a panel and the
// next) instead of a tile of four over a pair and one of the rest: each
// group's weights are read once, in one stream, for every row. Four to
// eight rows are where a tree is verified, and there a pair's first tile
// waited on memory while the rest of the pair ran from cache. Cold
// products of 8192 x 2048 (two threads, interleaved builds): Q4_K ran
// 42-60% faster at 6 rows, 7-38% at 8 and 22-30% at 4 (there the pair's
// two streams read slower than one, as in a decode step); Q6_K 14-35%
// faster at 6 rows and -2% to +16% at 4, at 8 not clearly (-21% to +22%
// over four rounds), but whole 8-token passes of llama-3.2-1b Q4_K_M (a
// third of whose multiply-adds are Q6_K) took 0.969 and 0.985 of the
// time with it (two runs of twelve rounds interleaved in one process; the
// one-token passes between them 1.012 and 1.015), so it runs to 8. Nor
// did Q4_0's, Q5_0's, Q4_1's or IQ4_XS's gain (their pairs already ran
// 190-460 GMAC/s at 4 to 8 rows, and Q5_0 at 4 rows ran 190-194 one group
// a tile against 212-232 in pairs). A wide tile requests its weights
// AHEAD bytes on.
#ifndef X16_WIDE
#define X16_WIDE 1
#endif
// PREFETCH_Q80_WIDE: Q8_0's wide tile spends 64 vpdpbusd on a group's
// 544-byte block, about half a Q4_K super-block's work a byte, so
// PREFETCH16's 2 KiB was some 40 ns of work ahead, short of the memory's
// latency. Interleaved in one process (ten rounds, medians of the
// ratios), llama-3.2-1b Q8_0's 8-token passes took 0.828 / 0.883 of the
// time at 8 KiB, 0.858 at 16 and 32 KiB, and the bench target's (in the
// caches) 0.958. Q4_K and Q4_K_M at 4 to 8 KiB read 0.97-1.07: no gain,
// so they keep PREFETCH16. With 2 KiB, Q8_0's wide tile had paid only at
// 8 rows (llama-3.2-1b's 8-token passes 0.86-0.93 of the time with it;
// at 4 to 7 rows 1.03-1.19, one group a tile loading a broadcast for
// every vpdpbusd where a pair shares it). With 8 KiB it pays from 4: the
// same harness read llama-3.2-1b Q8_0's passes of 4 / 5 / 6 / 7 tokens at
// 0.897-0.972 / 0.777-0.809 / 0.740-0.805 / 0.660-0.712 of the time
// against the pairs (two runs), the bench target's at 0.889-0.900 /
// 0.823-0.825 / 0.817-0.836 / 0.787-0.802, and stories15m's (26 MB, in
// the caches) at 1.016-1.097 / 0.987-0.995 / 0.992 / 0.932.
// W2MAX: from WMAX + 1 rows up to W2MAX (at most WMAX + 3), a group's
// wide tile takes the first WMAX rows and a one-group tile the rest,
// from the first level of cache. At 9 to 11 rows the pairs' tiles of four
// are two or fewer a pair, too few for the later ones to bring the next
// pair to L2 in time, so there Q8_0's pairs waited on memory: in one
// process llama-3.2-1b Q8_0's passes of 9 / 10 / 11 tokens took 0.777 /
// 0.778 / 0.774 of the time this way (0.757-0.805 in two more runs), and
// the bench target's 0.92-1.03. From 12 tokens the 1B shape's read
// 0.88-0.99 but the bench target's 1.00-1.10, and Q4_K's passes of 9 to
// 16 tokens 1.00-1.12, so only Q8_0 does it, to 11.
#ifndef PREFETCH_Q80_WIDE
#define PREFETCH_Q80_WIDE 8192
#endif
#define X16_ROWS(NAME, TILE, GB, PER, TMAX) X16_ROWSW(NAME, TILE, x16_none, 0, 0, PREFETCH16, GB, PER, TMAX)
#define x16_none(...) ((void)0)
#define X16_ROWSW(NAME, TILE, WIDE, WMAX, W2MAX, AHEAD, GB, PER, TMAX)                                    \
	X16 static void NAME(const uint8_t *packed, int glo, int ghi, const q8in *y, int n, float *out, int rows) { \
		int span = X16_SPAN / (32 * y->nb) / 8 * 8;                                                      \
		if (span < 8) span = 8;                                                                          \
		long gs = (long)(y->nb / (PER)) * (GB);                                                          \
		if (X16_WIDE && n >= ARB_PANEL && n <= (WMAX)) {                                                    \
			for (int g = glo; g < ghi; g++) {                                                            \
				const uint8_t *gp = packed + (long)g * gs;                                               \
				switch (n) {                                                                             \
				case 4: WIDE(1, gp, gs, y, 0, 4, pf_wide(y, AHEAD), out, rows, 16 * g, rows - 16 * g); break; \
				case 5: WIDE(1, gp, gs, y, 0, 5, pf_wide(y, AHEAD), out, rows, 16 * g, rows - 16 * g); break; \
				case 6: WIDE(1, gp, gs, y, 0, 6, pf_wide(y, AHEAD), out, rows, 16 * g, rows - 16 * g); break; \
				case 7: WIDE(1, gp, gs, y, 0, 7, pf_wide(y, AHEAD), out, rows, 16 * g, rows - 16 * g); break; \
				default: WIDE(1, gp, gs, y, 0, 8, pf_wide(y, AHEAD), out, rows, 16 * g, rows - 16 * g); break; \
				}                                                                                        \
			}                                                                                            \
			return;                                                                                      \
		}                                                                                                \
		if (X16_WIDE && n > (WMAX) && n <= (W2MAX)) { /* W2MAX <= WMAX + 3, WMAX whole panels */       \
			for (int g = glo; g < ghi; g++) {                                                            \
				const uint8_t *gp = packed + (long)g * gs;                                               \
				int o = 16 * g, valid = rows - o;                                                        \
				WIDE(1, gp, gs, y, 0, (WMAX), pf_wide(y, AHEAD), out, rows, o, valid);                   \
				switch (n - (WMAX)) {                                                                    \
				case 1: TILE(1, gp, gs, y, (WMAX), 1, pf_plan(1, 0, 0, 0), out, rows, o, valid); break;  \
				case 2: TILE(1, gp, gs, y, (WMAX), 2, pf_plan(1, 0, 0, 0), out, rows, o, valid); break;  \
				default: TILE(1, gp, gs, y, (WMAX), 3, pf_plan(1, 0, 0, 0), out, rows, o, valid); break; \
				}                                                                                        \
			}                                                                                            \
			return;                                                                                      \
		}                                                                                                \
		for (int r0 = 0; r0 < n; r0 += span) {                                                           \
			int r1 = r0 + span < n ? r0 + span : n;                                                      \
			for (int g = glo; g < ghi; g += 2) {                                                         \
				const uint8_t *gp = packed + (long)g * gs;                                               \
				int o = 16 * g, valid = rows - o, r = r0;                                                \
				if (g + 1 < ghi && n >= X16_PAIRS) {                                                     \
					long next = g + 2 < ghi ? ((g + 4 < ghi ? g + 4 : ghi) - (g + 2)) * gs : 0;          \
					for (; r + TMAX <= r1; r += TMAX)                                                    \
						TILE(2, gp, gs, y, r, TMAX, pf_plan((r - r0) / TMAX, (r1 - r0) / TMAX, gp + 2 * gs, next), out, rows, o, valid); \
					X16_REST(TILE, 2)                                                                    \
				} else {                                                                                 \
					for (int g1 = g; g1 < g + 2 && g1 < ghi; g1++, gp += gs, o += 16, valid -= 16) {   \
						for (r = r0; r + TMAX <= r1; r += TMAX) TILE(1, gp, gs, y, r, TMAX, pf_plan((r - r0) / TMAX, 0, 0, 0), out, rows, o, valid); \
						X16_REST(TILE, 1)                                                                \
					}                                                                                    \
				}                                                                                        \
			}                                                                                            \
		}                                                                                                \
	}
#define X16_REST(TILE, G)                                                                                     \
	switch (r1 - r) {                                                                                        \
	case 3: TILE(G, gp, gs, y, r, 3, r == r0 ? pf_once(y) : pf_plan(1, 0, 0, 0), out, rows, o, valid); break;                 \
	case 2: TILE(G, gp, gs, y, r, 2, r == r0 ? pf_once(y) : pf_plan(1, 0, 0, 0), out, rows, o, valid); break;                 \
	case 1: TILE(G, gp, gs, y, r, 1, r == r0 ? pf_once(y) : pf_plan(1, 0, 0, 0), out, rows, o, valid); break;                 \
	}

// pf_once is the prefetches of a tile that alone reads its groups'
// weights in this product: its own blocks, non-temporally where the
// weights stream (q8in's stream: a model far larger than the caches).
// A non-temporal request brings a line to the first level and keeps it
// out of the others on its way out, so a decode step's weights, read
// once a token, no longer push out of the caches what is read again
// (the activations, the KV cache, the next product's first blocks).
// Interleaved in one process against the plain requests (ten rounds,
// medians of the ratios), llama-3.2-1b's one-token passes took 0.919
// (Q8_0), 0.920 (Q4_K) and 0.913 (Q4_K_M) of the time, its 8-token ones
// 0.944, 1.001 and 0.949. A model that fits in the caches loses by it:
// stories15m's Q8_0 shape (26 MB) read 1.09 at one token, so only a
// backend holding more than streamBytes of repacked weights streams
// them (kernels/cpu/cpu.go).
X16 static AI pfplan pf_once(const q8in *y) {
	pfplan p = {1, 0, 0, y->stream, PREFETCH16};
	return p;
}

// pf_plan is the prefetches of tile t of the tiles full tiles over a pair
// of groups in a span: its own blocks for the first; for each later one, a
// share of the next pair's next bytes at nx.
X16 static AI pfplan pf_plan(int t, int tiles, const uint8_t *nx, long next) {
	pfplan p = {t == 0, 0, 0, 0, PREFETCH16};
	if (t > 0 && tiles > 1 && next > 0) {
		long chunk = (next + tiles - 2) / (tiles - 1), a = (t - 1) * chunk;
		if (a < next) p.nx = nx + a, p.nxb = next - a < chunk ? next - a : chunk;
	}
	return p;
}

#define q4k_tile0(...) q4k_tile(0, __VA_ARGS__)
#define q4k_tile1(...) q4k_tile(1, __VA_ARGS__)
#ifndef TQ
#define TQ 4
#endif
#ifndef TQ6
#define TQ6 4
#endif
X16_ROWSW(mm_q80x16, q80_tile, q80_tile, 2 * ARB_PANEL, 2 * ARB_PANEL + 3, PREFETCH_Q80_WIDE, X16_Q80, 1, TQ)
#define q40_tile00(...) q40_tile(0, 0, 0, __VA_ARGS__)
#define q40_tile10(...) q40_tile(1, 0, 0, __VA_ARGS__)
#define q40_tile01(...) q40_tile(0, 1, 0, __VA_ARGS__)
#define q40_tile11(...) q40_tile(1, 1, 0, __VA_ARGS__)
#define iq4_tile1(...) q40_tile(0, 0, 1, __VA_ARGS__)
#define iq4_tile2(...) q40_tile(0, 0, 2, __VA_ARGS__)
X16_ROWS(mm_q40x16, q40_tile00, X16_Q40, 1, TQ)
X16_ROWS(mm_q50x16, q40_tile10, X16_Q50, 1, TQ)
X16_ROWS(mm_q41x16, q40_tile01, X16_Q41, 1, TQ)
X16_ROWS(mm_q51x16, q40_tile11, X16_Q51, 1, TQ)
X16_ROWS(mm_iq4nlx16, iq4_tile1, X16_Q40, 1, TQ)
X16_ROWS(mm_iq4xsx16, iq4_tile2, X16_IQ4XS, 1, TQ)
#ifndef TQK
#define TQK 4
#endif
X16_ROWSW(mm_q4kx16, q4k_tile0, q4k_tile0, 2 * ARB_PANEL, 0, PREFETCH16, X16_Q4K, 8, TQK)
X16_ROWSW(mm_q5kx16, q4k_tile1, q4k_tile1, 2 * ARB_PANEL, 0, PREFETCH16, X16_Q5K, 8, TQK)
X16_ROWSW(mm_q6kx16, q6k_tile, q6k_tile, 2 * ARB_PANEL, 0, PREFETCH16, X16_Q6K, 8, TQ6)
#define k23_tile3(...) k23_tile(1, __VA_ARGS__)
#define k23_tile2(...) k23_tile(0, __VA_ARGS__)
X16_ROWS(mm_q3kx16, k23_tile3, X16_Q3K, 8, TQK)
X16_ROWS(mm_q2kx16, k23_tile2, X16_Q2K, 8, TQK)
#endif

// arb_mm_x16 multiplies groups glo..ghi-1 (of sixteen rows) of a matrix
// of type repacked by arb_x16_pack by n activation rows quantised into
// panels by arb_quantize_q8_panels, or for the K-quants
// arb_quantize_q8k_panels (yq, yd, yc; nb blocks of 32 a row), into
// out[r*rows + o]. With stream, a tile that alone reads its weights (a
// decode step's, at most three rows, or the wide tile's) requests them
// non-temporally (pf_once). It returns -1 where the CPU lacks AVX-512
// VNNI or type has no sixteen-row tiles.
int arb_mm_x16(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc,
               int nb, int n, float *out, int rows, int stream) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (arb_simd_level() < 2) return -1;
	q8in y = {yq, yd, yc, nb, stream};
	switch (type) {
	case ARB_Q8_0: mm_q80x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q4_0: mm_q40x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q5_0: mm_q50x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q4_1: mm_q41x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q5_1: mm_q51x16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_IQ4_NL: mm_iq4nlx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_IQ4_XS: mm_iq4xsx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q4_K: mm_q4kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q5_K: mm_q5kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q6_K: mm_q6kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q3_K: mm_q3kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	case ARB_Q2_K: mm_q2kx16(packed, glo, ghi, &y, n, out, rows); return 0;
	}
#endif
	return -1;
}
