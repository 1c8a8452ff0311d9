// Inference attention on the CPU (attn.c, and attn16.c's kernels with the
// query vectors in lanes). See attn.c.
#ifndef ARB_ATTN_H
#define ARB_ATTN_H
#include <stdint.h>

// arb_attn_args is one call of arb_attention: the shape (set by the
// caller), then the plan arb_attention_plan makes of it.
typedef struct {
	int f16, past, n, heads, kv_heads, hd;
	float scale;
	int seqs;   // the sequences planned into one job with this one (0 or 1: alone)
	int mode;   // the kernel (attn.c's attention_mode)
	int chunk;  // visible slots a chunk
	int nch;    // the most chunks a row has
	int stride; // ints a row of the boundaries
	int rows;   // rows a task takes
	int kb;     // kv heads a task takes
	int split;  // 1: a task a chunk, its records folded by phase 1
	int span;   // the most slots a task's chunk reaches over
	int ahead;  // a cache long enough to request its rows ahead
	int phase;  // 0: the tasks, 1: folding the split records
	long tasks; // phase 0's tasks
	long scratch; // floats of scratch a task (either phase)
} arb_attn_args;

int arb_attention_chunk(int hd);
long arb_attention_plan(arb_attn_args *a, const uint8_t *mask, int threads, int32_t *bnd, int32_t *cnt);
long arb_attention_records(const arb_attn_args *a);
void arb_attention(const arb_attn_args *a, float *out, const float *q, const void *kc, const void *vc, const uint8_t *mask,
                   const int32_t *bnd, const int32_t *cnt, float *part, long lo, long hi, float *scratch);

// arb_attn_rec is the floats of one record of heads of hd dims: the
// weighted value sums, then the largest score (a float) and the sum of
// the weights (a double, on an even float).
static inline int arb_attn_rec(int hd) { return ((hd + 1) & ~1) + 4; }

// ARB_LANES_MIN is the fewest query vectors of a kv head (rows times the
// heads sharing it) that attn16.c's kernel takes for heads of width 8.
enum { ARB_LANES_MIN = 8 };
// ARB_LANES16_MIN is the fewest query vectors of a block of
// attention_avx512 (heads of a multiple of 16 dims) that attn16.c's
// arb_lanes16_weights scores, sixteen lanes to a vector: with 8 (half the
// lanes idle; 8 rows of 32 heads of 128 over 32 kv heads) it took
// 1.2-1.35x the per-row scores' time, with 14 (2 rows of 14 heads over 2)
// 0.7x.
enum { ARB_LANES16_MIN = 12 };
int arb_lanes_block(int n, int heads, int kv_heads, int hd);
long arb_lanes_scratch(int span, int block);
void arb_hd8_lanes(float *rec, const float *q, const void *kc, const void *vc, int f16, int total, const uint8_t *mask, int heads,
                   int kv_heads, float scale, int kh, int u0, int u1, int r0, const int32_t *lo, const int32_t *hi, int L,
                   float *scratch);
int arb_lanes16_weights(float *S, float *mx, double *sm, float *qt, uint32_t *vis, const float *q, const void *kc, int f16,
                        const uint8_t *mask, int total, int group, int hd, int kvd, int qd, int kh, int i0, int i1,
                        const int32_t *lo, const int32_t *hi, int jn, float scale);
#endif
