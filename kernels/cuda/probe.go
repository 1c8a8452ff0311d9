package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Binary is the name of the program that has the CUDA backend linked in
// (built by `make cuda`).
const Binary = "arborist-cuda"

// The reasons Probe gives, as the user reads them.
const (
	NoDriver     = "no NVIDIA driver"
	NoDevice     = "no device"
	NotInstalled = "arborist-cuda not installed (make cuda)"
)

// Unavailable says why CUDA cannot run here: Reason is one of NoDriver,
// NoDevice, NotInstalled; Detail names what was looked for.
type Unavailable struct {
	Reason, Detail string
}

func (u *Unavailable) Error() string { return u.Reason + ": " + u.Detail }

// ProbeEnv is what Probe looks at; SystemProbeEnv gives this machine's, and
// tests give made-up folders.
type ProbeEnv struct {
	// LibDirs are searched for the driver's libcuda.so.1.
	LibDirs []string
	// DriverFile (/proc/driver/nvidia/version) or ControlNode
	// (/dev/nvidiactl) exists when the kernel module is loaded; sandboxes
	// that pass a GPU through (gVisor) may show only the node.
	DriverFile, ControlNode string
	// DeviceGlob matches the GPUs' device nodes (/dev/nvidia[0-9]*).
	DeviceGlob string
	// Exe is the running program; arborist-cuda is looked for beside it
	// first, then on Path.
	Exe  string
	Path string
}

// SystemProbeEnv is this machine's: the usual library folders of Debian,
// Fedora, the NVIDIA container runtime and WSL, plus LD_LIBRARY_PATH.
func SystemProbeEnv() ProbeEnv {
	dirs := []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/lib64",
		"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib"}
	if ld := os.Getenv("LD_LIBRARY_PATH"); ld != "" {
		dirs = append(filepath.SplitList(ld), dirs...)
	}
	exe, _ := os.Executable()
	return ProbeEnv{LibDirs: dirs, DriverFile: "/proc/driver/nvidia/version", ControlNode: "/dev/nvidiactl", DeviceGlob: "/dev/nvidia[0-9]*", Exe: exe, Path: os.Getenv("PATH")}
}

// Probe reports whether a CUDA run can start here, without loading the
// driver (loading it is what the CUDA binary does, and it exits when that
// fails): the driver library and kernel module, a GPU device node, and the
// arborist-cuda program, whose path it returns.
func Probe(env ProbeEnv) (string, error) {
	lib := ""
	for _, d := range env.LibDirs {
		if d == "" {
			continue
		}
		if p := filepath.Join(d, "libcuda.so.1"); exists(p) {
			lib = p
			break
		}
	}
	if lib == "" {
		return "", &Unavailable{NoDriver, "libcuda.so.1 not found in " + strings.Join(env.LibDirs, ", ")}
	}
	if !exists(env.DriverFile) && !exists(env.ControlNode) {
		return "", &Unavailable{NoDriver, fmt.Sprintf("%s found, but neither %s nor %s (the nvidia kernel module is not loaded)", lib, env.DriverFile, env.ControlNode)}
	}
	nodes, _ := filepath.Glob(env.DeviceGlob)
	if len(nodes) == 0 {
		return "", &Unavailable{NoDevice, "the driver is loaded but no GPU device node matches " + env.DeviceGlob}
	}
	return findBinary(env)
}

// findBinary looks for arborist-cuda beside env.Exe, then on env.Path.
func findBinary(env ProbeEnv) (string, error) {
	var tried []string
	if env.Exe != "" {
		p := filepath.Join(filepath.Dir(env.Exe), Binary)
		if executable(p) {
			return p, nil
		}
		tried = append(tried, filepath.Dir(env.Exe))
	}
	for _, d := range filepath.SplitList(env.Path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, Binary)
		if executable(p) {
			return p, nil
		}
		tried = append(tried, d)
	}
	return "", &Unavailable{NotInstalled, "looked in " + strings.Join(tried, ", ")}
}

func exists(p string) bool {
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// IsUnavailable reports whether err is a probe's answer.
func IsUnavailable(err error) bool {
	var u *Unavailable
	return errors.As(err, &u)
}
