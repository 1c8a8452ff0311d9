// The fast path's kernels (ARBORIST_CUDA_PATH=fast, docs/CUDA.md),
// included at the end of arborist.cu so that both paths share one module.
//
// Each kernel here does the work of several of the verified path's, with
// the same arithmetic in the same order, so that a row's result is, bit
// for bit, what the verified kernels give it (the quantised products, the
// norms, RoPE and the cache store, attention), and stays independent of
// how many rows a pass has (the backend's batch-invariance rule: a row's
// reductions never depend on the batch). The F16 product is the one
// exception to the first rule: it multiplies float activations by the f16
// weights with float fused multiply-adds instead of rounding the
// activations for the tensor cores; it keeps the second.
//
// Fusions (docs/CUDA.md, "The fast path"): the residual add, RMSNorm and
// the 8-bit quantisation a quantised product reads, in one kernel
// (f_norm); the Q/K norms, RoPE of Q and K and the cache store (f_rope_*);
// attention and the quantisation of its output (f_att_*); SiLU/GELU and
// the quantisation of the down projection's input (f_glu_q8); products of
// matrices stored one after another (Q|K|V, gate|up) in one launch, their
// outputs split by row (f_mm_*). Values that change token after token (the
// cache slot, the context length) are read from device memory, so that a
// captured graph of launches replays unchanged.

// FAST_NORM: threads of f_norm and f_rope_*; their reductions are
// rmsnorm's, whose tree is 256 wide.
#define FAST_NORM 256

// ld16 loads 16 bytes from a 16-byte aligned address in one instruction.
__device__ __forceinline__ uint4 ld16(const void *p) {
#ifdef ARBORIST_EMU
	if ((uintptr_t)p & 15) emu_fail("16-byte load from %p, not 16-byte aligned", p);
#endif
	return *(const uint4 *)p;
}

__device__ __forceinline__ float4 ldf4(const float *p) {
#ifdef ARBORIST_EMU
	if ((uintptr_t)p & 15) emu_fail("16-byte load from %p, not 16-byte aligned", (const void *)p);
#endif
	return *(const float4 *)p;
}

