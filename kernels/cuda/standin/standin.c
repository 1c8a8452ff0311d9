/* A stand-in for libcuda.so.1 on host memory (standin.h says what for).
 *
 * It implements what gorgonia.org/cu and kernels/cuda call on the way
 * through a model: one device of compute capability 9.0, contexts,
 * streams and events that succeed, device memory that is zeroed host
 * memory, copies that are memcpy, modules that keep their PTX text so a
 * kernel the PTX lacks is refused as the driver refuses it, and launches
 * that are checked against the hardware's grid and block limits, counted
 * and logged, and do nothing. Every other driver function the binding
 * links (unsupported.c) fails with CUDA_ERROR_NOT_SUPPORTED and is
 * counted, so a test notices when the backend starts calling one.
 *
 * With ARBORIST_STANDIN_RUN=1 in its environment it also runs every
 * kernel it is asked to launch, on the CPU (emu/: the kernels' source
 * compiled for the host, a block's threads as fibers), so that what the
 * kernels compute can be checked here against references and against
 * each other; kernels then run in the order they are issued, one at a
 * time, as one stream would run them.
 *
 * Streams can be captured into graphs (cuStreamBeginCapture ...
 * cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch): a
 * capture records each launch with a copy of its arguments, whose sizes
 * the stand-in reads from the kernel's .entry in the PTX, and a graph
 * launch issues the recorded launches in order, each counted, logged and
 * (when running kernels) run as a launch is.
 *
 * make cuda-check builds it as kernels/cuda/standin/build/libcuda.so.1,
 * which only the tests run on it load (through LD_LIBRARY_PATH);
 * arborist-cuda itself is linked against, and runs on, the real driver.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"
#include "emu/emu_run.h"

#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

/* What the stand-in reports as its device: an H100-like part, so the
 * backend picks its sm_90 PTX and sizes its launches as it would there. */
#define DEVICE_NAME "Arborist stand-in driver (host memory, kernels not run)"
#define DEVICE_NAME_RUNS "Arborist stand-in driver (host memory, kernels run on the CPU)"
#define DEVICE_MEMORY ((size_t)80 << 30)
#define MAX_KERNELS 1024
#define LOG_CAP ((size_t)1 << 24)

struct CUctx_st { int unused; };
#define MAX_PARAMS 32

/* A launch as a capture records it: the kernel, its grid and block, and
 * a copy of its arguments. */
struct node {
	CUfunction f;
	unsigned grid[3], block[3];
	unsigned char args[MAX_PARAMS][8];
};

/* A stream, and the launches a capture of it has recorded. */
struct CUstream_st {
	int capturing;
	struct node *nodes;
	size_t n, cap;
};
struct CUgraph_st { struct node *nodes; size_t n; };
struct CUgraphExec_st { struct node *nodes; size_t n; };
struct CUevent_st { int unused; };
struct CUmod_st { char *ptx; };
/* A kernel: its id in the launch log, its arguments' sizes (from the
 * PTX), and its host entry when kernels run. */
