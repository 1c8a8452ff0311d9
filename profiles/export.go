package profiles

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"arborist/engine/gguf"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/outfile"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// Export is a plan rendered as config.yaml and other engines' settings.
type Export struct {
	PlanID      int64
	Best        costmodel.Prediction
	Config      *config.Config
	YAML        []byte
	Equivalents string
	// Provenance says what the plan was computed from: the stored plan,
	// the latency profile and the calibration, with their dates.
	Provenance string
	// Assumed is set when any input is assumed rather than measured (no
	// stored profile of this machine, or no calibration); the faces show
	// it as a warning.
	Assumed bool
	// Path is the file a tune wrote it to ("" where it was not written).
	Path string
}

// provenance describes the inputs of a plan exported now.
func (b *Bench) provenance(ctx context.Context, in *Inputs, planID int64) (string, bool) {
	st, err := b.db(ctx)
	if err != nil {
		return "", true
	}
	when := func(s string) string {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return "date unknown"
		}
		return t.Local().Format("2006-01-02 15:04")
	}
	var parts []string
	if planID > 0 {
		if created, err := st.PlanCreated(ctx, planID); err == nil {
			parts = append(parts, fmt.Sprintf("plan %d, tuned %s", planID, when(created)))
		}
	}
	assumed := false
	if in.Profiled {
		n, created, err := st.CurveCount(ctx, in.Hardware.ID, in.TargetID)
		if err == nil && n > 0 {
			parts = append(parts, fmt.Sprintf("T_verify from the stored latency profile of this machine (%d curves, newest %s)", n, when(created)))
		} else {
			parts = append(parts, "T_verify from the stored latency profile of this machine")
		}
	} else {
		assumed = true
		parts = append(parts, "T_verify ASSUMED, NOT MEASURED (no stored profile of this machine: run Profile)")
	}
	if in.Acc == nil || in.Assumed {
		assumed = true
		parts = append(parts, "acceptance ASSUMED, NOT MEASURED (no calibration: run Calibrate)")
	} else {
		parts = append(parts, "acceptance "+in.Describe())
	}
	return strings.Join(parts, "; "), assumed
}

// config is the one builder of exported configs: the plan for the pair on
// this machine, with the threads, context and precision the pair runs with.
//
// Each model file's SHA-256 is recorded (hashed once, then cached in the
// database by path, size and mtime), so a replay can refuse a changed file.
func (b *Bench) config(ctx context.Context, ps PairSpec, in *Inputs, best costmodel.Prediction, measuredOn string) (*Export, error) {
	c := config.New(ps, config.HardwareOf(in.Hardware), in.Threads, in.CtxLen, in.Precision, best)
	// the sampling the plan was tuned for: its calibration's
	c.Sampling = config.SamplingOf(in.sampling())
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	if c.Models.Target.SHA256, err = pairs.ModelSHA256(ctx, st, ps.Target); err != nil {
		return nil, err
	}
	// a drafter file (a draft model, a hidden-state drafter) is recorded
	// like the target, so a replay refuses a changed one too
	if (c.Models.Draft.Kind == "model" || c.Models.Draft.Kind == "hidden") && c.Models.Draft.Path != "" {
		if c.Models.Draft.SHA256, err = pairs.ModelSHA256(ctx, st, c.Models.Draft.Path); err != nil {
			return nil, err
		}
	}
	target, draft := in.Backend, ps.DraftBackend
	if best.Backend != "" { // a placed plan runs where the search put it
		target, draft = best.Backend, best.DraftBackend
	}
	if target != "" {
		c.Models.Target.Device = target
		if c.Models.Draft.Device != "" {
			c.Models.Draft.Device = target
		}
	}
	if draft != "" && draft != c.Models.Target.Device && c.Models.Draft.Kind != "none" && c.Models.Draft.Kind != "ngram" {
		c.Models.Draft.Device = draft // the drafter on a device of its own
		c.Models.Draft.Threads = ps.DraftThreads
	}
	if best.DraftThreads > 0 && best.Plan.Concurrent() {
		// the split of the threads the plan was priced on: the drafter's
		// share of them, the target keeping the rest on one device
		c.Models.Draft.Threads = best.DraftThreads
	}
	c.Predicted.MeasuredOn = measuredOn
	y, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	if _, err := config.Parse("export.yaml", y); err != nil {
		return nil, fmt.Errorf("exported config does not parse back: %w", err)
	}
	return &Export{Best: best, Config: c, YAML: y, Equivalents: c.Equivalents()}, nil
}

