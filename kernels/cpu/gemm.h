// A blocked float32 matrix product for training. See gemm.c.
void arb_gemm_nt(const float *A, const float *B, float *C, int m, int jlo, int jhi, int k, int ldc, int accumulate,
                 int portable);
