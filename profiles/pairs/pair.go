package pairs

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"arborist/engine/drafter"
	"arborist/engine/gguf"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/kernels"
)

// Spec names a target and a draft source (at most one of Draft, NGram,
// Layers, DraftHidden) and the CPU threads they run with.
type Spec struct {
	Target       string
	Draft        string
	Backend      string // a registered backend's name ("" = kernels.DefaultBackend)
	NGram        int
	Layers       int
	Threads      int
	DraftThreads int // of a concurrent drafter; 0 = half of Threads
	// DraftBackend places the draft source on another registered backend
	// ("" = the target's): DuoDecoding's split, the drafter on the CPU
	// while the target verifies on the GPU. A draft model, the layer-skip
	// drafter (a copy of the target's first layers there) and the
	// hidden-state drafter can move; n-gram drafting needs no device.
	DraftBackend string
	// DraftHidden is a hidden-state drafter: a stored drafter's id (in DB,
	// default store.DefaultPath()) or a drafter GGUF file.
	DraftHidden string
	DB          string
	// ResampleDepth bounds re-sampling after a rejection (0: the default
	// 4); NoResample turns it off.
	ResampleDepth int
	NoResample    bool
	// NoMmap reads the model files into memory instead of mapping them, so
	// a file truncated or rewritten during a run cannot touch the weights.
	NoMmap bool
	// KV is the target's KV cache type (kernels.ParseKV: "" or "f32", "f16").
	KV string
}

// TargetOnly is the spec without its draft source: the target alone,
// as a server that drafts for no request opens it (the draft model's
// load and memory spared).
func (p Spec) TargetOnly() Spec {
	p.Draft, p.NGram, p.Layers, p.DraftHidden = "", 0, 0, ""
	p.DraftThreads, p.DraftBackend = 0, ""
	return p
}

// SourceName names the draft source as calibrations and runs are keyed.
func (p *Spec) SourceName() string {
	switch {
	case p.Draft != "":
		return "draft:" + filepath.Base(p.Draft)
	case p.NGram > 0:
		return fmt.Sprintf("ngram:%d", p.NGram)
	case p.Layers > 0:
		return fmt.Sprintf("layers:%d", p.Layers)
	case p.DraftHidden != "":
		if _, err := strconv.ParseInt(p.DraftHidden, 10, 64); err == nil {
			return "hidden:#" + p.DraftHidden
		}
		return "hidden:" + filepath.Base(p.DraftHidden)
	}
	return ""
}

// Key names the pair as long jobs belong to it (jobs.Job.Pair): its
// target, its draft source and its devices.
func (p *Spec) Key() string {
	return p.Target + "|" + p.SourceName() + "|" + p.Backend + "|" + p.DraftBackend
}

// Resampling is how deep a hidden-state drafter re-samples after a
// rejection (0: it does not; other sources never do).
func (p *Spec) Resampling() int {
	switch {
	case p.DraftHidden == "" || p.NoResample:
		return 0
	case p.ResampleDepth > 0:
		return p.ResampleDepth
	}
	return hidden.DefaultResampleDepth
}

// Sources counts the draft sources set.
func (p *Spec) Sources() int {
	n := 0
	for _, set := range []bool{p.Draft != "", p.NGram > 0, p.Layers > 0, p.DraftHidden != ""} {
		if set {
			n++
		}
	}
	return n
}

// Pair is an opened target and draft source with their backends.
type Pair struct {
	Target     *model.Model
	Source     drafter.Source // nil when no source was named
	Backend    kernels.Device // the target's
	DraftModel *model.Model   // the draft model, when the source is one
	// DraftBackend is the drafter's device: the target's Backend, or its
	// own (concurrent plans, a draft device of its own).
	DraftBackend kernels.Device
	Hidden       *hidden.Source // the hidden-state drafter, when the source is one
	Concurrent   bool           // the drafter has its own backend and threads
	closers      []func()
}

// Close releases models and backends.
// Drafting is what the pair's re-check drafts with between its target
// passes (a draft model, or the hidden-state source), as its steps do.
func (l *Pair) Drafting() Drafting {
	switch {
	case l.DraftModel != nil:
		return Drafting{Draft: l.DraftModel}
	case l.Hidden != nil:
		return Drafting{Hidden: l.Hidden}
	}
	return Drafting{}
}

func (l *Pair) Close() {
	for i := len(l.closers) - 1; i >= 0; i-- {
		l.closers[i]()
	}
	l.closers = nil
}

