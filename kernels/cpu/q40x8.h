#include <stdint.h>
// Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, IQ4_NL and IQ4_XS weights repacked eight
// rows at a time. See q40x8.c.
void arb_x8_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst);
long arb_x8_group_bytes(int type);
int arb_mm_x8(int type, const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
              const int32_t *ys, int n, float *out, int rows, int stream, int vnni);
int arb_mm_x8_vnni(int type, const uint8_t *packed, int glo, int ghi, int nb, const float *yd, const int8_t *yq,
                   const int32_t *ys, int n, float *out, int rows, int stream);
// Every quantised type's weights repacked sixteen rows at a time
// for AVX-512 VNNI on 512-bit vectors. See x16.c.
long arb_x16_bytes(int type, int rows, int nb);
void arb_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m);
uint8_t arb_q6_value(const uint8_t *blk, int l);
void arb_fifth_bits(const uint8_t *qh4, uint8_t *out);
void arb_k23_pack(int type, const uint8_t *blk, int rows, int i, uint8_t *d, uint8_t *scales, uint8_t *planes);
void arb_x16_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst);
int arb_mm_x16(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc,
               int nb, int n, float *out, int rows, int stream);
// K-quant weights repacked eight rows at a time for AVX2. See k8.c.
void arb_k8_pack(int type, const uint8_t *src, long row_bytes, int rows, int nb, uint8_t *dst);
long arb_k8_group_bytes(int type);
int arb_mm_k8(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc, int nb,
              int n, float *out, int rows, int stream, int vnni);
int arb_mm_k8_vnni(int type, const uint8_t *packed, int glo, int ghi, const int8_t *yq, const float *yd, const int32_t *yc,
                   int nb, int n, float *out, int rows, int stream);
// arb_avx_vnni_cpu says whether the CPU has AVX-VNNI (256-bit vpdpbusd)
// beside AVX2, FMA and F16C; arb_avx_vnni whether the eight-row tiles use
// it (not where ARBORIST_AVXVNNI=0). See simd.c.
int arb_avx_vnni_cpu(void);
int arb_avx_vnni(void);
