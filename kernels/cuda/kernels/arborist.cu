// Arborist's CUDA kernels: every primitive of kernels.Device on float32
// activation rows in device memory, and matrix products on GGUF weight
// blocks uploaded unchanged (the layouts of kernels/quant).
//
// Compiled to PTX for sm_80 and sm_90 (Makefile target `cuda`) and embedded
// in the arborist-cuda binary; the driver JIT-compiles the PTX on load, so
// running needs only the NVIDIA driver. Every kernel is extern "C" so its
// name in the PTX is the name kernels/cuda launches (names.go lists them,
// and a test checks the two lists agree).
//
// Numerics. A matrix product computes each output from the same code in the
// same order whatever the batch width n, so verifying W tokens in one pass
// gives bit for bit the logits of W single-token passes (greedy speculative
// output must equal the target's own): one warp per output row, lanes over
// fixed 32-weight chunks, a fixed shuffle reduction; batching only shares
// the weight reads between rows. The quantised types run, as on the CPU
// backend, on activations quantised to 8 bits per 32 values (round to
// nearest even, scale amax/127) with integer dot products (dp4a); F32 runs
// in float32; F16 and BF16 run on tensor cores (wmma 16x16x16, float32
// accumulation) with the activations rounded to the weight's type, for every
// n, decode included (a decode pass is bound by the weight reads either way).

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <stdint.h>

#define WARP 32
// Rows of a batch that one block of a matrix product handles: each weight
// chunk a lane dequantises is used MMQ_NB times.
#define MMQ_NB 8
// Warps (output rows) per matrix-product block.
#define MM_WARPS 4
// Warps sharing one 16x16 output tile of the tensor-core product.
#define TC_WARPS 8
// Attention: warps per (row, head) block, and the most head values a lane holds.
#define ATT_WARPS 4
#define ATT_MAXD 8 // head_dim <= 256

// ---------------------------------------------------------------- helpers

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ int warp_isum(int v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// The quantised weight layouts (shared with the host check, hostcheck.c).
#include "quant.cuh"

#define T_Q8_0 8
#define T_Q4_0 2
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14

// unpack fills ch with chunk c (weights 32c..32c+31) of the row at row.
template <int T> __device__ __forceinline__ void unpack(const uint8_t *row, int c, Chunk &ch);
template <> __device__ __forceinline__ void unpack<T_Q8_0>(const uint8_t *row, int c, Chunk &ch) { unpack_q8_0(row, c, &ch); }
template <> __device__ __forceinline__ void unpack<T_Q4_0>(const uint8_t *row, int c, Chunk &ch) { unpack_q4_0(row, c, &ch); }
template <> __device__ __forceinline__ void unpack<T_Q4_K>(const uint8_t *row, int c, Chunk &ch) { unpack_q4_k(row, c, &ch); }
template <> __device__ __forceinline__ void unpack<T_Q5_K>(const uint8_t *row, int c, Chunk &ch) { unpack_q5_k(row, c, &ch); }
template <> __device__ __forceinline__ void unpack<T_Q6_K>(const uint8_t *row, int c, Chunk &ch) { unpack_q6_k(row, c, &ch); }

// ------------------------------------------------------------- embedding

// Embedding rows of a quantised table: dst[i, 32c + j] = w_j of chunk c of
// row ids[i]. grid (ceil(chunks/128), nids), block 128: a thread per chunk.
template <int T> __device__ void embed_q(float *dst, const uint8_t *w, size_t rowBytes, const int *ids, int cols) {
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y;
	if (c >= cols / 32) return;
	Chunk ch;
	unpack<T>(w + (size_t)ids[i] * rowBytes, c, ch);
	float *o = dst + (size_t)i * cols + 32 * c;
#pragma unroll
	for (int j = 0; j < 32; j++) o[j] = chunk_weight(&ch, j);
}

// Embedding rows of a float table: grid (ceil(cols/256), nids), block 256.
template <typename W> __device__ __forceinline__ float to_f32(W v);
template <> __device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename W> __device__ void embed_f(float *dst, const W *w, const int *ids, int cols) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	int i = blockIdx.y;
	if (j >= cols) return;
	dst[(size_t)i * cols + j] = to_f32<W>(w[(size_t)ids[i] * cols + j]);
}

