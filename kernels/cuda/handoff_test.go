package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"arborist/kernels"
)

// probeFiles lays out a machine for the CUDA probe under a temporary folder:
// which of the driver library, the kernel module, a GPU node and
// arborist-cuda (beside the program) exist.
func probeFiles(t *testing.T, lib, module, node, bin bool) ProbeEnv {
	dir := t.TempDir()
	env := ProbeEnv{
		LibDirs:    []string{filepath.Join(dir, "lib")},
		DriverFile: filepath.Join(dir, "proc/version"),
		DeviceGlob: filepath.Join(dir, "dev/nvidia[0-9]*"),
		Exe:        filepath.Join(dir, "bin/arborist"),
	}
	for _, f := range []struct {
		ok   bool
		path string
	}{{lib, "lib/libcuda.so.1"}, {module, "proc/version"}, {node, "dev/nvidia0"}, {bin, "bin/" + Binary}, {true, "bin/arborist"}} {
		if !f.ok {
			continue
		}
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

func TestHandOff(t *testing.T) {
	if linked {
		t.Skip("arborist-cuda runs CUDA itself")
	}
	var ran []string
	var ranEnv []string
	fake := func(path string, args, env []string) error {
		ran, ranEnv = append([]string{path}, args...), env
		return nil
	}
	args := []string{"/opt/arborist", "run", "--device", "cuda", "--target", "m.gguf"}
	if err := handOff("cpu", probeFiles(t, false, false, false, false), args, nil, fake); err != nil || ran != nil {
		t.Fatalf("cpu: %v, ran %v", err, ran)
	}
	for _, c := range []struct {
		lib, module, node, bin bool
		want                   string
	}{
		{false, false, false, false, "cuda is unavailable: no NVIDIA driver: libcuda.so.1 not found"},
		{true, false, true, true, "cuda is unavailable: no NVIDIA driver:"},
		{true, true, false, true, "cuda is unavailable: no device:"},
		{true, true, true, false, "cuda is unavailable: arborist-cuda not installed (make cuda)"},
	} {
		err := handOff("cuda", probeFiles(t, c.lib, c.module, c.node, c.bin), args, nil, fake)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || ran != nil {
			t.Errorf("%+v: %v (ran %v)", c, err, ran)
		}
	}
	env := probeFiles(t, true, true, true, true)
	if err := handOff("cuda", env, args, []string{"HOME=/h"}, fake); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(env.Exe), Binary)
	if want := append([]string{bin, bin}, args[1:]...); !slices.Equal(ran, want) {
		t.Fatalf("ran %q, want %q", ran, want)
	}
	if !slices.Contains(ranEnv, "HOME=/h") || !slices.Contains(ranEnv, handOffEnv+"=1") {
		t.Fatalf("environment %q", ranEnv)
	}
	// a handed-over process that still lacks CUDA does not hand over again
	ran = nil
	if err := handOff("cuda", env, args, []string{handOffEnv + "=1"}, fake); err == nil || ran != nil {
		t.Fatalf("second handover: %v, ran %v", err, ran)
	}
	failing := func(string, []string, []string) error { return errors.New("exec format error") }
	if err := handOff("cuda", env, args, nil, failing); err == nil || !strings.Contains(err.Error(), "exec format error") {
		t.Fatalf("failed exec: %v", err)
	}
}

// cuda is a registered name in both binaries; the default one cannot start
// it in-process and says why.
func TestCUDARegistered(t *testing.T) {
	if !slices.Contains(kernels.Names(), "cuda") {
		t.Fatalf("backends %v", kernels.Names())
	}
	if linked {
		return
	}
	if _, err := kernels.Open("cuda", 1); err == nil || !strings.Contains(err.Error(), "cuda") {
		t.Fatalf("NewBackend(cuda) in the default binary: %v", err)
	}
	if r, err := kernels.Lookup("cuda"); err != nil || r.Kernels() == "" {
		t.Fatal("no kernels description")
	}
}
