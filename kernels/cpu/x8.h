// Shared by the eight-row AVX2 kernels (q40x8.c, k8.c): the exact
// integer sums of a row lane's weights against broadcast activation bytes,
// and the loop that runs a kernel's tiles over groups of eight rows.
// Included inside each file's x86-64 section, after <immintrin.h>.
#ifndef ARB_X8_H
#define ARB_X8_H

#ifndef PREFETCH
#define PREFETCH 2048
#endif

// X8_PREFETCH requests the line at p ahead: non-temporally with nta (a
// tile that alone reads its weights, where they stream: x16.c's pf_once),
// else to the first level.
#define X8_PREFETCH(p, nta)                                      \
	do {                                                         \
		if (nta) _mm_prefetch((const char *)(p), _MM_HINT_NTA);  \
		else _mm_prefetch((const char *)(p), _MM_HINT_T0);       \
	} while (0)

// X8_VNNI is 1 where the including file is compiled a second time for
// AVX-VNNI (x8vnni_q40.c, x8vnni_k.c): the CPUs with AVX2 and 256-bit
// vpdpbusd but no AVX-512 (Intel's since Alder Lake) add four products
// into a lane's 32-bit sum in one instruction, where AVX2 takes maddubs,
// a 16-bit add and (every few) a madd. The sums are exact either way, so
// both compilations give the same bits.
#ifndef X8_VNNI
#define X8_VNNI 0
#endif

// The instruction set the tiles are compiled for: AVX2 with FMA and F16C
// (arb_simd_level 1; from level 2 on, x16.c's AVX-512 VNNI tiles run
// instead, held to these bit for bit), and AVX-VNNI in the second
// compilation.
#if X8_VNNI
#define X8_AVX2 __attribute__((target("avx2,fma,f16c,avxvnni")))
#else
#define X8_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

// X8_DP(s, w, y) is s plus, in each lane, its four unsigned bytes of w
// times the four signed bytes of y (the AVX-VNNI compilation alone).
#define X8_DP(s, w, y) _mm256_dpbusd_avx_epi32((s), (w), (y))

// X8_DOTS(s, a, y, ones) is s plus, in each lane, its four unsigned bytes
// of a times the four signed bytes of y: one vpdpbusd with AVX-VNNI, else
// maddubs (pair sums of at most 2*128*127: no room for a second in 16
// bits) widened at once by madd with ones (sixteen-bit ones).
#if X8_VNNI
#define X8_DOTS(s, a, y, ones) ((void)(ones), X8_DP((s), (a), (y)))
#else
#define X8_DOTS(s, a, y, ones) _mm256_add_epi32((s), _mm256_madd_epi16(_mm256_maddubs_epi16((a), (y)), (ones)))
#endif

// X8_DOTS_T is X8_DOTS in a tile of T activation rows: with AVX-VNNI and
// one or two rows, each vpdpbusd from zero and added after, so none waits
// on the one before (three or four rows' chains keep the unit busy by
// themselves).
#if X8_VNNI
#define X8_DOTS_T(T, s, a, y, ones) ((T) <= 2 ? _mm256_add_epi32((s), X8_DOTS(_mm256_setzero_si256(), (a), (y), (ones))) : X8_DOTS((s), (a), (y), (ones)))
#else
#define X8_DOTS_T(T, s, a, y, ones) X8_DOTS((s), (a), (y), (ones))
#endif

// ISUM8_AVX2 is each lane's exact sum over h = 0..7 of its four unsigned
// weights w[h] (at most 15) times the four activation bytes y4[h]
// broadcast to every lane: maddubs pairs (2*15*127 at most; eight of them
// stay below 32767) added in 16 bits, then one madd. The AVX-VNNI
// compilation keeps it: vpdpbusd, from zero or in chains, ran the Q4_0
// tile no faster on the Zen 5 measured.
#define ISUM8_AVX2(w, y4)                                                                                   \
	({                                                                                                   \
		__m256i s16 = _mm256_maddubs_epi16((w)[0], _mm256_set1_epi32((y4)[0]));                          \
		for (int h = 1; h < 8; h++) s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16((w)[h], _mm256_set1_epi32((y4)[h]))); \
		_mm256_madd_epi16(s16, _mm256_set1_epi16(1));                                                    \
	})

// X8_ROWS defines NAME, which runs TILE##4 (then TILE##3, 2 or 1 for the
// rest) over the n activation rows for each group glo..ghi-1 of a repacked
// matrix whose groups take nb * GB bytes (nb blocks or super-blocks a row,
// GB bytes for eight rows' each); every tile takes the same arguments
// (ys unused by the types without an offset or min), and nta; and
// NAME##_nta, the same with nta, which x8_run runs where it streams and
// one tile reads a group (four rows or fewer). Two functions, nta a
// constant in each, so the plain one is the code it was: with nta chosen
// request by request inside one, the bench target's one-token passes on
// AVX2 had run about 10% slower, and with both loops in one function
// stories110m's Q4_K 4- and 8-token passes 18%.
#define X8_ROWS(NAME, ATTR, TILE, GB) X8_ROWS_AS(NAME, ATTR, TILE, GB, 0) X8_ROWS_AS(NAME##_nta, ATTR, TILE, GB, 1)
#define X8_ROWS_AS(NAME, ATTR, TILE, GB, NTA)                                                               \
	ATTR static void NAME(const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq, \
	                      const int32_t *ys, int n, float *out, int rows) {                                 \
		const int nta = NTA;                                                                             \
		for (int g = glo; g < ghi; g++) {                                                                \
			const uint8_t *gp = packed + (long)g * nb * (GB);                                            \
			int r = 0;                                                                                   \
			for (; r + 4 <= n; r += 4) TILE##4(gp, nb, yd, yq, ys, r, out, rows, 8 * g, nta);           \
			switch (n - r) {                                                                             \
			case 3: TILE##3(gp, nb, yd, yq, ys, r, out, rows, 8 * g, nta); break;                       \
			case 2: TILE##2(gp, nb, yd, yq, ys, r, out, rows, 8 * g, nta); break;                       \
			case 1: TILE##1(gp, nb, yd, yq, ys, r, out, rows, 8 * g, nta); break;                       \
			}                                                                                            \
		}                                                                                                \
	}

// x8_rows is a function X8_ROWS defines; x8_run runs plain, or with
// stream and at most four rows streamed (NAME##_nta), and returns 0, or
// -1 where the CPU lacks AVX2, FMA or F16C.
typedef void x8_rows(const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
                     const int32_t *ys, int n, float *out, int rows);
static inline int x8_run(x8_rows *plain, x8_rows *streamed, const uint8_t *packed, int glo, int ghi, int nb, const float *yd,
                         const int8_t *yq, const int32_t *ys, int n, float *out, int rows, int stream) {
	if (arb_simd_level() < 1) return -1;
	(stream && n <= 4 ? streamed : plain)(packed, glo, ghi, nb, yd, yq, ys, n, out, rows);
	return 0;
}

#endif
