/* CUDA C on the host: what the stand-in driver needs to run the backend's
 * kernels (kernels/cuda/kernels/arborist.cu) on the CPU, compiled by g++.
 *
 * A block's threads are fibers on one OS thread (emu.cc), switched at every
 * barrier: __syncthreads waits for the block's live threads, and every warp
 * collective (shuffles, ballots, __syncwarp) for the warp's 32 lanes, so
 * code that is wrong on a GPU because of a missing barrier or a divergent
 * collective deadlocks here and is reported, rather than passing by luck.
 * Shared memory is static storage: one block runs at a time. The half and
 * bfloat16 types convert with round-to-nearest-even as the GPU does; the
 * tensor-core fragments (mma.h) hold whole tiles, so their products are
 * the exact sums in float, in an order that need not be the hardware's.
 * Transcendental functions are the host's, so results are close to the
 * GPU's, not equal: the stand-in checks kernels against each other and
 * against references, never against a GPU's bits.
 *
 * This header stands in for cuda_fp16.h, cuda_bf16.h and mma.h (the files
 * of those names beside it include it) and is force-included ahead of the
 * kernels' source.
 */
#ifndef ARBORIST_EMU_H
#define ARBORIST_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <type_traits>

#define ARBORIST_EMU 1
#define __CUDACC__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __restrict__ __restrict

/* ------------------------------------------------------------ indices */

struct uint3 {
	unsigned x, y, z;
};
typedef uint3 dim3;

/* The running fiber's indices: emu.cc sets them before switching to it. */
extern uint3 threadIdx, blockIdx, blockDim, gridDim;

/* emu_fail stops the launch with a message (a kernel's fault, as a GPU's
 * illegal address or misaligned access would): it does not return. */
[[noreturn]] void emu_fail(const char *fmt, ...);

/* emu_warp_wait parks the running lane until every live lane of its warp
 * has arrived; emu_block_wait until every live thread of the block has. */
void emu_warp_wait(void);
void emu_block_wait(void);

/* The running lane's warp's exchange buffer for collective number
 * emu_phase() (two alternate, so that a lane running ahead to the next
 * collective cannot overwrite what a slower one has still to read). */
uint64_t *emu_exchange(void);

/* ------------------------------------------------------ vector types */

struct alignas(8) int2 { int x, y; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };

static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

template <typename T> static inline T min(T a, T b) { return a < b ? a : b; }
template <typename T> static inline T max(T a, T b) { return a > b ? a : b; }

/* -------------------------------------------------- half and bfloat16 */

struct __half {
	uint16_t x;
};
struct __half2 {
	__half x, y;
};
struct __nv_bfloat16 {
	uint16_t x;
};

static inline float emu_bits_float(uint32_t b) {
	float f;
	memcpy(&f, &b, 4);
	return f;
}
static inline uint32_t emu_float_bits(float f) {
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

/* float to half, rounding to nearest even (subnormals, overflow to
 * infinity, NaN kept a NaN) */
static inline uint16_t emu_f2h(float f) {
	uint32_t x = emu_float_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
	if (e == 0xff)
		return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
	int ee = (int)e - 127 + 15;
	if (ee >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (ee <= 0) {
		if (ee < -10)
			return (uint16_t)sign;
		m |= 0x800000u;
		unsigned shift = (unsigned)(14 - ee);
		uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (hm & 1)))
			hm++;
		return (uint16_t)(sign | hm);
	}
	uint32_t hm = m >> 13, rem = m & 0x1fffu;
	uint32_t h = sign | ((uint32_t)ee << 10) | hm;
	if (rem > 0x1000u || (rem == 0x1000u && (hm & 1)))
		h++; /* a carry into the exponent is the right result */
	return (uint16_t)h;
}

static inline float emu_h2f(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
	if (e == 0) {
		float v = ldexpf((float)m, -24);
		return sign ? -v : v;
	}
	if (e == 31)
		return emu_bits_float(sign | 0x7f800000u | (m << 13));
	return emu_bits_float(sign | ((e + 112) << 23) | (m << 13));
}

static inline __half __float2half_rn(float f) { return __half{emu_f2h(f)}; }
static inline __half __float2half(float f) { return __half{emu_f2h(f)}; }
static inline float __half2float(__half h) { return emu_h2f(h.x); }
static inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }
static inline float2 __half22float2(__half2 h) { return float2{emu_h2f(h.x.x), emu_h2f(h.y.x)}; }
static inline float __low2float(__half2 h) { return emu_h2f(h.x.x); }
static inline float __high2float(__half2 h) { return emu_h2f(h.y.x); }

static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
	uint32_t x = emu_float_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return __nv_bfloat16{(uint16_t)((x >> 16) | 0x40u)};
	return __nv_bfloat16{(uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}
static inline float __bfloat162float(__nv_bfloat16 b) { return emu_bits_float((uint32_t)b.x << 16); }

/* ---------------------------------------------------------- intrinsics */

static inline int __float2int_rn(float v) { return (int)nearbyintf(v); }
static inline float __int_as_float(int v) { return emu_bits_float((uint32_t)v); }
static inline int __float_as_int(float v) { return (int)emu_float_bits(v); }
static inline float __uint_as_float(unsigned v) { return emu_bits_float(v); }
static inline unsigned __float_as_uint(float v) { return emu_float_bits(v); }
static inline int __ffs(int v) { return ffs(v); }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
template <typename T> static inline T __ldg(const T *p) { return *p; }
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}

