//go:build cuda

package cuda

// The stand-in driver's counters (kernels/cuda/standin), read through
// dlsym so the same binary runs on the real driver, where the symbols are
// absent and StandIn and StandInRuns report false. The stand-in lets the
// backend's host path (its launches, copies and synchronisations per
// pass) be counted and timed on a machine without a GPU; kernels do not
// run on it unless ARBORIST_STANDIN_RUN=1 asks it to run them on the CPU,
// where what they compute is checked as on a GPU (slowly).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include "standin/standin.h"

typedef int (*counts_fn)(uint64_t *, int);
typedef void (*reset_fn)(void);
typedef size_t (*log_fn)(int32_t *, size_t);
typedef const char *(*name_fn)(int32_t);
typedef const char *(*last_fn)(void);
typedef int (*runs_fn)(void);

static void *standin_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }
static int standin_counts(void *f, uint64_t *v, int n) { return ((counts_fn)f)(v, n); }
static void standin_reset(void *f) { ((reset_fn)f)(); }
static size_t standin_log(void *f, int32_t *ids, size_t cap) { return ((log_fn)f)(ids, cap); }
static const char *standin_name(void *f, int32_t id) { return ((name_fn)f)(id); }
static const char *standin_last(void *f) { return ((last_fn)f)(); }
static int standin_runs(void *f) { return ((runs_fn)f)(); }
*/
import "C"

import (
	"sync"
	"unsafe"
)

// StandInCounts is what the stand-in driver counted since its last reset
// (standin.h describes each counter).
type StandInCounts struct {
	Launches          uint64
	HtoD, HtoDBytes   uint64 // synchronous copies to the device
	DtoH, DtoHBytes   uint64 // synchronous copies to the host
	DtoD, DtoDBytes   uint64 // copies inside device memory
	Blocking          uint64 // copies that wait for every launch before them
	Async, AsyncBytes uint64 // asynchronous copies to or from the host
	Memsets, Syncs    uint64
	Allocs, Frees     uint64
	LiveBytes         uint64 // allocated and not freed (never reset)
	Unsupported       uint64 // calls of driver functions the stand-in lacks
	LogDropped        uint64 // launches beyond the log's capacity
	Blocks            uint64 // thread blocks launched (grid sizes summed)
	GraphLaunches     uint64 // graphs launched (their launches are in Launches)
	Instantiates      uint64 // graphs instantiated from captures
	Captured          uint64 // launches recorded by captures, not issued
	HostAllocs        uint64 // page-locked host allocations
	// of Async: copies to the device and to the host
	AsyncHtoD, AsyncHtoDBytes uint64
	AsyncDtoH, AsyncDtoHBytes uint64
	// LastUnsupported names the last of those calls, "" when none.
	LastUnsupported string
}

// The stand-in's functions, found once; nil under a real driver.
var standIn struct {
	once                           sync.Once
	counts, reset, log, name, last unsafe.Pointer
	loaded, runs                   bool

	mu    sync.Mutex
	names map[int32]string // kernel ids already named
}

func loadStandIn() {
	standIn.once.Do(func() {
		sym := func(name string) unsafe.Pointer {
			c := C.CString(name)
			defer C.free(unsafe.Pointer(c))
			return C.standin_sym(c)
		}
		standIn.counts = sym("arborist_standin_counts")
		standIn.reset = sym("arborist_standin_reset")
		standIn.log = sym("arborist_standin_launch_log")
		standIn.name = sym("arborist_standin_kernel_name")
		standIn.last = sym("arborist_standin_last_unsupported")
		runs := sym("arborist_standin_runs")
		standIn.loaded = standIn.counts != nil && standIn.reset != nil && standIn.log != nil &&
			standIn.name != nil && standIn.last != nil && runs != nil
		// cu's package init has called cuInit, which read the stand-in's
		// ARBORIST_STANDIN_RUN
		standIn.runs = standIn.loaded && C.standin_runs(runs) != 0
		standIn.names = map[int32]string{}
	})
}

// StandIn reports whether the loaded libcuda is the stand-in driver
// rather than NVIDIA's, counting launches without running them: tests
// that check what kernels compute skip on it, and the launch budget test
// runs only on it.
func StandIn() bool {
	loadStandIn()
	return standIn.loaded && !standIn.runs
}