extern "C" {
__global__ void embed_f32(float *dst, const float *w, const int *ids, int cols) { embed_f<float>(dst, w, ids, cols); }
__global__ void embed_f16(float *dst, const __half *w, const int *ids, int cols) { embed_f<__half>(dst, w, ids, cols); }
__global__ void embed_bf16(float *dst, const __nv_bfloat16 *w, const int *ids, int cols) { embed_f<__nv_bfloat16>(dst, w, ids, cols); }
__global__ void embed_q8_0(float *dst, const uint8_t *w, size_t rb, const int *ids, int cols) { embed_q<T_Q8_0>(dst, w, rb, ids, cols); }
__global__ void embed_q4_0(float *dst, const uint8_t *w, size_t rb, const int *ids, int cols) { embed_q<T_Q4_0>(dst, w, rb, ids, cols); }
__global__ void embed_q4_k(float *dst, const uint8_t *w, size_t rb, const int *ids, int cols) { embed_q<T_Q4_K>(dst, w, rb, ids, cols); }
__global__ void embed_q5_k(float *dst, const uint8_t *w, size_t rb, const int *ids, int cols) { embed_q<T_Q5_K>(dst, w, rb, ids, cols); }
__global__ void embed_q6_k(float *dst, const uint8_t *w, size_t rb, const int *ids, int cols) { embed_q<T_Q6_K>(dst, w, rb, ids, cols); }
}

// ------------------------------------------------------ matrix products

// quantize_q8 quantises n rows of cols activations (cols a multiple of 32)
// to 8 bits per 32 values: xq[r, i] int8, xd[r, c] the scale amax/127,
// xs[r, c] = xd * sum(q). grid (cols/32, n), block 32: a warp per chunk.
extern "C" __global__ void quantize_q8(int8_t *xq, float *xd, float *xs, const float *x, int cols) {
	int c = blockIdx.x, r = blockIdx.y, l = threadIdx.x;
	size_t i = (size_t)r * cols + 32 * c + l;
	float v = x[i];
	float amax = warp_max(fabsf(v));
	float d = amax / 127.f;
	float id = d != 0.f ? 1.f / d : 0.f;
	int q = __float2int_rn(v * id);
	xq[i] = (int8_t)q;
	int sum = warp_isum(q);
	if (l == 0) {
		size_t k = (size_t)r * (cols / 32) + c;
		xd[k] = d;
		xs[k] = d * (float)sum;
	}
}

