// A packed float32 matrix product for training. See gemm.c.
#include <stddef.h>
// bf asks for bfloat16 inputs (float32 sums) where arb_gemm_bf16 says the
// CPU has them. Returns 0, or -1 when its packing buffers cannot be
// allocated.
int arb_gemm(const float *A, const float *B, float *C, int m, int n, int k, int ta, int tb, int accumulate, int bf);
int arb_gemm_bf16(void);
long arb_gemm_packed_size(int n, int k, int bf);
int arb_gemm_pack_b(void *dst, const float *B, int n, int k, int tb, int bf);
int arb_gemm_pb(const float *A, const void *pre, float *C, int m, int n, int k, int ta, int accumulate, int bf);
// arb_train_scratch is the calling thread's scratch buffer for the
// trainer's kernels, at least need bytes, or NULL when it cannot be had.
float *arb_train_scratch(size_t need);
