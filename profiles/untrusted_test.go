package profiles

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/llamacheck"
	"arborist/profiles/llamacpp"
)

// fakeLlama writes stand-ins for llama-completion and
// llama-speculative-simple into a new folder: each answers --version with
// version (a shell snippet) and a completion with body.
func fakeLlama(t *testing.T, version, body string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"llama-completion", "llama-speculative-simple"} {
		script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = --version ]; then\n%s\nexit 0\nfi\n%s\n", version, body)
		if err := os.WriteFile(filepath.Join(dir, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gone says whether the process pid ends (gone, or a zombie no one has
// reaped yet), waiting for a signal already sent to arrive: up to 10 s, a
// bound on hanging, not a timing assertion.
func gone(pid int) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'Z' {
			return true
		}
	}
	return false
}

// childPID reads the pid a stand-in recorded.
func childPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the stand-in recorded no child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

const plainTiming = `echo "llama_perf_context_print:        eval time =     48.00 ms /   8 runs" >&2`

// TestCheckExportBoundsUntrustedPrograms: a llama.cpp stand-in that
// printed endlessly grew Arborist to 2 GB; one that hung on --version or on
// a completion hung check-export, SIGINT did not end it, and a background
// child holding its output kept it waiting. Each call now has a time
// limit (here the test's short one), keeps only a tail of the output, and
// ends the program's whole process group; the error names the program.
func TestCheckExportBoundsUntrustedPrograms(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to see processes end")
	}
	ctx := context.Background()
	b := openBench(t)
	c := checkConfig(spec.Plan{Strategy: "chain", Gamma: 4})
	opt := func(dir string) llamacheck.Options {
		return llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once"}, MaxTokens: 8, Rounds: 1, NoStore: true, CallLimit: time.Second}
	}
	child := filepath.Join(t.TempDir(), "child.pid")
	for _, c2 := range []struct {
		name, version, body, want string
		childEnds                 bool
	}{
		{"endless output", "echo 'version: 1'", "while :; do echo 'a line of output that never ends, over and over'; done", "llama-completion did not finish within 1s", false},
		{"hangs on --version", "exec sleep 1000", "", "llama-completion --version: llama-completion did not finish within 1s", false},
		{"hangs with a child", "echo 'version: 1'", "sleep 1000 & echo $! > " + child + "; wait", "llama-completion did not finish within 1s", true},
	} {
		os.Remove(child)
		_, err := b.CheckExport(ctx, c, opt(fakeLlama(t, c2.version, c2.body)))
		if err == nil || !strings.Contains(err.Error(), c2.want) || !errors.Is(err, llamacpp.ErrEnded) {
			t.Errorf("%s: %v; want %q", c2.name, err, c2.want)
		}
		if c2.childEnds {
			if pid := childPID(t, child); !gone(pid) {
				t.Errorf("%s: its child %d still runs", c2.name, pid)
			}
		}
	}

	// a program that exits while a child it left holds its output: the
	// call returns (after waitDelay) and the child is ended
	os.Remove(child)
	dir := fakeLlama(t, "echo 'version: 1'", "sleep 1000 & echo $! > "+child+"\n"+plainTiming+"\necho 'decoded 8 tokens in 0.04 seconds' >&2")
	o := opt(dir)
	o.CallLimit = time.Hour // only the exit can end this call
	if _, err := b.CheckExport(ctx, c, o); err != nil {
		t.Errorf("a program leaving a child behind: %v", err)
	}
	if pid := childPID(t, child); !gone(pid) {
		t.Errorf("the child %d left behind still runs", pid)
	}

	// cancelled (SIGINT) mid-call: the program and its child end at once
	os.Remove(child)
	started := filepath.Join(t.TempDir(), "started")
	dir = fakeLlama(t, "echo 'version: 1'", "sleep 1000 & echo $! > "+child+"; touch "+started+"; wait")
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			if _, err := os.Stat(started); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	o = opt(dir)
	o.CallLimit = time.Hour
	if _, err := b.CheckExport(cctx, c, o); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled check: %v", err)
	}
	if pid := childPID(t, child); !gone(pid) {
		t.Errorf("the child %d of a cancelled call still runs", pid)
	}
}

// TestAbsurdRuntimeFiguresRefused: figures a runtime printed were stored
// and written into config.yaml however absurd (a speedup of -6e6, an
// acceptance of -100%, 2.4e64x). A figure that cannot be a measurement is
// refused naming the program; nothing is stored. -n beyond the config's
// context, which reached llama.cpp and came back as "no timing line", is
// refused first.
func TestAbsurdRuntimeFiguresRefused(t *testing.T) {
	ctx := context.Background()
	b := openBench(t)
	c := checkConfig(spec.Plan{Strategy: "chain", Gamma: 4})
	spec := func(line string) string { return "echo '" + line + "' >&2\n" + plainTiming }
	for _, c2 := range []struct{ body, want string }{
		{spec("decoded 100 tokens in 1e-300 seconds"), "no timing line"},
		{spec("decoded 10 tokens in 0.0000000001 seconds"), "not a plausible measurement"},
		{spec("decoded 99999999999999999999999 tokens in 1 seconds"), "not a measurement"},
		{spec("decoded 100000000 tokens in 1 seconds"), "asked for 8"},
		{spec("decoded 10 tokens in 0.1 seconds") + "\necho 'n_drafted = 5' >&2\necho 'n_accept = 9' >&2", "accepted of 5 drafted"},
		{spec("decoded 10 tokens in 99999999999 seconds"), "not a measurement"},
		{spec("decoded 10 tokens in 0.00001 seconds"), "speedup of"},
	} {
		dir := fakeLlama(t, "echo 'version: 1'", c2.body)
		_, err := b.CheckExport(ctx, c, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once"}, MaxTokens: 8, Rounds: 1})
		if err == nil || !strings.Contains(err.Error(), c2.want) {
			t.Errorf("%q: %v; want %q", c2.body, err, c2.want)
		}
		if _, err := b.TuneLlamaCpp(ctx, c, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once"}, MaxTokens: 8, Rounds: 1}); err == nil {
			t.Errorf("a tune on %q succeeded", c2.body)
		}
	}
	if st, err := b.db(ctx); err != nil {
		t.Fatal(err)
	} else if runs, err := st.Runs(ctx, 0); err != nil || len(runs) != 0 {
		t.Errorf("absurd figures were stored: %d runs %v", len(runs), err)
	}
	// the negative control: plausible figures pass
	dir := fakeLlama(t, "echo 'version: 1'", spec("decoded 8 tokens in 0.05 seconds"))
	if _, err := b.CheckExport(ctx, c, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once"}, MaxTokens: 8, Rounds: 1, NoStore: true}); err != nil {
		t.Errorf("plausible figures: %v", err)
	}
	for _, n := range []int{513, 1 << 62} {
		_, err := b.CheckExport(ctx, c, llamacheck.Options{LlamaCpp: dir, Prompts: []string{"Once"}, MaxTokens: n, Rounds: 1, NoStore: true})
		if err == nil || !strings.Contains(err.Error(), "(-n) exceed the config's context (models.target.max_seq_len 512)") {
			t.Errorf("-n %d: %v", n, err)
		}
	}
}
