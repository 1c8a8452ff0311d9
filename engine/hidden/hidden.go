// Package hidden is the hidden-state drafter design ("Make Every Draft
// Count", arXiv 2602.21224; docs/HIDDEN-DRAFTER.md): one transformer layer
// that autoregresses on the target's own hidden states,
// h_{t+1} = Layer(h_<=t), sharing the target's frozen final norm, output
// head and token embedding. Token identity never enters the recurrence; it
// is added only when sampling, as a low-rank token-info embedding
// E(t) = onehot(t)^T W_E W_1 W_2, so the drafter's logits for the token
// after position t+1 are head(norm(h_{t+1})) + E(token_{t+1}).
//
// Because the hidden-state chain of a step does not depend on which tokens
// were drafted, every node at one depth shares one hidden state, and after a
// rejection the cached chain is re-sampled from the target's bonus token
// without running the layer again (Source).
//
// The package trains such a drafter by self-distillation from the target
// (Trainer: hand-written gradients in float64, Adam, a curriculum over the
// number of autoregressive steps), and reads and writes it as a GGUF file.
package hidden

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels"
	"arborist/kernels/quant"
)

// Shape is the drafter layer's geometry: the target's, plus the token-info
// rank D.
type Shape struct {
	Dim, Heads, KVHeads, HeadDim, FFN, Vocab int
	D                                        int // token-info rank
	RopeDim                                  int
	RopeBase, RopeScale                      float32
	RopeNeox                                 bool
	Eps                                      float32
}

// ShapeOf is the shape of a drafter for target with token-info rank d,
// capped by the target's width (a rank above it adds nothing).
func ShapeOf(target *model.Config, d int) Shape {
	if d <= 0 || d > target.Dim {
		d = target.Dim
	}
	return Shape{Dim: target.Dim, Heads: target.Heads, KVHeads: target.KVHeads, HeadDim: target.HeadDim,
		FFN: target.FFN, Vocab: target.Vocab, D: d, RopeDim: target.RopeDim, RopeBase: target.RopeBase,
		RopeScale: target.RopeScale, RopeNeox: target.RopeNeox, Eps: target.Eps}
}

// Fits reports why a drafter of this shape cannot run on target, or nil.
func (s Shape) Fits(target *model.Config) error {
	if s.Dim != target.Dim || s.Vocab != target.Vocab || s.Heads != target.Heads || s.KVHeads != target.KVHeads || s.HeadDim != target.HeadDim {
		return fmt.Errorf("hidden: drafter shape (width %d, %d heads, %d kv heads, head width %d, vocabulary %d) does not fit the target (width %d, %d heads, %d kv heads, head width %d, vocabulary %d)",
			s.Dim, s.Heads, s.KVHeads, s.HeadDim, s.Vocab, target.Dim, target.Heads, target.KVHeads, target.HeadDim, target.Vocab)
	}
	return nil
}

func (s Shape) qDim() int  { return s.Heads * s.HeadDim }
func (s Shape) kvDim() int { return s.KVHeads * s.HeadDim }

// config is the one-block model configuration the decoder runs.
func (s Shape) config(ctx int) model.Config {
	return model.Config{Arch: "llama", Dim: s.Dim, Layers: 1, Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: s.HeadDim,
		FFN: s.FFN, Vocab: s.Vocab, CtxLen: ctx, RopeDim: s.RopeDim, RopeBase: s.RopeBase, RopeScale: s.RopeScale,
		RopeNeox: s.RopeNeox, Eps: s.Eps}
}

// Block is one trainable parameter tensor: Rows x Cols, row-major, each row
// one output (the GGUF layout of a weight matrix, ne = [Cols, Rows]).
type Block struct {
	Name       string // GGUF tensor name
	Rows, Cols int
	Off        int // offset in the flat parameter vector
}

// Size is the number of values.
func (b Block) Size() int { return b.Rows * b.Cols }

// Block indices in Layout's order.
const (
	bAttnNorm = iota
	bQ
	bK
	bV
	bO
	bFFNNorm
	bGate
	bUp
	bDown
	bW1 // token-info W_1, stored transposed: D x Dim (u = W1 · e)
	bW2 // token-info W_2, stored transposed: Vocab x D (E = W2 · u)
	nBlocks
)

