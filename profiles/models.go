package profiles

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"arborist/assets"
	"arborist/engine/demo"
	"arborist/engine/drafter"
	"arborist/engine/generate"
	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/synth"
	"arborist/engine/tokenizer"
	"arborist/engine/tree"
	"arborist/kernels"
	"arborist/profiles/hardware"
	"arborist/profiles/latency"
	"arborist/profiles/measure"
	"arborist/profiles/outfile"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// Model facts and single-model workflows (inspect, tokenize, generate,
// synth, bench, the demo pair): the faces show them but never open GGUF
// files, tokenizers or backends themselves.

// ModelFacts are what Inspect reads of a GGUF model: the file, its shape
// and tensor types, its memory need at a context, whether Arborist can run
// it, and its tokenizer. Where a part cannot be read, its error says why
// and the rest is still there.
type ModelFacts struct {
	Path          string
	Version       uint32 // the GGUF version
	Tensors, Keys int    // tensors and metadata keys
	Name          string // general.name
	// Synthetic marks random weights (synth), with the shape they copy;
	// Demo is the demo pair's note ("" for other models).
	Synthetic      bool
	SyntheticShape string
	Demo           string
	Architecture   string
	Params         uint64
	WeightBytes    uint64
	Types          []gguf.TypeCount // tensors by type, the most common first
	// Config is the model's shape; nil where it cannot be read (ConfigErr).
	Config    *model.Config
	ConfigErr error
	// Context is the context the memory need is for; KVBytes the KV
	// cache there, and Repacked the host backend's repacked copies of the
	// matrices (0 where it keeps none).
	Context           int
	KVBytes, Repacked uint64
	// Unrunnable says why Arborist cannot run the model (missing tensors,
	// a vocabulary mismatch); nil where it can.
	Unrunnable error
	// Tokenizer is the model's vocabulary (TokenizerErr where it is
	// unusable): byte-level BPE with its pre-tokenizer, or SentencePiece.
	Tokenizer struct {
		BPE      bool
		Pre      string
		Vocab    int
		BOS, EOS int
		AddBOS   bool
	}
	TokenizerErr error
}

// Inspect reads a GGUF model's architecture, shape, tensor types, memory
// need at context ctxLen (0: the model's, at most 4096) and tokenizer.
func Inspect(path string, ctxLen int) (*ModelFacts, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := &ModelFacts{Path: f.Path, Version: f.Version, Tensors: len(f.Tensors), Keys: len(f.KV), Architecture: f.Architecture(),
		Params: f.Params(), WeightBytes: f.WeightBytes(), Types: f.TypeCounts()}
	m.Name, _ = f.String("general.name")
	if m.Synthetic, _ = f.Bool("arborist.synthetic"); m.Synthetic {
		m.SyntheticShape, _ = f.String("arborist.synthetic_shape")
	}
	m.Demo, _ = f.String("arborist.demo")
	if cfg, err := model.ReadConfig(f); err != nil {
		m.ConfigErr = err
	} else {
		m.Config = &cfg
		m.Context = ctxLen
		if m.Context == 0 {
			m.Context = min(cfg.CtxLen, 4096)
		}
		m.KVBytes = cfg.KVBytes(m.Context)
		// the host backend's repacked copies, in tensor order until its
		// budget would be passed (kernels.HostFacts.RepackBudget)
		if r, err := kernels.LookupHost(); err == nil {
			left := uint64(r.Host.RepackBudget())
			for _, t := range f.Tensors {
				if len(t.Dims) == 2 {
					if size := uint64(r.Host.RepackedBytes(t.Type, int(t.Dims[1]), int(t.Dims[0]))); size <= left {
						m.Repacked, left = m.Repacked+size, left-size
					}
				}
			}
		}
		m.Unrunnable = model.Check(f) // missing tensors, vocabulary mismatch
	}
	if tok, err := tokenizer.FromGGUF(f); err != nil {
		m.TokenizerErr = err
	} else {
		t := &m.Tokenizer
		t.BPE, t.Pre, t.Vocab, t.BOS, t.EOS, t.AddBOS = tok.Kind == tokenizer.BPE, tok.Pre, tok.VocabSize(), tok.BOS, tok.EOS, tok.AddBOS
	}
	return m, nil
}

