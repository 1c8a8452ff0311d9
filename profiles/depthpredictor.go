package profiles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"arborist/assets"
	"arborist/engine/spec"
	"arborist/profiles/costmodel"
	"arborist/profiles/measure"
	"arborist/profiles/pairs"
	"arborist/profiles/predictor"
	"arborist/profiles/store"
	"arborist/profiles/trainsize"
)

// PredictorOptions choose what a depth predictor is trained on.
type PredictorOptions struct {
	// Prompts and Tokens are the prompts the pair decodes for the
	// predictor's data, and how many tokens each; Corpus adds the built-in
	// prompt corpus to them.
	// Size caps the prompts decoded (the given ones first, then the
	// corpus, assets.TrainingPrompts) and gives Tokens where it is 0:
	// trainsize.Predictor; "" is trainsize.Default.
	Prompts []string
	Tokens  int
	Corpus  bool
	Size    string
	// Plan is the EGT shape the predictor decides depth for; zero: the
	// pair's best fixed-depth EGT or chain, as tune ranks it on the
	// newest calibration, two levels deeper (so the predictor can draft
	// deeper when the drafter is sure, and shallower when not).
	Plan   Plan
	Epochs int // default 30
}

// PredictorReport is a trained, stored depth predictor; its JSON is
// `train predictor --json`'s.
type PredictorReport struct {
	ID   int64 `json:"id"`
	Plan Plan  `json:"-"` // the plan that runs it: its shape with depth policy "predictor"
	// Name is Plan's name.
	Name  string          `json:"plan"`
	Stats predictor.Stats `json:"stats"`
}

// TrainPredictor trains a depth predictor (Yggdrasil's first stage) for
// the pair on its newest calibration: it decodes the prompts with the
// calibration's probe tree, at the calibration's sampling, recording each
// step's features; replays the plan's shape on every step at every depth;
// and fits the predictor to choose the depth this machine's costs reward
// (predictor.Fit), reporting it against the best fixed depth, the
// threshold policies and the most common best depth on held-out prompts.
// It is stored with the calibration, and tune offers it only where it was
// at least as fast as those.
func (b *Bench) TrainPredictor(ctx context.Context, ps PairSpec, opt PredictorOptions, progress Progress) (*PredictorReport, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	if ps.Sources() == 0 {
		return nil, fmt.Errorf("a depth predictor needs a draft source")
	}
	work, err := opt.work()
	if err != nil {
		return nil, err
	}
	texts := opt.texts(work)
	opt.Tokens = work.Tokens
	if opt.Tokens < 2 || len(texts) < 3 {
		return nil, fmt.Errorf("a depth predictor needs at least 3 prompts and more than 1 token per prompt")
	}
	in, err := b.Inputs(ctx, ps, InputsOptions{Measure: true}, progress)
	if err != nil {
		return nil, err
	}
	if in.Acc == nil || in.CalID == 0 {
		return nil, fmt.Errorf("no calibration of %s with %s in %s: %w", ps.Target, ps.SourceName(), b.path, ErrNotCalibrated)
	}
	shape := opt.Plan
	if shape.Strategy == "" {
		if shape, err = predictorShape(in); err != nil {
			return nil, err
		}
	}
	shape.DepthPolicy, shape.DepthMin, shape.PredictorID = "", 0, 0
	prices, err := costmodel.CutPrices(shape, in.Acc, in.Costs)
	if err != nil {
		return nil, err
	}
	if _, _, ok := costmodel.CutReplay(shape, nil); !ok || len(shape.EGT) < 2 {
		return nil, fmt.Errorf("a depth predictor decides the depth of an Equal-Growth Tree of 2 to %d levels whose branches fit the calibration's probe tree (%s), not %s", len(costmodel.CalibrationWidths), spec.Ints(costmodel.CalibrationWidths), shape)
	}
	pair, err := b.openPair(ps, false)
	if err != nil {
		return nil, err
	}
	defer pair.Close()
	ids, err := encodeWithRoom(pair, texts, opt.Tokens)
	if err != nil {
		return nil, err
	}
	perToken, _ := probeStepCost(in)
	recorded, err := b.probeSteps(ctx, st, ps, pair, ids, opt.Tokens, in.Acc.Sample, progress, collectETA(progress, perToken*time.Duration(opt.Tokens)))
	if err != nil {
		return nil, err
	}
	steps, err := predictorSteps(pair, shape, recorded)
	if err != nil {
		return nil, err
	}
	c := predictor.Costs{Plain: in.Costs.PlainToken()}
	for _, pr := range prices {
		c.Step = append(c.Step, pr.Step)
	}
	mix := func(resampled []bool, levels, kept []int) (float64, []float64) {
		return costmodel.PolicyMix(resampled, levels, kept, in.Acc)
	}
	pred, err := predictor.Fit(steps, shape, c, mix, predictor.FitOptions{Epochs: opt.Epochs, Seed: 1, Progress: func(stage string, done, total int) {
		progress.send(stage, done, total, "epochs")
	}})
	if err != nil {
		return nil, err
	}
	blob, err := pred.Marshal()
	if err != nil {
		return nil, err
	}
	id, err := st.SavePredictor(ctx, in.CalID, blob, pred.Stats)
	if err != nil {
		return nil, err
	}
	run := shape
	run.DepthPolicy, run.PredictorID = "predictor", id
	return &PredictorReport{ID: id, Plan: run, Name: run.String(), Stats: pred.Stats}, nil
}