// Layout lists the parameter blocks and their offsets in the flat vector.
func (s Shape) Layout() []Block {
	n, f := s.Dim, s.FFN
	bl := []Block{
		{"blk.0.attn_norm.weight", 1, n, 0},
		{"blk.0.attn_q.weight", s.qDim(), n, 0},
		{"blk.0.attn_k.weight", s.kvDim(), n, 0},
		{"blk.0.attn_v.weight", s.kvDim(), n, 0},
		{"blk.0.attn_output.weight", n, s.qDim(), 0},
		{"blk.0.ffn_norm.weight", 1, n, 0},
		{"blk.0.ffn_gate.weight", f, n, 0},
		{"blk.0.ffn_up.weight", f, n, 0},
		{"blk.0.ffn_down.weight", n, f, 0},
		{"token_info.w1", s.D, n, 0},
		{"token_info.w2", s.Vocab, s.D, 0},
	}
	off := 0
	for i := range bl {
		bl[i].Off = off
		off += bl[i].Size()
	}
	return bl
}

// Params is the number of trainable parameters.
func (s Shape) Params() int {
	l := s.Layout()
	return l[len(l)-1].Off + l[len(l)-1].Size()
}

// Drafter is a hidden-state drafter: its shape, weights and provenance.
type Drafter struct {
	Shape
	P []float32 // flat parameters, in Layout order
	// Hot lists token ids by falling frequency in the training data: their
	// token-info rows are precomputed (hot-token sparsification).
	Hot []int
	// Target names the model it was trained for; Fingerprint identifies it.
	Target, Fingerprint string
	InitLayer           int // target block the layer started from (-1: random)
	Settings            Settings
	Losses              []Epoch // training history
}

// Epoch is one training epoch's record.
type Epoch struct {
	Epoch, Depth int
	Train        float64   // mean training loss
	HeldOut      float64   // held-out loss at the epoch's depth
	MSE, KL      float64   // held-out components
	MSEAt        []float64 `json:",omitempty"` // held-out state MSE at depths 1..Depth
	StateMS      float64   // mean square of the held-out target states (the MSE of predicting zero)
	StateVar     float64   `json:",omitempty"` // their variance about the mean state (the MSE of predicting the mean)
	Agree        float64   // held-out top-1 agreement with the target at depth 1
	AgreeAt      []float64 `json:",omitempty"` // held-out agreement at depths 1..Depth (the drafter reading its own states)
	Accept       float64   // chain acceptance estimated from AgreeAt: what early stopping follows
	LR           float64   // learning rate at the epoch's end
	Seconds      float64
}

// Block returns the parameters of block i.
func (d *Drafter) Block(i int) []float32 {
	b := d.Layout()[i]
	return d.P[b.Off : b.Off+b.Size()]
}

// New makes a drafter for target. With initLayer in [0, Layers) the
// transformer layer starts as a copy of that target block (the published
// design starts from a middle layer); otherwise it is random. W_1 starts random and W_2 at
// zero, so the untrained token-info adds nothing.
func New(target *model.Model, d, initLayer int, seed uint64) (*Drafter, error) {
	s := ShapeOf(&target.Config, d)
	dr := &Drafter{Shape: s, P: make([]float32, s.Params()), InitLayer: -1, Target: target.Path}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	lay := s.Layout()
	randn := func(b Block, std float64) {
		p := dr.P[b.Off : b.Off+b.Size()]
		for i := range p {
			p[i] = float32(rng.NormFloat64() * std)
		}
	}
	if initLayer >= 0 && initLayer < target.Layers {
		l := &target.Blocks[initLayer]
		dr.InitLayer = initLayer
		target.Backend.Download(dr.Block(bAttnNorm), l.AttnNorm)
		target.Backend.Download(dr.Block(bFFNNorm), l.FFNNorm)
		for _, i := range []int{bQ, bK, bV, bO, bGate, bUp, bDown} {
			if err := readTensor(target, fmt.Sprintf("blk.%d.%s", initLayer, lay[i].Name[len("blk.0."):]), dr.Block(i)); err != nil {
				return nil, fmt.Errorf("hidden: initialising from block %d: %w", initLayer, err)
			}
		}
	} else {
		for _, i := range []int{bAttnNorm, bFFNNorm} {
			for j := range dr.Block(i) {
				dr.Block(i)[j] = 1
			}
		}
		for _, i := range []int{bQ, bK, bV, bO, bGate, bUp, bDown} {
			randn(lay[i], 1/math.Sqrt(float64(lay[i].Cols)))
		}
	}
	randn(lay[bW1], 1/math.Sqrt(float64(s.Dim)))
	return dr, nil
}

