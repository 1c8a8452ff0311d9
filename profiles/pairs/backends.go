package pairs

// The backends a pair can run on register themselves by name
// (kernels.Register); Open finds them there, and everything else reaches
// them through the kernels registry too. A new backend is linked in by one
// import here, the only package that names a backend's.
import (
	_ "arborist/kernels/cpu" // every machine
	"arborist/kernels/cuda"  // in arborist-cuda; elsewhere a hand-off to it
)

// HandOff prepares a run on the named device: in the default binary a
// cuda run is handed over to arborist-cuda (the process is replaced), or
// HandOff says why CUDA is unavailable; for every other device it does
// nothing.
func HandOff(device string) error { return cuda.HandOff(device) }
