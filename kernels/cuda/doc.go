// Package cuda is Arborist's NVIDIA GPU backend: kernels.Device on the CUDA
// driver API through gorgonia.org/cu, with kernels written in CUDA C
// (kernels/arborist.cu), compiled to PTX for sm_80 and sm_90 by `make cuda`
// and embedded in the arborist-cuda binary, so running needs only the
// NVIDIA driver.
//
// Two halves. The files without a build tag hold everything that can be
// built and tested on a machine without a GPU: the kernel table (names.go),
// the launch geometry of every kernel for every shape (geometry.go), the
// memory planning that checks each allocation against the device's free
// memory before it is made (plan.go), and the availability probe the
// default binary runs before it hands a --device cuda run over to
// arborist-cuda (probe.go). The files with the build tag cuda implement
// kernels.Device on the GPU (device_cuda.go). gorgonia.org/cu calls cuInit
// in its package init and exits the process when that fails, so only the
// arborist-cuda binary links it; the default arborist binary never does,
// and starts on any machine.
//
// Residency. Weights are uploaded once, unchanged (the GGUF block layouts of
// kernels/quant); activations (Tensor) and the KV cache (KV) live in device
// memory for the whole pass; the host sends token ids, positions' RoPE
// tables and tree masks, and reads back only the rows it asks for, or their
// argmax. Every launch goes to one stream in order; a host read waits for
// the launches before it.
//
// Two paths (path.go). The verified path launches each primitive as it is
// called, on the default stream. The fast path (ARBORIST_CUDA_PATH=fast,
// fast_cuda.go) records a pass and issues it at its first read back as
// fused kernels (kernels/fast.cuh), one page-locked upload, a CUDA graph
// captured once per pass shape and replayed, one read back and one wait.
//
// Status: the verified path has run on an NVIDIA H200 and passed every GPU
// test (the device and model-level suites, build tag cuda), matching the
// CPU backend for every weight type (docs/CUDA.md). The fast path has been
// checked on the stand-in driver (kernels/cuda/standin), which counts its
// launches and runs its kernels on the CPU, not yet on a GPU; it stays
// opt-in until it has.
package cuda