// MiddleLayer is the block a drafter starts from by default: the middle
// one of the target's live blocks, those whose attention output or
// feed-forward down projection is not all zero. A block with both zero
// adds nothing to the residual stream (models deepened by inserting such
// blocks, like the bench target, have many), and a drafter copied from it
// starts as the identity and gets no gradient in its other matrices until
// those two move. -1 when no block is live.
func MiddleLayer(target *model.Model) (int, error) {
	var live []int
	s := ShapeOf(&target.Config, 0)
	lay := s.Layout()
	for l := 0; l < target.Layers; l++ {
		for _, i := range []int{bO, bDown} {
			b := lay[i]
			w := make([]float32, b.Size())
			if err := readTensor(target, fmt.Sprintf("blk.%d.%s", l, b.Name[len("blk.0."):]), w); err != nil {
				return -1, fmt.Errorf("hidden: block %d: %w", l, err)
			}
			if slices.ContainsFunc(w, func(v float32) bool { return v != 0 }) {
				live = append(live, l)
				break
			}
		}
	}
	if len(live) == 0 {
		return -1, nil
	}
	return live[len(live)/2], nil
}

// Settings are the training settings stored with a drafter.
type Settings struct {
	D            int       `json:"d"`                   // token-info rank
	Depth        int       `json:"depth"`               // deepest curriculum level
	Epochs       int       `json:"epochs"`              // passes over the training data
	LR           float64   `json:"lr"`                  // Adam learning rate
	Batch        int       `json:"batch"`               // sequences per update
	Noise        float64   `json:"noise"`               // share of token-info tokens replaced at random
	MSEWeight    float64   `json:"mse_weight"`          // 0.7 in the published design; 0.1 by default here (measured: KL-heavy weights agree more)
	KLWeight     float64   `json:"kl_weight"`           // 0.3 in the published design; 0.9 by default here
	HeldOut      float64   `json:"held_out"`            // share of sequences held out
	Tokens       int       `json:"tokens"`              // tokens generated per sample
	Samples      int       `json:"samples"`             // samples generated per prompt (different seeds)
	Temp         float64   `json:"temp"`                // sampling temperature of the generated data
	Seed         uint64    `json:"seed"`                // data, noise and initialisation
	Hot          int       `json:"hot"`                 // hot tokens whose token-info is precomputed
	InitLayer    int       `json:"init_layer"`          // target block to start from; -1 random, -2 MiddleLayer
	Prompts      string    `json:"prompts"`             // where the prompts came from
	PromptsCount int       `json:"prompts_count"`       // how many
	Clip         float64   `json:"clip"`                // gradient norm clip
	Temps        []float64 `json:"temps,omitempty"`     // temperatures of the samples, cycled (empty: Temp)
	Corpus       bool      `json:"corpus"`              // add the built-in prompt corpus to the prompts
	MaxPrompts   int       `json:"prompts_max"`         // prompts continued at most, the given first, then the corpus (0: all; assets.TrainingPrompts)
	Warmup       float64   `json:"warmup"`              // share of the updates the learning rate warms up over
	Patience     int       `json:"patience"`            // epochs at full depth without a better held-out acceptance before stopping (0: never)
	Precision    string    `json:"precision,omitempty"` // the training products' inputs: auto (empty), f32 or bf16 (Products)
}

// Products is the precision the training products run at: f32, or bf16
// (inputs rounded to bfloat16, sums and everything else float32, as
// mixed-precision training does) where the CPU multiplies bfloat16 pairs
// at twice the float32 rate (AVX-512 BF16). auto picks bf16 where it can.
// The held-out evaluation, which decides the epoch kept and early
// stopping, always runs in f32, as the drafter is served. The products
// run on the host backend's math (trainMath); without it there is none.
func (s *Settings) Products() (kernels.Precision, error) {
	const f32, bf16 = kernels.PrecisionF32, kernels.PrecisionBF16
	tm, err := trainMath()
	if err != nil {
		return f32, err
	}
	switch s.Precision {
	case "", "auto":
		if tm.BF16Products() {
			return bf16, nil
		}
		return f32, nil
	case "f32":
		return f32, nil
	case "bf16":
		if !tm.BF16Products() {
			return f32, fmt.Errorf("hidden: precision bf16 needs a CPU with AVX-512 BF16 (this one has none, or ARBORIST_SIMD caps it): use auto or f32")
		}
		return bf16, nil
	}
	return f32, fmt.Errorf("hidden: precision %q must be auto, f32 or bf16", s.Precision)
}

