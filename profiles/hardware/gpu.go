package hardware

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// GPU is one NVIDIA GPU as its driver reports it: the inventory a plan's
// device placement and the exported config.yaml rest on.
type GPU struct {
	Index                   int
	Name                    string
	MemoryMiB               int
	SMClockMHz, MemClockMHz int // the largest clocks
	Driver                  string
	PCIeGen, PCIeWidth      int // the link's largest generation and width
}

// String is the one-line description Profile screens and reports show.
func (g GPU) String() string {
	return fmt.Sprintf("%s (%.0f GiB, SM %d MHz, memory %d MHz, PCIe %d x%d, driver %s)",
		g.Name, float64(g.MemoryMiB)/1024, g.SMClockMHz, g.MemClockMHz, g.PCIeGen, g.PCIeWidth, g.Driver)
}

// gpuQuery is what DetectGPUs asks nvidia-smi for, in its CSV's order.
const gpuQuery = "index,name,memory.total,clocks.max.sm,clocks.max.memory,driver_version,pcie.link.gen.max,pcie.link.width.max"

// DetectGPUs lists the NVIDIA GPUs through the driver's nvidia-smi, which
// needs no CUDA in this binary; no nvidia-smi means no GPUs (nil, nil). It
// gives up after five seconds (a hung driver must not hang a profile).
func DetectGPUs(ctx context.Context) ([]GPU, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu="+gpuQuery, "--format=csv,noheader,nounits").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return parseGPUs(string(out))
}

// parseGPUs reads nvidia-smi's CSV (gpuQuery, no header, no units). Fields
// the driver cannot report ("[N/A]", "[Not Supported]") read as 0.
func parseGPUs(out string) ([]GPU, error) {
	var gpus []GPU
	for ln, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 8 {
			return nil, fmt.Errorf("nvidia-smi line %d: %d fields, want 8: %q", ln+1, len(f), line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		num := func(s string) int {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return 0
			}
			return v
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: index %q", ln+1, f[0])
		}
		gpus = append(gpus, GPU{Index: idx, Name: f[1], MemoryMiB: num(f[2]), SMClockMHz: num(f[3]), MemClockMHz: num(f[4]),
			Driver: f[5], PCIeGen: num(f[6]), PCIeWidth: num(f[7])})
	}
	return gpus, nil
}

// GPUSummary is the hardware record's GPUs field for this machine: one
// description per GPU, "" without any, or why nvidia-smi could not say.
func GPUSummary(ctx context.Context) string {
	gpus, err := DetectGPUs(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return gpuSummary(gpus)
}

// gpuSummary is the hardware record's GPUs field: one description per GPU.
func gpuSummary(gpus []GPU) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = fmt.Sprintf("%d: %s", g.Index, g)
	}
	return strings.Join(s, "; ")
}
