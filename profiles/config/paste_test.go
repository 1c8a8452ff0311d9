package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"arborist/engine/spec"
)

// hostileName holds every character a POSIX shell treats specially, as a
// downloaded model's file name may: pasted unquoted, each of ; | & $( )
// ` < > and a line break would run a command or redirect a stream.
const hostileName = "a;touch P1|touch P2&touch P3 $(touch P4) `touch P5` <P6 >P7 *?[]{}!#~'\"\t\ntouch P8.gguf"

// argvStandins writes programs named like the runtimes that record the
// arguments they get (NUL-separated, one record per call) in $ARGV_LOG.
func argvStandins(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	os.Mkdir(bin, 0o755)
	script := "#!/bin/sh\n{ printf '%s\\0' \"${0##*/}\" \"$@\"; printf '\\1\\0'; } >>\"$ARGV_LOG\"\n"
	for _, p := range []string{"llama-server", "llama-lookup", "llama-completion", "llama-speculative-simple", "vllm", "python"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// ranArgvs runs text (lines to paste) with sh in a fresh folder, the
// stand-ins first on PATH, and returns each call's argv; it fails the test
// where the shell made any file but the log (a command ran, a stream was
// redirected).
func ranArgvs(t *testing.T, text string) [][]string {
	t.Helper()
	argvs, made := paste(t, text)
	if len(made) != 0 {
		t.Errorf("pasting the lines made %v: something beside the runtime ran\n%s", made, text)
	}
	return argvs
}

// paste runs text as ranArgvs does and returns the argvs and the files
// the shell made in its folder.
func paste(t *testing.T, text string) ([][]string, []string) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	if out, err := exec.Command(sh, "-n", "-c", text).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v %s\n%s", err, out, text)
	}
	bin := argvStandins(t)
	work := t.TempDir()
	log := filepath.Join(t.TempDir(), "argv.log")
	cmd := exec.Command(sh, "-c", text)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "ARGV_LOG="+log)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh: %v %s\n%s", err, out, text)
	}
	var made []string
	entries, _ := os.ReadDir(work)
	for _, e := range entries {
		made = append(made, e.Name())
	}
	data, _ := os.ReadFile(log)
	var out [][]string
	for _, rec := range strings.Split(string(data), "\x01\x00") {
		if rec == "" {
			continue
		}
		out = append(out, strings.Split(strings.TrimSuffix(rec, "\x00"), "\x00"))
	}
	return out, made
}

// TestLinesSafeToPaste: the vLLM line left the model path unquoted and
// the llama.cpp line left > < ( ) * unquoted, so a model whose file name
// holds shell syntax ran commands when its line was pasted into a shell.
// Each runtime's block, pasted whole (comments and all, as the GUI's Copy
// copies it), now runs exactly its runtimes with the paths intact and
// nothing else.
func TestLinesSafeToPaste(t *testing.T) {
	dir := "/models/" + hostileName
	for _, src := range []Draft{
		{Kind: "model", Path: dir + "-draft.gguf", Device: "cpu", Threads: 2},
		{Kind: "ngram", NGram: 3},
	} {
		c := &Config{Speculation: spec.Plan{Strategy: "chain", Gamma: 4}, Sampling: Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, Seed: 7}}
		c.Models.Target = Target{Path: dir + ".gguf", Device: "cpu", MaxSeqLen: 2048, Threads: 2}
		c.Models.Draft = src
		c.Measured = &Runtimes{LlamaCpp: nil}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Runtimes() {
			argvs := ranArgvs(t, e.Render())
			if len(argvs) != len(e.Lines) {
				t.Fatalf("%s with %s: %d programs ran for %d lines:\n%s", e.Runtime, src.Kind, len(argvs), len(e.Lines), e.Render())
			}
			for i, argv := range argvs {
				// the shell split the line into the very words it quotes
				if got := ShellLine(argv...); got != e.Lines[i] {
					t.Errorf("%s with %s: the shell read\n%q\nfrom\n%q", e.Runtime, src.Kind, argv, e.Lines[i])
				}
				if e.Runtime != "SGLang" && !slices.Contains(argv, c.Models.Target.Path) {
					t.Errorf("%s with %s: the target path did not arrive intact: %q", e.Runtime, src.Kind, argv)
				}
				if e.Runtime == "llama.cpp" && src.Kind == "model" && !slices.Contains(argv, src.Path) {
					t.Errorf("llama.cpp: the draft path did not arrive intact: %q", argv)
				}
			}
		}
	}
}

// TestShellQuote: plain words stay as they are; anything else is single
// quoted, a single quote inside it closed, escaped and reopened; the
// shell reads every such word back as it was (the negative control: the
// word unquoted does not survive).
func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":               "''",
		"-m":             "-m",
		"/m/t.gguf":      "/m/t.gguf",
		"0.05":           "0.05",
		"a b":            "'a b'",
		"it's":           `'it'\''s'`,
		"$(id)":          "'$(id)'",
		"~/m.gguf":       "'~/m.gguf'",
		"PROMPT":         "PROMPT",
		"key=value,x:y@": "key=value,x:y@",
		"=ls":            "'=ls'",
	} {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	words := []string{"llama-server", "-m", hostileName, "it's", "", "plain"}
	argvs := ranArgvs(t, ShellLine(words...))
	if len(argvs) != 1 || !slices.Equal(argvs[0], words) {
		t.Errorf("the shell read %q, want %q", argvs, words)
	}
	// the negative control: the same name unquoted, as the vLLM line
	// carried it, runs what it holds
	_, made := paste(t, "llama-server -m /m/a;touch P1 $(touch P4)")
	if !slices.Contains(made, "P1") || !slices.Contains(made, "P4") {
		t.Errorf("an unquoted name ran nothing (%v): the check proves nothing", made)
	}
}