// DefaultSettings are the defaults of `arborist train drafter`.
func DefaultSettings() Settings {
	return Settings{D: 256, Depth: 3, Epochs: 12, LR: 3e-3, Batch: 8, Noise: 0.1, MSEWeight: 0.1, KLWeight: 0.9,
		HeldOut: 0.1, Tokens: 128, Samples: 2, Temp: 0.8, Temps: []float64{0, 0.8}, Corpus: true, Warmup: 0.05, Patience: 3,
		Seed: 1, Hot: 32768, InitLayer: -2, Clip: 1, Precision: "auto"}
}

// Validate checks the settings.
// MaxEpochs, MaxTokens and MaxSamples bound a training run before anything
// is generated or allocated (a billion tokens a sample asked for a 24 GB
// block; a billion epochs ran for ever).
const (
	MaxEpochs  = 1000
	MaxTokens  = 1 << 16
	MaxSamples = 1000
)

func (s *Settings) Validate() error {
	switch {
	case s.Depth < 1 || s.Depth > 16:
		return fmt.Errorf("hidden: depth %d must be in 1..16", s.Depth)
	case s.Epochs < 1 || s.Epochs > MaxEpochs:
		return fmt.Errorf("hidden: epochs %d must be in 1..%d", s.Epochs, MaxEpochs)
	case !(s.LR > 0) || s.LR > 1:
		return fmt.Errorf("hidden: learning rate %g must be in (0, 1]", s.LR)
	case s.Batch < 1:
		return fmt.Errorf("hidden: batch %d must be >= 1", s.Batch)
	case !(s.Noise >= 0 && s.Noise < 1):
		return fmt.Errorf("hidden: noise %g must be in [0, 1)", s.Noise)
	case !(s.MSEWeight >= 0 && s.KLWeight >= 0 && s.MSEWeight+s.KLWeight > 0) || math.IsInf(s.MSEWeight+s.KLWeight, 0):
		return fmt.Errorf("hidden: loss weights %g and %g must be finite, >= 0 and not both 0", s.MSEWeight, s.KLWeight)
	case !(s.HeldOut >= 0 && s.HeldOut < 1):
		return fmt.Errorf("hidden: held-out share %g must be in [0, 1)", s.HeldOut)
	case s.Tokens < 2 || s.Tokens > MaxTokens:
		return fmt.Errorf("hidden: tokens per prompt %d must be in 2..%d", s.Tokens, MaxTokens)
	case s.Samples < 1 || s.Samples > MaxSamples:
		return fmt.Errorf("hidden: samples per prompt %d must be in 1..%d", s.Samples, MaxSamples)
	case sample.CheckTemp(s.Temp) != nil:
		return fmt.Errorf("hidden: %w", sample.CheckTemp(s.Temp))
	case !(s.Clip >= 0) || math.IsInf(s.Clip, 0):
		return fmt.Errorf("hidden: gradient clip %g must be a finite number >= 0 (0: none)", s.Clip)
	case s.MaxPrompts < 0:
		return fmt.Errorf("hidden: at most %d prompts: give a positive number (0: all)", s.MaxPrompts)
	case s.Hot < 0:
		return fmt.Errorf("hidden: hot tokens %d must be >= 0", s.Hot)
	case !(s.Warmup >= 0 && s.Warmup < 1):
		return fmt.Errorf("hidden: warm-up share %g must be in [0, 1)", s.Warmup)
	case s.Patience < 0:
		return fmt.Errorf("hidden: patience %d must be >= 0", s.Patience)
	case len(s.Temps) > 16:
		return fmt.Errorf("hidden: %d temperatures; at most 16", len(s.Temps))
	}
	for _, t := range s.Temps { // the target samples its data as any decoding does
		if err := sample.CheckTemp(t); err != nil {
			return fmt.Errorf("hidden: %w", err)
		}
	}
	_, err := s.Products()
	return err
}

// readTensor dequantises one of the target's tensors into dst.
func readTensor(target *model.Model, name string, dst []float32) error {
	t, data, err := target.File.TensorData(name)
	if err != nil {
		return err
	}
	if t.Elements() != uint64(len(dst)) {
		return fmt.Errorf("%s has %d values, want %d", name, t.Elements(), len(dst))
	}
	return quant.Dequantize(t.Type, data, dst)
}
