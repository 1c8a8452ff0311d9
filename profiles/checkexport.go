package profiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"arborist/profiles/config"
	"arborist/profiles/hardware"
	"arborist/profiles/store"
)

// CheckOptions describe a check of an exported plan in llama.cpp.
type CheckOptions struct {
	// LlamaCpp is the folder holding llama.cpp's binaries ("": found on
	// PATH).
	LlamaCpp string
	Prompts  []string
	// MaxTokens per prompt (default 128) and Rounds (default 3): each
	// round decodes every prompt plainly and with the exported settings,
	// the two in turn, the order swapped every round.
	MaxTokens, Rounds int
	NoStore           bool
	// CallLimit bounds each llama.cpp call (0: callLimit, derived from the
	// tokens asked for and the prompt's size); a call past it is ended,
	// with the processes it started, and the check fails naming it.
	CallLimit time.Duration
	// OnRound, when set, receives each finished round.
	OnRound func(i int, r CheckRound)
	// Out, for TuneLlamaCpp, is the file the tuned config is written to,
	// refused before anything is measured where it names the database, a
	// model the config names or one of Inputs (the config tuned from, the
	// prompt suite).
	Out    string
	Inputs []string
}

// CheckRound is one round's figures in llama.cpp: decode tokens/s of plain
// decoding and of the exported speculative settings over the prompts,
// their ratio, and the drafted and accepted tokens.
type CheckRound struct {
	Plain    float64 `json:"plain_tokens_per_s"`
	Spec     float64 `json:"speculative_tokens_per_s"`
	Speedup  float64 `json:"speedup"`
	Drafted  int     `json:"drafted"`
	Accepted int     `json:"accepted"`
}

// CheckResult is the speedup the exported settings give in llama.cpp.
type CheckResult struct {
	Runtime     string   `json:"runtime"`
	Version     string   `json:"version,omitempty"` // what the binaries print for --version
	Plain       []string `json:"plain_command"`     // the commands, the prompt as PROMPT
	Speculative []string `json:"speculative_command"`
	// PlainLine and SpeculativeLine are the commands as shell lines, every
	// word quoted where it needs it, safe to paste.
	PlainLine       string       `json:"plain_line"`
	SpeculativeLine string       `json:"speculative_line"`
	Rounds          []CheckRound `json:"rounds"`
	Speedup         float64      `json:"speedup"` // the median round's
	Acceptance      float64      `json:"acceptance"`
	// Predicted is Arborist's prediction for its own engine (the config's).
	Predicted float64 `json:"predicted_arborist,omitempty"`
	PlainRun  int64   `json:"plain_run_id,omitempty"`
	SpecRun   int64   `json:"speculative_run_id,omitempty"`
	// Min and Max are the rounds' range.
	Min float64 `json:"speedup_min"`
	Max float64 `json:"speedup_max"`
}

// The programs a check runs, in order of preference: llama.cpp moved its
// plain completion tool from llama-cli to llama-completion.
var (
	plainPrograms = []string{"llama-completion", "llama-cli"}
	specPrograms  = []string{"llama-speculative-simple"}
)

// The timing lines llama.cpp prints: its context's performance report
// (plain decoding's eval time over its runs) and the speculative
// example's summary.
var (
	evalLine    = regexp.MustCompile(`(?m)llama_perf_context_print:\s+eval time =\s*([0-9.]+) ms /\s*([0-9]+) (?:runs|tokens)`)
	decodedLine = regexp.MustCompile(`(?m)decoded\s+([0-9]+) tokens in\s+([0-9.]+) seconds`)
	draftedLine = regexp.MustCompile(`(?m)n_drafted\s*=\s*([0-9]+)`)
	acceptLine  = regexp.MustCompile(`(?m)n_accept\s*=\s*([0-9]+)`)
)

