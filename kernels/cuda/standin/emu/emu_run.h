/* What the stand-in driver (standin.c) calls to run a kernel on the CPU
 * (emu.cc, kernels.cc). */
#ifndef ARBORIST_EMU_RUN_H
#define ARBORIST_EMU_RUN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel's entry on the host: it reads its arguments as the driver
 * does, from params[i], each pointing at the argument's bytes. */
typedef void (*emu_kernel)(void **params);

/* arborist_emu_kernel is the host entry of the kernel called name, or
 * NULL when the stand-in has none of that name. */
emu_kernel arborist_emu_kernel(const char *name);

/* arborist_emu_run runs kernel k over a grid of gx x gy x gz blocks of
 * bx x by x bz threads; 0, or -1 with a message in err when a thread
 * faulted or the block's threads could never meet at a barrier. */
int arborist_emu_run(emu_kernel k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                     void **params, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
