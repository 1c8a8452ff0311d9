//go:build cuda

package cuda

// The driver calls the fast path needs that gorgonia.org/cu does not
// offer: page-locked host memory, stream capture into graphs and graph
// launches, and a launch of many kernels in one call (cu's Launch makes two
// C allocations and one cgo call per launch). The graph and page-locked
// memory functions are found with dlsym in the loaded driver, so a driver
// without one of them still runs the fast path, without graphs or with
// pageable staging (Device.Describe says which), rather than failing to
// start; cuLaunchKernel and the async copies are the binding's own.

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>

typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*inst_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*glaunch_fn)(CUgraphExec, CUstream);
typedef CUresult (*xdestroy_fn)(CUgraphExec);
typedef CUresult (*gdestroy_fn)(CUgraph);
typedef CUresult (*halloc_fn)(void **, size_t, unsigned int);
typedef CUresult (*hfree_fn)(void *);

static begin_fn p_begin;
static end_fn p_end;
static inst_fn p_inst;
static glaunch_fn p_glaunch;
static xdestroy_fn p_xdestroy;
static gdestroy_fn p_gdestroy;
static halloc_fn p_halloc;
static hfree_fn p_hfree;

// drv_load finds the functions; bit 1: graphs, bit 2: page-locked memory.
static int drv_load(void) {
	p_begin = (begin_fn)dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2");
	p_end = (end_fn)dlsym(RTLD_DEFAULT, "cuStreamEndCapture");
	p_inst = (inst_fn)dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags");
	p_glaunch = (glaunch_fn)dlsym(RTLD_DEFAULT, "cuGraphLaunch");
	p_xdestroy = (xdestroy_fn)dlsym(RTLD_DEFAULT, "cuGraphExecDestroy");
	p_gdestroy = (gdestroy_fn)dlsym(RTLD_DEFAULT, "cuGraphDestroy");
	p_halloc = (halloc_fn)dlsym(RTLD_DEFAULT, "cuMemHostAlloc");
	p_hfree = (hfree_fn)dlsym(RTLD_DEFAULT, "cuMemFreeHost");
	int have = 0;
	if (p_begin && p_end && p_inst && p_glaunch && p_xdestroy && p_gdestroy)
		have |= 1;
	if (p_halloc && p_hfree)
		have |= 2;
	return have;
}

// A launch as drv_run takes it: the kernel, grid, block, and its
// arguments at args[off..off+nargs), each in an 8-byte slot.
typedef struct {
	CUfunction f;
	unsigned g[3], b[3];
	int off, nargs;
} drv_launch;

static CUresult drv_run(const drv_launch *ls, int n, const uint64_t *args, CUstream s, int *failed) {
	void *ps[64];
	for (int i = 0; i < n; i++) {
		const drv_launch *l = &ls[i];
		if (l->nargs > 64)
			return CUDA_ERROR_INVALID_VALUE;
		for (int j = 0; j < l->nargs; j++)
			ps[j] = (void *)&args[l->off + j];
		CUresult r = cuLaunchKernel(l->f, l->g[0], l->g[1], l->g[2], l->b[0], l->b[1], l->b[2], 0, s, ps, NULL);
		if (r != CUDA_SUCCESS) {
			*failed = i;
			return r;
		}
	}
	return CUDA_SUCCESS;
}

// drv_capture records the launches into a graph and instantiates it; the
// capture always ends, even when a launch failed.
static CUresult drv_capture(const drv_launch *ls, int n, const uint64_t *args, CUstream s, CUgraphExec *x, int *failed) {
	CUresult r = p_begin(s, CU_STREAM_CAPTURE_MODE_RELAXED);
	if (r != CUDA_SUCCESS)
		return r;
	r = drv_run(ls, n, args, s, failed);
	CUgraph g = NULL;
	CUresult e = p_end(s, &g);
	if (r == CUDA_SUCCESS)
		r = e;
	if (r == CUDA_SUCCESS)
		r = p_inst(x, g, 0);
	if (g)
		p_gdestroy(g);
	return r;
}

