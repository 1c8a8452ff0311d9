//go:build cgo && !purego

// k8.c's eight-row K-quant tiles compiled a second time with AVX-VNNI
// (x8.h's X8_VNNI): arb_mm_k8 runs them where the CPU has it
// (arb_avx_vnni).
#define X8_VNNI 1
#include "k8.c"
