//go:build !cgo || purego

package cpu

// Kernels names the kernel family in use, for benchmarks and profiles.
func Kernels() string { return "pure-go" }

const haveC = false

func cQuantize(q *q8Buf, x []float32) { q.quantize(x) }

func (j *matmulJob) doC(worker, lo, hi int) { j.doGo(worker, lo, hi) }
