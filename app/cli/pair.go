package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"arborist/profiles"
)

// pairFlags selects a target, a draft source and the backend; run,
// profile, calibrate, train, tune and export share them.
type pairFlags struct {
	profiles.PairSpec
}

func (p *pairFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.Target, "target", "", "target GGUF `file`")
	fs.StringVar(&p.Draft, "draft", "", "draft model GGUF `file` (same vocabulary)")
	fs.IntVar(&p.NGram, "draft-ngram", 0, "draft by prompt lookup with suffixes up to `N` tokens")
	fs.IntVar(&p.Layers, "draft-layers", 0, "self-draft with the target's first `K` layers")
	fs.StringVar(&p.DraftHidden, "draft-hidden", "", "hidden-state drafter: a stored drafter's `ID` (see 'arborist drafters list') or a drafter GGUF file")
	fs.IntVar(&p.ResampleDepth, "resample-depth", 4, "hidden drafter: depth of the subtree re-sampled after a rejection")
	fs.BoolVar(&p.NoResample, "no-resample", false, "hidden drafter: always draft afresh after a rejection")
	backendFlags(fs, &p.Backend, &p.Threads)
	fs.IntVar(&p.DraftThreads, "draft-threads", 0, "threads of a concurrent drafter (duo, --aot, --tail); default: half, or all of --draft-device's (tune tries one thread, a quarter and half, and config.yaml keeps its choice)")
	fs.StringVar(&p.DraftBackend, "draft-device", "", "device of the draft source (default: the target's); another one drafts while the target verifies (DuoDecoding's split: --device cuda --draft-device cpu)")
	fs.BoolVar(&p.NoMmap, "no-mmap", false, "read model files into memory instead of mapping them (a file changed during the run cannot affect it)")
	kvFlag(fs, &p.KV)
}

// kvFlag registers --kv, the target's KV cache type.
func kvFlag(fs *flag.FlagSet, kv *string) {
	fs.StringVar(kv, "kv", "f32", "KV cache type: f32, or f16 (half the memory; its accuracy is in the README)")
}

// checkKV validates --kv.
func checkKV(kv string) error {
	if err := profiles.CheckKV(kv); err != nil {
		return usagef("--kv: %v", err)
	}
	return nil
}

// backendFlags registers --device (and --backend, its older name) and
// --threads.
func backendFlags(fs *flag.FlagSet, backend *string, threads *int) {
	c := profiles.Choices()
	fs.StringVar(backend, "device", c.DefaultBackend, "compute device ("+strings.Join(c.Backends, ", ")+")")
	fs.StringVar(backend, "backend", c.DefaultBackend, "same as --device")
	fs.IntVar(threads, "threads", c.DefaultThreads, "CPU threads in all")
}

// checkBackend validates --device and --threads. For --device cuda in the
// default binary it hands the run over to arborist-cuda (and does not
// return) or says why CUDA is unavailable.
func checkBackend(backend string, threads int) error {
	if err := profiles.CheckBackend(backend); err != nil {
		return usagef("--device: %v", err)
	}
	if err := profiles.HandOff(backend); err != nil {
		return fmt.Errorf("--device %s: %w", backend, err)
	}
	if threads <= 0 {
		return usagef("--threads must be positive")
	}
	if err := profiles.CheckThreads("--threads", threads); err != nil { // capped at a few times the logical cores
		return usagef("%v", err)
	}
	return nil
}

// check validates the flags; needSource says whether a draft source is required.
func (p *pairFlags) check(needSource bool) error {
	if p.Target == "" {
		return usagef("--target is required")
	}
	n := p.Sources()
	if n > 1 {
		return usagef("choose one draft source: --draft, --draft-ngram, --draft-layers or --draft-hidden")
	}
	if n == 0 && needSource {
		return usagef("this needs a draft source: --draft, --draft-ngram, --draft-layers or --draft-hidden")
	}
	if p.ResampleDepth < 1 && !p.NoResample {
		return usagef("--resample-depth must be at least 1 (or use --no-resample)")
	}
	if p.DraftThreads < 0 {
		return usagef("--draft-threads must not be negative")
	}
	if err := profiles.CheckThreads("--threads (with --draft-threads)", p.Threads+p.DraftThreads); err != nil {
		return usagef("%v", err)
	}
	if err := checkKV(p.KV); err != nil {
		return err
	}
	if p.DraftBackend != "" {
		if n == 0 {
			return usagef("--draft-device needs a draft source")
		}
		if err := profiles.CheckBackend(p.DraftBackend); err != nil {
			return usagef("--draft-device: %v", err)
		}
	}
	return checkBackend(p.Backend, p.Threads)
}

func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", profiles.Choices().DefaultDB, "Arborist database `file`")
}

func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print one JSON document instead of the text report (fields: README, JSON output)")
}

// openBench opens the workflow core over the database.
func openBench(ctx context.Context, db string) (*profiles.Bench, error) {
	return profiles.Open(ctx, db)
}

// progress prints a workflow's progress on stderr, one line per stage.
func progress(env Env) profiles.Progress {
	return func(e profiles.Event) {
		fmt.Fprintf(env.Stderr, "\r  %s: %d of %d %s   ", e.Stage, e.Done, e.Total, e.Detail)
		if e.Done == e.Total {
			fmt.Fprintln(env.Stderr)
		}
	}
}

// writeJSON prints v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
