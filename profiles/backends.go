package profiles

import (
	_ "arborist/kernels/cpu"  // the CPU backend registers itself
	_ "arborist/kernels/cuda" // so does CUDA (in arborist-cuda; a hand-off elsewhere)
)
