/* The stand-in CUDA driver's own interface: what a test reads from it.
 *
 * The stand-in (standin.c) is a libcuda.so.1 that implements, on host
 * memory, the part of the CUDA driver API the CUDA backend calls, so the
 * backend's host path (every allocation, copy, launch and
 * synchronisation it issues) runs and is counted on a machine without a
 * GPU. Kernels do not run: a launch is counted and logged, nothing more,
 * so every value the backend computes is garbage (zeros); only the counts
 * and the host time mean anything.
 *
 * A program finds these functions with dlsym(RTLD_DEFAULT, ...): their
 * presence is how it knows the stand-in, not a real driver, is loaded.
 */
#ifndef ARBORIST_STANDIN_H
#define ARBORIST_STANDIN_H

#include <stddef.h>
#include <stdint.h>

/* The counters, in the order arborist_standin_counts writes them. New
 * counters go at the end, so a reader built against fewer still reads
 * the ones it knows. */
enum {
	STANDIN_LAUNCHES,      /* cuLaunchKernel calls */
	STANDIN_HTOD,          /* synchronous host-to-device copies */
	STANDIN_HTOD_BYTES,    /* their bytes */
	STANDIN_DTOH,          /* synchronous device-to-host copies */
	STANDIN_DTOH_BYTES,    /* their bytes */
	STANDIN_DTOD,          /* device-to-device copies (never blocking) */
	STANDIN_DTOD_BYTES,    /* their bytes */
	STANDIN_BLOCKING,      /* copies that wait for every launch before them:
	                          the synchronous ones to or from the host */
	STANDIN_ASYNC,         /* asynchronous copies to or from the host */
	STANDIN_ASYNC_BYTES,   /* their bytes */
	STANDIN_MEMSETS,       /* cuMemsetD8/D16/D32 (and async) calls */
	STANDIN_SYNCS,         /* context, stream and event synchronisations */
	STANDIN_ALLOCS,        /* cuMemAlloc calls */
	STANDIN_FREES,         /* cuMemFree calls */
	STANDIN_LIVE_BYTES,    /* device bytes allocated and not yet freed */
	STANDIN_UNSUPPORTED,   /* calls of driver functions the stand-in lacks */
	STANDIN_LOG_DROPPED,   /* launches past the log's capacity (not logged) */
	STANDIN_BLOCKS,        /* thread blocks launched: the launches' grid sizes
	                          summed, a measure of the work they ask for */
	STANDIN_GRAPH_LAUNCHES, /* cuGraphLaunch calls (their launches are counted
	                          in STANDIN_LAUNCHES as they are issued) */
	STANDIN_INSTANTIATES,  /* graphs instantiated (each a capture made
	                          executable) */
	STANDIN_CAPTURED,      /* launches recorded by captures (not issued) */
	STANDIN_HOST_ALLOCS,   /* page-locked host allocations (cuMemHostAlloc) */
	STANDIN_ASYNC_HTOD,    /* of STANDIN_ASYNC: those to the device */
	STANDIN_ASYNC_HTOD_BYTES,
	STANDIN_ASYNC_DTOH,    /* of STANDIN_ASYNC: those to the host */
	STANDIN_ASYNC_DTOH_BYTES,
	STANDIN_NCOUNTERS
};

/* arborist_standin_counts copies up to n counters into v and returns how
 * many it copied. */
int arborist_standin_counts(uint64_t *v, int n);

/* arborist_standin_reset zeroes every counter (but the live bytes) and
 * empties the launch log. */
void arborist_standin_reset(void);

/* arborist_standin_launch_log copies up to cap entries of the launch log
 * (kernel ids, in launch order since the last reset) into ids and returns
 * the number of entries logged. */
size_t arborist_standin_launch_log(int32_t *ids, size_t cap);

/* arborist_standin_kernel_name is the name of kernel id (what
 * cuModuleGetFunction was asked for), or NULL for an unknown id. */
const char *arborist_standin_kernel_name(int32_t id);

/* arborist_standin_runs is 1 when the stand-in runs the kernels it
 * launches on the CPU (ARBORIST_STANDIN_RUN=1 at cuInit), 0 when it only
 * counts them. */
int arborist_standin_runs(void);

/* arborist_standin_last_unsupported names the last driver function called
 * that the stand-in does not implement, or NULL. */
const char *arborist_standin_last_unsupported(void);

#endif