// mm_q: out[r, o] = W[o, :] . x[r, :] for quantised W against activations
// quantised by quantize_q8. grid (ceil(rows/MM_WARPS), ceil(n/MMQ_NB)),
// block 32*MM_WARPS: a warp per output row o, MMQ_NB batch rows per block;
// lane l takes chunks l, l+32, ...
template <int T>
__device__ void mm_q(float *out, const uint8_t *w, size_t rowBytes, const int8_t *xq, const float *xd, const float *xs, int rows, int cols, int n) {
	int o = blockIdx.x * MM_WARPS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP;
	int r0 = blockIdx.y * MMQ_NB;
	if (o >= rows) return;
	int nb = min(MMQ_NB, n - r0);
	int chunks = cols / 32;
	const uint8_t *wr = w + (size_t)o * rowBytes;
	float acc[MMQ_NB];
#pragma unroll
	for (int r = 0; r < MMQ_NB; r++) acc[r] = 0.f;
	for (int c = lane; c < chunks; c += WARP) {
		Chunk ch;
		unpack<T>(wr, c, ch);
#pragma unroll
		for (int r = 0; r < MMQ_NB; r++) {
			if (r < nb) {
				const int *xr = (const int *)(xq + (size_t)(r0 + r) * cols + 32 * c);
				size_t xi = (size_t)(r0 + r) * chunks + c;
				acc[r] += chunk_dot(&ch, xr, xd[xi], xs[xi]);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < MMQ_NB; r++) {
		float v = warp_sum(acc[r]);
		if (lane == 0 && r < nb) out[(size_t)(r0 + r) * rows + o] = v;
	}
}

#define MMQ(name, T)                                                                                              \
	extern "C" __global__ void name(float *out, const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, \
	                                const float *xs, int rows, int cols, int n) {                                \
		mm_q<T>(out, w, rb, xq, xd, xs, rows, cols, n);                                                        \
	}
MMQ(mm_q8_0, T_Q8_0)
MMQ(mm_q4_0, T_Q4_0)
MMQ(mm_q4_k, T_Q4_K)
MMQ(mm_q5_k, T_Q5_K)
MMQ(mm_q6_k, T_Q6_K)

// mm_f: float weights in float32 (F32, and F16/BF16 shapes the tensor-core
// kernel does not take). Same geometry as mm_q; lane l takes columns l,
// l+32, ... (coalesced reads).
template <typename W>
__device__ void mm_f(float *out, const W *w, const float *x, int rows, int cols, int n) {
	int o = blockIdx.x * MM_WARPS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP;
	int r0 = blockIdx.y * MMQ_NB;
	if (o >= rows) return;
	int nb = min(MMQ_NB, n - r0);
	const W *wr = w + (size_t)o * cols;
	float acc[MMQ_NB];
#pragma unroll
	for (int r = 0; r < MMQ_NB; r++) acc[r] = 0.f;
	for (int i = lane; i < cols; i += WARP) {
		float wv = to_f32<W>(wr[i]);
#pragma unroll
		for (int r = 0; r < MMQ_NB; r++)
			if (r < nb) acc[r] = fmaf(wv, x[(size_t)(r0 + r) * cols + i], acc[r]);
	}
#pragma unroll
	for (int r = 0; r < MMQ_NB; r++) {
		float v = warp_sum(acc[r]);
		if (lane == 0 && r < nb) out[(size_t)(r0 + r) * rows + o] = v;
	}
}

extern "C" {
__global__ void mm_f32(float *out, const float *w, const float *x, int rows, int cols, int n) { mm_f<float>(out, w, x, rows, cols, n); }
__global__ void mm_f16(float *out, const __half *w, const float *x, int rows, int cols, int n) { mm_f<__half>(out, w, x, rows, cols, n); }
__global__ void mm_bf16(float *out, const __nv_bfloat16 *w, const float *x, int rows, int cols, int n) { mm_f<__nv_bfloat16>(out, w, x, rows, cols, n); }
}

// to_half / to_bf16: x (n rows of cols) rounded to the weight type into
// xh, npad rows (rows n..npad-1 zero) for the tensor-core kernel. grid
// (ceil(cols/256), npad), block 256.
extern "C" __global__ void to_half(__half *xh, const float *x, int n, int cols) {
	int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (i >= cols) return;
	xh[(size_t)r * cols + i] = __float2half_rn(r < n ? x[(size_t)r * cols + i] : 0.f);
}
extern "C" __global__ void to_bf16(__nv_bfloat16 *xh, const float *x, int n, int cols) {
	int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (i >= cols) return;
	xh[(size_t)r * cols + i] = __float2bfloat16_rn(r < n ? x[(size_t)r * cols + i] : 0.f);
}

// mm_tc: tensor-core product for F16/BF16 weights, rows and cols multiples
// of 16: out[r, o] = sum_k xh[r, k] W[o, k]. A = xh (row-major, ld cols),
// B[k, o] = W[o, k] (column-major, ld cols). grid (rows/16, npad/16), block
// 32*TC_WARPS: a block computes the 16x16 tile of outputs o0 = 16*bx, rows
// r0 = 16*by; its warps split the k steps (warp w takes steps w, w+TC_WARPS,
// ...) so a decode pass has enough loads in flight to stream the weights,
// and their partial tiles are summed in shared memory in warp order, the
// same for every n. Rows >= n are not written.
template <typename W>
__device__ void mm_tc(float *out, const W *w, const W *xh, int rows, int cols, int n) {
	using namespace nvcuda;
	__shared__ __align__(32) float tile[TC_WARPS][16 * 16]; // wmma stores need 256-bit alignment
	int warp = threadIdx.x / WARP;
	int o0 = 16 * blockIdx.x, r0 = 16 * blockIdx.y;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::col_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
	wmma::fill_fragment(fc, 0.f);
	const W *a = xh + (size_t)r0 * cols;
	const W *b = w + (size_t)o0 * cols;
	for (int k = 16 * warp; k < cols; k += 16 * TC_WARPS) {
		wmma::load_matrix_sync(fa, a + k, cols);
		wmma::load_matrix_sync(fb, b + k, cols);
		wmma::mma_sync(fc, fa, fb, fc);
	}
	wmma::store_matrix_sync(tile[warp], fc, 16, wmma::mem_row_major);
	__syncthreads();
	for (int e = threadIdx.x; e < 256; e += blockDim.x) {
		float v = 0.f;
#pragma unroll
		for (int i = 0; i < TC_WARPS; i++) v += tile[i][e];
		int r = r0 + e / 16, o = o0 + e % 16;
		if (r < n && o < rows) out[(size_t)r * rows + o] = v;
	}
}

extern "C" {
__global__ void mm_tc_f16(float *out, const __half *w, const __half *xh, int rows, int cols, int n) { mm_tc<__half>(out, w, xh, rows, cols, n); }
__global__ void mm_tc_bf16(float *out, const __nv_bfloat16 *w, const __nv_bfloat16 *xh, int rows, int cols, int n) {
	mm_tc<__nv_bfloat16>(out, w, xh, rows, cols, n);
}
}

// ------------------------------------------------------- row operations

// rmsnorm: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, the mean summed in
// double as the CPU does. grid (rows), block 256.
extern "C" __global__ void rmsnorm(float *out, const float *x, const float *w, int dim, float eps) {
	__shared__ double part[256];
	const float *xr = x + (size_t)blockIdx.x * dim;
	float *orow = out + (size_t)blockIdx.x * dim;
	double s = 0;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) {
		float v = xr[i];
		s += (double)(v * v);
	}
	part[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	float mean = (float)(part[0] / (double)dim);
	float scale = 1.f / (float)sqrt((double)(mean + eps));
	for (int i = threadIdx.x; i < dim; i += blockDim.x) orow[i] = xr[i] * scale * w[i];
}

// Elementwise operations: grid ceil(n/256), block 256.
extern "C" __global__ void add(float *x, const float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += y[i];
}
extern "C" __global__ void scale(float *x, int n, float s) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}
extern "C" __global__ void softcap(float *x, int n, float c) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] = c * tanhf(x[i] / c);
}
// add_row: x[i] += b[i % dim] for i < rows*dim (a bias).
extern "C" __global__ void add_row(float *x, const float *b, int n, int dim) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += b[i % dim];
}
// glu: g = act(g) * u, act SiLU (gelu == 0) or GELU, tanh form.
extern "C" __global__ void glu(float *g, const float *u, int n, int gelu) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float v = g[i], a;
	if (gelu) {
		// 0.5 v (1 + tanh z) written as v / (1 + e^-2z): the same value
		// without the cancellation of 1 + tanh z for negative v
		a = v / (1.f + expf(-2.f * 0.7978845608028654f * (v + 0.044715f * v * v * v)));
	} else {
		a = v / (1.f + expf(-v));
	}
	g[i] = a * u[i];
}

