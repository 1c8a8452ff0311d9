// Package config is the config.yaml format: the tuned plan exported for
// deployment (DuoDecoding's shape: hardware, models, optimization, extended
// with the speculation plan, sampling and the prediction it rests on),
// parsed with every size and number bounded and validated on replay, and
// its closest equivalents for llama.cpp, vLLM and SGLang (Equivalents).
package config

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"arborist/engine/gguf"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/kernels"
	"arborist/kernels/quant"
	"arborist/profiles/costmodel"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// Config is the exported plan: DuoDecoding's config.yaml shape (hardware,
// models, optimization), extended with the speculation plan and sampling.
// `arborist run --config` replays it.
type Config struct {
	Version      string       `yaml:"arborist_version"`
	Hardware     Hardware     `yaml:"hardware"`
	Models       Models       `yaml:"models"`
	Optimization Optimization `yaml:"optimization"`
	// Serving is the concurrency the plan was tuned for and the policy
	// serve replays (absent in configs written before: one request at a
	// time, the plan).
	Serving     Serving    `yaml:"serving,omitempty"`
	Speculation spec.Plan  `yaml:"speculation"`
	Sampling    Sampling   `yaml:"sampling"`
	Predicted   *Predicted `yaml:"predicted,omitempty"`
	// Measured holds settings measured in other runtimes for this plan
	// (arborist check-export --tune); the exported lines use them.
	Measured *Runtimes `yaml:"runtimes,omitempty"`
}

// Runtimes are the settings of other runtimes measured for the plan.
type Runtimes struct {
	LlamaCpp *LlamaCppTuned `yaml:"llama_cpp,omitempty"`
}

// LlamaCppTuned is the llama.cpp setting measured fastest on this machine
// for the pair: the draft length and cut-off the exported llama.cpp line
// then carries in place of the plan's, or no speculation at all where no
// setting measured faster than llama.cpp's plain decoding.
type LlamaCppTuned struct {
	Version   string  `yaml:"version,omitempty"` // what llama.cpp's --version printed
	Speculate bool    `yaml:"speculate"`
	DraftMax  int     `yaml:"draft_max,omitempty"`
	DraftPMin float64 `yaml:"draft_p_min"`
	// Speedup is the setting's measured speedup over llama.cpp's plain
	// decoding (the median round's; 1 when it does not speculate), Low
	// and High the rounds' range.
	Speedup float64 `yaml:"measured_speedup"`
	Low     float64 `yaml:"measured_low"`
	High    float64 `yaml:"measured_high"`
}

// MaxLlamaDraft bounds a tuned llama.cpp draft length.
const MaxLlamaDraft = 64

func (t *LlamaCppTuned) validate(draftKind string) error {
	for _, v := range []float64{t.DraftPMin, t.Speedup, t.Low, t.High} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("runtimes.llama_cpp: a figure is not a number")
		}
	}
	switch {
	case t.Speculate && draftKind != "model":
		return fmt.Errorf("runtimes.llama_cpp.speculate: llama.cpp speculates with a draft model, and models.draft.kind is %q", draftKind)
	case t.Speculate && (t.DraftMax < 1 || t.DraftMax > MaxLlamaDraft):
		return fmt.Errorf("runtimes.llama_cpp.draft_max %d: want 1 to %d", t.DraftMax, MaxLlamaDraft)
	case !t.Speculate && t.DraftMax != 0:
		return fmt.Errorf("runtimes.llama_cpp.draft_max %d without speculate: true", t.DraftMax)
	case t.DraftPMin < 0 || t.DraftPMin > 1:
		return fmt.Errorf("runtimes.llama_cpp.draft_p_min %g: want 0 to 1", t.DraftPMin)
	case t.Speedup <= 0 || t.Low > t.Speedup || t.High < t.Speedup:
		return fmt.Errorf("runtimes.llama_cpp: measured_speedup %g must be positive and within measured_low %g and measured_high %g", t.Speedup, t.Low, t.High)
	}
	return nil
}