// drv_error_name is the driver's name of r, or NULL.
static const char *drv_error_name(CUresult r) {
	typedef CUresult (*name_fn)(CUresult, const char **);
	name_fn f = (name_fn)dlsym(RTLD_DEFAULT, "cuGetErrorName");
	const char *s = NULL;
	if (f == NULL || f(r, &s) != CUDA_SUCCESS)
		return NULL;
	return s;
}

static CUresult drv_glaunch(CUgraphExec x, CUstream s) { return p_glaunch(x, s); }
static CUresult drv_xdestroy(CUgraphExec x) { return p_xdestroy(x); }
static CUresult drv_halloc(void **p, size_t n) { return p_halloc(p, n, 0); }
static CUresult drv_hfree(void *p) { return p_hfree(p); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// drv is what the loaded driver offers beyond the binding.
var drv struct {
	once          sync.Once
	graphs, locks bool
}

func loadDrv() {
	drv.once.Do(func() {
		have := C.drv_load()
		drv.graphs, drv.locks = have&1 != 0, have&2 != 0
	})
}

// driverError is a driver call's CUresult.
type driverError int

func (e driverError) Error() string {
	if s := C.drv_error_name(C.CUresult(e)); s != nil {
		return C.GoString(s)
	}
	return fmt.Sprintf("CUDA error %d", int(e))
}

// drvLaunch is one launch of a batch (C's drv_launch).
type drvLaunch = C.drv_launch

// cuFunc is a kernel as C sees it.
func cuFunc(f cu.Function) C.CUfunction {
	return *(*C.CUfunction)(unsafe.Pointer(&f))
}

func cStream(s cu.Stream) C.CUstream { return C.CUstream(unsafe.Pointer(s.C())) }

func newDrvLaunch(f cu.Function, l Launch, off, nargs int) drvLaunch {
	return drvLaunch{f: cuFunc(f),
		g:   [3]C.unsigned{C.unsigned(l.Grid[0]), C.unsigned(l.Grid[1]), C.unsigned(l.Grid[2])},
		b:   [3]C.unsigned{C.unsigned(l.Block[0]), C.unsigned(l.Block[1]), C.unsigned(l.Block[2])},
		off: C.int(off), nargs: C.int(nargs)}
}

// runLaunches issues ls on s; it returns the index of the launch that
// failed with the driver's error.
func runLaunches(ls []drvLaunch, args []uint64, s cu.Stream) (int, error) {
	if len(ls) == 0 {
		return 0, nil
	}
	var failed C.int
	if r := C.drv_run(&ls[0], C.int(len(ls)), (*C.uint64_t)(unsafe.Pointer(&args[0])), cStream(s), &failed); r != C.CUDA_SUCCESS {
		return int(failed), driverError(r)
	}
	return 0, nil
}

// graphExec is an instantiated graph.
type graphExec = C.CUgraphExec

// captureLaunches records ls into a graph and instantiates it.
func captureLaunches(ls []drvLaunch, args []uint64, s cu.Stream) (graphExec, error) {
	var x C.CUgraphExec
	var failed C.int
	if r := C.drv_capture(&ls[0], C.int(len(ls)), (*C.uint64_t)(unsafe.Pointer(&args[0])), cStream(s), &x, &failed); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("capturing %d launches into a graph (launch %d): %w", len(ls), int(failed), driverError(r))
	}
	return x, nil
}

func launchGraph(x graphExec, s cu.Stream) error {
	if r := C.drv_glaunch(x, cStream(s)); r != C.CUDA_SUCCESS {
		return driverError(r)
	}
	return nil
}

func destroyGraph(x graphExec) { C.drv_xdestroy(x) }

// hostAlloc takes n bytes of page-locked host memory, from which copies
// run asynchronously at the bus's rate.
func hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.drv_halloc(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuda: %d bytes of page-locked host memory: %w", n, driverError(r))
	}
	return p, nil
}

func hostFree(p unsafe.Pointer) { C.drv_hfree(p) }