// rope rotates pairs in place: x is rows x heads x hd; pair i < ropeDim/2
// of each head is (2i, 2i+1), or (i, i+ropeDim/2) when neox, rotated by
// cos/sin[r, i]. grid (ceil(heads*half/256), rows), block 256.
extern "C" __global__ void rope(float *x, const float *cs, const float *sn, int heads, int hd, int ropeDim, int neox) {
	int half = ropeDim / 2;
	int t = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (t >= heads * half) return;
	int h = t / half, i = t % half;
	float *p = x + ((size_t)r * heads + h) * hd;
	int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
	float c = cs[(size_t)r * half + i], s = sn[(size_t)r * half + i];
	float x0 = p[a], x1 = p[b];
	p[a] = x0 * c - x1 * s;
	p[b] = x0 * s + x1 * c;
}

// gather: dst[j] = src[rows[j]], rows of dim values. grid (ceil(dim/256), k).
extern "C" __global__ void gather(float *dst, const float *src, const int *rows, int dim) {
	int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y;
	if (i < dim) dst[(size_t)j * dim + i] = src[(size_t)rows[j] * dim + i];
}

// argmax of each row of cols values, the lowest index on ties (NaN never
// wins). grid (rows), block 256.
extern "C" __global__ void argmax(int *dst, const float *x, int cols) {
	__shared__ float bv[256];
	__shared__ int bi[256];
	const float *xr = x + (size_t)blockIdx.x * cols;
	float best = -INFINITY;
	int idx = -1;
	for (int i = threadIdx.x; i < cols; i += blockDim.x) {
		float v = xr[i];
		if (v > best || (idx < 0 && v == v)) {
			best = v;
			idx = i;
		}
	}
	bv[threadIdx.x] = best;
	bi[threadIdx.x] = idx;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k) {
			float v = bv[threadIdx.x + k], mv = bv[threadIdx.x];
			int j = bi[threadIdx.x + k], mine = bi[threadIdx.x];
			if (j >= 0 && (mine < 0 || v > mv || (v == mv && j < mine))) {
				bv[threadIdx.x] = v;
				bi[threadIdx.x] = j;
			}
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) dst[blockIdx.x] = bi[0] < 0 ? 0 : bi[0];
}