// Hardware describes the machine the plan was tuned on.
type Hardware struct {
	CPUCores    int    `yaml:"cpu_cores"`
	CPU         string `yaml:"cpu,omitempty"`
	GPUType     string `yaml:"gpu_type"`
	CPUAffinity string `yaml:"cpu_affinity,omitempty"` // read from older configs, checked, never written: Arborist pins no threads
}

// Models names the target and the draft source.
type Models struct {
	Target Target `yaml:"target"`
	Draft  Draft  `yaml:"draft"`
}

// Target is the target model.
type Target struct {
	Path      string `yaml:"path"`
	SHA256    string `yaml:"sha256,omitempty"` // SHA-256 of the file (older configs: Arborist's 24-digit fingerprint)
	Device    string `yaml:"device"`
	Precision string `yaml:"precision,omitempty"`
	MaxSeqLen int    `yaml:"max_seq_len"`
	Threads   int    `yaml:"threads"`
	// KVCache is the KV cache type the plan was profiled and tuned with:
	// f16, or f32 where absent (run's and tune's --kv); run, serve and
	// loadtest replay it.
	KVCache string `yaml:"kv_cache,omitempty"`
}

// Draft is the draft source: a model file, n-gram lookup, the
// target's first layers, or a hidden-state drafter (a file, or a drafter id
// in the database).
type Draft struct {
	Kind string `yaml:"kind"` // model, ngram, layers, hidden, none
	Path string `yaml:"path,omitempty"`
	// DrafterID is a stored hidden-state drafter (kind hidden, no path).
	DrafterID int64  `yaml:"drafter_id,omitempty"`
	SHA256    string `yaml:"sha256,omitempty"`
	NGram     int    `yaml:"ngram,omitempty"`
	Layers    int    `yaml:"layers,omitempty"`
	Device    string `yaml:"device,omitempty"`
	Quant     string `yaml:"quant,omitempty"`
	Threads   int    `yaml:"threads,omitempty"`
}

// Optimization is DuoDecoding's block.
type Optimization struct {
	DraftBudget  string `yaml:"draft_budget"` // "auto" (a plan that adapts it) or the plan's drafter passes a step
	MaxSequences int    `yaml:"max_sequences"`
	WarmupSteps  int    `yaml:"warmup_steps,omitempty"` // read from older configs: must be 0
}

// Sampling is the sampling rule.
type Sampling struct {
	Temperature float64 `yaml:"temperature"`
	TopK        int     `yaml:"top_k"`
	TopP        float64 `yaml:"top_p"`
	MinP        float64 `yaml:"min_p"`
	Seed        uint64  `yaml:"seed"`
}

// Predicted records what the speedup model expected.
type Predicted struct {
	Speedup    float64 `yaml:"speedup"`
	AAL        float64 `yaml:"aal"`
	MeasuredOn string  `yaml:"measured_on,omitempty"` // the curves and calibration the prediction rests on
}

// Version is Arborist's version, written into exported configs.
const Version = "0.1.0"

// Marshal renders the config as YAML with a header comment.
func (c *Config) Marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Arborist speculation plan; replay with: arborist run --config THIS_FILE --prompt ...\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("profiles: config: %w", err)
	}
	return b.Bytes(), enc.Close()
}