// findProgram is the first of names in dir (or on PATH when dir is "").
func findProgram(dir string, names []string) (string, error) {
	for _, n := range names {
		if dir == "" {
			if p, err := exec.LookPath(n); err == nil {
				return p, nil
			}
			continue
		}
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	where := "on PATH"
	if dir != "" {
		where = "in " + dir
	}
	return "", fmt.Errorf("%w: no %s %s (build llama.cpp, or give the folder of its binaries)", errNoLlamaCpp, strings.Join(names, " or "), where)
}

// maxCheckTokens bounds the tokens a check asks llama.cpp for per prompt.
const maxCheckTokens = 1 << 20

// defaults fills in a check's or a tune's defaults (128 tokens a prompt,
// 3 rounds) and refuses one without prompts or with more tokens a prompt
// than the config's context (or maxCheckTokens); what names the work.
func (opt *CheckOptions) defaults(what string, c *Config) error {
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 128
	}
	if opt.Rounds <= 0 {
		opt.Rounds = 3
	}
	if len(opt.Prompts) == 0 {
		return fmt.Errorf("no prompts to %s with", what)
	}
	if ctx := c.Models.Target.MaxSeqLen; ctx > 0 && opt.MaxTokens > ctx {
		return fmt.Errorf("%d tokens a prompt (-n) exceed the config's context (models.target.max_seq_len %d)", opt.MaxTokens, ctx)
	}
	if opt.MaxTokens > maxCheckTokens {
		return fmt.Errorf("%d tokens a prompt (-n): at most %d", opt.MaxTokens, maxCheckTokens)
	}
	return nil
}

// callLimit is how long one llama.cpp call may take: two minutes to load
// the models, two seconds for each token asked for and 20 ms for each
// byte of the prompt (far beyond any machine llama.cpp runs on: a model
// that slow is not worth checking).
func (opt *CheckOptions) callLimit(prompt string) time.Duration {
	if opt.CallLimit > 0 {
		return opt.CallLimit
	}
	return 2*time.Minute + time.Duration(opt.MaxTokens)*2*time.Second + time.Duration(len(prompt))*20*time.Millisecond
}

// llamaPrograms finds llama.cpp's plain decoding and speculative example
// programs in dir (or on PATH when dir is "").
func llamaPrograms(dir string) (plain, spec string, err error) {
	if plain, err = findProgram(dir, plainPrograms); err != nil {
		return "", "", err
	}
	spec, err = findProgram(dir, specPrograms)
	return plain, spec, err
}

// llamaArgs are the argument lists of llama.cpp's plain decoding and
// speculative example for settings a, maxTokens a prompt (the prompt
// itself goes after them).
func llamaArgs(a config.LlamaCppArgs, maxTokens int) (plain, spec []string) {
	n := []string{"-n", strconv.Itoa(maxTokens)}
	return slices.Concat(a.Model, a.Layers, a.Sampling, n, []string{"-no-cnv"}),
		slices.Concat(a.Model, a.Draft, a.Layers, a.DraftLayers, a.Sampling, n)
}

// llamaCommand is a llama.cpp command as shown and stored: the program's
// name, its arguments and the prompt as PROMPT.
func llamaCommand(prog string, args []string) []string {
	return slices.Concat([]string{filepath.Base(prog)}, args, []string{"-p", "PROMPT"})
}

// timed is one decoding's figures as llama.cpp reports them.
type timed struct {
	tokens            int
	seconds           float64
	drafted, accepted int
}

// Bounds on what llama.cpp reports for one call: a figure outside them
// is not a measurement (an overflowed or garbled line) and is refused
// before it is stored or written into a config.
const (
	maxTokensPerSecond = 1e6 // no runtime decodes a million tokens a second
	maxReportedSeconds = 1e7 // some four months
)

