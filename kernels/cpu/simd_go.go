//go:build !cgo || purego

package cpu

// Kernels names the kernel family in use, for benchmarks and profiles.
func Kernels() string { return "pure-go" }

const haveC = false

func cQuantize(q *q8Buf, x []float32) { q.quantize(x) }

func (j *matmulJob) doC(worker, lo, hi int) { j.doGo(worker, lo, hi) }

// ReadSum XORs the words of p: the inner loop of a memory bandwidth
// measurement.
func ReadSum(p []uint64) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+4 <= len(p); i += 4 {
		s0 ^= p[i]
		s1 ^= p[i+1]
		s2 ^= p[i+2]
		s3 ^= p[i+3]
	}
	return s0 ^ s1 ^ s2 ^ s3
}

// attnJob is unused without the C kernels (attention falls back to the
// engine's Go loop); it keeps the Backend layout the same on every build.
type attnJob struct{}