// Parse reads a config.yaml strictly: unknown keys, wrong types and
// impossible values are errors naming the file (and the line, where YAML
// knows it). Relative model paths are resolved against the file's folder.
func Parse(path string, data []byte) (*Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: invalid config: the file is empty (export one with 'arborist export' or 'arborist tune -o')", path)
	}
	// the document's shape bounded first: decoding a mapping of 150,000
	// unknown keys took minutes and gave an 8 MB error
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: invalid config: %w", path, err)
	}
	if err := boundDocument(&doc); err != nil {
		return nil, fmt.Errorf("%s: invalid config: %w", path, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: invalid config: %w", path, err)
	}
	if err := singleDocument(dec); err != nil {
		return nil, fmt.Errorf("%s: invalid config: %w", path, err)
	}
	if err := checkTypes(&doc, reflect.TypeOf(c), ""); err != nil {
		return nil, fmt.Errorf("%s: invalid config: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid config: %w", path, withLine(&doc, err))
	}
	base := filepath.Dir(path)
	if c.Models.Target.Path != "" && !filepath.IsAbs(c.Models.Target.Path) {
		c.Models.Target.Path = filepath.Join(base, c.Models.Target.Path)
	}
	if c.Models.Draft.Path != "" && !filepath.IsAbs(c.Models.Draft.Path) {
		c.Models.Draft.Path = filepath.Join(base, c.Models.Draft.Path)
	}
	return &c, nil
}

// MaxBytes bounds a config.yaml: an exported one is about 2 KB, and the
// YAML decoder needs about 100 times a file's size.
const MaxBytes = 1 << 20

// Load reads and parses a config.yaml file.
func Load(path string) (*Config, error) {
	data, err := gguf.ReadRegular(path, MaxBytes)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Validate checks the values make a runnable plan.
func (c *Config) Validate() error {
	if err := c.checkLimits(); err != nil { // sizes and floats bounded first
		return err
	}
	t := c.Models.Target
	switch {
	case t.Path == "":
		return fmt.Errorf("models.target.path is required")
	case t.Threads < 0 || t.MaxSeqLen < 0:
		return fmt.Errorf("models.target: threads and max_seq_len must not be negative")
	}
	if _, err := kernels.ParseKV(t.KVCache); err != nil {
		return fmt.Errorf("models.target.kv_cache: %w", err)
	}
	d := c.Models.Draft
	switch d.Kind {
	case "model":
		if d.Path == "" {
			return fmt.Errorf("models.draft.path is required for kind model")
		}
	case "ngram":
		if d.NGram < 1 {
			return fmt.Errorf("models.draft.ngram must be >= 1")
		}
	case "layers":
		if d.Layers < 1 {
			return fmt.Errorf("models.draft.layers must be >= 1")
		}
	case "hidden":
		if (d.Path == "") == (d.DrafterID <= 0) {
			return fmt.Errorf("models.draft: kind hidden needs exactly one of path (a drafter file) and drafter_id")
		}
	case "none", "":
		if c.Speculation.NeedsSource() {
			return fmt.Errorf("strategy %q needs a draft source (models.draft.kind)", c.Speculation.Strategy)
		}
	default:
		return fmt.Errorf("models.draft.kind %q: want model, ngram, layers, hidden or none", d.Kind)
	}
	if d.Threads < 0 {
		return fmt.Errorf("models.draft.threads must not be negative")
	}
	if err := c.Speculation.Validate(); err != nil {
		return fmt.Errorf("speculation: %w", err)
	}
	if err := c.checkOptimization(); err != nil {
		return err
	}
	if err := c.Serving.validate(!c.plain()); err != nil {
		return err
	}
	if c.Hardware.CPUCores < 0 {
		return fmt.Errorf("hardware.cpu_cores %d: want a count >= 0", c.Hardware.CPUCores)
	}
	if c.Hardware.CPUAffinity != "" && !cpuList(c.Hardware.CPUAffinity) {
		return fmt.Errorf("hardware.cpu_affinity %q: want a CPU list such as 0-3,6", c.Hardware.CPUAffinity)
	}
	if err := d.onlyItsFields(); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"models.target.precision", c.Models.Target.Precision}, {"models.draft.quant", c.Models.Draft.Quant}} {
		if f.v != "" {
			if _, err := quant.ParseType(strings.ToUpper(f.v)); err != nil {
				return fmt.Errorf("%s %q: not a weight type", f.name, f.v)
			}
		}
	}
	if c.Measured != nil && c.Measured.LlamaCpp != nil {
		if err := c.Measured.LlamaCpp.validate(d.Kind); err != nil {
			return err
		}
	}
	sm := c.Sampling
	// the sampling fields' bounds, the same as every face's
	if err := (sample.Params{Temp: float32(sm.Temperature), TopK: sm.TopK, TopP: float32(sm.TopP), MinP: float32(sm.MinP)}).Validate(); err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	return nil
}