// work is the size the options ask for, their Tokens in place of the
// size's where set.
func (opt PredictorOptions) work() (trainsize.Work, error) {
	size := opt.Size
	if size == "" {
		size = trainsize.Default
	}
	w, err := trainsize.Predictor(size)
	if err != nil {
		return w, err
	}
	if opt.Tokens != 0 {
		w.Tokens = opt.Tokens
	}
	return w, nil
}

// texts are the prompts a predictor of that size decodes.
func (opt PredictorOptions) texts(w trainsize.Work) []string {
	var corpus []string
	if opt.Corpus {
		corpus = assets.CorpusPrompts()
	}
	return assets.TrainingPrompts(opt.Prompts, corpus, w.Prompts)
}

// PredictorCost is what TrainPredictor with these options will decode,
// and how long that should take as the pair's latency curves and newest
// calibration price the probe tree's steps (Estimate 0 where the pair has
// no calibration: the decoding's first prompts then price it). It
// measures only the curves TrainPredictor would measure first (those a
// narrower profile lacks), so a face shows it before the decoding starts
// and the training finds them stored.
func (b *Bench) PredictorCost(ctx context.Context, ps PairSpec, opt PredictorOptions, progress Progress) (trainsize.Cost, error) {
	w, err := opt.work()
	if err != nil {
		return trainsize.Cost{}, err
	}
	out := trainsize.Cost{Work: w, Prompts: len(opt.texts(w))}
	out.Decoded = out.Prompts * w.Tokens
	def := opt
	def.Size, def.Tokens = trainsize.Default, 0
	if dw, err := def.work(); err == nil {
		out.Relative = float64(out.Decoded) / float64(max(1, len(def.texts(dw))*dw.Tokens))
	}
	in, err := b.Inputs(ctx, ps, InputsOptions{Measure: true}, progress)
	if err != nil {
		return out, err
	}
	if per, err := probeStepCost(in); err == nil {
		out.PerToken, out.Basis = per, "the pair's latency curve and calibration"
		out.Estimate = per * time.Duration(out.Decoded)
	}
	return out, nil
}

// collectETA adds the time left to the depth predictor's decoding
// progress: priced at perPrompt (the stored curve's) until a prompt has
// been decoded, then at the rate so far.
func collectETA(progress Progress, perPrompt time.Duration) func(done, total int) {
	start := time.Now()
	return func(done, total int) {
		eta := trainsize.ETA(time.Since(start), float64(done), float64(total))
		if done == 0 {
			eta = perPrompt * time.Duration(total)
		}
		detail := "prompts"
		if eta > 0 {
			detail += ", about " + trainsize.Minutes(eta) + " left"
		}
		progress.send("collecting", done, total, detail)
	}
}

// predictorShape is the EGT a depth predictor is trained for by default:
// the best-ranked fixed-depth EGT or chain on the calibration, two levels
// deeper where the probe tree reaches (its widest level repeated).
func predictorShape(in *Inputs) (Plan, error) {
	if !in.Profiled {
		return Plan{}, fmt.Errorf("a depth predictor weighs depths with the pair's latency curves: %s", in.missing())
	}
	for _, pr := range costmodel.SearchAll(in.Acc, in.Costs, costmodel.SearchSpace{}).Ranked {
		p, ok := pr.Plan.AsGrowing() // a chain as the EGT of branch 1
		if !ok || p.DepthPolicy != "" {
			continue
		}
		p.Pad = false
		grown := func(q Plan) int {
			n, frontier := 0, 1
			for _, w := range q.EGT {
				frontier = min(w, frontier) * q.Branch
				n += frontier
			}
			return n
		}
		for want := len(p.EGT) + 2; len(p.EGT) < want; {
			before := grown(p)
			q := p
			q.EGT = append(slices.Clone(p.EGT), p.EGT[len(p.EGT)-1])
			q.WMax = p.WMax + grown(q) - before
			if _, _, ok := costmodel.CutReplay(q, nil); !ok || q.WMax > spec.MaxTreeNodes {
				break
			}
			p = q
		}
		if _, _, ok := costmodel.CutReplay(p, nil); ok && len(p.EGT) >= 2 {
			return p, nil
		}
	}
	return Plan{}, fmt.Errorf("no Equal-Growth Tree or chain of 2 to %d levels ranks on this calibration to train a depth predictor for: name one (--strategy egt ...)", len(costmodel.CalibrationWidths))
}