// tuneExport renders a tune's best plan; what the prediction rests on is
// recorded in predicted.measured_on.
func (b *Bench) tuneExport(ctx context.Context, ps PairSpec, t *TuneResult) (*Export, error) {
	in := t.Inputs
	on := fmt.Sprintf("hardware %s; T_verify curve of %d points", in.Hardware.Fingerprint, len(in.Costs.Verify))
	if in.CalID > 0 {
		on += fmt.Sprintf("; calibration %d", in.CalID)
	} else {
		on += "; assumed acceptance (--alpha)"
	}
	ex, err := b.config(ctx, ps, in, t.Best(), on)
	if ex != nil {
		ex.PlanID = t.PlanID
		ex.Provenance, ex.Assumed = b.provenance(ctx, in, t.PlanID)
	}
	return ex, err
}

// Export renders the pair's newest stored plan (from tune); the GUI's
// Export screen and `arborist export` both come here, so the same database
// gives the same bytes.
func (b *Bench) Export(ctx context.Context, ps PairSpec) (*Export, error) {
	in, err := b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil {
		return nil, err
	}
	id, best, err := b.latestPlan(ctx, in)
	if err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, fmt.Errorf("no plan for %s in %s: %w", ps.Target, b.path, ErrNotTuned)
	}
	ex, err := b.config(ctx, ps, in, best, fmt.Sprintf("plan %d of %s", id, b.path))
	if ex != nil {
		ex.PlanID = id
		ex.Provenance, ex.Assumed = b.provenance(ctx, in, id)
	}
	return ex, err
}

// Write validates the (possibly edited) YAML, writes it to path and
// records the export; path is never the database, a file the config
// names, or one of inputs (the command's other inputs: a prompt suite).
func (b *Bench) Write(ctx context.Context, planID int64, yaml []byte, path string, inputs ...string) error {
	st, err := b.db(ctx)
	if err != nil {
		return err
	}
	c, err := config.Parse(path, yaml)
	if err != nil {
		return err
	}
	// never onto the database, a model or a drafter the config names
	inputs = append([]string{b.path, c.Models.Target.Path, c.Models.Draft.Path}, inputs...)
	if err := outfile.WriteFile(path, yaml, inputs...); err != nil {
		return err
	}
	return st.SaveExport(ctx, planID, string(yaml))
}

// WriteFile writes an output of the faces' own (a chart) as every output
// is written (outfile.WriteFile): never onto a link or a non-regular
// file, through a temporary file renamed into place, the old mode kept.
func WriteFile(path string, data []byte) error { return outfile.WriteFile(path, data) }

// replay is what a config.yaml asks to run.
type replay struct {
	Pair        PairSpec
	Plan        spec.Plan
	Sample      sample.Params
	Predicted   float64
	PredictedOn string
	// PredictedAAL is the tokens a step the prediction expects.
	PredictedAAL float64
	// Context is the context a run may use (max_seq_len; 0: the model's).
	Context int
	// Serving is the concurrency the plan was tuned for and the serving
	// policy (the config's serving block, its defaults filled in), which
	// serve replays where its command line names none.
	Serving config.Serving
	// Notes say where this machine or run differs from the one the plan
	// was tuned for, so its prediction may not hold here.
	Notes []string
}

// pairWith is the replayed pair completed by the pair a run was asked for
// (flags): what config.yaml does not hold comes from flags (the
// re-sampling settings, reading the files into memory), and so do the
// threads, the concurrent drafter's threads and the KV cache type where
// the config names none.
func (r *replay) pairWith(flags PairSpec) PairSpec {
	ps := r.Pair
	ps.ResampleDepth, ps.NoResample = flags.ResampleDepth, flags.NoResample
	ps.NoMmap = flags.NoMmap
	if ps.KV == "" {
		ps.KV = flags.KV
	}
	if ps.Threads == 0 {
		ps.Threads = flags.Threads
	}
	if ps.DraftThreads == 0 {
		ps.DraftThreads = flags.DraftThreads
	}
	return ps
}

// loadReplay reads a config.yaml: its models, plan, sampling and
// predicted speedup.
//
// A model whose SHA-256 differs from the one the config recorded is refused
// unless allowChanged; hashDB is the database that caches file hashes ("" for
// none).
func loadReplay(ctx context.Context, path, hashDB string, allowChanged bool) (*replay, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return replayConfig(ctx, c, hashDB, allowChanged)
}

