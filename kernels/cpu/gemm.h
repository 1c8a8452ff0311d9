// A packed float32 matrix product for training. See gemm.c.
// Returns 0, or -1 when its packing buffers cannot be allocated.
int arb_gemm(const float *A, const float *B, float *C, int m, int n, int k, int ta, int tb, int accumulate);