// predictorSteps are the recorded steps as the predictor learns from
// them: shape replayed on each step's probe, its features, and the last
// token's embedding.
func predictorSteps(pair *pairs.Pair, shape Plan, recorded []measure.ProbeStep) ([]predictor.Step, error) {
	// steps that drafted nothing (the last of a generation) teach nothing
	recorded = slices.DeleteFunc(slices.Clone(recorded), func(r measure.ProbeStep) bool { return !r.Sample.HasProbe() })
	samples := make([]costmodel.DepthSample, len(recorded))
	for i, r := range recorded {
		samples[i] = r.Sample
	}
	kept, best, ok := costmodel.CutReplay(shape, samples)
	if !ok {
		return nil, fmt.Errorf("profiles: %s cannot be replayed on the recorded steps", shape)
	}
	out := make([]predictor.Step, len(recorded))
	for i, r := range recorded {
		emb := make([]float32, pair.Target.Dim)
		if err := pair.Target.Embed(r.Last, emb); err != nil {
			return nil, err
		}
		out[i] = predictor.Step{Prompt: r.Prompt, Hidden: r.Hidden, Embedding: emb, Top1: r.Top1, Entropy: r.Entropy,
			Best: best[i], Kept: kept[i], Resampled: r.Sample.Resampled}
	}
	return out, nil
}

// probeSteps decodes the prompts with the probe tree for a depth
// predictor's data (measure.ProbeSteps), or reads the data a training
// before stored for the same target, draft source, prompts, tokens and
// sampling: a retrain (another shape, more epochs) skips the decoding.
func (b *Bench) probeSteps(ctx context.Context, st *store.Store, ps PairSpec, pair *pairs.Pair, ids [][]int, tokens int, smp SampleParams, progress Progress, collect func(done, total int)) ([]measure.ProbeStep, error) {
	md, err := pairs.DescribeModel(pair.Target)
	if err != nil {
		return nil, err
	}
	source := ps.SourceName()
	if ps.Draft != "" {
		fp, err := pairs.FileFingerprint(ps.Draft)
		if err != nil {
			return nil, err
		}
		source += "@" + fp
	}
	if ps.DraftHidden != "" {
		source += fmt.Sprintf("/resample %d", ps.Resampling())
		if _, err := strconv.ParseInt(ps.DraftHidden, 10, 64); err != nil {
			fp, err := pairs.FileFingerprint(ps.DraftHidden)
			if err != nil {
				return nil, err
			}
			source += "@" + fp
		}
	}
	h := sha256.New()
	json.NewEncoder(h).Encode(struct {
		Format, Target, Source string
		Tokens                 int
		Sample                 SampleParams
		Probe                  []int
		Prompts                [][]int
	}{"depth-predictor v1", md.Fingerprint, source, tokens, smp, costmodel.CalibrationWidths, ids})
	key := "depth-predictor/" + hex.EncodeToString(h.Sum(nil))
	if blob, err := st.DrafterData(ctx, key); err != nil {
		return nil, err
	} else if blob != nil {
		var out []measure.ProbeStep
		if err := gob.NewDecoder(bytes.NewReader(blob)).Decode(&out); err == nil {
			progress.send("collecting", len(ids), len(ids), "prompts (stored)")
			return out, nil
		}
		// a damaged record is decoded again below and replaced
	}
	eng := &spec.Engine{Target: pair.Target, Source: pair.Source}
	collect(0, len(ids))
	out, err := measure.ProbeSteps(ctx, eng, ids, tokens, smp, collect)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(out); err != nil {
		return nil, err
	}
	if err := st.SaveDrafterData(ctx, key, md.Fingerprint, buf.Bytes()); err != nil {
		return nil, err
	}
	return out, nil
}

// probeStepCost is what a token committed by the calibration's probe
// tree costs the pair, as its stored curves price a step (the drafter's
// pass over each level's frontier, the target's pass over the whole tree,
// extrapolated beyond the curve's widest) and its newest calibration
// measured the tokens a step of that tree commits: the depth predictor's
// decoding is these steps.
func probeStepCost(in *Inputs) (time.Duration, error) {
	if in == nil || in.Acc == nil || !in.Profiled || len(in.Costs.Verify) == 0 {
		return 0, fmt.Errorf("no stored curve and calibration to price the probe tree with")
	}
	if in.Acc.Steps <= 0 || in.Acc.Tokens <= 0 {
		return 0, fmt.Errorf("the calibration counted no steps")
	}
	step, frontier, nodes := in.Costs.Overhead, 1, 0
	for _, w := range costmodel.CalibrationWidths {
		if in.Costs.Draft != nil {
			step += costmodel.Interp(in.Costs.Draft, frontier)
		}
		frontier *= w
		nodes += frontier
	}
	step += costmodel.Interp(in.Costs.Verify, 1+nodes)
	perStep := float64(in.Acc.Tokens) / float64(in.Acc.Steps)
	if step <= 0 {
		return 0, fmt.Errorf("the probe tree prices at %v a step", step)
	}
	return time.Duration(float64(step) / perStep), nil
}
