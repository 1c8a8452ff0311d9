package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"arborist/app/present"
	"arborist/profiles"
)

func runInspect(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "inspect", "[--ctx N] MODEL.gguf")
	ctxLen := fs.Int("ctx", 0, "context length for the memory estimate (default: the model's, at most 4096)")
	pos, err := parse(fs, args)
	if err != nil {
		return fail(fs, err)
	}
	if len(pos) != 1 {
		return fail(fs, usagef("want exactly one model file, got %d arguments", len(pos)))
	}
	if *ctxLen < 0 {
		return fail(fs, usagef("--ctx %d must be positive", *ctxLen))
	}
	m, err := profiles.Inspect(pos[0], *ctxLen)
	if err != nil {
		return err
	}
	printModel(env.Stdout, m)
	return nil
}

// printModel writes inspect's report: the file, its shape and tensor
// types, the memory it needs, whether it runs, and its tokenizer.
func printModel(w io.Writer, m *profiles.ModelFacts) {
	fmt.Fprintf(w, "file:          %s (GGUF v%d, %d tensors, %d metadata keys)\n", m.Path, m.Version, m.Tensors, m.Keys)
	fmt.Fprintf(w, "name:          %s\n", m.Name)
	if m.Synthetic {
		fmt.Fprintf(w, "SYNTHETIC:     random weights with the shape of %s (timing only; text is noise)\n", m.SyntheticShape)
	}
	if m.Demo != "" {
		fmt.Fprintf(w, "DEMO:          %s\n", m.Demo)
	}
	fmt.Fprintf(w, "architecture:  %s\n", m.Architecture)
	fmt.Fprintf(w, "parameters:    %s (%d)\n", present.Human(float64(m.Params), ""), m.Params)
	fmt.Fprintf(w, "weights:       %s\n", present.HumanBytes(m.WeightBytes))
	fmt.Fprintln(w, "tensor types:")
	for _, tc := range m.Types {
		fmt.Fprintf(w, "  %-6s %4d tensors  %10s params  %10s\n", tc.Type, tc.Tensors, present.Human(float64(tc.Params), ""), present.HumanBytes(tc.Bytes))
	}
	if cfg := m.Config; cfg != nil {
		fmt.Fprintf(w, "shape:         width %d, %d layers, %d heads (%d kv, head width %d), ffn %d, context %d\n",
			cfg.Dim, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.FFN, cfg.CtxLen)
		rope := "normal"
		if cfg.RopeNeox {
			rope = "neox"
		}
		fmt.Fprintf(w, "rope:          %s, %d dims, base %g, scaling %s\n", rope, cfg.RopeDim, cfg.RopeBase, cfg.RopeVariant())
		describeFamily(w, m)
		repacked := ""
		if m.Repacked > 0 {
			repacked = fmt.Sprintf(" + %s repacked for this CPU", present.HumanBytes(m.Repacked))
		}
		fmt.Fprintf(w, "memory:        %s at context %d (weights %s mapped%s + KV cache %s)\n",
			present.HumanBytes(m.WeightBytes+m.Repacked+m.KVBytes), m.Context, present.HumanBytes(m.WeightBytes), repacked, present.HumanBytes(m.KVBytes))
		if m.Unrunnable != nil {
			fmt.Fprintf(w, "runnable:      no: %v\n", m.Unrunnable)
		}
	} else {
		fmt.Fprintf(w, "runnable:      no: %v\n", m.ConfigErr)
	}
	if m.TokenizerErr != nil {
		fmt.Fprintf(w, "tokenizer:     unusable: %v\n", m.TokenizerErr)
		return
	}
	t := m.Tokenizer
	kind := "SentencePiece (llama)"
	if t.BPE {
		kind = fmt.Sprintf("byte-level BPE (gpt2, pre-tokenizer %q)", t.Pre)
	}
	fmt.Fprintf(w, "tokenizer:     %s, %d tokens, BOS %d, EOS %d, add BOS %v\n", kind, t.Vocab, t.BOS, t.EOS, t.AddBOS)
}

// describeFamily writes inspect's lines on the architecture's switches
// (sliding window, soft-capping, norms), only those a family uses, and the
// rope factor tensors.
func describeFamily(w io.Writer, m *profiles.ModelFacts) {
	cfg := m.Config
	var parts []string
	if cfg.Window > 0 {
		which := "every layer"
		if cfg.SWAPattern > 0 {
			which = fmt.Sprintf("%d of every %d layers (the last of each %d global)", cfg.SWAPattern-1, cfg.SWAPattern, cfg.SWAPattern)
		}
		parts = append(parts, fmt.Sprintf("sliding window %d on %s", cfg.Window, which))
	}
	if cfg.QKNorm {
		parts = append(parts, "q/k norms")
	}
	if cfg.PostNorms {
		parts = append(parts, "post-attention and post-FFN norms")
	}
	if cfg.AttnSoftcap != 0 {
		parts = append(parts, fmt.Sprintf("attention soft-cap %g", cfg.AttnSoftcap))
	}
	if cfg.FinalSoftcap != 0 {
		parts = append(parts, fmt.Sprintf("final logit soft-cap %g", cfg.FinalSoftcap))
	}
	if cfg.EmbedScale != 0 {
		parts = append(parts, fmt.Sprintf("embeddings x%.4g", cfg.EmbedScale))
	}
	if cfg.GELU {
		parts = append(parts, "GELU (tanh) FFN")
	}
	if cfg.QKVBias {
		parts = append(parts, "Q/K/V biases")
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "family:        %s\n", strings.Join(parts, ", "))
	}
	for _, f := range []struct {
		name string
		v    []float32
	}{{"rope_freqs", cfg.RopeFreqs}, {"rope short", cfg.RopeShort}, {"rope long", cfg.RopeLong}} {
		if f.v != nil {
			fmt.Fprintf(w, "%-15s%s\n", f.name+":", strings.Trim(fmt.Sprintf("%.4g", f.v), "[]"))
		}
	}
}
