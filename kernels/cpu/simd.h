// Matrix kernels over ggml weight blocks. See simd.c.
#include <stdint.h>

enum { ARB_F32 = 0, ARB_F16 = 1, ARB_Q4_0 = 2, ARB_Q4_1 = 3, ARB_Q5_0 = 6, ARB_Q5_1 = 7,
       ARB_Q8_0 = 8, ARB_Q2_K = 10, ARB_Q3_K = 11, ARB_Q4_K = 12, ARB_Q5_K = 13, ARB_Q6_K = 14,
       ARB_IQ4_NL = 20, ARB_IQ4_XS = 23, ARB_BF16 = 30 };

// ARB_F32_ROWS is how many weight rows arb_mm_f32 widens at a time (F16,
// BF16): its scratch holds ARB_F32_ROWS rows of cols floats.
enum { ARB_F32_ROWS = 4 };

// ARB_PANEL is how many activation rows a panel of arb_quantize_q8_panels
// holds: the rows a sixteen-row tile multiplies at once (x16.c).
enum { ARB_PANEL = 4 };

// ARB_HD8_SCALE is what the kernels for heads of width 8 (attn.c's
// attention_hd8, attn16.c's lanes kernel) multiply a score by: the
// attention's scale times log2(e), in float, so that their softmax takes
// powers of two. Both compute it this one way, so a row gets the same
// bits from either.
#define ARB_HD8_SCALE(scale) ((float)(scale) * 1.44269504088896341f)

int arb_simd_level(void);
float arb_f16_to_f32(uint16_t h);
const int8_t *arb_iq4_table(void);
void arb_quantize_q8(const float *x, int count, float *d, int8_t *q, int32_t *s);
void arb_quantize_q8_panels(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c);
void arb_quantize_q8k_panels(const float *x, int n, int cols, int lo, int hi, int8_t *q, float *d, int32_t *c);
void arb_mm_q8(int type, const uint8_t *w, long row_bytes, int lo, int hi, int nb,
               const float *yd, const int8_t *yq, const int32_t *ys, int n, float *out, int rows);
void arb_mm_f32(int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                const float *x, int n, float *out, int rows, float *scratch);
void arb_mm_f32_at(int lvl, int type, const uint8_t *w, long row_bytes, int lo, int hi, int cols,
                   const float *x, int n, float *out, int rows, float *scratch);
void arb_silu_mul(float *g, const float *u, long count);
void arb_rmsnorm(float *out, const float *x, const float *w, int rows, int dim, float eps);
void arb_add(float *x, const float *y, long n);
int arb_f32_to_f16(uint16_t *dst, const float *src, long n);
void arb_rope(float *x, int rows, int heads, int hd, int rope_dim, int neox, const float *cos, const float *sin);
uint64_t arb_read_sum(const uint64_t *p, long n);
int64_t arb_peak_i8(long iters);
int arb_peak_i8_macs(void);
int64_t arb_peak_f32(long iters);
int arb_peak_f32_macs(void);