// Tokenize returns the token ids of text under a model's vocabulary.
func Tokenize(path, text string, bos, special bool) (ids []int, err error) {
	err = withTokenizer(path, func(tok *tokenizer.Tokenizer) { ids = tok.Encode(text, bos, special) })
	return ids, err
}

// withTokenizer calls use with a model file's tokenizer, read from its
// metadata alone: no weights are loaded.
func withTokenizer(path string, use func(*tokenizer.Tokenizer)) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	use(tok)
	return nil
}

// openModel loads one model on a backend chosen by name; noMmap reads the
// file into memory instead of mapping it.
// kv is its KV cache type (kernels.ParseKV).
func openModel(backend string, threads int, path string, noMmap bool, kv string) (*model.Model, kernels.Backend, error) {
	kt, err := kernels.ParseKV(kv)
	if err != nil {
		return nil, nil, err
	}
	be, err := kernels.Open(backend, threads)
	if err != nil {
		return nil, nil, err
	}
	m, err := model.LoadWith(path, be, gguf.Options{NoMmap: noMmap})
	if err != nil {
		be.Close()
		return nil, nil, err
	}
	m.KVType = kt
	return m, be, nil
}

func closeModel(m *model.Model, be kernels.Backend) {
	m.Close()
	be.Close()
}

// GenerateOptions describe plain autoregressive generation.
type GenerateOptions struct {
	Model   string
	Backend string // "" = kernels.DefaultBackend
	Threads int
	NoMmap  bool
	KV      string // KV cache type (kernels.ParseKV)
	Prompt  string
	NoBOS   bool
	// IDs, when not nil, is the prompt as token ids (BOS included if
	// wanted), with no tokenizer involved: how Arborist is compared with
	// another engine.
	IDs       []int
	IgnoreEOS bool // generate MaxTokens tokens even past an end-of-generation token
	MaxTokens int
	Sample    sample.Params
	OnPiece   func(string)               // each token's text as it comes
	OnToken   func(id int, piece string) // each token's id and text as it comes
}

// GenerateResult is a generation's figures.
type GenerateResult struct {
	Stats   generate.Stats
	Tokens  []int
	Threads int
	Backend string
}

// ErrEmptyPrompt: the prompt encodes to nothing (and the model adds no BOS).
var ErrEmptyPrompt = fmt.Errorf("the prompt is empty and the model adds no BOS token")

// Generate decodes with the target alone.
func Generate(ctx context.Context, opt GenerateOptions) (*GenerateResult, error) {
	m, be, err := openModel(opt.Backend, opt.Threads, opt.Model, opt.NoMmap, opt.KV)
	if err != nil {
		return nil, err
	}
	defer closeModel(m, be)
	ids := opt.IDs
	if ids != nil {
		if err := checkIDs(ids, m.Vocab); err != nil {
			return nil, err
		}
	} else {
		ids = m.Tok.Encode(opt.Prompt, !opt.NoBOS, false)
	}
	if len(ids) == 0 {
		return nil, ErrEmptyPrompt
	}
	if len(ids)+opt.MaxTokens > m.CtxLen {
		return nil, fmt.Errorf("prompt (%d tokens) + %d new tokens exceed the model's context of %d", len(ids), opt.MaxTokens, m.CtxLen)
	}
	out, st, err := generate.Run(ctx, m, ids, generate.Options{
		MaxTokens: opt.MaxTokens, Sample: opt.Sample, StopAtEOS: !opt.IgnoreEOS,
		OnToken: func(id int) {
			if opt.OnPiece != nil {
				opt.OnPiece(m.Tok.Piece(id))
			}
			if opt.OnToken != nil {
				opt.OnToken(id, m.Tok.Piece(id))
			}
		},
	})
	return &GenerateResult{Stats: st, Tokens: out, Threads: be.Threads(), Backend: be.Name()}, err
}

// SynthModel is a random-weight model Synth writes: the shape it copies,
// its parameters and its weight type.
type SynthModel struct {
	Shape  string
	Params uint64
	Type   string
}