// replayConfig is what a parsed config.yaml asks to run (loadReplay, for
// a config already read: the Export screen serves the text it shows).
func replayConfig(ctx context.Context, c *config.Config, hashDB string, allowChanged bool) (*replay, error) {
	if err := checkConfigModels(ctx, hashDB, c, allowChanged); err != nil {
		return nil, err
	}
	r := &replay{Plan: c.Speculation}
	r.Pair.Target = c.Models.Target.Path
	r.Pair.Threads = c.Models.Target.Threads
	r.Pair.KV = c.Models.Target.KVCache
	if c.Models.Target.Device != "" && c.Models.Target.Device != "cpu" {
		r.Pair.Backend = c.Models.Target.Device
	}
	if d := c.Models.Draft.Device; d != "" && d != c.Models.Target.Device {
		r.Pair.DraftBackend, r.Pair.DraftThreads = d, c.Models.Draft.Threads
	} else if c.Speculation.Concurrent() && c.Models.Draft.Threads > 0 && c.Models.Draft.Threads < c.Models.Target.Threads {
		r.Pair.DraftThreads = c.Models.Draft.Threads // its share of the target's threads
	}
	switch d := c.Models.Draft; d.Kind {
	case "hidden":
		r.Pair.DraftHidden = d.Path
		if d.DrafterID > 0 {
			r.Pair.DraftHidden = strconv.FormatInt(d.DrafterID, 10)
		}
	case "model":
		r.Pair.Draft = d.Path
	case "ngram":
		r.Pair.NGram = d.NGram
	case "layers":
		r.Pair.Layers = d.Layers
	}
	r.Plan = r.Plan.WithSequences(c.Optimization.MaxSequences)
	s := c.Sampling
	r.Sample = sample.Params{Temp: float32(s.Temperature), TopK: s.TopK, TopP: float32(s.TopP), MinP: float32(s.MinP), Seed: s.Seed}
	if r.Sample.TopP == 0 {
		r.Sample.TopP = 1
	}
	if c.Predicted != nil {
		r.Predicted = c.Predicted.Speedup
		r.PredictedOn, r.PredictedAAL = c.Predicted.MeasuredOn, c.Predicted.AAL
		if r.PredictedOn == "" {
			r.PredictedOn = "the prediction config.yaml records"
		}
		if r.PredictedAAL > 0 {
			r.PredictedOn += fmt.Sprintf("; %.2f tokens a step", r.PredictedAAL)
		}
	}
	if c.Version != "" && c.Version != config.Version {
		r.Notes = append(r.Notes, fmt.Sprintf("config.yaml was written by Arborist %s, this is %s", c.Version, config.Version))
	}
	if want := c.Models.Target.Precision; want != "" {
		if f, err := gguf.Open(c.Models.Target.Path); err == nil {
			if tc := f.TypeCounts(); len(tc) > 0 && !strings.EqualFold(tc[0].Type.String(), want) {
				r.Notes = append(r.Notes, fmt.Sprintf("models.target.precision says %s; %s holds %s weights", want, c.Models.Target.Path, tc[0].Type))
			}
			f.Close()
		}
	}
	r.Context = c.Models.Target.MaxSeqLen
	r.Serving = config.Serving{Concurrency: c.Concurrency(), Policy: c.Policy(), SpeculationStopsAt: c.Serving.SpeculationStopsAt}
	hw := hardware.DetectHardware()
	if h := c.Hardware; (h.CPU != "" && h.CPU != hw.CPU) || (h.CPUCores > 0 && h.CPUCores != hw.Cores) {
		r.Notes = append(r.Notes, fmt.Sprintf("the plan was tuned on %s (%d cores); this machine is %s (%d cores): its prediction may not hold here (tune again on this machine)",
			h.CPU, h.CPUCores, hw.CPU, hw.Cores))
	}
	if gpu := c.Hardware.GPUType; gpu != "" {
		here := config.HardwareOf(store.Hardware{GPUs: hardware.GPUSummary(ctx)}).GPUType
		if here != gpu {
			r.Notes = append(r.Notes, fmt.Sprintf("the plan was tuned with GPU %s; this machine has %s", gpu, here))
		}
	}
	return r, nil
}
