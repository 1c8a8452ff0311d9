// Package kernels defines the compute backends engine/model runs on.
//
// Device (device.go) is the contract of a whole forward pass: weights,
// activations and the KV cache stay in the backend's memory, and the model
// code, written once above it, calls its primitives. Backend is the part
// every backend offers: weight matrices and host-memory matrix products.
// Host (host.go) is what the backend computing in host memory offers
// beside: the training math of the hidden-state drafter's trainer and the
// machine's facts as its kernels see them.
//
// Implementations: kernels/cpu, on every machine; kernels/cuda, in the
// arborist-cuda binary (build tag cuda). They register by name
// (registry.go), and nothing above this package names their packages: one
// blank import in profiles/pairs links them in.
package kernels

import "arborist/kernels/quant"

// Matrix is a weight matrix prepared by a backend: Rows() outputs of Cols()
// inputs each, stored as ggml rows of type Type().
type Matrix interface {
	Rows() int
	Cols() int
	Type() quant.Type
}

// Backend computes matrix products against prepared weights.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda") in profiles and traces.
	Name() string
	// Threads is the number of worker threads the backend computes with.
	Threads() int
	// NewMatrix prepares a weight matrix from ggml-layout bytes: rows rows of
	// cols weights of type t. The bytes may alias a memory-mapped file and
	// must stay valid for the matrix's lifetime.
	NewMatrix(t quant.Type, data []byte, rows, cols int) (Matrix, error)
	// MatMul computes out[r*w.Rows()+o] = sum_i W[o,i] * x[r*w.Cols()+i]
	// for every row r < n of x.
	MatMul(out []float32, w Matrix, x []float32, n int)
	// Close stops the backend's workers.
	Close()
}

// Parallel is an optional Backend capability: run fn over [0, n) split into
// contiguous chunks on the backend's workers. The engine uses it for
// attention; without it, the work runs on the calling goroutine.
type Parallel interface {
	ParallelFor(n int, fn func(lo, hi int))
}

// ParallelFor runs fn over [0, n) on b's workers when b offers them.
func ParallelFor(b Backend, n int, fn func(lo, hi int)) {
	if p, ok := b.(Parallel); ok {
		p.ParallelFor(n, fn)
		return
	}
	fn(0, n)
}