// --------------------------------------------------------------- KV cache

// The cache of L layers x S slots x width values of type K (float or
// __half) is one allocation: layer l's keys at element 2*l*S*width, its
// values at (2*l+1)*S*width.

template <typename K> __device__ __forceinline__ K from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

// store_kv writes rows keys k and values v (rows x width) to slots
// slot..slot+rows-1 of layer. grid (ceil(width/256), rows), block 256.
template <typename K>
__device__ void store_kv(K *kv, const float *k, const float *v, int layer, int slots, int width, int slot) {
	int i = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (i >= width) return;
	size_t lk = (size_t)2 * layer * slots * width, lv = lk + (size_t)slots * width;
	size_t d = (size_t)(slot + r) * width + i, s = (size_t)r * width + i;
	kv[lk + d] = from_f32<K>(k[s]);
	kv[lv + d] = from_f32<K>(v[s]);
}
extern "C" {
__global__ void store_kv_f32(float *kv, const float *k, const float *v, int layer, int slots, int width, int slot) {
	store_kv<float>(kv, k, v, layer, slots, width, slot);
}
__global__ void store_kv_f16(__half *kv, const float *k, const float *v, int layer, int slots, int width, int slot) {
	store_kv<__half>(kv, k, v, layer, slots, width, slot);
}
}

// kv_gather copies slots keep[0..k-1] of every layer's keys and values
// (planes = 2*layers planes of slots rows of rowWords 16-bit words) into
// scratch; kv_put writes them back to slots 0..k-1. Two steps, because a
// slot may be both read and written (keep = {1, 0}). grid
// (ceil(rowWords/256), k, planes), block 256.
extern "C" __global__ void kv_gather(uint16_t *scratch, const uint16_t *kv, const int *keep, int k, int slots, int rowWords) {
	int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y, p = blockIdx.z;
	if (i >= rowWords) return;
	scratch[((size_t)p * k + j) * rowWords + i] = kv[((size_t)p * slots + keep[j]) * rowWords + i];
}
extern "C" __global__ void kv_put(uint16_t *kv, const uint16_t *scratch, int k, int slots, int rowWords) {
	int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y, p = blockIdx.z;
	if (i >= rowWords) return;
	kv[((size_t)p * slots + j) * rowWords + i] = scratch[((size_t)p * k + j) * rowWords + i];
}

// ------------------------------------------------------------- attention