// rms_scale is rmsnorm's factor 1/sqrt(mean(x^2) + eps) for the dim values
// of xr, computed as rmsnorm computes it: each of FAST_NORM threads sums
// (double)(v*v) over values t, t+256, ..., then a tree in shared memory.
// Every thread of the block calls it.
__device__ __forceinline__ float rms_scale(const float *xr, int dim, float eps) {
	__shared__ double part[FAST_NORM];
	double s = 0;
	for (int i = threadIdx.x; i < dim; i += FAST_NORM) {
		float v = xr[i];
		s += (double)(v * v);
	}
	part[threadIdx.x] = s;
	__syncthreads();
	for (int k = FAST_NORM / 2; k > 0; k >>= 1) {
		if ((int)threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	float mean = (float)(part[0] / (double)dim);
	__syncthreads(); // part is reused by the next call
	return 1.f / (float)sqrt((double)(mean + eps));
}

// quantise_rows quantises 32-value chunks of row, as quantize_q8 does: the
// block's warps take chunks warp, warp+nw, ... of nchunks, lane l value l
// of its chunk; chunk c goes to xq[32c..], xd[c], xs[c].
__device__ __forceinline__ void quantise_row(const float *row, int nchunks, int8_t *xq, float *xd, float *xs) {
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, nw = blockDim.x / WARP;
	for (int c = warp; c < nchunks; c += nw) {
		float v = row[32 * c + lane];
		float amax = warp_max(fabsf(v));
		float d = amax / 127.f;
		float id = d != 0.f ? 1.f / d : 0.f;
		int q = __float2int_rn(v * id);
		xq[32 * c + lane] = (int8_t)q;
		int sum = warp_isum(q);
		if (lane == 0) {
			xd[c] = d;
			xs[c] = d * (float)sum;
		}
	}
}

// f_norm: for row j (block j): with y, x[j] += y[j] (Add); then out[j] =
// RMSNorm(x[rows ? rows[j] : j]) * w (RMSNorm, gathered when rows is set);
// with xq, out[j] quantised to 8 bits into xq/xd/xs (quantize_q8). grid
// (n), block FAST_NORM.
extern "C" __global__ void f_norm(float *out, float *x, const float *y, const float *w, const int *rows, int8_t *xq, float *xd,
                                  float *xs, int dim, float eps) {
	int j = blockIdx.x;
	float *xr = x + (size_t)(rows ? rows[j] : j) * dim;
	if (y) {
		const float *yr = y + (size_t)j * dim;
		for (int i = threadIdx.x; i < dim; i += FAST_NORM) xr[i] += yr[i];
		__syncthreads();
	}
	float scale = rms_scale(xr, dim, eps);
	float *orow = out + (size_t)j * dim;
	for (int i = threadIdx.x; i < dim; i += FAST_NORM) orow[i] = xr[i] * scale * w[i];
	if (xq) {
		__syncthreads();
		quantise_row(orow, dim / 32, xq + (size_t)j * dim, xd + (size_t)j * (dim / 32), xs + (size_t)j * (dim / 32));
	}
}

// f_glu_q8: g = act(g) * u (glu), then g's chunks quantised (quantize_q8).
// grid (cols/32, n), block 32: a warp per chunk.
extern "C" __global__ void f_glu_q8(float *g, const float *u, int8_t *xq, float *xd, float *xs, int cols, int gelu) {
	int c = blockIdx.x, r = blockIdx.y, l = threadIdx.x;
	size_t i = (size_t)r * cols + 32 * c + l;
	float v = g[i], a;
	if (gelu) {
		a = v / (1.f + expf(-2.f * 0.7978845608028654f * (v + 0.044715f * v * v * v)));
	} else {
		a = v / (1.f + expf(-v));
	}
	v = a * u[i];
	g[i] = v;
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

// ------------------------------------------------------------ products

// Seg splits a product's outputs among up to three tensors: output o goes
// to out0 (o < b1), out1 (b1 <= o < b2) or out2, each a row-major matrix
// as wide as its part, so that Q|K|V (or gate|up), stored one after
// another as one matrix, is one launch writing three tensors.
struct Seg {
	float *out0, *out1, *out2;
	int b1, b2;
};

__device__ __forceinline__ float *seg_out(const Seg &s, int rows, int r, int o) {
	if (o < s.b1) return s.out0 + (size_t)r * s.b1 + o;
	if (o < s.b2) return s.out1 + (size_t)r * (s.b2 - s.b1) + (o - s.b1);
	return s.out2 + (size_t)r * (rows - s.b2) + (o - s.b2);
}

// A Q4_K chunk from its super-block's first 16 bytes (h: d, dmin, the
// packed scales) and the 32 bytes of quants it shares with its neighbour
// (q0, q1): unpack_q4_k's values, read 16 bytes at a time.
__device__ __forceinline__ int byte_of(const uint4 &v, int i) {
	unsigned w = i < 4 ? v.x : i < 8 ? v.y : i < 12 ? v.z : v.w;
	return (int)((w >> (8 * (i & 3))) & 0xff);
}

__device__ __forceinline__ void scale_min16(const uint4 &h, int j, int *sc, int *m) {
	// the 12 packed bytes start at byte 4 of the super-block
	if (j < 4) {
		*sc = byte_of(h, 4 + j) & 63;
		*m = byte_of(h, 8 + j) & 63;
	} else {
		*sc = (byte_of(h, 8 + j) & 0xF) | ((byte_of(h, j) >> 6) << 4);
		*m = (byte_of(h, 8 + j) >> 4) | ((byte_of(h, 4 + j) >> 6) << 4);
	}
}

__device__ __forceinline__ float h16(unsigned bits) { return __half2float(__ushort_as_half((unsigned short)(bits & 0xffff))); }

__device__ __forceinline__ void unpack_q4_k16(const uint4 &h, const uint4 &q0, const uint4 &q1, int s, Chunk &ch) {
	int sc, m;
	scale_min16(h, s, &sc, &m);
	ch.a0 = ch.a1 = h16(h.x) * (float)sc;
	ch.b = -(h16(h.x >> 16) * (float)m);
	int sh = 4 * (s % 2);
	ch.q[0] = (int)(q0.x >> sh) & 0x0F0F0F0F;
	ch.q[1] = (int)(q0.y >> sh) & 0x0F0F0F0F;
	ch.q[2] = (int)(q0.z >> sh) & 0x0F0F0F0F;
	ch.q[3] = (int)(q0.w >> sh) & 0x0F0F0F0F;
	ch.q[4] = (int)(q1.x >> sh) & 0x0F0F0F0F;
	ch.q[5] = (int)(q1.y >> sh) & 0x0F0F0F0F;
	ch.q[6] = (int)(q1.z >> sh) & 0x0F0F0F0F;
	ch.q[7] = (int)(q1.w >> sh) & 0x0F0F0F0F;
}

__device__ __forceinline__ int hi5(unsigned w, int s) { return (int)(((w >> s) & 0x01010101u) << 4); }

__device__ __forceinline__ void unpack_q5_k16(const uint4 &h, const uint4 &h0, const uint4 &h1, const uint4 &q0, const uint4 &q1, int s,
                                              Chunk &ch) {
	int sc, m;
	scale_min16(h, s, &sc, &m);
	ch.a0 = ch.a1 = h16(h.x) * (float)sc;
	ch.b = -(h16(h.x >> 16) * (float)m);
	int sh = 4 * (s % 2);
	ch.q[0] = ((int)(q0.x >> sh) & 0x0F0F0F0F) | hi5(h0.x, s);
	ch.q[1] = ((int)(q0.y >> sh) & 0x0F0F0F0F) | hi5(h0.y, s);
	ch.q[2] = ((int)(q0.z >> sh) & 0x0F0F0F0F) | hi5(h0.z, s);
	ch.q[3] = ((int)(q0.w >> sh) & 0x0F0F0F0F) | hi5(h0.w, s);
	ch.q[4] = ((int)(q1.x >> sh) & 0x0F0F0F0F) | hi5(h1.x, s);
	ch.q[5] = ((int)(q1.y >> sh) & 0x0F0F0F0F) | hi5(h1.y, s);
	ch.q[6] = ((int)(q1.z >> sh) & 0x0F0F0F0F) | hi5(h1.z, s);
	ch.q[7] = ((int)(q1.w >> sh) & 0x0F0F0F0F) | hi5(h1.w, s);
}

// Raw holds the bytes of one chunk as loaded, so that a lane issues the
// loads of its next chunk before it computes with this one.
struct Raw {
	uint4 v[5];
};

// fetch loads chunk c of the row at wr: 16 bytes at a time for Q4_K (the
// super-block's head and the chunk's 32 quant bytes) and Q5_K (head, high
// bits, quants); the other types are unpacked from the row directly
// (their blocks are only 2-byte aligned).
template <int T> __device__ __forceinline__ void fetch(const uint8_t *wr, int c, Raw &r) {
	if (T == T_Q4_K) {
		const uint8_t *b = wr + (size_t)(c / 8) * 144;
		int s = c % 8;
		r.v[0] = ld16(b);
		r.v[1] = ld16(b + 16 + 32 * (s / 2));
		r.v[2] = ld16(b + 32 + 32 * (s / 2));
	} else if (T == T_Q5_K) {
		const uint8_t *b = wr + (size_t)(c / 8) * 176;
		int s = c % 8;
		r.v[0] = ld16(b);
		r.v[1] = ld16(b + 16);
		r.v[2] = ld16(b + 32);
		r.v[3] = ld16(b + 48 + 32 * (s / 2));
		r.v[4] = ld16(b + 64 + 32 * (s / 2));
	}
}

template <int T> __device__ __forceinline__ void unpack_raw(const uint8_t *wr, int c, const Raw &r, Chunk &ch) {
	if (T == T_Q4_K) {
		unpack_q4_k16(r.v[0], r.v[1], r.v[2], c % 8, ch);
	} else if (T == T_Q5_K) {
		unpack_q5_k16(r.v[0], r.v[1], r.v[2], r.v[3], r.v[4], c % 8, ch);
	} else {
		unpack<T>(wr, c, ch);
	}
}

// dot_rows adds chunk c's products with NB activation rows (r0.., nb of
// them real) to acc, as mm_q does, the 32 activations of a row loaded 16
// bytes at a time.
template <int NB>
__device__ __forceinline__ void dot_rows(const Chunk &ch, const int8_t *xq, const float *xd, const float *xs, int r0, int nb, int cols, int c,
                                         float *acc) {
	int chunks = cols / 32;
#pragma unroll
	for (int r = 0; r < NB; r++) {
		if (r < nb) {
			const int8_t *xr = xq + (size_t)(r0 + r) * cols + 32 * c;
			uint4 a = ld16(xr), b = ld16(xr + 16);
			int xv[8] = {(int)a.x, (int)a.y, (int)a.z, (int)a.w, (int)b.x, (int)b.y, (int)b.z, (int)b.w};
			size_t xi = (size_t)(r0 + r) * chunks + c;
			acc[r] += chunk_dot(&ch, xv, xd[xi], xs[xi]);
		}
	}
}

// f_mm_q: out[r, o] = W[o, :] . x[r, :] for quantised W, x quantised by
// quantize_q8 (or f_norm, f_att_*, f_glu_q8), outputs split by seg. A warp
// per output row, NB batch rows per block (so a pass of up to 64 rows
// unpacks each weight once: grid.y is 1); lane l takes chunks l, l+32, ...
// in order, two at a time, the next one's bytes loaded before the current
// one is used; the products are mm_q's, summed in mm_q's order, so every
// output is bit for bit mm_q's whatever NB. grid (ceil(rows/MM_WARPS),
// ceil(n/NB)), block 32*MM_WARPS.
template <int T, int NB>
__device__ void f_mm_q(Seg seg, const uint8_t *w, size_t rowBytes, const int8_t *xq, const float *xd, const float *xs, int rows, int cols,
                       int n) {
	int o = blockIdx.x * MM_WARPS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP;
	int r0 = blockIdx.y * NB;
	if (o >= rows) return;
	int nb = min(NB, n - r0);
	int chunks = cols / 32;
	const uint8_t *wr = w + (size_t)o * rowBytes;
	float acc[NB];
#pragma unroll
	for (int r = 0; r < NB; r++) acc[r] = 0.f;
	for (int c = lane; c < chunks; c += 2 * WARP) {
		Raw ra, rb;
		int c2 = c + WARP;
		fetch<T>(wr, c, ra);
		if (c2 < chunks) fetch<T>(wr, c2, rb);
		Chunk ch;
		unpack_raw<T>(wr, c, ra, ch);
		dot_rows<NB>(ch, xq, xd, xs, r0, nb, cols, c, acc);
		if (c2 < chunks) {
			unpack_raw<T>(wr, c2, rb, ch);
			dot_rows<NB>(ch, xq, xd, xs, r0, nb, cols, c2, acc);
		}
	}
#pragma unroll
	for (int r = 0; r < NB; r++) {
		float v = warp_sum(acc[r]);
		if (lane == 0 && r < nb) *seg_out(seg, rows, r0 + r, o) = v;
	}
}

// f_mm_h: the F16 product on float activations: a warp per output row, NB
// batch rows per block; lane l takes the 8-weight groups l, l+32, ... (16
// bytes each) in order, the next group's bytes loaded before the current
// one is used, and adds weight k of a group times x in order with fused
// multiply-adds; then mm_q's warp sum. Needs cols a multiple of 8. grid
// (ceil(rows/MM_WARPS), ceil(n/NB)), block 32*MM_WARPS.
template <int NB>
__device__ void f_mm_h(Seg seg, const __half *w, const float *x, int rows, int cols, int n) {
	int o = blockIdx.x * MM_WARPS + threadIdx.x / WARP;
	int lane = threadIdx.x % WARP;
	int r0 = blockIdx.y * NB;
	if (o >= rows) return;
	int nb = min(NB, n - r0);
	int groups = cols / 8;
	const __half *wr = w + (size_t)o * cols;
	float acc[NB];
#pragma unroll
	for (int r = 0; r < NB; r++) acc[r] = 0.f;
	uint4 cur = make_uint4(0, 0, 0, 0);
	if (lane < groups) cur = ld16(wr + 8 * lane);
	for (int g = lane; g < groups; g += WARP) {
		uint4 nxt = make_uint4(0, 0, 0, 0);
		if (g + WARP < groups) nxt = ld16(wr + 8 * (g + WARP));
		float wv[8] = {h16(cur.x), h16(cur.x >> 16), h16(cur.y), h16(cur.y >> 16),
		               h16(cur.z), h16(cur.z >> 16), h16(cur.w), h16(cur.w >> 16)};
#pragma unroll
		for (int r = 0; r < NB; r++) {
			if (r < nb) {
				const float *xr = x + (size_t)(r0 + r) * cols + 8 * g;
				float4 a = ldf4(xr), b = ldf4(xr + 4);
				float s = acc[r];
				s = fmaf(wv[0], a.x, s);
				s = fmaf(wv[1], a.y, s);
				s = fmaf(wv[2], a.z, s);
				s = fmaf(wv[3], a.w, s);
				s = fmaf(wv[4], b.x, s);
				s = fmaf(wv[5], b.y, s);
				s = fmaf(wv[6], b.z, s);
				s = fmaf(wv[7], b.w, s);
				acc[r] = s;
			}
		}
		cur = nxt;
	}
#pragma unroll
	for (int r = 0; r < NB; r++) {
		float v = warp_sum(acc[r]);
		if (lane == 0 && r < nb) *seg_out(seg, rows, r0 + r, o) = v;
	}
}

#define FMMQ(T, sfx, NB)                                                                                                             \
	extern "C" __global__ void f_mm_##sfx##_##NB(float *out0, float *out1, float *out2, int b1, int b2, const uint8_t *w, size_t rb, \
	                                             const int8_t *xq, const float *xd, const float *xs, int rows, int cols, int n) {     \
		f_mm_q<T, NB>(Seg{out0, out1, out2, b1, b2}, w, rb, xq, xd, xs, rows, cols, n);                                              \
	}
#define FMMQ_ALL(T, sfx) FMMQ(T, sfx, 8) FMMQ(T, sfx, 16) FMMQ(T, sfx, 32) FMMQ(T, sfx, 64)
FMMQ_ALL(T_Q8_0, q8_0)
FMMQ_ALL(T_Q4_0, q4_0)
FMMQ_ALL(T_Q4_K, q4_k)
FMMQ_ALL(T_Q5_K, q5_k)
FMMQ_ALL(T_Q6_K, q6_k)

#define FMMH(NB)                                                                                                                \
	extern "C" __global__ void f_mm_f16_##NB(float *out0, float *out1, float *out2, int b1, int b2, const __half *w, const float *x, \
	                                         int rows, int cols, int n) {                                                          \
		f_mm_h<NB>(Seg{out0, out1, out2, b1, b2}, w, x, rows, cols, n);                                                          \
	}
// F16 stops at 32 rows a block: at 64 the float accumulators and the
// activations a lane loads for each row do not fit its registers (ptxas
// spills), so a pass of 33 to 64 rows reads the F16 weights twice.
FMMH(8)
FMMH(16)
FMMH(32)

// ------------------------------------------------- RoPE and the cache

// f_rope: for row r (block r): with qn/kn, each head of q and k
// RMSNorm'ed by them (rmsnorm over rows*heads rows of hd values); q's and
// k's heads rotated (rope, by cos/sin[r]); then k and v stored in layer's
// slot *slot + r (store_kv). grid (n), block FAST_NORM.
template <typename K>
__device__ void f_rope(K *kv, float *q, float *k, const float *v, const float *qn, const float *kn, float eps, const float *cs, const float *sn,
                       const int *slot, int layer, int slots, int heads, int kvHeads, int hd, int ropeDim, int neox) {
	int r = blockIdx.x;
	int width = kvHeads * hd, half = ropeDim / 2;
	float *qr = q + (size_t)r * heads * hd;
	float *kr = k + (size_t)r * width;
	if (qn) {
		for (int h = 0; h < heads + kvHeads; h++) {
			float *x = h < heads ? qr + (size_t)h * hd : kr + (size_t)(h - heads) * hd;
			const float *w = h < heads ? qn : kn;
			float scale = rms_scale(x, hd, eps);
			for (int i = threadIdx.x; i < hd; i += FAST_NORM) x[i] = x[i] * scale * w[i];
			__syncthreads();
		}
	}
	for (int t = threadIdx.x; t < (heads + kvHeads) * half; t += FAST_NORM) {
		int h = t / half, i = t % half;
		float *p = h < heads ? qr + (size_t)h * hd : kr + (size_t)(h - heads) * hd;
		int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
		float c = cs[(size_t)r * half + i], s = sn[(size_t)r * half + i];
		float x0 = p[a], x1 = p[b];
		p[a] = x0 * c - x1 * s;
		p[b] = x0 * s + x1 * c;
	}
	__syncthreads();
	size_t lk = (size_t)2 * layer * slots * width, lv = lk + (size_t)slots * width;
	size_t d = (size_t)(*slot + r) * width;
	const float *vr = v + (size_t)r * width;
	for (int i = threadIdx.x; i < width; i += FAST_NORM) {
		kv[lk + d + i] = from_f32<K>(kr[i]);
		kv[lv + d + i] = from_f32<K>(vr[i]);
	}
}

extern "C" {
__global__ void f_rope_f32(float *kv, float *q, float *k, const float *v, const float *qn, const float *kn, float eps, const float *cs,
                           const float *sn, const int *slot, int layer, int slots, int heads, int kvHeads, int hd, int ropeDim, int neox) {
	f_rope<float>(kv, q, k, v, qn, kn, eps, cs, sn, slot, layer, slots, heads, kvHeads, hd, ropeDim, neox);
}
__global__ void f_rope_f16(__half *kv, float *q, float *k, const float *v, const float *qn, const float *kn, float eps, const float *cs,
                           const float *sn, const int *slot, int layer, int slots, int heads, int kvHeads, int hd, int ropeDim, int neox) {
	f_rope<__half>(kv, q, k, v, qn, kn, eps, cs, sn, slot, layer, slots, heads, kvHeads, hd, ropeDim, neox);
}
}

// ------------------------------------------------------------- attention

// FAST_GQA: the most query heads sharing one key/value head that f_att_*
// takes (more fall back to the verified attention).
#define FAST_GQA 8

// f_att: attention's arithmetic (kernel attention) for the g query heads
// sharing key/value head blockIdx.x, in one block: each visible slot's key
// and value are read once for all of them. For each head, the visible
// slots go to the ATT_WARPS warps by rank, each warp keeps an online
// softmax, and the warps merge at the end, exactly as attention does for
// that head alone; *past (device memory) is the context before the
// batch. With xq, the output row's chunks are quantised (quantize_q8) for
// the output projection. grid (kvHeads, n), block 32*ATT_WARPS; g <=
// FAST_GQA, hd <= 256.
template <typename K>
__device__ void f_att(float *out, const float *q, const K *kv, const uint8_t *mask, const int *pastp, int layer, int slots, int heads,
                      int kvHeads, int hd, float scl, float cap, int8_t *xq, float *xd, float *xs) {
	__shared__ float sq[FAST_GQA][256];
	__shared__ float sm[ATT_WARPS][FAST_GQA], sl[ATT_WARPS][FAST_GQA];
	__shared__ float sacc[ATT_WARPS][FAST_GQA][256];
	int kvh = blockIdx.x, r = blockIdx.y, n = gridDim.y;
	int g = heads / kvHeads;
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	int past = *pastp;
	int width = kvHeads * hd, total = past + n;
	const float *qr = q + ((size_t)r * heads + (size_t)kvh * g) * hd;
	for (int e = threadIdx.x; e < g * hd; e += blockDim.x) sq[e / hd][e % hd] = qr[e];
	__syncthreads();
	const K *kb = kv + (size_t)2 * layer * slots * width + (size_t)kvh * hd;
	const K *vb = kb + (size_t)slots * width;
	float m[FAST_GQA], l[FAST_GQA], acc[FAST_GQA][ATT_MAXD];
#pragma unroll
	for (int h = 0; h < FAST_GQA; h++) {
		m[h] = -INFINITY;
		l[h] = 0.f;
#pragma unroll
		for (int i = 0; i < ATT_MAXD; i++) acc[h][i] = 0.f;
	}
	auto step = [&](int s) {
		const K *kr = kb + (size_t)s * width;
		const K *vr = vb + (size_t)s * width;
		float kk[ATT_MAXD], vv[ATT_MAXD];
#pragma unroll
		for (int i = 0; i < ATT_MAXD; i++) {
			int d = lane + WARP * i;
			kk[i] = d < hd ? to_f32<K>(kr[d]) : 0.f;
			vv[i] = d < hd ? to_f32<K>(vr[d]) : 0.f;
		}
#pragma unroll
		for (int h = 0; h < FAST_GQA; h++) {
			if (h < g) {
				float dot = 0.f;
#pragma unroll
				for (int i = 0; i < ATT_MAXD; i++) {
					int d = lane + WARP * i;
					if (d < hd) dot += sq[h][d] * kk[i];
				}
				float sc = warp_sum(dot) * scl;
				if (cap > 0.f) sc = cap * tanhf(sc / cap);
				float mn = fmaxf(m[h], sc);
				float corr = expf(m[h] - mn), p = expf(sc - mn);
				l[h] = l[h] * corr + p;
#pragma unroll
				for (int i = 0; i < ATT_MAXD; i++) {
					int d = lane + WARP * i;
					if (d < hd) acc[h][i] = acc[h][i] * corr + p * vv[i];
				}
				m[h] = mn;
			}
		}
	};
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
#pragma unroll
	for (int h = 0; h < FAST_GQA; h++) {
		if (h < g) {
			if (lane == 0) {
				sm[warp][h] = m[h];
				sl[warp][h] = l[h];
			}
#pragma unroll
			for (int i = 0; i < ATT_MAXD; i++) {
				int d = lane + WARP * i;
				if (d < hd) sacc[warp][h][d] = acc[h][i];
			}
		}
	}
	__syncthreads();
	float *orow = out + ((size_t)r * heads + (size_t)kvh * g) * hd;
	for (int e = threadIdx.x; e < g * hd; e += blockDim.x) {
		int h = e / hd, d = e % hd;
		float mx = -INFINITY;
		for (int w = 0; w < ATT_WARPS; w++) mx = fmaxf(mx, sm[w][h]);
		float L = 0.f;
		for (int w = 0; w < ATT_WARPS; w++)
			if (sl[w][h] > 0.f) L += sl[w][h] * expf(sm[w][h] - mx);
		float o = 0.f;
		for (int w = 0; w < ATT_WARPS; w++)
			if (sl[w][h] > 0.f) o += sacc[w][h][d] * expf(sm[w][h] - mx);
		orow[e] = L > 0.f ? o / L : 0.f;
	}
	if (xq) {
		__syncthreads();
		int qd = heads * hd, c0 = kvh * g * hd / 32;
		size_t k0 = (size_t)r * (qd / 32) + c0;
		quantise_row(orow, g * hd / 32, xq + (size_t)r * qd + 32 * c0, xd + k0, xs + k0);
	}
}

extern "C" {
__global__ void f_att_f32(float *out, const float *q, const float *kv, const uint8_t *mask, const int *past, int layer, int slots, int heads,
                          int kvHeads, int hd, float scl, float cap, int8_t *xq, float *xd, float *xs) {
	f_att<float>(out, q, kv, mask, past, layer, slots, heads, kvHeads, hd, scl, cap, xq, xd, xs);
}
__global__ void f_att_f16(float *out, const float *q, const __half *kv, const uint8_t *mask, const int *past, int layer, int slots, int heads,
                          int kvHeads, int hd, float scl, float cap, int8_t *xq, float *xd, float *xs) {
	f_att<__half>(out, q, kv, mask, past, layer, slots, heads, kvHeads, hd, scl, cap, xq, xd, xs);
}
}
