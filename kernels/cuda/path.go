package cuda

import (
	"fmt"
	"strings"

	"arborist/kernels/quant"
)

// Path is how the CUDA backend issues a pass: the verified path, which
// has run every GPU test on a GPU, or the fast path, which issues a pass
// as a few fused kernels replayed as a CUDA graph (docs/CUDA.md, "The
// fast path"). The verified path is the default; the fast path is chosen
// with PathEnv until it has passed the GPU tests on a GPU.
type Path int

const (
	// Verified issues each primitive as it is called, on the default
	// stream, with the host waiting for every copy.
	Verified Path = iota
	// Fast records a pass's primitives and issues them at its first read
	// back: fused kernels, one page-locked upload and one download, on a
	// stream of its own, the launches captured once per pass shape into a
	// graph and replayed.
	Fast
)

// PathEnv names the environment variable that chooses the path:
// "verified" (or unset) or "fast".
const PathEnv = "ARBORIST_CUDA_PATH"

func (p Path) String() string {
	if p == Fast {
		return "fast"
	}
	return "verified"
}

// ParsePath reads a path's name ("" is Verified).
func ParsePath(s string) (Path, error) {
	switch strings.TrimSpace(strings.ToLower(s)) {
	case "", "verified":
		return Verified, nil
	case "fast":
		return Fast, nil
	}
	return Verified, fmt.Errorf("cuda: %s=%q: the path is verified or fast", PathEnv, s)
}

// PathStatus says which path a backend started with env's PathEnv value
// takes, for `arborist backends`.
func PathStatus(env string) string {
	p, err := ParsePath(env)
	switch {
	case err != nil:
		return err.Error()
	case p == Fast:
		return "fast path (" + PathEnv + "=fast; checked on the stand-in driver, not yet on a GPU)"
	}
	return "verified path (" + PathEnv + "=fast for the fast path)"
}

// fastWidth is the batch rows one block of a fast product of the type of
// kernel suffix sfx covers for a pass of n rows: the smallest of
// fastWidths that holds them, so that a pass of up to 64 rows (32 for
// F16) reads and unpacks each weight once.
func fastWidth(sfx string, n int) int {
	for _, nb := range fastWidths {
		if nb > fastWidthMax(sfx) {
			break
		}
		if n <= nb {
			return nb
		}
	}
	return fastWidthMax(sfx)
}

// FastProductLaunch is the fast path's product of a rows x cols matrix of
// type t with n activation rows, and whether it takes its activations
// quantised to 8 bits; ok is false for a type or shape the fast products
// do not take (F32, BF16, an F16 row not a multiple of 8), which the fast
// path multiplies with the verified path's kernels.
func FastProductLaunch(t quant.Type, rows, cols, n int) (l Launch, q8, ok bool, err error) {
	if rows < 1 || cols < 1 || n < 1 {
		return l, false, false, fmt.Errorf("cuda: product of %dx%d weights with %d rows", rows, cols, n)
	}
	switch {
	case quantised(t):
		q8 = true
	case t == quant.F16 && cols%8 == 0:
	default:
		return l, false, false, nil
	}
	suf, err := suffix(t)
	if err != nil {
		return l, false, false, err
	}
	nb := fastWidth(suf, n)
	l, err = launch(fmt.Sprintf("f_mm_%s_%d", suf, nb), ceilDiv(rows, mmWarps), ceilDiv(n, nb), 1, warp*mmWarps)
	return l, q8, err == nil, err
}

// FastNormLaunch covers n rows with f_norm (add, RMSNorm, quantisation).
func FastNormLaunch(n int) (Launch, error) { return launch("f_norm", n, 1, 1, ewBlock) }

// FastGLULaunch covers n rows of cols values (a multiple of 32) with
// f_glu_q8, a warp per 32-value chunk.
func FastGLULaunch(cols, n int) (Launch, error) {
	if cols%32 != 0 {
		return Launch{}, fmt.Errorf("cuda: f_glu_q8 of rows of %d values, not whole chunks of 32", cols)
	}
	return launch("f_glu_q8", cols/32, n, 1, warp)
}

// FastRoPELaunch covers n rows with f_rope_* (the Q/K norms, RoPE and the
// store into a cache of type kv).
func FastRoPELaunch(kv quant.Type, n int) (Launch, error) {
	suf, _, err := kvSuffix(kv)
	if err != nil {
		return Launch{}, err
	}
	return launch("f_rope_"+suf, n, 1, 1, ewBlock)
}

// fastGQA mirrors FAST_GQA of fast.cuh: the most query heads sharing a
// key/value head that f_att_* takes.
const fastGQA = 8

// FastAttentionLaunch is f_att_*'s launch, a block per key/value head and
// row, or ok false for a shape it does not take (more than fastGQA query
// heads a key/value head, or heads wider than attMaxD), which the fast
// path computes with the verified attention.
func FastAttentionLaunch(kv quant.Type, heads, kvHeads, headDim, n int) (l Launch, ok bool, err error) {
	suf, _, err := kvSuffix(kv)
	if err != nil {
		return l, false, err
	}
	if kvHeads < 1 || heads%kvHeads != 0 || heads/kvHeads > fastGQA || headDim < 1 || headDim > attMaxD {
		return l, false, nil
	}
	l, err = launch("f_att_"+suf, kvHeads, n, 1, warp*attWarps)
	return l, err == nil, err
}
