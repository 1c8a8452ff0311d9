package cuda

import (
	"fmt"

	"arborist/kernels/quant"
)

// Kernels lists every kernel in kernels/arborist.cu (and fast.cuh, which
// it includes) by its extern "C" name; the module loader resolves each one
// at start-up, and a test checks the list against the source.
var Kernels = append(verifiedKernels, fastKernels()...)

// verifiedKernels are the verified path's kernels (arborist.cu).
var verifiedKernels = []string{
	"embed_f32", "embed_f16", "embed_bf16",
	"embed_q8_0", "embed_q4_0", "embed_q4_k", "embed_q5_k", "embed_q6_k",
	"quantize_q8",
	"mm_q8_0", "mm_q4_0", "mm_q4_k", "mm_q5_k", "mm_q6_k",
	"mm_f32", "mm_f16", "mm_bf16",
	"to_half", "to_bf16", "mm_tc_f16", "mm_tc_bf16",
	"rmsnorm", "add", "scale", "softcap", "add_row", "glu", "rope",
	"gather", "argmax",
	"store_kv_f32", "store_kv_f16", "kv_gather", "kv_put",
	"attention_f32", "attention_f16",
}

// fastProductTypes are the weight types the fast path's own products take
// (fast.cuh's f_mm_*), by kernel suffix; others take the verified
// path's products there too.
var fastProductTypes = []string{"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "f16"}

// fastWidths are the batch rows one block of a fast product covers; a
// pass takes the smallest that holds its rows (fastWidth).
var fastWidths = []int{8, 16, 32, 64}

// fastWidthMax is the most batch rows a block of the fast product for the
// type of kernel suffix sfx covers: 64, but 32 for F16, whose block of 64
// would not fit its registers (fast.cuh).
func fastWidthMax(sfx string) int {
	if sfx == "f16" {
		return 32
	}
	return fastWidths[len(fastWidths)-1]
}

// fastKernels are the fast path's kernels (fast.cuh).
func fastKernels() []string {
	ks := []string{"f_norm", "f_glu_q8", "f_rope_f32", "f_rope_f16", "f_att_f32", "f_att_f16"}
	for _, t := range fastProductTypes {
		for _, nb := range fastWidths {
			if nb <= fastWidthMax(t) {
				ks = append(ks, fmt.Sprintf("f_mm_%s_%d", t, nb))
			}
		}
	}
	return ks
}

// WeightTypes are the weight types the CUDA backend computes with; a model
// holding another type is refused by name when its matrices are prepared.
var WeightTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q5_K, quant.Q6_K}

// suffix is the kernel-name suffix of weight type t.
func suffix(t quant.Type) (string, error) {
	switch t {
	case quant.F32:
		return "f32", nil
	case quant.F16:
		return "f16", nil
	case quant.BF16:
		return "bf16", nil
	case quant.Q8_0:
		return "q8_0", nil
	case quant.Q4_0:
		return "q4_0", nil
	case quant.Q4_K:
		return "q4_k", nil
	case quant.Q5_K:
		return "q5_k", nil
	case quant.Q6_K:
		return "q6_k", nil
	}
	return "", fmt.Errorf("cuda: weight type %v is not supported on the GPU (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)", t)
}

// quantised reports whether products with t run on 8-bit activations.
func quantised(t quant.Type) bool {
	switch t {
	case quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q5_K, quant.Q6_K:
		return true
	}
	return false
}

// PTXArch chooses which embedded PTX to load for a device of compute
// capability major.minor: sm_90 on Hopper and newer, sm_80 on Ampere and
// Ada (the driver JIT-compiles PTX for the exact chip); older chips lack
// the bf16 tensor-core and integer instructions the kernels use.
func PTXArch(major, minor int) (string, error) {
	switch {
	case major >= 9:
		return "sm_90", nil
	case major == 8:
		return "sm_80", nil
	}
	return "", fmt.Errorf("cuda: compute capability %d.%d is too old (the kernels need 8.0, Ampere, or newer)", major, minor)
}
