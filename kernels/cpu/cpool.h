// The workers' side of the pool: jobs whose chunks run in C. See cpool.c.
#include <stdint.h>
#include "attn.h"

typedef struct arb_pool arb_pool;

// ARB_POOL_MAX is the most threads a pool has.
enum { ARB_POOL_MAX = 256 };

// How a product's rows are multiplied (matmulJob.doC's cases), and which
// of the quantised activations it reads.
enum { ARB_MM_X16 = 1, ARB_MM_X8, ARB_MM_Q8, ARB_MM_F32 };
enum { ARB_ACT_ROWS = 0, ARB_ACT_PANELS, ARB_ACT_KPANELS, ARB_ACT_F32 };

typedef struct {
	int how, type, rows, cols, n, act;
	int stream; // arb_mm_x16's (arb_mm_x8's, arb_mm_k8's) stream
	long row_bytes;
} arb_mm_one;

// arb_mm_args is up to four products of one input: units start[i] ..
// start[i+1]-1 are product i's (as multiJob).
typedef struct {
	int count;
	long start[5];
	arb_mm_one m[4];
} arb_mm_args;

// The element-wise operations, numbered as rows.go's rowOp.
enum { ARB_ROW_NORM = 0, ARB_ROW_ADD, ARB_ROW_SILU, ARB_ROW_ROPE, ARB_ROW_QUANT, ARB_ROW_STORE };

typedef struct {
	int op, dim;
	float eps;
	int heads, hd, rope_dim, neox; // ARB_ROW_ROPE
	int n, cols, layout;           // ARB_ROW_QUANT: rows in all, their width, the layouts (bits as cpu.go's layout)
	int width, slot, f16;          // ARB_ROW_STORE
} arb_rows_args;


arb_pool *arb_pool_new(int n);
void arb_pool_close(arb_pool *p);
void arb_pool_free(arb_pool *p);
int arb_pool_work(arb_pool *p, int w);
void arb_pool_post_go(arb_pool *p);
void arb_pool_done(arb_pool *p);
void arb_pool_wait(arb_pool *p);
void arb_pool_mm(arb_pool *p, const arb_mm_args *a, float *o0, float *o1, float *o2, float *o3, const uint8_t *w0,
                 const uint8_t *w1, const uint8_t *w2, const uint8_t *w3, const int8_t *rq, const float *rd, const int32_t *rs,
                 const int8_t *pq, const float *pd, const int32_t *pc, const int8_t *kq, const float *kd, const int32_t *kc,
                 const float *x, long total, long chunk);
void arb_pool_rows(arb_pool *p, const arb_rows_args *a, float *out, float *x, const float *w, const float *y, const float *cos,
                   const float *sin, void *dk, void *dv, int8_t *rq, float *rd, int32_t *rs, int8_t *pq, float *pd, int32_t *pc,
                   int8_t *kq, float *kd, int32_t *kc, long total, long chunk);
void arb_pool_attn(arb_pool *p, const arb_attn_args *a, float *out, const float *q, const void *kc, const void *vc,
                   const uint8_t *mask, const int32_t *bnd, const int32_t *cnt, float *part, long total, long chunk);

// arb_attn_seq is one sequence's part of a job of several sequences'
// attention (arb_pool_attn_seqs): its plan (a.phase saying which phase
// the job runs), its operands as arb_attention takes them, and its units,
// first .. first+units-1 of the job's.
typedef struct {
	arb_attn_args a;
	float *out;
	const float *q;
	const void *kc, *vc;
	const uint8_t *mask;
	const int32_t *bnd, *cnt;
	float *part;
	long first, units;
} arb_attn_seq;

void arb_pool_attn_seqs(arb_pool *p, const arb_attn_seq *s, int count, long scratch, long total, long chunk);
