package hardware

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strings"

	"arborist/kernels"
	"arborist/profiles/store"
)

// DetectHardware reads the CPU model, core counts, SIMD features and RAM from
// the OS (Linux /proc; elsewhere what Go reports). The fingerprint is the
// CPU side only: the CPU's curves stay valid when a GPU comes or goes. The
// GPUs (a process spawn of nvidia-smi) are added by GPUSummary where the
// machine is profiled and recorded, not on every run. Bandwidth is measured
// separately (Bandwidth) because it takes a second.
func DetectHardware() store.Hardware {
	r := host()
	h := store.Hardware{CPU: runtime.GOARCH, Threads: runtime.NumCPU(), Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	flags := map[string]bool{}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "model name":
				h.CPU = v
			case "flags":
				for _, fl := range strings.Fields(v) {
					flags[fl] = true
				}
			}
		}
		f.Close()
		if n := r.Host.PhysicalCores(); n > 0 {
			h.Cores = n
		}
	}
	var simd []string
	for _, fl := range []string{"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni"} {
		if flags[fl] {
			simd = append(simd, fl)
		}
	}
	if runtime.GOARCH == "arm64" {
		simd = append(simd, "neon")
	}
	flagList := strings.Join(simd, " ")
	h.SIMD = flagList + " (kernels " + r.Kernels() + ")"
	h.RAM = r.Host.MemTotal()
	h.Fingerprint = fingerprint(h, flagList+" (kernels "+r.Host.KernelsID()+")")
	return h
}

// host is the host backend's registration: its kernels' name and the
// machine as they see it (kernels.HostFacts), the CPU side of every record
// here. Every binary links the CPU backend in (profiles/pairs), so its
// absence is a build's mistake and panics.
func host() kernels.Registration {
	r, err := kernels.LookupHost()
	if err != nil {
		panic(fmt.Sprintf("hardware: %v", err))
	}
	return r
}

// fingerprint hashes what decides a machine's CPU latency curves: the CPU,
// its cores and threads, its SIMD flags and kernel family (simdID, with the
// family's fingerprint name, which outlives renames of its display name),
// the RAM in whole GiB and the OS.
func fingerprint(h store.Hardware, simdID string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d|%s|%d|%s", h.CPU, h.Cores, h.Threads, simdID, h.RAM/(1<<30), h.OS)))
	return hex.EncodeToString(sum[:8])
}

// MeasureHardware detects the machine and measures its read bandwidth.
func MeasureHardware(ctx context.Context, threads int) (store.Hardware, error) {
	h := DetectHardware()
	h.GPUs = GPUSummary(ctx)
	bw, err := Bandwidth(ctx, threads, 256<<20)
	if err != nil {
		return h, err
	}
	h.Bandwidth = bw
	return h, nil
}

// KnownHardware returns this machine with its read bandwidth: from the store
// when it was measured before, otherwise (or when fresh) measured now and
// stored.
func KnownHardware(ctx context.Context, st *store.Store, threads int, fresh bool) (store.Hardware, error) {
	hw := DetectHardware()
	hw.GPUs = GPUSummary(ctx)
	if !fresh {
		known := hw
		if _, err := st.PutHardware(ctx, &known); err != nil {
			return hw, err
		}
		if known.Bandwidth > 0 {
			return known, nil
		}
	}
	bw, err := Bandwidth(ctx, threads, 256<<20)
	if err != nil {
		return hw, err
	}
	hw.Bandwidth = bw
	_, err = st.PutHardware(ctx, &hw)
	return hw, err
}
