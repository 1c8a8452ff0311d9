// A packed float32 matrix product for training. See gemm.c.
// Returns 0, or -1 when its packing buffers cannot be allocated.
int arb_gemm(const float *A, const float *B, float *C, int m, int n, int k, int ta, int tb, int accumulate);
long arb_gemm_packed_size(int n, int k);
void arb_gemm_pack_b(float *dst, const float *B, int n, int k, int tb);
int arb_gemm_pb(const float *A, const float *pre, float *C, int m, int n, int k, int ta, int accumulate);
