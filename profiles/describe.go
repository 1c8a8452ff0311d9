package profiles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"arborist/engine/model"
	"arborist/profiles/store"
)

// DescribeModel fingerprints a loaded model: a hash of its size and its first
// and last MiB (cheap on multi-gigabyte files), with shape and vocabulary.
func DescribeModel(m *model.Model) (store.Model, error) {
	f, err := os.Open(m.Path)
	if err != nil {
		return store.Model{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return store.Model{}, err
	}
	vh := sha256.New()
	for _, t := range m.Tok.Tokens {
		io.WriteString(vh, t)
		vh.Write([]byte{0})
	}
	quant := ""
	if tc := m.File.TypeCounts(); len(tc) > 0 {
		quant = tc[0].Type.String()
	}
	syn, _ := m.File.Bool("arborist.synthetic")
	return store.Model{
		Fingerprint: quickFingerprint(f, st.Size()),
		Path:        m.Path,
		Arch:        m.Arch,
		Shape:       fmt.Sprintf("dim %d, %d layers, %d/%d heads, ffn %d, vocab %d", m.Dim, m.Layers, m.Heads, m.KVHeads, m.FFN, m.Vocab),
		Quant:       quant,
		Params:      m.File.Params(),
		WeightBytes: m.WeightBytes(),
		VocabHash:   hex.EncodeToString(vh.Sum(nil)[:8]),
		Synthetic:   syn,
	}, nil
}

// ConfigHardware is the hardware block of an exported config for hw.
func ConfigHardware(hw store.Hardware) HardwareConfig {
	gpu := "none"
	if name, _, ok := strings.Cut(strings.TrimPrefix(hw.GPUs, "0: "), " ("); ok && strings.HasPrefix(hw.GPUs, "0: ") {
		gpu = name
	}
	return HardwareConfig{CPUCores: hw.Cores, CPU: hw.CPU, GPUType: gpu, CPUAffinity: fmt.Sprintf("0-%d", hw.Threads-1)}
}
