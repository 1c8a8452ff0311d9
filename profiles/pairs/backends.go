package pairs

// The backends a pair can run on register themselves by name
// (kernels.Register); Open finds them there. A new backend is linked in
// by one blank import here.
import (
	_ "arborist/kernels/cpu"  // every machine
	_ "arborist/kernels/cuda" // in arborist-cuda; elsewhere a hand-off to it
)
