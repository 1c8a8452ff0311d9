package model

import (
	"fmt"

	"arborist/engine/gguf"
)

// family is one model family: the GGUF architecture names it reads and
// what sets it apart from the generic Llama-lineage block. Each family is
// one file (family_llama.go, family_qwen.go, family_phi3.go,
// family_gemma.go) holding its family value, listed once in families.
type family struct {
	// names are the general.architecture strings of the family's files;
	// Config.Arch is the first (mistral files run as llama).
	names []string
	// switches are the family's fixed choices, set before the generic
	// hyperparameters are read (they decide nothing about the metadata).
	switches switches
	// after, when set, runs once the generic hyperparameters (and the
	// sliding window, 0 when absent) are read: the family's own keys and
	// rules (windows it requires, soft-caps, embedding scale, which layers
	// slide, attention scale).
	after func(m meta, c *Config) error
	// fusedQKV says the layers hold Q, K and V in one attn_qkv tensor
	// (rows Q, then K, then V). Files of any family that carry
	// blk.0.attn_qkv.weight are read that way too.
	fusedQKV bool
}

// switches are the Config switches a family fixes.
type switches struct {
	RopeNeox  bool // rotate (i, i+d/2) pairs
	QKVBias   bool // biases on Q, K and V
	QKNorm    bool // RMS norm over each head of Q and K before RoPE
	GELU      bool // gelu(tanh) gate instead of silu
	PostNorms bool // norms on the attention and FFN outputs
}

// families are the families this package runs, in the order
// SupportedArchs lists their names. A new family is a new file
// (family_<name>.go) defining its family value, and one line here.
var families = []*family{
	&llamaFamily,
	&qwen2Family,
	&qwen3Family,
	&phi3Family,
	&gemmaFamily,
	&gemma2Family,
	&gemma3Family,
}

// SupportedArchs lists the architectures this package runs.
var SupportedArchs = archNames(families)

func archNames(fs []*family) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.names...)
	}
	return out
}

// lookup finds the family of a GGUF architecture name.
func lookup(arch string) (*family, bool) {
	for _, f := range families {
		for _, n := range f.names {
			if n == arch {
				return f, true
			}
		}
	}
	return nil, false
}

// meta reads a file's metadata under its architecture's prefix (arch.key),
// refusing bad values with the errors ReadConfig gives.
type meta struct {
	f    *gguf.File
	arch string // the file's general.architecture
}

// bad is the error for a missing or unusable key.
func (m meta) bad(key string) error {
	return &gguf.Error{Path: m.f.Path, Err: fmt.Errorf("%w: %s.%s", gguf.ErrMetadata, m.arch, key)}
}

// size reads a positive size below 2^24; def >= 0 is its value when the
// key is absent, def < 0 makes it required.
func (m meta) size(key string, def int) (int, error) {
	v, ok := m.f.Uint(m.arch + "." + key)
	if !ok {
		if def >= 0 {
			return def, nil
		}
		return 0, m.bad(key)
	}
	if v == 0 || v > 1<<24 {
		return 0, m.bad(key + fmt.Sprintf(" = %d", v))
	}
	return int(v), nil
}

// uint reads an unsigned key as written.
func (m meta) uint(key string) (uint64, bool) { return m.f.Uint(m.arch + "." + key) }

// float reads a float key.
func (m meta) float(key string) (float64, bool) { return m.f.Float(m.arch + "." + key) }

// str reads a string key.
func (m meta) str(key string) (string, bool) { return m.f.String(m.arch + "." + key) }