// Synth writes a random-weight GGUF with a named (or custom:...) shape and
// weight type (e.g. Q8_0). It returns no model where the request is refused
// before writing (an unknown shape or type, a file that would not fit), and
// the model with the error where the writing failed.
func Synth(ctx context.Context, path, shapeName, typeName string, seed uint64, progress func(done, total uint64)) (*SynthModel, error) {
	shape, err := synth.ParseShape(shapeName)
	if err != nil {
		return nil, err
	}
	typ, medium, err := synth.ParseType(typeName)
	if err != nil {
		return nil, err
	}
	opt := synth.Options{Type: typ, Medium: medium, Seed: seed, Progress: progress}
	if err := outfile.Check(path); err != nil { // a FIFO or a device there stays as it is
		return nil, err
	}
	name := opt.TypeName()
	// the file's size before writing a byte: a custom shape can ask for
	// tens of gigabytes (a shape Write refuses is reported by Write)
	if shape.Validate() == nil {
		need := synth.Size(shape, opt)
		if free, ok := hardware.FreeDisk(filepath.Dir(path)); ok && need > free {
			return nil, fmt.Errorf("synth: %s in %s would be about %.2f GiB, and its folder has %.2f GiB free", shape.Name, name, float64(need)/(1<<30), float64(free)/(1<<30))
		}
	}
	m := &SynthModel{Shape: shape.Name, Params: uint64(shape.Params()), Type: name}
	return m, synth.WriteFile(ctx, path, shape, opt)
}

// DemoPair writes the built-in demo pair into dir and returns its paths;
// a complete pair already there is reused. The pair is built from the
// stories260K model embedded in the binary (engine/demo explains the
// construction): a target that costs like a 35M-parameter model and writes
// real text, and a noisy small drafter, so speculation visibly pays on any
// laptop. The model's licence notice is written beside the pair. Files
// of those names that are not a complete pair are replaced only with
// force.
func DemoPair(ctx context.Context, dir string, force bool, progress func(float64)) (target, draft string, err error) {
	target, draft = filepath.Join(dir, demo.TargetName), filepath.Join(dir, demo.DraftName)
	if fileExists(target) && fileExists(draft) {
		return target, draft, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("demo pair: %w", err)
	}
	for _, p := range []string{target, draft, filepath.Join(dir, demoNoticeName)} {
		if _, err := os.Lstat(p); err == nil && !force {
			return "", "", fmt.Errorf("%s already exists (use --force to replace it)", p)
		}
		if err := outfile.Check(p); err != nil {
			return "", "", err
		}
	}
	if progress != nil {
		progress(0)
	}
	if target, draft, err = demo.Write(ctx, assets.DemoModel, dir, demo.Options{}); err != nil {
		return "", "", err
	}
	// like the pair, a new file renamed into place: never written through
	// a link planted under its name
	if err := outfile.WriteFile(filepath.Join(dir, demoNoticeName), []byte(assets.DemoNotice), target, draft); err != nil {
		return "", "", fmt.Errorf("demo pair: %w", err)
	}
	if progress != nil {
		progress(1)
	}
	return target, draft, nil
}

// demoNoticeName is the file beside the demo pair that carries the licence
// notice of the model it is built from (stories260K, MIT).
const demoNoticeName = "NOTICE-stories260K.txt"

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// DescribePair summarises a pair's target and its draft source (a draft
// model, layer-skip, or a hidden-state drafter: a stored id in the
// database db, or a file) and checks that they can work together.
func DescribePair(ctx context.Context, ps PairSpec, db string) (string, error) {
	s, err := describeModels(ps.Target, ps.Draft, ps.Layers)
	if err == nil && ps.DraftHidden != "" {
		var more string
		more, err = describeHidden(ctx, ps.Target, ps.DraftHidden, db)
		s += more
	}
	return s, err
}

// describeModels summarises a target and its draft model (or layer-skip
// depth) and checks that they can work together.
func describeModels(target, draft string, layers int) (string, error) {
	var b strings.Builder
	tf, err := gguf.Open(target)
	if err != nil {
		return "", err
	}
	defer tf.Close()
	ttok, err := describeModel(&b, "Target", tf)
	if err != nil {
		return "", err
	}
	cfg, _ := model.ReadConfig(tf)
	if layers > 0 {
		if layers >= cfg.Layers {
			return "", fmt.Errorf("layer-skip needs fewer than the target's %d layers", cfg.Layers)
		}
		fmt.Fprintf(&b, "\nDraft: the target's first %d of %d layers (layer-skip), same vocabulary.\n", layers, cfg.Layers)
	}
	if draft != "" {
		df, err := gguf.Open(draft)
		if err != nil {
			return "", err
		}
		defer df.Close()
		b.WriteString("\n")
		dtok, err := describeModel(&b, "Draft", df)
		if err != nil {
			return "", err
		}
		if err := drafter.CheckVocab(ttok, dtok); err != nil {
			return "", fmt.Errorf("the pair is incompatible: %w", err)
		}
		fmt.Fprintf(&b, "\nCompatible: identical vocabularies (%d tokens); size ratio %.0f:1.\n", ttok.VocabSize(), float64(tf.Params())/float64(max(df.Params(), 1)))
	}
	return b.String(), nil
}

