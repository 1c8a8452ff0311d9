// Package hardware discovers and measures the machine Arborist tunes for:
// the CPU (model, cores, SIMD flags, memory) and the NVIDIA GPUs the driver
// reports, the memory read bandwidth and the kernels' compute ceiling, and
// from them a model's limits on this machine (the decode roofline and the
// multiply-adds a pass can reach), plus the bounds on thread counts and
// context room the verbs check their inputs against.
package hardware