// runLlama runs a llama.cpp program for at most limit (runProgram: its
// output bounded, its process group ended on time-out or cancellation)
// and reads its timing report, refusing figures that cannot be real:
// tokens not a positive count at most twice maxTokens plus 64 (the
// speculative example may decode a draft past -n), seconds not finite
// and positive, a rate above a million tokens a second, more tokens
// accepted than drafted or decoded.
func runLlama(ctx context.Context, prog string, args []string, spec bool, maxTokens int, limit time.Duration) (timed, error) {
	name := filepath.Base(prog)
	buf, err := runProgram(ctx, prog, args, limit)
	if err != nil {
		return timed{}, err
	}
	out := buf.String()
	var t timed
	re := evalLine
	if spec {
		re = decodedLine
	}
	m := re.FindAllStringSubmatch(out, -1)
	if m == nil {
		return t, fmt.Errorf("%s printed no timing line (%q):\n%s", name, re.String(), buf.excerpt(2000))
	}
	last := m[len(m)-1]
	bad := func(what, v string) error {
		return fmt.Errorf("%s reported %s %q, which is not a measurement (the line: %q)", name, what, printable(v, 40), printable(last[0], 200))
	}
	num := func(what, v string) (float64, error) {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x > maxReportedSeconds*1000 {
			return 0, bad(what, v)
		}
		return x, nil
	}
	count := func(what, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<40 {
			return 0, bad(what, v)
		}
		return n, nil
	}
	if spec { // decoded N tokens in S seconds
		if t.tokens, err = count("tokens", last[1]); err == nil {
			t.seconds, err = num("seconds", last[2])
		}
	} else { // eval time = MS ms / N runs
		var ms float64
		if ms, err = num("milliseconds", last[1]); err == nil {
			t.tokens, err = count("tokens", last[2])
		}
		t.seconds = ms / 1000
	}
	if err != nil {
		return t, err
	}
	if d := draftedLine.FindStringSubmatch(out); d != nil {
		if t.drafted, err = count("drafted tokens", d[1]); err != nil {
			return t, err
		}
	}
	if a := acceptLine.FindStringSubmatch(out); a != nil {
		if t.accepted, err = count("accepted tokens", a[1]); err != nil {
			return t, err
		}
	}
	switch {
	case t.tokens <= 0 || t.seconds <= 0:
		return t, fmt.Errorf("%s reported %d tokens in %g s", name, t.tokens, t.seconds)
	case t.tokens > 2*maxTokens+64:
		return t, fmt.Errorf("%s reported %d tokens decoded, asked for %d: not a measurement of this call", name, t.tokens, maxTokens)
	case t.seconds > maxReportedSeconds || float64(t.tokens)/t.seconds > maxTokensPerSecond:
		return t, fmt.Errorf("%s reported %d tokens in %g s (%.3g tokens/s): not a plausible measurement", name, t.tokens, t.seconds, float64(t.tokens)/t.seconds)
	case t.accepted > t.drafted || t.accepted > t.tokens:
		return t, fmt.Errorf("%s reported %d tokens accepted of %d drafted, %d decoded: not a plausible measurement", name, t.accepted, t.drafted, t.tokens)
	}
	return t, nil
}

// plausibleSpeedup refuses a speedup over plain decoding that no
// speculation gives (beyond 1000x either way): figures that cannot all
// have been measured, never stored or written into a config.
func plausibleSpeedup(x float64) error {
	if !(x >= 1e-3 && x <= 1e3) {
		return fmt.Errorf("llama.cpp's timing lines give a speedup of %.3gx over its plain decoding: not a plausible measurement, nothing was stored", x)
	}
	return nil
}

// CheckExport runs llama.cpp's plain decoding and the exported speculative
// settings (config.LlamaCpp: the flags of the exported line) on the
// prompts, interleaved over rounds, reads llama.cpp's own timing lines,
// and returns the measured speedup in llama.cpp (the median round's, with
// the range), beside Arborist's prediction for its own engine. Both are
// stored as runs of the runtime (unless NoStore), so Compare shows them.
func (b *Bench) CheckExport(ctx context.Context, c *Config, opt CheckOptions) (*CheckResult, error) {
	if err := opt.defaults("check", c); err != nil {
		return nil, err
	}
	a := c.LlamaCpp()
	if tl := c.Measured; a.Draft == nil && tl != nil && tl.LlamaCpp != nil && !tl.LlamaCpp.Speculate {
		return nil, fmt.Errorf("the exported llama.cpp setting is plain decoding (no draft length measured faster in llama.cpp: runtimes.llama_cpp): nothing to check")
	}
	if a.Draft == nil {
		return nil, fmt.Errorf("the exported llama.cpp settings do not speculate (the plan is %s with a %s draft source): nothing to check; llama.cpp speculates with a draft model", c.Speculation.Strategy, c.Models.Draft.Kind)
	}
	plainProg, specProg, err := llamaPrograms(opt.LlamaCpp)
	if err != nil {
		return nil, err
	}
	plainArgs, specArgs := llamaArgs(a, opt.MaxTokens)
	res := &CheckResult{Runtime: "llama.cpp", Plain: llamaCommand(plainProg, plainArgs), Speculative: llamaCommand(specProg, specArgs)}
	res.PlainLine, res.SpeculativeLine = config.ShellLine(res.Plain...), config.ShellLine(res.Speculative...)
	if c.Predicted != nil {
		res.Predicted = c.Predicted.Speedup
	}
	if res.Version, err = llamaVersion(ctx, plainProg, opt.CallLimit); err != nil {
		return nil, err
	}
	var plainTot, specTot timed
	for r := 0; r < opt.Rounds; r++ {
		var pr, sr timed
		for _, p := range opt.Prompts {
			runs := []bool{false, true}
			if r%2 == 1 {
				runs = []bool{true, false}
			}
			for _, spec := range runs {
				prog, args, acc := plainProg, plainArgs, &pr
				if spec {
					prog, args, acc = specProg, specArgs, &sr
				}
				t, err := runLlama(ctx, prog, slices.Concat(args, []string{"-p", p}), spec, opt.MaxTokens, opt.callLimit(p))
				if err != nil {
					return nil, err
				}
				acc.add(t)
			}
		}
		round := CheckRound{Plain: float64(pr.tokens) / pr.seconds, Spec: float64(sr.tokens) / sr.seconds, Drafted: sr.drafted, Accepted: sr.accepted}
		round.Speedup = round.Spec / round.Plain
		if err := plausibleSpeedup(round.Speedup); err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
		res.Rounds = append(res.Rounds, round)
		if opt.OnRound != nil {
			opt.OnRound(r, round)
		}
		plainTot.add(pr)
		specTot.add(sr)
	}
	speedups := make([]float64, len(res.Rounds))
	for i, r := range res.Rounds {
		speedups[i] = r.Speedup
	}
	res.Speedup, res.Min, res.Max = medianRange(speedups)
	if specTot.drafted > 0 {
		res.Acceptance = float64(specTot.accepted) / float64(specTot.drafted)
	}
	if opt.NoStore {
		return res, nil
	}
	return res, b.storeCheck(ctx, c, opt, res, plainTot, specTot)
}

