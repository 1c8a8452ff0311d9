// Package cli implements Arborist's headless verbs (arborist inspect,
// tokenize, generate, synth, run, tune, ...). Each verb parses its own
// flags, prints a usage message and a clear error on bad input, calls the
// workflow core (arborist/profiles, which the GUI uses too), prints the
// text report or, with --json, one JSON document, and returns an exit
// status. A new verb is a function here and a line in verbs(); it reaches
// models and backends only through the core (the module's TestLayers).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
)

// Env is where a verb reads and writes; tests substitute buffers.
type Env struct {
	Stdout, Stderr io.Writer
}

// verb is one subcommand.
type verb struct {
	name    string
	summary string
	run     func(ctx context.Context, env Env, args []string) error
}

func verbs() map[string]verb {
	vs := []verb{
		{"inspect", "show a GGUF model's architecture, shape, tensor types and memory need", runInspect},
		{"tokenize", "print the token ids of a text", runTokenize},
		{"generate", "generate text with plain autoregressive decoding (--ids/--print-ids: token ids in and out)", runGenerate},
		{"logits", "print the top logits of every position of teacher-forced token ids, as JSON lines", runLogits},
		{"synth", "write a random-weight GGUF with a real model's shape", runSynth},
		{"demo", "write the built-in demo pair (real text, speculation that pays) to a folder", runDemo},
		{"run", "speculative decoding session: strategy, draft source, figures, trace", runRun},
		{"bench", "decode speed, T_verify(W) curve and memory bandwidth of a model on this machine", runBench},
		{"backends", "list the compute backends (cpu, cuda, ...) and whether each can run on this machine", runBackends},
		{"profile", "measure and store latency curves of a target (and drafter) on this machine", runProfile},
		{"calibrate", "measure a pair's acceptance per depth, rank and confidence over a prompt suite", runCalibrate},
		{"tune", "rank plans with the latency-aware speedup model; -o writes config.yaml", runTune},
		{"train", "train predictor: fit a pair's depth predictor; train drafter: distil a hidden-state drafter from a target", runTrain},
		{"drafters", "stored hidden-state drafters: list, show ID, export ID -o FILE, import FILE, rm ID", runDrafters},
		{"export", "write the newest tuned plan of a pair as config.yaml, with llama.cpp/vLLM/SGLang equivalents", runExport},
		{"runs", "stored runs: list, show ID (per-step trace), compare ID ID...", runRuns},
		{"check-export", "measure an export's llama.cpp settings in llama.cpp against its plain decoding", runCheckExport},
		{"serve", "serve a config.yaml's plan behind an OpenAI-compatible HTTP API (completions, chat, streaming)", runServe},
		{"loadtest", "drive a config's servers (serve, llama-server) with concurrent clients: tokens/s, time to first token, per token", runLoadTest},
	}
	m := map[string]verb{}
	for _, v := range vs {
		m[v.name] = v
	}
	return m
}

// errUsage marks an error caused by how the verb was called: the verb's
// usage is printed with it.
var errUsage = errors.New("usage")

type usageError struct {
	msg     string
	printed bool // the flag package already printed the usage
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Is(t error) bool {
	return t == errUsage
}

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// Usage writes the list of verbs.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "usage: arborist                 open the workbench (GUI)")
	fmt.Fprintln(w, "       arborist VERB [flags]    run headless")
	fmt.Fprintln(w, "\nverbs:")
	vs := verbs()
	var names []string
	for n := range vs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, vs[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'arborist VERB -h' for a verb's flags.")
}

// Main runs the verb named by args[0] and returns the process exit status:
// 0 on success, 2 for usage errors, 1 for failures.
func Main(ctx context.Context, env Env, args []string) int {
	if len(args) == 0 {
		Usage(env.Stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		Usage(env.Stdout)
		return 0
	}
	v, ok := verbs()[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "arborist: unknown verb %q\n\n", args[0])
		Usage(env.Stderr)
		return 2
	}
	err := v.run(ctx, env, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.Stderr, "arborist %s: %v\n", v.name, err)
		return 2
	default:
		fmt.Fprintf(env.Stderr, "arborist %s: %v\n", v.name, err)
		return 1
	}
}

// newFlags makes a verb's flag set; parse errors come back as usage errors
// after the flag package has printed the flags.
func newFlags(env Env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: arborist %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags (allowing them before and after positional arguments)
// and returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error(), printed: true}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlags parses a verb that takes flags only: a positional argument is
// a usage error. Errors come back already reported through fail.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return fail(fs, err)
	}
	if len(pos) > 0 {
		return fail(fs, usagef("unexpected argument %q", pos[0]))
	}
	return nil
}

// fail prints the verb's usage before a usage error the flag package has
// not reported yet.
func fail(fs *flag.FlagSet, err error) error {
	var ue *usageError
	if errors.As(err, &ue) && !ue.printed {
		fs.Usage()
	}
	return err
}
