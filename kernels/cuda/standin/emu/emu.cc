/* The stand-in driver's kernel runner (emu.h says what for): a launch runs
 * its blocks one after another, each block's threads as fibers on the
 * calling thread, switched at every barrier. */
#include "emu.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "emu_run.h"

uint3 threadIdx, blockIdx, blockDim, gridDim;

/* emu_switch saves the callee-saved registers and the stack pointer of
 * the running context in *save and resumes the one saved at to (x86-64
 * System V). */
extern "C" void emu_switch(void **save, void *to);
asm(R"(
	.text
	.p2align 4
	.globl emu_switch
	.hidden emu_switch
	.type emu_switch, @function
emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size emu_switch, .-emu_switch
)");

enum { RUNNING, AT_WARP, AT_BLOCK, DONE };

struct Fiber {
	void *sp;
	int state;
	uint3 tid;
	unsigned phase; /* collectives done: picks the exchange buffer */
};

static const int MAX_THREADS = 1024;
static const size_t STACK = 128 << 10;

/* One launch at a time (the kernels' shared memory is static). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static Fiber fibers[MAX_THREADS];
static char *stacks[MAX_THREADS];
static uint64_t exchange[MAX_THREADS / 32][2][32];
static void *scheduler;
static int current, nthreads;
static emu_kernel running;
static void **running_params;
static bool failed;
static char failure[512];

void emu_fail(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(failure, sizeof failure, "block (%u,%u,%u) thread (%u,%u,%u): ", blockIdx.x, blockIdx.y, blockIdx.z,
	                 threadIdx.x, threadIdx.y, threadIdx.z);
	if (n > 0 && (size_t)n < sizeof failure)
		vsnprintf(failure + n, sizeof failure - (size_t)n, fmt, ap);
	va_end(ap);
	failed = true;
	fibers[current].state = DONE;
	emu_switch(&fibers[current].sp, scheduler);
	abort(); /* never resumed */
}

static void yield(int state) {
	fibers[current].state = state;
	emu_switch(&fibers[current].sp, scheduler);
}

void emu_warp_wait(void) { yield(AT_WARP); }
void emu_block_wait(void) { yield(AT_BLOCK); }

uint64_t *emu_exchange(void) {
	Fiber &f = fibers[current];
	return exchange[current / 32][f.phase++ & 1];
}

static void fiber_main(void) {
	running(running_params);
	fibers[current].state = DONE;
	emu_switch(&fibers[current].sp, scheduler);
	abort();
}

/* run_block runs one block to its end; false, with failure set, when a
 * thread faulted or the threads wait for each other forever. */
static bool run_block(unsigned bx, unsigned by) {
	for (int t = 0; t < nthreads; t++) {
		uintptr_t top = ((uintptr_t)stacks[t] + STACK) & ~(uintptr_t)15;
		void **sp = (void **)top;
		*--sp = nullptr;                  /* fiber_main's return address: never used */
		*--sp = (void *)fiber_main;       /* where emu_switch's ret goes */
		for (int i = 0; i < 6; i++)       /* rbp rbx r12 r13 r14 r15 */
			*--sp = nullptr;
		Fiber &f = fibers[t];
		f.sp = sp;
		f.state = RUNNING;
		f.phase = 0;
		f.tid = uint3{(unsigned)t % bx, (unsigned)t / bx % by, (unsigned)t / (bx * by)};
	}
	for (;;) {
		for (int t = 0; t < nthreads; t++) {
			if (fibers[t].state != RUNNING)
				continue;
			current = t;
			threadIdx = fibers[t].tid;
			emu_switch(&scheduler, fibers[t].sp);
			if (failed)
				return false;
		}
		bool released = false;
		int atWarp = 0, atBlock = 0, done = 0;
		for (int w = 0; w * 32 < nthreads; w++) {
			int lo = 32 * w, hi = min(lo + 32, nthreads), nw = 0, nd = 0;
			for (int t = lo; t < hi; t++) {
				nw += fibers[t].state == AT_WARP;
				nd += fibers[t].state == DONE;
			}
			if (nw > 0 && nw + nd == hi - lo) {
				if (nd > 0) {
					snprintf(failure, sizeof failure, "block (%u,%u,%u) warp %d: a warp collective with %d of its lanes exited",
					         blockIdx.x, blockIdx.y, blockIdx.z, w, nd);
					return false;
				}
				for (int t = lo; t < hi; t++)
					fibers[t].state = RUNNING;
				released = true;
			}
		}
		if (released)
			continue;
		for (int t = 0; t < nthreads; t++) {
			atWarp += fibers[t].state == AT_WARP;
			atBlock += fibers[t].state == AT_BLOCK;
			done += fibers[t].state == DONE;
		}
		if (done == nthreads)
			return true;
		if (atWarp == 0) {
			for (int t = 0; t < nthreads; t++)
				if (fibers[t].state == AT_BLOCK)
					fibers[t].state = RUNNING;
			continue;
		}
		snprintf(failure, sizeof failure,
		         "block (%u,%u,%u): deadlock: %d threads at __syncthreads, %d at a warp collective whose warp never gathers, %d exited",
		         blockIdx.x, blockIdx.y, blockIdx.z, atBlock, atWarp, done);
		return false;
	}
}

extern "C" int arborist_emu_run(emu_kernel k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, void **params, char *err, size_t errlen) {
	unsigned n = bx * by * bz;
	if (n == 0 || n > (unsigned)MAX_THREADS) {
		snprintf(err, errlen, "block of %u threads", n);
		return -1;
	}
	pthread_mutex_lock(&mu);
	int rc = 0;
	for (unsigned t = 0; t < n; t++) {
		if (stacks[t] == nullptr && (stacks[t] = (char *)malloc(STACK)) == nullptr) {
			snprintf(err, errlen, "no memory for a thread's stack");
			pthread_mutex_unlock(&mu);
			return -1;
		}
	}
	nthreads = (int)n;
	running = k;
	running_params = params;
	failed = false;
	failure[0] = 0;
	blockDim = uint3{bx, by, bz};
	gridDim = uint3{gx, gy, gz};
	for (unsigned z = 0; z < gz && rc == 0; z++)
		for (unsigned y = 0; y < gy && rc == 0; y++)
			for (unsigned x = 0; x < gx && rc == 0; x++) {
				blockIdx = uint3{x, y, z};
				if (!run_block(bx, by)) {
					snprintf(err, errlen, "%s", failure);
					rc = -1;
				}
			}
	pthread_mutex_unlock(&mu);
	return rc;
}