// storeCheck stores a check's two sides as runs of the runtime: its plain
// decoding, and the exported settings with the measured speedup.
func (b *Bench) storeCheck(ctx context.Context, c *Config, opt CheckOptions, res *CheckResult, plain, spec timed) error {
	return b.storeSides(ctx, c, opt, res, plain, &spec)
}

// storeSides stores the plain side as a run of the runtime, and the
// speculative one where spec is not nil.
func (b *Bench) storeSides(ctx context.Context, c *Config, opt CheckOptions, res *CheckResult, plain timed, spec *timed) error {
	st, err := b.db(ctx)
	if err != nil {
		return fmt.Errorf("%w (use --no-store to check without storing)", err)
	}
	hw := hardware.DetectHardware().Fingerprint
	a := c.LlamaCpp()
	version := res.Version
	if version == "" {
		version = "unknown"
	}
	type side struct {
		id       *int64
		strategy string
		drafter  string
		command  []string
		t        timed
	}
	sides := []side{{&res.PlainRun, "llama.cpp plain", "", res.Plain, plain}}
	if spec != nil {
		sides = append(sides, side{&res.SpecRun, fmt.Sprintf("llama.cpp draft-max=%d p-min=%g", a.Depth, a.PMin), "draft:" + filepath.Base(c.Models.Draft.Path), res.Speculative, *spec})
	}
	for _, side := range sides {
		run := &store.Run{Hardware: hw, Target: c.Models.Target.Path, Drafter: side.drafter, Strategy: side.strategy, Prompts: opt.Prompts,
			Settings: map[string]any{"runtime": "llama.cpp", "version": version, "command": side.command, "rounds": opt.Rounds, "max_tokens": opt.MaxTokens}}
		if side.drafter != "" {
			run.PredictedSpeedup = res.Predicted
		}
		if _, err := st.CreateRun(ctx, run); err != nil {
			return err
		}
		run.Status, run.Tokens, run.Decode = "done", side.t.tokens, time.Duration(side.t.seconds*float64(time.Second))
		run.TokensPerSecond = float64(side.t.tokens) / side.t.seconds
		run.MeasuredSpeedup = 1
		if side.drafter != "" {
			run.MeasuredSpeedup = res.Speedup
			if side.t.drafted > 0 {
				run.Acceptance = float64(side.t.accepted) / float64(side.t.drafted)
			}
		}
		if err := st.FinishRun(context.WithoutCancel(ctx), run); err != nil {
			return err
		}
		*side.id = run.ID
	}
	return nil
}

// versionLimit bounds a --version call: it loads no model.
const versionLimit = 30 * time.Second

// llamaVersion is what a llama.cpp program prints for --version ("" when
// it prints no version line, or fails), cut to 100 printable characters
// (it is stored and written into config.yaml); one that does not answer
// within its limit (limit, or versionLimit when 0) is an error.
func llamaVersion(ctx context.Context, prog string, limit time.Duration) (string, error) {
	if limit <= 0 {
		limit = versionLimit
	}
	out, err := runProgram(ctx, prog, []string{"--version"}, limit)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		if errors.Is(err, errEnded) {
			return "", fmt.Errorf("%s --version: %w", filepath.Base(prog), err)
		}
		return "", nil
	}
	version := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "version:") {
			version = printable(strings.TrimPrefix(l, "version:"), 100)
		}
	}
	return version, nil
}

// errNoLlamaCpp marks a check without llama.cpp's binaries.
var errNoLlamaCpp = errors.New("llama.cpp not found")