// StandInRuns reports whether the loaded libcuda is the stand-in driver
// running every kernel on the CPU (ARBORIST_STANDIN_RUN=1): the tests of
// what kernels compute run there as on a GPU, only far more slowly, so
// those of real model sizes skip.
func StandInRuns() bool {
	loadStandIn()
	return standIn.runs
}

// standInLoaded: either stand-in, whose counters can be read.
func standInLoaded() bool {
	loadStandIn()
	return standIn.loaded
}

// StandInReset zeroes the stand-in's counters and empties its launch log.
func StandInReset() {
	if standInLoaded() {
		C.standin_reset(standIn.reset)
	}
}

// StandInRead returns the stand-in's counters (zero under a real driver).
func StandInRead() StandInCounts {
	var r StandInCounts
	if !standInLoaded() {
		return r
	}
	var v [C.STANDIN_NCOUNTERS]C.uint64_t
	C.standin_counts(standIn.counts, &v[0], C.int(len(v)))
	r.Launches = uint64(v[C.STANDIN_LAUNCHES])
	r.HtoD, r.HtoDBytes = uint64(v[C.STANDIN_HTOD]), uint64(v[C.STANDIN_HTOD_BYTES])
	r.DtoH, r.DtoHBytes = uint64(v[C.STANDIN_DTOH]), uint64(v[C.STANDIN_DTOH_BYTES])
	r.DtoD, r.DtoDBytes = uint64(v[C.STANDIN_DTOD]), uint64(v[C.STANDIN_DTOD_BYTES])
	r.Blocking = uint64(v[C.STANDIN_BLOCKING])
	r.Async, r.AsyncBytes = uint64(v[C.STANDIN_ASYNC]), uint64(v[C.STANDIN_ASYNC_BYTES])
	r.Memsets, r.Syncs = uint64(v[C.STANDIN_MEMSETS]), uint64(v[C.STANDIN_SYNCS])
	r.Allocs, r.Frees = uint64(v[C.STANDIN_ALLOCS]), uint64(v[C.STANDIN_FREES])
	r.LiveBytes = uint64(v[C.STANDIN_LIVE_BYTES])
	r.Unsupported, r.LogDropped = uint64(v[C.STANDIN_UNSUPPORTED]), uint64(v[C.STANDIN_LOG_DROPPED])
	r.Blocks = uint64(v[C.STANDIN_BLOCKS])
	r.GraphLaunches, r.Instantiates = uint64(v[C.STANDIN_GRAPH_LAUNCHES]), uint64(v[C.STANDIN_INSTANTIATES])
	r.Captured, r.HostAllocs = uint64(v[C.STANDIN_CAPTURED]), uint64(v[C.STANDIN_HOST_ALLOCS])
	r.AsyncHtoD, r.AsyncHtoDBytes = uint64(v[C.STANDIN_ASYNC_HTOD]), uint64(v[C.STANDIN_ASYNC_HTOD_BYTES])
	r.AsyncDtoH, r.AsyncDtoHBytes = uint64(v[C.STANDIN_ASYNC_DTOH]), uint64(v[C.STANDIN_ASYNC_DTOH_BYTES])
	if s := C.standin_last(standIn.last); s != nil {
		r.LastUnsupported = C.GoString(s)
	}
	return r
}

// StandInLaunches returns the kernels launched since the last reset, by
// name, in launch order (nil under a real driver).
func StandInLaunches() []string {
	if !standInLoaded() {
		return nil
	}
	n := C.standin_log(standIn.log, nil, 0)
	if n == 0 {
		return nil
	}
	ids := make([]C.int32_t, n)
	n = min(n, C.standin_log(standIn.log, &ids[0], n)) // launches cannot race a reader here, but stay in bounds
	standIn.mu.Lock()
	defer standIn.mu.Unlock()
	out := make([]string, n)
	for i, id := range ids[:n] {
		name, ok := standIn.names[int32(id)]
		if !ok {
			if s := C.standin_name(standIn.name, id); s != nil {
				name = C.GoString(s)
			} else {
				name = "?"
			}
			standIn.names[int32(id)] = name
		}
		out[i] = name
	}
	return out
}