/* four signed bytes a and b: the sum of their products, plus c */
static inline int __dp4a(int a, int b, int c) {
	for (int i = 0; i < 4; i++)
		c += (int8_t)(a >> (8 * i)) * (int8_t)(b >> (8 * i));
	return c;
}
static inline int __dp4a(unsigned a, int b, int c) { return __dp4a((int)a, b, c); }

/* per-byte signed subtraction, saturated to [-128, 127] */
static inline int __vsubss4(int a, int b) {
	uint32_t r = 0;
	for (int i = 0; i < 4; i++) {
		int d = (int)(int8_t)(a >> (8 * i)) - (int)(int8_t)(b >> (8 * i));
		d = d < -128 ? -128 : d > 127 ? 127 : d;
		r |= (uint32_t)(uint8_t)(int8_t)d << (8 * i);
	}
	return (int)r;
}

/* ------------------------------------------------------------ barriers */

static inline void __syncthreads(void) { emu_block_wait(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
	(void)mask;
	emu_warp_wait();
}

static inline int emu_lane(void) { return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32); }

/* exchange puts v in the running lane's slot, waits for the warp, and
 * returns the slots */
template <typename T> static inline const uint64_t *emu_put(T v) {
	static_assert(sizeof(T) <= 8, "a shuffled value fits 64 bits");
	uint64_t *x = emu_exchange();
	uint64_t b = 0;
	memcpy(&b, &v, sizeof v);
	x[emu_lane()] = b;
	emu_warp_wait();
	return x;
}

template <typename T> static inline T emu_get(const uint64_t *x, int lane) {
	T v;
	memcpy(&v, &x[lane], sizeof v);
	return v;
}

template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
	(void)mask;
	const uint64_t *x = emu_put(v);
	int l = emu_lane(), s = l ^ m;
	if ((s & ~(width - 1)) != (l & ~(width - 1)))
		s = l;
	return emu_get<T>(x, s);
}

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
	(void)mask;
	const uint64_t *x = emu_put(v);
	int l = emu_lane();
	return emu_get<T>(x, (l & ~(width - 1)) + (src & (width - 1)));
}

template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
	(void)mask;
	const uint64_t *x = emu_put(v);
	int l = emu_lane(), s = l + (int)d;
	if ((s & ~(width - 1)) != (l & ~(width - 1)))
		s = l;
	return emu_get<T>(x, s);
}

template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
	(void)mask;
	const uint64_t *x = emu_put(v);
	int l = emu_lane(), s = l - (int)d;
	if (s < (l & ~(width - 1)))
		s = l;
	return emu_get<T>(x, s);
}

static inline unsigned __ballot_sync(unsigned mask, int pred) {
	const uint64_t *x = emu_put<int>(pred != 0);
	unsigned r = 0;
	for (int i = 0; i < 32; i++)
		if ((mask >> i & 1) && x[i])
			r |= 1u << i;
	return r;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

/* ----------------------------------------------------- tensor cores */

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K> struct emu_dims;
template <int M, int N, int K> struct emu_dims<matrix_a, M, N, K> {
	enum { rows = M, cols = K };
};
template <int M, int N, int K> struct emu_dims<matrix_b, M, N, K> {
	enum { rows = K, cols = N };
};
template <int M, int N, int K> struct emu_dims<accumulator, M, N, K> {
	enum { rows = M, cols = N };
};

static inline float emu_val(float v) { return v; }
static inline float emu_val(__half v) { return __half2float(v); }
static inline float emu_val(__nv_bfloat16 v) { return __bfloat162float(v); }

/* A fragment holds its whole tile (row-major, as floats: every value of
 * the input types is exact in float) in every lane. */
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
	enum { R = emu_dims<Use, M, N, K>::rows, C = emu_dims<Use, M, N, K>::cols, num_elements = R * C };
	float x[R * C];
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
static inline void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, float v) {
	for (int i = 0; i < f.num_elements; i++)
		f.x[i] = v;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const T *p, unsigned ld) {
	typedef fragment<Use, M, N, K, T, Layout> F;
	bool col = std::is_same<Layout, col_major>::value;
	for (int r = 0; r < F::R; r++)
		for (int c = 0; c < F::C; c++)
			f.x[r * F::C + c] = emu_val(col ? p[(size_t)c * ld + r] : p[(size_t)r * ld + c]);
	emu_warp_wait(); /* a warp-wide operation */
}

template <int M, int N, int K, typename T>
static inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, T> &f, unsigned ld, layout_t l) {
	emu_warp_wait();
	if (emu_lane() == 0)
		for (int r = 0; r < M; r++)
			for (int c = 0; c < N; c++)
				p[l == mem_row_major ? (size_t)r * ld + c : (size_t)c * ld + r] = f.x[r * N + c];
	emu_warp_wait();
}

template <int M, int N, int K, typename T, typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, T, LA> &a,
                            const fragment<matrix_b, M, N, K, T, LB> &b, const fragment<accumulator, M, N, K, float> &c) {
	float out[M * N];
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float s = 0.f;
			for (int k = 0; k < K; k++)
				s += a.x[i * K + k] * b.x[k * N + j];
			out[i * N + j] = c.x[i * N + j] + s;
		}
	memcpy(d.x, out, sizeof out);
	emu_warp_wait();
}
} // namespace wmma
} // namespace nvcuda

#endif
