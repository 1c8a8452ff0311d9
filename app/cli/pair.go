package cli

import (
	"flag"

	"arborist/engine/sample"
	"arborist/kernels/cpu"
	"arborist/profiles"
)

// pairFlags selects a target and a draft source; run, profile, calibrate
// and tune share them.
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
	fs.IntVar(&p.Threads, "threads", cpu.DefaultThreads(), "CPU threads in all")
	fs.IntVar(&p.DraftThreads, "draft-threads", 0, "threads of a concurrent drafter (duo, --aot); default: half")
	fs.BoolVar(&p.NoMmap, "no-mmap", false, "read model files into memory instead of mapping them (a file changed during the run cannot affect it)")
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
	if p.Threads <= 0 || p.DraftThreads < 0 {
		return usagef("--threads must be positive")
	}
	if err := profiles.CheckThreads("--threads (with --draft-threads)", p.Threads+p.DraftThreads); err != nil { // issue 17
		return usagef("%v", err)
	}
	return nil
}

// open loads the pair; db is where a --draft-hidden id is looked up.
func (p *pairFlags) open(params sample.Params, concurrent bool, db string) (*profiles.Pair, error) {
	p.DB = db
	return profiles.OpenPair(p.PairSpec, params, concurrent)
}
