package profiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	// OnRound, when set, receives each finished round.
	OnRound func(i int, r CheckRound)
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
	Min, Max        float64      `json:"-"`
	Acceptance      float64      `json:"acceptance"`
	// Predicted is Arborist's prediction for its own engine (the config's).
	Predicted float64 `json:"predicted_arborist,omitempty"`
	PlainRun  int64   `json:"plain_run_id,omitempty"`
	SpecRun   int64   `json:"speculative_run_id,omitempty"`
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
	return "", fmt.Errorf("%w: no %s %s (build llama.cpp, or give the folder of its binaries)", ErrNoLlamaCpp, strings.Join(names, " or "), where)
}

// defaults fills in a check's or a tune's defaults (128 tokens a prompt,
// 3 rounds) and refuses one without prompts; what names the work.
func (opt *CheckOptions) defaults(what string) error {
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 128
	}
	if opt.Rounds <= 0 {
		opt.Rounds = 3
	}
	if len(opt.Prompts) == 0 {
		return fmt.Errorf("no prompts to %s with", what)
	}
	return nil
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

// runLlama runs a llama.cpp program and reads its timing report.
func runLlama(ctx context.Context, prog string, args []string, spec bool) (timed, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	tail := func() string {
		s := out.String()
		if len(s) > 2000 {
			s = "..." + s[len(s)-2000:]
		}
		return s
	}
	if err != nil {
		if ctx.Err() != nil {
			return timed{}, ctx.Err()
		}
		return timed{}, fmt.Errorf("%s: %v\n%s", filepath.Base(prog), err, tail())
	}
	var t timed
	re := evalLine
	if spec {
		re = decodedLine
	}
	m := re.FindAllStringSubmatch(out.String(), -1)
	if m == nil {
		return t, fmt.Errorf("%s printed no timing line (%q):\n%s", filepath.Base(prog), re.String(), tail())
	}
	last := m[len(m)-1]
	if spec { // decoded N tokens in S seconds
		t.tokens, _ = strconv.Atoi(last[1])
		t.seconds, _ = strconv.ParseFloat(last[2], 64)
	} else { // eval time = MS ms / N runs
		ms, _ := strconv.ParseFloat(last[1], 64)
		t.tokens, _ = strconv.Atoi(last[2])
		t.seconds = ms / 1000
	}
	if d := draftedLine.FindStringSubmatch(out.String()); d != nil {
		t.drafted, _ = strconv.Atoi(d[1])
	}
	if a := acceptLine.FindStringSubmatch(out.String()); a != nil {
		t.accepted, _ = strconv.Atoi(a[1])
	}
	if t.tokens <= 0 || t.seconds <= 0 {
		return t, fmt.Errorf("%s reported %d tokens in %g s", filepath.Base(prog), t.tokens, t.seconds)
	}
	return t, nil
}

// CheckExport runs llama.cpp's plain decoding and the exported speculative
// settings (config.LlamaCpp: the flags of the exported line) on the
// prompts, interleaved over rounds, reads llama.cpp's own timing lines,
// and returns the measured speedup in llama.cpp (the median round's, with
// the range), beside Arborist's prediction for its own engine. Both are
// stored as runs of the runtime (unless NoStore), so Compare shows them.
func (b *Bench) CheckExport(ctx context.Context, c *Config, opt CheckOptions) (*CheckResult, error) {
	if err := opt.defaults("check"); err != nil {
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
	res.Version = llamaVersion(ctx, plainProg)
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
				t, err := runLlama(ctx, prog, slices.Concat(args, []string{"-p", p}), spec)
				if err != nil {
					return nil, err
				}
				acc.add(t)
			}
		}
		round := CheckRound{Plain: float64(pr.tokens) / pr.seconds, Spec: float64(sr.tokens) / sr.seconds, Drafted: sr.drafted, Accepted: sr.accepted}
		round.Speedup = round.Spec / round.Plain
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

// llamaVersion is what a llama.cpp program prints for --version ("" when
// it prints no version line).
func llamaVersion(ctx context.Context, prog string) string {
	v, err := exec.CommandContext(ctx, prog, "--version").CombinedOutput()
	if err != nil {
		return ""
	}
	version := ""
	for _, l := range strings.Split(string(v), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "version:") {
			version = strings.TrimSpace(strings.TrimPrefix(l, "version:"))
		}
	}
	return version
}

// ErrNoLlamaCpp marks a check without llama.cpp's binaries.
var ErrNoLlamaCpp = errors.New("llama.cpp not found")
