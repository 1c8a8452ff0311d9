package cli

import (
	"flag"
	"fmt"
	"path/filepath"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels/cpu"
)

// pairFlags selects a target and a draft source; run, calibrate, tune and
// export share them.
type pairFlags struct {
	target, draft     string
	ngram, layers     int
	threads, dthreads int
}

func (p *pairFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.target, "target", "", "target GGUF `file`")
	fs.StringVar(&p.draft, "draft", "", "draft model GGUF `file` (same vocabulary)")
	fs.IntVar(&p.ngram, "draft-ngram", 0, "draft by prompt lookup with suffixes up to `N` tokens")
	fs.IntVar(&p.layers, "draft-layers", 0, "self-draft with the target's first `K` layers")
	fs.IntVar(&p.threads, "threads", cpu.DefaultThreads(), "CPU threads in all")
	fs.IntVar(&p.dthreads, "draft-threads", 0, "threads of a concurrent drafter (duo, --aot); default: half")
}

// check validates the flags; needSource says whether a draft source is required.
func (p *pairFlags) check(needSource bool) error {
	if p.target == "" {
		return usagef("--target is required")
	}
	n := 0
	for _, set := range []bool{p.draft != "", p.ngram > 0, p.layers > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return usagef("choose one draft source: --draft, --draft-ngram or --draft-layers")
	}
	if n == 0 && needSource {
		return usagef("this needs a draft source: --draft, --draft-ngram or --draft-layers")
	}
	if p.threads <= 0 || p.dthreads < 0 {
		return usagef("--threads must be positive")
	}
	return nil
}

// sourceName names the draft source as calibrations are keyed.
func (p *pairFlags) sourceName() string {
	switch {
	case p.draft != "":
		return "draft:" + filepath.Base(p.draft)
	case p.ngram > 0:
		return fmt.Sprintf("ngram:%d", p.ngram)
	case p.layers > 0:
		return fmt.Sprintf("layers:%d", p.layers)
	}
	return ""
}

// loadedPair is an opened target and draft source with their backends.
type loadedPair struct {
	target     *model.Model
	source     drafter.Source
	backend    *cpu.Backend // the target's
	draftBE    *cpu.Backend // the drafter's, when it has its own
	concurrent bool
	closers    []func()
}

func (l *loadedPair) Close() {
	for i := len(l.closers) - 1; i >= 0; i-- {
		l.closers[i]()
	}
}

// open loads the pair. A concurrent drafter (duo, egt --aot) gets its own
// backend and threads; otherwise drafter and target take turns on one.
func (p *pairFlags) open(params sample.Params, concurrent bool) (*loadedPair, error) {
	concurrent = concurrent && p.draft != ""
	tThreads, dThreads := p.threads, p.threads
	if concurrent {
		dThreads = p.dthreads
		if dThreads == 0 {
			dThreads = max(1, p.threads/2)
		}
		tThreads = max(1, p.threads-dThreads)
	}
	l := &loadedPair{concurrent: concurrent}
	l.backend = cpu.New(tThreads)
	l.closers = append(l.closers, l.backend.Close)
	target, err := model.Load(p.target, l.backend)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.target = target
	l.closers = append(l.closers, func() { target.Close() })
	switch {
	case p.draft != "":
		dbe := l.backend
		if concurrent {
			l.draftBE = cpu.New(dThreads)
			l.closers = append(l.closers, l.draftBE.Close)
			dbe = l.draftBE
		}
		dm, err := model.Load(p.draft, dbe)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.closers = append(l.closers, func() { dm.Close() })
		if err := drafter.CheckVocab(target.Tok, dm.Tok); err != nil {
			l.Close()
			return nil, fmt.Errorf("%s and %s: %w", p.target, p.draft, err)
		}
		l.source = drafter.NewModel(dm, 0, target.CtxLen, params, p.sourceName())
	case p.ngram > 0:
		l.source = drafter.NewNGram(p.ngram, target.Vocab)
	case p.layers > 0:
		if p.layers >= target.Layers {
			l.Close()
			return nil, fmt.Errorf("--draft-layers %d must be below the target's %d layers", p.layers, target.Layers)
		}
		l.source = drafter.NewModel(target, p.layers, target.CtxLen, params, p.sourceName())
	}
	return l, nil
}