struct CUfunc_st {
	int32_t id;
	int nparams;
	int size[MAX_PARAMS];
	emu_kernel run;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t counts[STANDIN_NCOUNTERS];
static struct CUctx_st the_ctx;
static CUcontext current;
static struct CUfunc_st kernels[MAX_KERNELS];
static char *kernel_names[MAX_KERNELS];
static int32_t nkernels;
static int32_t *launch_log;
static size_t log_len, log_cap;
static const char *last_unsupported;
static int run_kernels; /* ARBORIST_STANDIN_RUN=1: launches run on the CPU */
static int capturing;   /* streams being captured */

static void lock(void) { pthread_mutex_lock(&mu); }
static void unlock(void) { pthread_mutex_unlock(&mu); }

static void add(int counter, uint64_t v) {
	lock();
	counts[counter] += v;
	unlock();
}

/* ------------------------------------------------- the stand-in's API */

EXPORT int arborist_standin_counts(uint64_t *v, int n) {
	if (n > STANDIN_NCOUNTERS)
		n = STANDIN_NCOUNTERS;
	lock();
	memcpy(v, counts, (size_t)n * sizeof counts[0]);
	unlock();
	return n;
}

EXPORT void arborist_standin_reset(void) {
	lock();
	uint64_t live = counts[STANDIN_LIVE_BYTES];
	memset(counts, 0, sizeof counts);
	counts[STANDIN_LIVE_BYTES] = live;
	log_len = 0;
	unlock();
}

EXPORT size_t arborist_standin_launch_log(int32_t *ids, size_t cap) {
	lock();
	size_t n = log_len < cap ? log_len : cap;
	if (n > 0)
		memcpy(ids, launch_log, n * sizeof ids[0]);
	size_t total = log_len;
	unlock();
	return total;
}

EXPORT const char *arborist_standin_kernel_name(int32_t id) {
	lock();
	const char *s = id >= 0 && id < nkernels ? kernel_names[id] : NULL;
	unlock();
	return s;
}

EXPORT int arborist_standin_runs(void) { return run_kernels; }

EXPORT const char *arborist_standin_last_unsupported(void) {
	lock();
	const char *s = last_unsupported;
	unlock();
	return s;
}

/* standin_unsupported is what every function of unsupported.c calls. */
__attribute__((visibility("hidden"))) int standin_unsupported(const char *name) {
	lock();
	counts[STANDIN_UNSUPPORTED]++;
	last_unsupported = name;
	unlock();
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---------------------------------------------- initialisation, device */

EXPORT CUresult cuInit(unsigned int flags) {
	const char *r = getenv("ARBORIST_STANDIN_RUN");
	lock();
	run_kernels = r != NULL && strcmp(r, "1") == 0;
	unlock();
	return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* in_capture reports a call that waits for the device while a stream is
 * being captured, which the driver refuses (and which invalidates the
 * capture). */
static int in_capture(void) {
	lock();
	int c = capturing;
	unlock();
	return c;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
	*n = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	lock();
	const char *n = run_kernels ? DEVICE_NAME_RUNS : DEVICE_NAME;
	unlock();
	strncpy(name, n, (size_t)len - 1);
	name[len - 1] = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem(size_t *bytes, CUdevice d) {
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = DEVICE_MEMORY;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) {
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	memset(u, 0, sizeof *u);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break; /* kHz */
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
	default: *v = 0;
	}
	return CUDA_SUCCESS;
}

/* ----------------------------------------------------------- contexts */

EXPORT CUresult cuCtxCreate(CUcontext *c, unsigned int flags, CUdevice d) {
	(void)flags;
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*c = &the_ctx;
	lock();
	current = &the_ctx;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	if (d != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*c = &the_ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
	return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuCtxDestroy(CUcontext c) {
	lock();
	if (current == c)
		current = NULL;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
	lock();
	current = c;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c) {
	lock();
	*c = current;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent(CUcontext c) { return cuCtxSetCurrent(c); }

EXPORT CUresult cuCtxPopCurrent(CUcontext *c) {
	lock();
	if (c)
		*c = current;
	current = NULL;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
	*d = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetApiVersion(CUcontext c, unsigned int *v) {
	(void)c;
	*v = 3020;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetFlags(unsigned int *flags) {
	*flags = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void) {
	if (in_capture())
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	add(STANDIN_SYNCS, 1);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- memory */

/* An allocation is calloc'd host memory, aligned to 256 bytes as the
 * driver's are, with its base and size just below the address handed
 * out. */
struct header {
	void *base;
	size_t size;
};

EXPORT CUresult cuMemGetInfo(size_t *free, size_t *total) {
	lock();
	uint64_t live = counts[STANDIN_LIVE_BYTES];
	unlock();
	*total = DEVICE_MEMORY;
	*free = live < DEVICE_MEMORY ? DEVICE_MEMORY - live : 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t size) {
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	size_t extra = sizeof(struct header) + 255;
	char *base = calloc(1, size + extra);
	if (base == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t a = ((uintptr_t)base + sizeof(struct header) + 255) & ~(uintptr_t)255;
	struct header *h = (struct header *)a - 1;
	h->base = base;
	h->size = size;
	*p = (CUdeviceptr)a;
	lock();
	counts[STANDIN_ALLOCS]++;
	counts[STANDIN_LIVE_BYTES] += size;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree(CUdeviceptr p) {
	if (p == 0)
		return CUDA_SUCCESS;
	struct header *h = (struct header *)(uintptr_t)p - 1;
	lock();
	counts[STANDIN_FREES]++;
	counts[STANDIN_LIVE_BYTES] -= h->size;
	unlock();
	free(h->base);
	return CUDA_SUCCESS;
}

static CUresult copy(void *dst, const void *src, size_t n, int what, int bytes, int blocking) {
	if (blocking && in_capture())
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (n > 0)
		memcpy(dst, src, n);
	lock();
	counts[what]++;
	counts[bytes] += n;
	if (what == STANDIN_ASYNC_HTOD || what == STANDIN_ASYNC_DTOH) {
		counts[STANDIN_ASYNC]++;
		counts[STANDIN_ASYNC_BYTES] += n;
	}
	if (blocking)
		counts[STANDIN_BLOCKING]++;
	unlock();
	return CUDA_SUCCESS;
}

#define DEV(p) ((void *)(uintptr_t)(p))

/* stream_object: whether s is a stream cuStreamCreate made, not the
 * default stream (NULL) or one of the driver's special handles
 * (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
static int stream_object(CUstream s) { return (uintptr_t)s > 16; }

/* stream_capturing: whether s is being captured (copies and memsets are
 * not captured: the backend captures launches only). */
static int stream_capturing(CUstream s) {
	lock();
	int c = stream_object(s) && s->capturing;
	unlock();
	return c;
}

/* Page-locked host memory is host memory here; the stand-in keeps where
 * it is, because an asynchronous copy to or from any other host memory
 * (pageable) waits, as the driver's does, for the launches before it. */
#define MAX_LOCKED 256
static struct {
	char *p;
	size_t n;
} locked[MAX_LOCKED];

EXPORT CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags) {
	(void)flags;
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	*p = calloc(1, size);
	if (*p == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lock();
	int i;
	for (i = 0; i < MAX_LOCKED && locked[i].p != NULL; i++)
		;
	if (i < MAX_LOCKED) {
		locked[i].p = *p;
		locked[i].n = size;
	}
	counts[STANDIN_HOST_ALLOCS]++;
	unlock();
	if (i == MAX_LOCKED) {
		free(*p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void *p) {
	lock();
	for (int i = 0; i < MAX_LOCKED; i++)
		if (locked[i].p == p)
			locked[i].p = NULL;
	unlock();
	free(p);
	return CUDA_SUCCESS;
}

/* is_locked: whether host memory [p, p+n) is page-locked. */
static int is_locked(const void *p, size_t n) {
	const char *c = p;
	int r = 0;
	lock();
	for (int i = 0; i < MAX_LOCKED && !r; i++)
		r = locked[i].p != NULL && c >= locked[i].p && c + n <= locked[i].p + locked[i].n;
	unlock();
	return r;
}

EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
	return copy(DEV(dst), src, n, STANDIN_HTOD, STANDIN_HTOD_BYTES, 1);
}

EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
	return copy(dst, DEV(src), n, STANDIN_DTOH, STANDIN_DTOH_BYTES, 1);
}

EXPORT CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	return copy(DEV(dst), DEV(src), n, STANDIN_DTOD, STANDIN_DTOD_BYTES, 0);
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	return copy(DEV(dst), DEV(src), n, STANDIN_DTOD, STANDIN_DTOD_BYTES, 0);
}

EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return copy(DEV(dst), src, n, STANDIN_ASYNC_HTOD, STANDIN_ASYNC_HTOD_BYTES, !is_locked(src, n));
}

EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return copy(dst, DEV(src), n, STANDIN_ASYNC_DTOH, STANDIN_ASYNC_DTOH_BYTES, !is_locked(dst, n));
}

EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return copy(DEV(dst), DEV(src), n, STANDIN_DTOD, STANDIN_DTOD_BYTES, 0);
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return copy(DEV(dst), DEV(src), n, STANDIN_DTOD, STANDIN_DTOD_BYTES, 0);
}

static CUresult fill(CUdeviceptr p, unsigned int v, size_t n, size_t width) {
	char *d = DEV(p);
	if (width == 1) {
		memset(d, (int)(v & 0xff), n);
	} else {
		for (size_t i = 0; i < n; i++)
			memcpy(d + i * width, &v, width); /* little-endian: the low bytes */
	}
	add(STANDIN_MEMSETS, 1);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8(CUdeviceptr p, unsigned char v, size_t n) { return fill(p, v, n, 1); }
EXPORT CUresult cuMemsetD16(CUdeviceptr p, unsigned short v, size_t n) { return fill(p, v, n, 2); }
EXPORT CUresult cuMemsetD32(CUdeviceptr p, unsigned int v, size_t n) { return fill(p, v, n, 4); }

EXPORT CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return fill(p, v, n, 1);
}

EXPORT CUresult cuMemsetD16Async(CUdeviceptr p, unsigned short v, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return fill(p, v, n, 2);
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr p, unsigned int v, size_t n, CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	return fill(p, v, n, 4);
}

/* ------------------------------------------------------------ modules */

static CUresult load(CUmodule *m, const char *ptx) {
	struct CUmod_st *mod = calloc(1, sizeof *mod);
	if (mod == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	mod->ptx = strdup(ptx ? ptx : "");
	if (mod->ptx == NULL) {
		free(mod);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*m = mod;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) { return load(m, image); }

EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v) {
	(void)n, (void)o, (void)v;
	return load(m, image);
}

EXPORT CUresult cuModuleUnload(CUmodule m) {
	if (m) {
		free(m->ptx);
		free(m);
	}
	return CUDA_SUCCESS;
}

/* defines says whether ptx has an entry point called name: ".entry name("
 * (or whitespace after the name). */
static int defines(const char *ptx, const char *name) {
	size_t n = strlen(name);
	for (const char *p = strstr(ptx, ".entry "); p; p = strstr(p + 1, ".entry ")) {
		const char *s = p + strlen(".entry ");
		if (strncmp(s, name, n) == 0 && (s[n] == '(' || s[n] == ' ' || s[n] == '\n' || s[n] == '\t'))
			return 1;
	}
	return 0;
}

/* params reads the sizes of kernel name's arguments from its .entry in
 * ptx (".param .u64 name_param_0, .param .u32 ..."); -1 when it cannot. */
static int params(const char *ptx, const char *name, int *size) {
	size_t n = strlen(name);
	const char *p;
	for (p = strstr(ptx, ".entry "); p; p = strstr(p + 1, ".entry ")) {
		const char *s = p + strlen(".entry ");
		if (strncmp(s, name, n) == 0 && s[n] == '(')
			break;
	}
	if (p == NULL)
		return -1;
	const char *end = strchr(p, ')');
	int k = 0;
	for (const char *q = strstr(p, ".param "); q && q < end; q = strstr(q + 1, ".param ")) {
		if (k == MAX_PARAMS)
			return -1;
		const char *t = q + strlen(".param ");
		if (strncmp(t, ".align ", 7) == 0) /* a struct passed by value: not used */
			return -1;
		if (strncmp(t + 2, "64", 2) == 0)
			size[k++] = 8;
		else if (strncmp(t + 2, "32", 2) == 0)
			size[k++] = 4;
		else
			return -1;
	}
	return k;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
	if (m == NULL || name == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (!defines(m->ptx, name))
		return CUDA_ERROR_NOT_FOUND;
	int size[MAX_PARAMS];
	int np = params(m->ptx, name, size);
	if (np < 0)
		return CUDA_ERROR_INVALID_PTX;
	CUresult r = CUDA_SUCCESS;
	lock();
	int32_t i;
	for (i = 0; i < nkernels && strcmp(kernel_names[i], name) != 0; i++)
		;
	if (i == nkernels) {
		if (nkernels == MAX_KERNELS || (kernel_names[i] = strdup(name)) == NULL) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			kernels[i].id = i;
			kernels[i].nparams = np;
			memcpy(kernels[i].size, size, sizeof size);
			kernels[i].run = arborist_emu_kernel(name);
			nkernels++;
		}
	}
	if (r == CUDA_SUCCESS)
		*f = &kernels[i];
	unlock();
	return r;
}

EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
	(void)f;
	*v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c) {
	(void)f, (void)c;
	return CUDA_SUCCESS;
}

/* ----------------------------------------------------------- launches */

/* issue counts and logs a launch and, when kernels run, runs it. */
static CUresult issue(const struct node *l) {
	lock();
	counts[STANDIN_LAUNCHES]++;
	counts[STANDIN_BLOCKS] += (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
	if (log_len == log_cap && log_cap < LOG_CAP) {
		size_t c = log_cap ? 2 * log_cap : 4096;
		int32_t *g = realloc(launch_log, c * sizeof *g);
		if (g) {
			launch_log = g;
			log_cap = c;
		}
	}
	if (log_len < log_cap)
		launch_log[log_len++] = l->f->id;
	else
		counts[STANDIN_LOG_DROPPED]++;
	int run = run_kernels;
	unlock();
	if (!run)
		return CUDA_SUCCESS;
	if (l->f->run == NULL) {
		fprintf(stderr, "stand-in driver: no host code for kernel %s\n", kernel_names[l->f->id]);
		return CUDA_ERROR_NOT_FOUND;
	}
	void *ps[MAX_PARAMS];
	for (int i = 0; i < l->f->nparams; i++)
		ps[i] = (void *)l->args[i];
	char err[512];
	if (arborist_emu_run(l->f->run, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], ps, err,
	                     sizeof err) != 0) {
		fprintf(stderr, "stand-in driver: kernel %s (grid %u,%u,%u block %u,%u,%u): %s\n", kernel_names[l->f->id],
		        l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2], err);
		return CUDA_ERROR_LAUNCH_FAILED;
	}
	return CUDA_SUCCESS;
}

/* cuLaunchKernel refuses what the hardware refuses (an empty grid, more
 * than 1024 threads a block, a grid beyond its limits), then issues the
 * launch, or records it when its stream is being captured. The arguments
 * are copied at the call, as the driver copies them. */
EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                               CUstream s, void **params, void **extra) {
	(void)shared, (void)extra;
	if (f == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (gx > 2147483647u || gy > 65535 || gz > 65535 || bx > 1024 || by > 1024 || bz > 64 ||
	    (uint64_t)bx * by * bz > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (f->nparams > 0 && params == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	struct node l = {.f = f, .grid = {gx, gy, gz}, .block = {bx, by, bz}};
	for (int i = 0; i < f->nparams; i++)
		memcpy(l.args[i], params[i], (size_t)f->size[i]);
	lock();
	if (stream_object(s) && s->capturing) {
		if (s->n == s->cap) {
			size_t c = s->cap ? 2 * s->cap : 256;
			struct node *g = realloc(s->nodes, c * sizeof *g);
			if (g == NULL) {
				unlock();
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			s->nodes = g;
			s->cap = c;
		}
		s->nodes[s->n++] = l;
		counts[STANDIN_CAPTURED]++;
		unlock();
		return CUDA_SUCCESS;
	}
	unlock();
	return issue(&l);
}

/* ------------------------------------------------------------- graphs */

EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
	(void)mode;
	if (!stream_object(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot be captured */
	lock();
	CUresult r = CUDA_SUCCESS;
	if (s->capturing) {
		r = CUDA_ERROR_ILLEGAL_STATE;
	} else {
		s->capturing = 1;
		s->n = 0;
		capturing++;
	}
	unlock();
	return r;
}

EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
	if (!stream_object(s))
		return CUDA_ERROR_INVALID_VALUE;
	struct CUgraph_st *graph = calloc(1, sizeof *graph);
	if (graph == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	lock();
	if (!s->capturing) {
		unlock();
		free(graph);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	s->capturing = 0;
	capturing--;
	graph->nodes = s->nodes;
	graph->n = s->n;
	s->nodes = NULL;
	s->n = s->cap = 0;
	unlock();
	*g = graph;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
	lock();
	*st = stream_object(s) && s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	unlock();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags) {
	(void)flags;
	if (g == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUgraphExec_st *x = calloc(1, sizeof *x);
	if (x == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (g->n > 0) {
		x->nodes = malloc(g->n * sizeof *x->nodes);
		if (x->nodes == NULL) {
			free(x);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(x->nodes, g->nodes, g->n * sizeof *x->nodes);
	}
	x->n = g->n;
	add(STANDIN_INSTANTIATES, 1);
	*e = x;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
	if (e == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	add(STANDIN_GRAPH_LAUNCHES, 1);
	for (size_t i = 0; i < e->n; i++) {
		CUresult r = issue(&e->nodes[i]);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
	if (e) {
		free(e->nodes);
		free(e);
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph g) {
	if (g) {
		free(g->nodes);
		free(g);
	}
	return CUDA_SUCCESS;
}

/* ---------------------------------------------------- streams, events */

static struct CUevent_st an_event;

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
	(void)flags;
	*s = calloc(1, sizeof **s);
	return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int prio) {
	(void)prio;
	return cuStreamCreate(s, flags);
}

EXPORT CUresult cuStreamDestroy(CUstream s) {
	if (stream_object(s)) {
		free(s->nodes);
		free(s);
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream s) {
	(void)s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
	if (stream_capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	add(STANDIN_SYNCS, 1);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
	(void)s, (void)e, (void)flags;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags) {
	(void)flags;
	*e = &an_event;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy(CUevent e) {
	(void)e;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
	(void)e, (void)s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent e) {
	(void)e;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
	(void)e;
	add(STANDIN_SYNCS, 1);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
	(void)a, (void)b;
	*ms = 0;
	return CUDA_SUCCESS;
}