// attention: for query row r (blockIdx.y) and head h (blockIdx.x), the
// softmax over visible slots of scale*q.k (soft-capped when softcap > 0)
// weights the cached values. The slots are split among ATT_WARPS warps,
// each keeping an online softmax (running max m, sum l, weighted values
// acc) so no score row is stored and any context length fits; the warps'
// states merge at the end; the k-th visible slot goes to warp k mod
// ATT_WARPS. A slot s is visible to row r when mask (n rows
// of past+n bytes) says so, or, with no mask, when s <= past+r. hd <= 256.
// grid (heads, n), block 32*ATT_WARPS.
template <typename K>
__device__ void attention(float *out, const float *q, const K *kv, const uint8_t *mask, int layer, int slots, int past, int heads,
                          int kvHeads, int hd, float scl, float cap) {
	__shared__ float sq[256];
	__shared__ float sm[ATT_WARPS], sl[ATT_WARPS];
	__shared__ float sacc[ATT_WARPS][256];
	int h = blockIdx.x, r = blockIdx.y, n = gridDim.y;
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int width = kvHeads * hd, kvh = h / (heads / kvHeads), total = past + n;
	const float *qr = q + ((size_t)r * heads + h) * hd;
	for (int d = threadIdx.x; d < hd; d += blockDim.x) sq[d] = qr[d];
	__syncthreads();
	const K *kb = kv + (size_t)2 * layer * slots * width + (size_t)kvh * hd;
	const K *vb = kb + (size_t)slots * width;
	float m = -INFINITY, l = 0.f, acc[ATT_MAXD];
#pragma unroll
	for (int i = 0; i < ATT_MAXD; i++) acc[i] = 0.f;
	auto step = [&](int s) {
		const K *kr = kb + (size_t)s * width;
		float dot = 0.f;
		for (int d = lane; d < hd; d += WARP) dot += sq[d] * to_f32<K>(kr[d]);
		float sc = warp_sum(dot) * scl;
		if (cap > 0.f) sc = cap * tanhf(sc / cap);
		float mn = fmaxf(m, sc);
		float corr = expf(m - mn), p = expf(sc - mn);
		l = l * corr + p;
		const K *vr = vb + (size_t)s * width;
#pragma unroll
		for (int i = 0; i < ATT_MAXD; i++) {
			int d = lane + WARP * i;
			if (d < hd) acc[i] = acc[i] * corr + p * to_f32<K>(vr[d]);
		}
		m = mn;
	};
	// Visible slots go to the warps by their rank among the visible ones,
	// not by slot index: a tree row then reduces its path's keys in the
	// same warps and order as decoding that path one token at a time (the
	// slots past+r and below), so verification gives decoding's bits.
	if (mask) {
		const uint8_t *mr = mask + (size_t)r * total;
		int j = 0;
		for (int s0 = 0; s0 < total; s0 += WARP) {
			unsigned bits = __ballot_sync(0xffffffffu, s0 + lane < total && mr[s0 + lane] != 0);
			while (bits) {
				int b = __ffs(bits) - 1;
				bits &= bits - 1;
				if (j++ % ATT_WARPS == warp) step(s0 + b);
			}
		}
	} else {
		for (int s = warp; s <= past + r; s += ATT_WARPS) step(s);
	}
	if (lane == 0) {
		sm[warp] = m;
		sl[warp] = l;
	}
#pragma unroll
	for (int i = 0; i < ATT_MAXD; i++) {
		int d = lane + WARP * i;
		if (d < hd) sacc[warp][d] = acc[i];
	}
	__syncthreads();
	float mx = -INFINITY;
	for (int w = 0; w < ATT_WARPS; w++) mx = fmaxf(mx, sm[w]);
	float L = 0.f;
	for (int w = 0; w < ATT_WARPS; w++)
		if (sl[w] > 0.f) L += sl[w] * expf(sm[w] - mx);
	float *orow = out + ((size_t)r * heads + h) * hd;
	for (int d = threadIdx.x; d < hd; d += blockDim.x) {
		float o = 0.f;
		for (int w = 0; w < ATT_WARPS; w++)
			if (sl[w] > 0.f) o += sacc[w][d] * expf(sm[w] - mx);
		orow[d] = L > 0.f ? o / L : 0.f;
	}
}

extern "C" {
__global__ void attention_f32(float *out, const float *q, const float *kv, const uint8_t *mask, int layer, int slots, int past, int heads,
                              int kvHeads, int hd, float scl, float cap) {
	attention<float>(out, q, kv, mask, layer, slots, past, heads, kvHeads, hd, scl, cap);
}
__global__ void attention_f16(float *out, const float *q, const __half *kv, const uint8_t *mask, int layer, int slots, int past, int heads,
                              int kvHeads, int hd, float scl, float cap) {
	attention<__half>(out, q, kv, mask, layer, slots, past, heads, kvHeads, hd, scl, cap);
}
}

// ------------------------------------------------------------ fast path

#include "fast.cuh"