// New builds the exported config of a plan for a pair on a machine.
// Model paths are made absolute so the file works from any folder.
func New(pair pairs.Spec, hw Hardware, threads, maxSeqLen int, precision string, best costmodel.Prediction) *Config {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	c := &Config{Version: Version, Hardware: hw}
	c.Models.Target = Target{Path: abs(pair.Target), Device: "cpu", Precision: precision, MaxSeqLen: maxSeqLen, Threads: threads}
	if kt, err := kernels.ParseKV(pair.KV); err == nil && kt == quant.F16 {
		c.Models.Target.KVCache = "f16" // f32, the default, is left unwritten
	}
	switch {
	case !best.Plan.NeedsSource(): // plain decoding: no drafter to configure or pass on
		c.Models.Draft = Draft{Kind: "none"}
	case pair.Draft != "":
		c.Models.Draft = Draft{Kind: "model", Path: abs(pair.Draft), Device: "cpu", Threads: threads}
	case pair.NGram > 0:
		c.Models.Draft = Draft{Kind: "ngram", NGram: pair.NGram}
	case pair.Layers > 0:
		c.Models.Draft = Draft{Kind: "layers", Layers: pair.Layers}
	case pair.DraftHidden != "":
		if id, err := strconv.ParseInt(pair.DraftHidden, 10, 64); err == nil {
			c.Models.Draft = Draft{Kind: "hidden", DrafterID: id}
		} else {
			c.Models.Draft = Draft{Kind: "hidden", Path: abs(pair.DraftHidden)}
		}
	default:
		c.Models.Draft = Draft{Kind: "none"}
		best = costmodel.Prediction{Plan: spec.PlainPlan(), Speedup: 1, AAL: 1}
	}
	c.Speculation = best.Plan.Trim()
	c.Optimization = Optimization{DraftBudget: draftBudget(c.Speculation), MaxSequences: c.Speculation.Sequences()}
	c.Sampling = Sampling{TopP: 1, Seed: 1}
	c.Serving = Serving{Concurrency: max(1, best.Concurrency), Policy: PolicyPlan}
	if best.Adaptive && c.Models.Draft.Kind != "none" {
		c.Serving.Policy = PolicyAdaptive
	}
	if best.StopsAt > 1 && c.Models.Draft.Kind != "none" {
		c.Serving.SpeculationStopsAt = best.StopsAt
	}
	round := func(x float64) float64 { return float64(int(x*100+0.5)) / 100 }
	c.Predicted = &Predicted{Speedup: round(best.Speedup), AAL: round(best.AAL)}
	return c
}

// HardwareOf is the hardware block of an exported config for hw.
func HardwareOf(hw store.Hardware) Hardware {
	gpu := "none"
	if name, _, ok := strings.Cut(strings.TrimPrefix(hw.GPUs, "0: "), " ("); ok && strings.HasPrefix(hw.GPUs, "0: ") {
		gpu = name
	}
	return Hardware{CPUCores: hw.Cores, CPU: hw.CPU, GPUType: gpu}
}

// SamplingOf is the sampling block for p, each float32 written as its
// shortest decimal (0.8, not 0.800000011920929), which reads back as the
// same float32.
func SamplingOf(p sample.Params) Sampling {
	dec := func(x float32) float64 {
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return f
	}
	return Sampling{Temperature: dec(p.Temp), TopK: p.TopK, TopP: dec(p.TopP), MinP: dec(p.MinP), Seed: p.Seed}
}