func describeModel(b *strings.Builder, label string, f *gguf.File) (*tokenizer.Tokenizer, error) {
	cfg, err := model.ReadConfig(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	quant := ""
	if tc := f.TypeCounts(); len(tc) > 0 {
		quant = tc[0].Type.String()
	}
	ctx := min(cfg.CtxLen, 4096)
	fmt.Fprintf(b, "%s: %s\n", label, f.Path)
	if syn, _ := f.Bool("arborist.synthetic"); syn {
		fmt.Fprintf(b, "  SYNTHETIC (random weights): for timing only, its text is noise\n")
	}
	if d, _ := f.String("arborist.demo"); d != "" {
		fmt.Fprintf(b, "  DEMO: %s\n", d)
	}
	fmt.Fprintf(b, "  %s, %.2fM parameters, %s weights (%.1f MiB)\n", cfg.Arch, float64(f.Params())/1e6, quant, float64(f.WeightBytes())/(1<<20))
	fmt.Fprintf(b, "  width %d, %d layers, %d heads (%d kv), ffn %d, context %d\n", cfg.Dim, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.FFN, cfg.CtxLen)
	fmt.Fprintf(b, "  memory at context %d: %.1f MiB\n", ctx, float64(f.WeightBytes()+cfg.KVBytes(ctx))/(1<<20))
	fmt.Fprintf(b, "  tokenizer %s, %d tokens\n", tok.Kind, tok.VocabSize())
	return tok, nil
}

// describeHidden checks that a hidden-state drafter (a stored id or a
// file) fits the target, and summarises it.
func describeHidden(ctx context.Context, target, ref, db string) (string, error) {
	m, be, err := openModel(kernels.DefaultBackend, 1, target, false, "")
	if err != nil {
		return "", err
	}
	defer closeModel(m, be)
	d, err := pairs.OpenDrafter(ctx, ref, db, m)
	if err != nil {
		return "", err
	}
	held := "-"
	if len(d.Losses) > 0 {
		held = fmt.Sprintf("%.4f", d.Losses[len(d.Losses)-1].HeldOut)
	}
	return fmt.Sprintf("\nDraft: hidden-state drafter %s: one layer over the target's hidden states, %d parameters, token-info rank %d, %d epochs, held-out loss %s.\n",
		ref, d.Params(), d.D, len(d.Losses), held), nil
}

// BenchOptions describe a single-model benchmark.
type BenchOptions struct {
	Model   string
	Backend string
	Threads int
	Reps    int    // decode runs (the median is reported)
	Tokens  int    // per decode run
	Widths  []int  // verification widths timed
	KV      string // KV cache type (kernels.ParseKV)
	// Ctx are context depths at which decode runs and verification passes
	// are timed as well (none: the short prompt's alone)
	Ctx []int
	// Progress, when set, hears each stage (decode runs, the passes, each
	// depth's prefill, runs and passes) with what is left of it: a depth
	// of thousands of tokens takes minutes before its first figure.
	Progress Progress
}

// BenchReport is a model's speed on this machine against its limits.
type BenchReport struct {
	Model       string  `json:"model"`
	Params      uint64  `json:"params"`
	WeightBytes uint64  `json:"weight_bytes"`
	Threads     int     `json:"threads"`
	Backend     string  `json:"backend"`
	Kernels     string  `json:"kernels"`
	Bandwidth   float64 `json:"bandwidth_bytes_per_s"`
	Roofline    float64 `json:"roofline_tokens_per_s"`
	// Context is the positions a decode step attends over, the mean over
	// the runs' steps, and KVRead the KV cache bytes it reads there: the
	// roofline streams those beside the weights
	Context  float64   `json:"roofline_context_positions"`
	KVRead   float64   `json:"kv_read_bytes_per_token"`
	Peak     float64   `json:"peak_macs_per_s"`
	PeakKind string    `json:"peak_kind"`
	MACs     float64   `json:"macs_per_token"`
	Decode   []float64 `json:"decode_tokens_per_s"` // sorted
	Median   float64   `json:"decode_median_tokens_per_s"`
	// DecodeShares is each decode run's share of the roofline at the
	// read rate of the sustained reads just before and just after it (the
	// mean of the two; sorted): on a shared machine the bandwidth swings
	// from second to second, and a run set against reads as long as itself
	// on either side says more than all runs against one probe
	DecodeShares []float64 `json:"decode_roofline_shares"`
	// BandwidthProbes are the sustained reads' rates, in the order taken
	// (one before the decode runs, then one after each, each about as long
	// as a run), of which Bandwidth is the median; BandwidthBest is the
	// fastest single pass of the probe's buffer, the memory at its
	// quietest. PeakProbes are the compute ceiling's probes (before the
	// decode runs and after the passes), of which Peak is the best, or
	// the fastest pass's rate where a pass ran faster than them all: PeakW
	// is then that pass's width (0: the probes' best is Peak)
	BandwidthProbes []float64       `json:"bandwidth_probes_bytes_per_s,omitempty"`
	BandwidthBest   float64         `json:"bandwidth_best_pass_bytes_per_s,omitempty"`
	PeakProbes      []float64       `json:"peak_probes_macs_per_s,omitempty"`
	PeakW           int             `json:"peak_set_by_pass_width,omitempty"`
	Curve           []latency.Point `json:"verify_curve"`
	Limits          hardware.Limits `json:"-"`
	// Memory is the device's own memory where it has one (a GPU): its
	// copy rate is Bandwidth, and Peak is 0 (not measured there)
	Memory *store.DeviceMemory `json:"device_memory,omitempty"`
	// Depths are the runs after BenchOptions.Ctx cached positions
	Depths []DepthReport `json:"depths,omitempty"`
	// KV is the KV cache type the runs held (BenchOptions.KV, "" the
	// backend's default), and identity the model's fingerprint, by which
	// SaveBenchReport keeps the report
	KV       string       `json:"-"`
	identity *store.Model // nil in a report read back from the store
}

// maxBenchReps bounds bench's repetitions: each decodes the whole -n.
const maxBenchReps = 1000

// BenchModel times decoding (Reps runs of Tokens tokens) and T_verify(W),
// and sets them against the bandwidth roofline and the compute ceiling.
// The roofline's bandwidth is the median of sustained reads, one before
// the decode runs and one after each, each about as long as a run, and
// each run is also set against the reads on either side of it; the
// ceiling is the best of probes before the runs and after the passes.
func BenchModel(ctx context.Context, opt BenchOptions) (*BenchReport, error) {
	if opt.Reps > maxBenchReps {
		return nil, fmt.Errorf("--reps %d: at most %d (each decodes the whole -n)", opt.Reps, maxBenchReps)
	}
	for _, w := range opt.Widths {
		if w < 1 || w > tree.MaxNodes {
			return nil, fmt.Errorf("--widths: %d is not a width a pass takes (1..%d)", w, tree.MaxNodes)
		}
	}
	bi, err := kernels.Lookup(opt.Backend)
	if err != nil {
		return nil, err
	}
	m, be, err := openModel(opt.Backend, opt.Threads, opt.Model, false, opt.KV)
	if err != nil {
		return nil, err
	}
	defer closeModel(m, be)
	if err := checkDepths(m, opt.Ctx, opt.Tokens, slices.Max(append([]int{1}, opt.Widths...))); err != nil {
		return nil, err
	}
	progress := opt.Progress
	r := &BenchReport{Model: opt.Model, Params: m.File.Params(), WeightBytes: m.WeightBytes(), Threads: be.Threads(), Backend: be.Name(), Kernels: bi.Kernels(), KV: opt.KV}
	md, err := pairs.DescribeModel(m)
	if err != nil {
		return nil, err
	}
	r.identity = &md
	// a device with memory of its own (a GPU) is held to that memory's rate
	if r.Memory, err = hardware.DeviceMemory(be); err != nil {
		return nil, err
	}
	var probe *hardware.BandwidthProbe
	if r.Memory != nil {
		r.Bandwidth = r.Memory.Copy
	} else {
		probe = hardware.NewBandwidthProbe(r.Threads, 256<<20)
		if r.BandwidthBest, err = probe.Measure(ctx); err != nil {
			return nil, err
		}
		r.Bandwidth = r.BandwidthBest
	}
	if r.Limits, err = hardware.DeviceLimits(ctx, m, r.Threads, r.Bandwidth, r.Memory); err != nil {
		return nil, err
	}
	if r.Limits.Peak > 0 {
		r.PeakProbes = append(r.PeakProbes, r.Limits.Peak)
	}
	// sustain reads for about d, keeping its rate and best pass
	sustain := func(d time.Duration) error {
		rd, err := probe.Sustain(ctx, d)
		if err != nil {
			return err
		}
		r.BandwidthProbes = append(r.BandwidthProbes, rd.Rate)
		r.BandwidthBest = max(r.BandwidthBest, rd.Best)
		return nil
	}
	if probe != nil { // the first read as long as a run at the best pass's rate
		if err := sustain(time.Duration(float64(opt.Tokens) * r.Limits.WeightBytes / r.BandwidthBest * float64(time.Second))); err != nil {
			return nil, err
		}
	}
	prompt := m.Tok.Encode("Once upon a time", true, false)
	runs := time.Now()
	for i := 0; i < opt.Reps; i++ {
		_, st, err := generate.Run(ctx, m, prompt, generate.Options{MaxTokens: opt.Tokens})
		if err != nil {
			return nil, err
		}
		bw := r.Bandwidth // a device's copy rate
		if probe != nil {
			if err := sustain(st.Decode); err != nil {
				return nil, err
			}
			bw = (r.BandwidthProbes[i] + r.BandwidthProbes[i+1]) / 2
		}
		r.Context, r.Limits.KVRead = decodeKV(m, st)
		r.Decode = append(r.Decode, st.DecodeTPS())
		r.DecodeShares = append(r.DecodeShares, st.DecodeTPS()*r.Limits.TokenBytes()/bw)
		progress.send("decode runs", i+1, opt.Reps, fmt.Sprintf("%.1f tokens/s%s", st.DecodeTPS(), leftOf(time.Since(runs), i+1, opt.Reps)))
	}
	probe = nil // the buffer is not needed past the decode runs
	sort.Float64s(r.Decode)
	sort.Float64s(r.DecodeShares)
	if len(r.Decode) > 0 {
		r.Median = r.Decode[len(r.Decode)/2]
	}
	if len(r.BandwidthProbes) > 0 {
		r.Bandwidth, _, _ = medianRange(r.BandwidthProbes)
	}
	if r.Curve, err = measure.VerifyCurve(ctx, m, opt.Widths, measure.CurveOptions{Progress: progress.rounds("verify passes", time.Now())}); err != nil {
		return nil, err
	}
	if r.Limits.Peak > 0 { // the ceiling again, after the passes
		after, err := hardware.ComputePeak(ctx, r.Threads, r.Limits.Integer)
		if err != nil {
			return nil, err
		}
		r.PeakProbes = append(r.PeakProbes, after)
		r.Limits.Peak = max(r.Limits.Peak, after)
		// and no lower than any pass ran: a pass beyond the probes shows
		// they fell short, and every width's share stays within 100%
		r.Limits.Bound(r.Curve)
	}
	r.Limits.Bandwidth = r.Bandwidth
	r.Roofline = 1 / r.Limits.Roofline().Seconds()
	r.Peak, r.PeakKind, r.MACs, r.KVRead = r.Limits.Peak, r.Limits.Kind(), r.Limits.MACs, r.Limits.KVRead
	r.PeakW = r.Limits.BoundW
	for _, d := range opt.Ctx {
		dr, err := benchDepth(ctx, m, r.Limits, d, opt.Reps, opt.Tokens, opt.Widths, progress)
		if err != nil {
			return nil, fmt.Errorf("--ctx %d: %w", d, err)
		}
		r.Depths = append(r.Depths, dr)
	}
	return r, nil
}

// decodeKV is the mean over a decode run's steps of the positions each
// attends over and of the KV cache bytes it reads: the first token comes
// out of the prefill, and step k (1..Tokens-1) attends over the prompt
// and k positions after it.
func decodeKV(m *model.Model, st generate.Stats) (positions, bytes float64) {
	steps := st.Tokens - 1
	if steps <= 0 {
		return 0, 0
	}
	for k := 1; k <= steps; k++ {
		positions += float64(st.PromptTokens + k)
		bytes += float64(m.KVReadBytes(st.PromptTokens+k, m.KVType))
	}
	return positions / float64(steps), bytes / float64(steps)
}
