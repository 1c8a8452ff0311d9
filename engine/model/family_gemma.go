package model

import "math"

// gemmaFamily is Gemma (v1): NeoX rope, GELU, embeddings scaled by
// sqrt(width).
var gemmaFamily = family{
	names:    []string{"gemma"},
	switches: switches{RopeNeox: true, GELU: true},
	after: func(m meta, c *Config) error {
		gemmaEmbedScale(c)
		return nil
	},
}

// gemma2Family is Gemma 2: Gemma with post-attention and post-FFN norms,
// attention and final logit soft-caps (50 and 30 unless the file says),
// and a sliding window (4096 unless the file says) on every other layer.
var gemma2Family = family{
	names:    []string{"gemma2"},
	switches: switches{RopeNeox: true, GELU: true, PostNorms: true},
	after: func(m meta, c *Config) error {
		gemmaEmbedScale(c)
		if c.Window == 0 {
			c.Window = 4096 // llama.cpp's default for gemma2
		}
		c.SWAPattern = 2
		c.AttnSoftcap, c.FinalSoftcap = 50, 30
		gemmaSoftcaps(m, c)
		if c.Layers == 46 { // Gemma-2 27B
			gemmaWidthScale(c)
		}
		return nil
	},
}

// gemma3Family is Gemma 3: Gemma with post-norms, q/k norms, rope base 1e6
// unless the file says, and a sliding window (which its files carry) on
// all layers but every sixth (or the file's pattern), whose rope has a
// base of its own (10000 unless the file says) and no position scaling.
var gemma3Family = family{
	names:    []string{"gemma3"},
	switches: switches{RopeNeox: true, GELU: true, PostNorms: true, QKNorm: true},
	after: func(m meta, c *Config) error {
		gemmaEmbedScale(c)
		if _, ok := m.float("rope.freq_base"); !ok {
			c.RopeBase = 1e6
		}
		if c.Window == 0 {
			return m.bad("attention.sliding_window (gemma3 files carry it)")
		}
		c.SWAPattern = 6
		if p, ok := m.uint("attention.sliding_window_pattern"); ok && p > 0 && p < 1<<16 {
			c.SWAPattern = int(p)
		}
		c.RopeBaseLocal = 10000
		if v, ok := m.float("rope.freq_base_swa"); ok && v > 0 {
			c.RopeBaseLocal = float32(v)
		}
		gemmaSoftcaps(m, c)
		if c.Layers == 62 { // Gemma-3 27B
			gemmaWidthScale(c)
		}
		return nil
	},
}

// gemmaEmbedScale: every Gemma multiplies its embeddings by sqrt(width).
func gemmaEmbedScale(c *Config) { c.EmbedScale = float32(math.Sqrt(float64(c.Dim))) }

// gemmaSoftcaps reads the soft-caps of attention scores and final logits
// where the file gives them.
func gemmaSoftcaps(m meta, c *Config) {
	if v, ok := m.float("attn_logit_softcapping"); ok {
		c.AttnSoftcap = float32(v)
	}
	if v, ok := m.float("final_logit_softcapping"); ok {
		c.FinalSoftcap = float32(v)
	}
}

// gemmaWidthScale is the 27B models' attention scale:
// query_pre_attn_scalar = width/heads rather than the head width.
func gemmaWidthScale(c *Config) { c.AttnScale = float32(1 / math.Sqrt(float64(c.Dim/c.Heads))) }
