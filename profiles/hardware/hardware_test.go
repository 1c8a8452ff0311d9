package hardware

import (
	"runtime"
	"strings"
	"testing"

	"arborist/kernels/cpu"
	"arborist/profiles/store"
)

// TestFingerprintKeepsStoredProfiles pins the fingerprint's hash to what
// earlier builds stored: a change to its inputs or their form would leave
// every machine's profiles unmatched.
func TestFingerprintKeepsStoredProfiles(t *testing.T) {
	h := store.Hardware{CPU: "AMD EPYC 9B45", Cores: 2, Threads: 2, RAM: 23 << 30, OS: "linux/amd64"}
	if got, want := fingerprint(h, "sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_vnni avx_vnni (kernels c-avx2-vnni)"), "9945d5ab384c55a1"; got != want {
		t.Errorf("fingerprint %s, earlier builds stored %s", got, want)
	}
}

// TestDetectHardwareNamesKernels: the description names the kernels in
// use, the fingerprint their fingerprint name.
func TestDetectHardwareNamesKernels(t *testing.T) {
	h := DetectHardware()
	if !strings.HasSuffix(h.SIMD, "(kernels "+cpu.Kernels()+")") {
		t.Errorf("SIMD description %q does not name the kernels %s", h.SIMD, cpu.Kernels())
	}
	flags := strings.TrimSuffix(h.SIMD, "(kernels "+cpu.Kernels()+")")
	if got := fingerprint(h, flags+"(kernels "+cpu.KernelsID()+")"); got != h.Fingerprint {
		t.Errorf("fingerprint %s, want %s from the kernels' fingerprint name", h.Fingerprint, got)
	}
}

// TestMemAvailable: the memory available is known on Linux, positive and
// at most the machine's RAM.
func TestMemAvailable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("read from /proc/meminfo")
	}
	avail, total := MemAvailable(), MemTotal()
	if avail == 0 || total == 0 || avail > total {
		t.Fatalf("memory available %d of %d bytes", avail, total)
	}
}
