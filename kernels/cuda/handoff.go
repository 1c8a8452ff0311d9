package cuda

import (
	"fmt"
	"os"
)

// handOffEnv marks a process that a handover started, so a binary that is
// named arborist-cuda but lacks CUDA cannot hand over to itself forever.
const handOffEnv = "ARBORIST_CUDA_HANDOFF"

// HandOff prepares a run on the named device (a --device value). For cpu,
// and in arborist-cuda, it does nothing. In the default binary, which does
// not link CUDA, a cuda run moves to arborist-cuda: when the driver, a GPU
// and arborist-cuda (beside this program, or on PATH) are all there, the
// process is replaced by arborist-cuda with the same arguments and HandOff
// does not return; otherwise it returns why CUDA is unavailable ("no NVIDIA
// driver", "no device", "arborist-cuda not installed (make cuda)").
func HandOff(device string) error {
	return handOff(device, SystemProbeEnv(), os.Args, os.Environ(), execProgram)
}

func handOff(device string, env ProbeEnv, args, environ []string, exec func(path string, args, env []string) error) error {
	if device != "cuda" || linked {
		return nil
	}
	for _, e := range environ {
		if e == handOffEnv+"=1" {
			return fmt.Errorf("cuda is unavailable: %s was started for CUDA but has no CUDA backend (rebuild it with make cuda)", args[0])
		}
	}
	bin, err := Probe(env)
	if err != nil {
		return fmt.Errorf("cuda is unavailable: %w", err)
	}
	argv := append([]string{bin}, args[1:]...)
	if err := exec(bin, argv, append(environ, handOffEnv+"=1")); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	return nil
}
