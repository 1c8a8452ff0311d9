// Package llamacpp runs llama.cpp's programs for the core's checks of an
// exported plan in llama.cpp (profiles' CheckExport and TuneLlamaCpp):
// finding them, their argument lists for a config's settings, running one
// with its time and output bounded (a program Arborist did not write is
// not trusted to behave), and reading its timing report and version,
// refusing figures that cannot be measurements.
package llamacpp

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
)

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
	return "", fmt.Errorf("%w: no %s %s (build llama.cpp, or give the folder of its binaries)", ErrNotFound, strings.Join(names, " or "), where)
}

// Programs finds llama.cpp's plain decoding and speculative example
// programs in dir (or on PATH when dir is ""): ErrNotFound where one is
// missing.
func Programs(dir string) (plain, spec string, err error) {
	if plain, err = findProgram(dir, plainPrograms); err != nil {
		return "", "", err
	}
	spec, err = findProgram(dir, specPrograms)
	return plain, spec, err
}

// Args are the argument lists of llama.cpp's plain decoding and
// speculative example for settings a, maxTokens a prompt (the prompt
// itself goes after them).
func Args(a config.LlamaCppArgs, maxTokens int) (plain, spec []string) {
	n := []string{"-n", strconv.Itoa(maxTokens)}
	return slices.Concat(a.Model, a.Layers, a.Sampling, n, []string{"-no-cnv"}),
		slices.Concat(a.Model, a.Draft, a.Layers, a.DraftLayers, a.Sampling, n)
}

// Command is a llama.cpp command as shown and stored: the program's
// name, its arguments and the prompt as PROMPT.
func Command(prog string, args []string) []string {
	return slices.Concat([]string{filepath.Base(prog)}, args, []string{"-p", "PROMPT"})
}

// Timed is one decoding's figures as llama.cpp reports them (or the sum
// of several: Add).
type Timed struct {
	Tokens            int
	Seconds           float64
	Drafted, Accepted int
}

// Add adds another decoding's figures to t.
func (t *Timed) Add(o Timed) {
	t.Tokens += o.Tokens
	t.Seconds += o.Seconds
	t.Drafted += o.Drafted
	t.Accepted += o.Accepted
}

// TPS is the decoding's tokens a second.
func (t Timed) TPS() float64 { return float64(t.Tokens) / t.Seconds }

// Bounds on what llama.cpp reports for one call: a figure outside them
// is not a measurement (an overflowed or garbled line) and is refused
// before it is stored or written into a config.
const (
	maxTokensPerSecond = 1e6 // no runtime decodes a million tokens a second
	maxReportedSeconds = 1e7 // some four months
)

// Run runs a llama.cpp program (spec: the speculative example) with args
// for at most limit (runProgram: its
// output bounded, its process group ended on time-out or cancellation)
// and reads its timing report, refusing figures that cannot be real:
// tokens not a positive count at most twice maxTokens plus 64 (the
// speculative example may decode a draft past -n), seconds not finite
// and positive, a rate above a million tokens a second, more tokens
// accepted than drafted or decoded.
func Run(ctx context.Context, prog string, args []string, spec bool, maxTokens int, limit time.Duration) (Timed, error) {
	name := filepath.Base(prog)
	buf, err := runProgram(ctx, prog, args, limit)
	if err != nil {
		return Timed{}, err
	}
	out := buf.String()
	var t Timed
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
		if t.Tokens, err = count("tokens", last[1]); err == nil {
			t.Seconds, err = num("seconds", last[2])
		}
	} else { // eval time = MS ms / N runs
		var ms float64
		if ms, err = num("milliseconds", last[1]); err == nil {
			t.Tokens, err = count("tokens", last[2])
		}
		t.Seconds = ms / 1000
	}
	if err != nil {
		return t, err
	}
	if d := draftedLine.FindStringSubmatch(out); d != nil {
		if t.Drafted, err = count("drafted tokens", d[1]); err != nil {
			return t, err
		}
	}
	if a := acceptLine.FindStringSubmatch(out); a != nil {
		if t.Accepted, err = count("accepted tokens", a[1]); err != nil {
			return t, err
		}
	}
	switch {
	case t.Tokens <= 0 || t.Seconds <= 0:
		return t, fmt.Errorf("%s reported %d tokens in %g s", name, t.Tokens, t.Seconds)
	case t.Tokens > 2*maxTokens+64:
		return t, fmt.Errorf("%s reported %d tokens decoded, asked for %d: not a measurement of this call", name, t.Tokens, maxTokens)
	case t.Seconds > maxReportedSeconds || float64(t.Tokens)/t.Seconds > maxTokensPerSecond:
		return t, fmt.Errorf("%s reported %d tokens in %g s (%.3g tokens/s): not a plausible measurement", name, t.Tokens, t.Seconds, float64(t.Tokens)/t.Seconds)
	case t.Accepted > t.Drafted || t.Accepted > t.Tokens:
		return t, fmt.Errorf("%s reported %d tokens accepted of %d drafted, %d decoded: not a plausible measurement", name, t.Accepted, t.Drafted, t.Tokens)
	}
	return t, nil
}

// versionLimit bounds a --version call: it loads no model.
const versionLimit = 30 * time.Second

// Version is what a llama.cpp program prints for --version ("" when
// it prints no version line, or fails), cut to 100 printable characters
// (it is stored and written into config.yaml); one that does not answer
// within its limit (limit, or versionLimit when 0) is an error.
func Version(ctx context.Context, prog string, limit time.Duration) (string, error) {
	if limit <= 0 {
		limit = versionLimit
	}
	out, err := runProgram(ctx, prog, []string{"--version"}, limit)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		if errors.Is(err, ErrEnded) {
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

// ErrNotFound marks a llama.cpp program that is not there.
var ErrNotFound = errors.New("llama.cpp not found")