// Open loads the pair, checking the vocabularies match. A concurrent
// drafter (duo, egt with AOT; a draft model, the layer-skip drafter on its
// own copy of the target's weights, or the hidden-state drafter) gets its
// own backend and threads; otherwise drafter and target take turns on one
// backend. A drafter on another
// device (DraftBackend) always has its own backend, can always run beside
// the target, and takes no threads from it. The draft source proposes at
// the sampling of each generation the engine runs with it
// (drafter.SetSample).
func Open(p Spec, concurrent bool) (*Pair, error) {
	if p.NGram > drafter.MaxNGram { // refused before a model is read
		return nil, fmt.Errorf("draft n-gram length %d: at most %d", p.NGram, drafter.MaxNGram)
	}
	bi, err := kernels.Lookup(p.Backend)
	if err != nil {
		return nil, err
	}
	if err := bi.Check(); err != nil {
		return nil, fmt.Errorf("backend %s is not available: %w", bi.Name, err)
	}
	dbi, elsewhere := bi, false
	if p.DraftBackend != "" && p.DraftBackend != bi.Name {
		if p.Sources() == 0 {
			return nil, fmt.Errorf("a draft device (%s) was named without a draft source", p.DraftBackend)
		}
		if dbi, err = kernels.Lookup(p.DraftBackend); err != nil {
			return nil, err
		}
		if err := dbi.Check(); err != nil {
			return nil, fmt.Errorf("draft backend %s is not available: %w", dbi.Name, err)
		}
		elsewhere = p.NGram == 0 // n-gram drafting runs on the host wherever it is told to
	}
	if p.Threads <= 0 {
		p.Threads = bi.DefaultThreads()
	}
	// every source but n-gram lookup can draft beside the target on
	// backend threads of its own (AOT and duo for every draft source)
	concurrent = concurrent && (p.Draft != "" || p.Layers > 0 || p.DraftHidden != "") || elsewhere
	tThreads, dThreads := p.Threads, p.Threads
	switch {
	case elsewhere:
		dThreads = p.DraftThreads
		if dThreads <= 0 {
			dThreads = dbi.DefaultThreads()
		}
	case concurrent:
		dThreads = p.DraftThreads
		if dThreads == 0 {
			dThreads = max(1, p.Threads/2)
		}
		tThreads = max(1, p.Threads-dThreads)
	}
	kv, err := kernels.ParseKV(p.KV)
	if err != nil {
		return nil, err
	}
	l := &Pair{Concurrent: concurrent}
	if l.Backend, err = bi.New(tThreads); err != nil {
		return nil, err
	}
	l.closers = append(l.closers, l.Backend.Close)
	target, err := model.LoadWith(p.Target, l.Backend, gguf.Options{NoMmap: p.NoMmap})
	if err != nil {
		l.Close()
		return nil, err
	}
	target.KVType = kv
	l.Target = target
	l.closers = append(l.closers, func() { target.Close() })
	// the drafter's device: the target's, or its own backend
	dbe := l.Backend
	if concurrent {
		own, err := dbi.New(dThreads)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.closers = append(l.closers, own.Close)
		dbe = own
	}
	switch {
	case p.Draft != "":
		dm, err := model.LoadWith(p.Draft, dbe, gguf.Options{NoMmap: p.NoMmap})
		if err != nil {
			l.Close()
			return nil, err
		}
		l.closers = append(l.closers, func() { dm.Close() })
		if err := drafter.CheckVocab(target.Tok, dm.Tok); err != nil {
			l.Close()
			return nil, fmt.Errorf("%s and %s: %w", p.Target, p.Draft, err)
		}
		l.DraftModel = dm
		l.Source = drafter.NewModel(dm, 0, target.CtxLen, p.SourceName())
	case p.NGram > 0:
		l.Source = drafter.NewNGram(p.NGram, target.Vocab)
	case p.Layers > 0:
		if p.Layers >= target.Layers {
			l.Close()
			return nil, fmt.Errorf("draft layers %d must be below the target's %d layers", p.Layers, target.Layers)
		}
		self := target
		if dbe != l.Backend { // a copy of the target on the drafter's device; only its first layers run
			if self, err = model.LoadWith(p.Target, dbe, gguf.Options{NoMmap: p.NoMmap}); err != nil {
				l.Close()
				return nil, err
			}
			l.closers = append(l.closers, func() { self.Close() })
		}
		l.Source = drafter.NewModel(self, p.Layers, target.CtxLen, p.SourceName())
	case p.DraftHidden != "":
		d, err := OpenDrafter(context.Background(), p.DraftHidden, p.DB, target)
		if err != nil {
			l.Close()
			return nil, err
		}
		o := hidden.Options{ResampleDepth: p.ResampleDepth, NoResample: p.NoResample, Name: p.SourceName()}
		if dbe != l.Backend {
			o.Device = dbe
		}
		hs, err := hidden.NewSource(d, target, o)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.Source, l.Hidden = hs, hs
	}
	l.Concurrent = concurrent
	l.DraftBackend = dbe
	return l, nil
}
