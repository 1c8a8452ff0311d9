package spec

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
)

// Batch runs many generations of one target together (continuous
// batching): requests join and leave between passes, and each pass is ONE
// multi-sequence target pass (model.Pass) holding every running request's
// verification rows (its step: the root and its drafted tree) and a chunk
// of each new request's prompt. A request's prompt is prefilled in chunks
// of at most Prefill rows, one a pass, so a long prompt delays the others
// by no more than one pass's share; its steps start the pass after.
//
// Every request runs the steps Engine.Run runs alone (prepare: draft and
// build the verification rows; finish: the lossless rules, compaction,
// commit, emission), with a draft source of its own (drafter.Fork), so
// its output is what it would be alone: greedy output token for token,
// sampled output distributed as the target's. Before each pass a Policy
// chooses each request's draft budget, from none up to its plan's (Fixed:
// always the plan's; Goodput: what the load pays for), and the step runs
// its plan shrunk to it (Plan.Shrink).
//
// Drafting runs request by request on the batch's goroutine before the
// pass. A request whose plan drafts while the target verifies (duo, aot,
// tail), with a source that can (Request.Concurrent), drafts ahead during
// the shared pass as it would during its own; the requests' drafting
// ahead takes turns on their sources' device (one request's at a time, so
// a device is called from one goroutine at a time, as the Device contract
// asks), and every request's drafting ahead is waited for before any step
// is finished. Which tokens a request emits never depends on it.
//
// Use: NewBatch, then Serve on a goroutine of its own (or Step, a pass at
// a time, as tests do); Submit each request, and read its tokens through
// its Config.OnToken and its end through the Handle. Callbacks run on the
// batch's goroutine, between passes: they must hand their work on and
// return (a callback that blocks on a slow client stalls every request).
// A request leaves when it ends (its MaxTokens, EOS, its context full), or
// when its context is done (a client gone, a stop string found: the
// caller cancels it), before the next pass; its cache and its source are
// freed then, at once.
type Batch struct {
	target *model.Model
	o      BatchOptions
	pass   *model.Pass
	// draftPasses run the requests' draft models' reading of the prompts
	// a pass finished, one a draft model (beginDrafters)
	draftPasses map[*model.Model]*model.Pass
	ahead       sync.Mutex    // drafting ahead: one request's at a time
	wake        chan struct{} // a request came or went

	mu       sync.Mutex // waiting and the counts Stats reads
	waiting  []*member
	nRunning int
	passes   int
	emitted  int

	running []*member // the stepping goroutine's own
	seqs    []model.Seq
	loads   []Load
	budgets []int
	faults  faults // test-only: the members' verification rules (verify)
}

// BatchOptions configures a Batch.
type BatchOptions struct {
	// Policy chooses each request's draft budget before each pass (nil:
	// Fixed, every request its plan's).
	Policy Policy
	// Prior is the acceptance a request's steps are priced with before
	// they show their own (nil: DefaultPrior); the pair's calibrated
	// acceptance, at(depth, rank), where there is one.
	Prior func(d, r int) float64
	// MaxSeqs bounds the requests running at once (0: DefaultMaxSeqs);
	// more wait, in the order they came.
	MaxSeqs int
	// Prefill bounds the prompt rows of one request a pass takes (0:
	// DefaultPrefill).
	Prefill int
	// Budget, when set, admits the requests' KV caches: a request whose
	// cache exceeds the whole budget is refused by Submit, one that does
	// not fit what the running requests leave waits for them.
	Budget *model.CacheBudget
	// OnPass, when set, receives each pass's record after the pass (on the
	// batch's goroutine).
	OnPass func(PassStats)
}

const (
	// DefaultMaxSeqs is the requests a Batch runs at once by default.
	DefaultMaxSeqs = 8
	// DefaultPrefill is the prompt rows of one request a pass takes by
	// default: enough that prefill runs at batch speed, few enough that a
	// pass holding them costs the others little.
	DefaultPrefill = 256
)

// PassStats is one pass of a Batch.
type PassStats struct {
	Index       int
	Seqs        int // sequences in the pass
	Decoding    int // of them, requests' steps (the others prefill chunks)
	Rows        int // rows of the pass
	PrefillRows int // of them, prompt rows
	Drafted     int // draft nodes verified
	Accepted    int // draft tokens accepted
	Emitted     int // tokens emitted
	Waiting     int // requests waiting after the pass's admissions
	Context     int // the requests' steps' mean cached tokens before it (Load.Context)
	Time        time.Duration
	// Step is the whole step's time: choosing the budgets, drafting,
	// the pass (Time) and finishing every request's step
	Step time.Duration
	// Prefilled is what of Step went to the requests whose prompt the
	// pass finished (their draft sources started on it): none of the
	// steps' own time
	Prefilled time.Duration
}

// BatchStats is a Batch's state now.
type BatchStats struct {
	Waiting, Running int
	Passes           int
	Emitted          int // tokens emitted since the batch began
}

// Request is one generation submitted to a Batch.
type Request struct {
	Prompt []int
	// Config is the generation's plan, sampling, token budget, context
	// cap and callbacks, as Engine.Run takes them (OnToken and OnStep run
	// on the batch's goroutine).
	Config Config
	// Source is the request's own draft source (drafter.Fork of the
	// pair's), nil for plain decoding. Once Submit accepts the request,
	// the batch owns it and frees it (drafter.Free) when the request
	// leaves.
	Source drafter.Source
	// Concurrent says the source may draft while the target verifies (on
	// a device or threads of its own), as Engine.Concurrent.
	Concurrent bool
	// OnAdmit, when set, is called once the request leaves the queue for
	// the running set (its cache taken from the budget), before its
	// prompt's first chunk: a server tells a waiting request from a
	// running one by it. It runs on the batch's goroutine, like OnToken.
	OnAdmit func()
	// From, when set, is Prompt prefilled once (Engine.Prefill on this
	// batch's target and a source of this request's kind): the request
	// starts from a copy of its cache instead of prefilling the prompt, as
	// RunFrom does, and decodes from its first pass. The caller keeps it
	// and frees it once its requests are done.
	From *Prefix
}

// Handle is a submitted request: Done is closed when it has left the
// batch, and Result then gives what it generated and why it ended (nil:
// its MaxTokens, EOS or a full context; its context's error when it was
// cancelled; any other error that stopped it).
type Handle struct {
	done chan struct{}
	res  *Result
	err  error
	stop func() bool // the context's wake-up, unregistered when it leaves
}

// Done is closed when the request has left the batch.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Result is the generation (whatever it emitted before it ended) and the
// error that ended it; valid once Done is closed.
func (h *Handle) Result() (*Result, error) { return h.res, h.err }

// Wait waits for the request to leave and returns its Result.
func (h *Handle) Wait() (*Result, error) {
	<-h.done
	return h.res, h.err
}

// member is a request in the batch.
type member struct {
	ctx      context.Context
	h        *Handle
	r        *run
	prompt   []int
	capacity int
	filled   int       // prompt rows in the cache (of len(prompt)-1)
	hidden   []float32 // the prompt's hidden states, for a source that reads them
	decoding bool
	left     bool
	chunk    int // prompt rows in this pass
	p        *pending
	onAdmit  func()
	from     *Prefix
	admitted time.Time
	decoded  time.Time
}

// NewBatch makes a batch of generations of target.
func NewBatch(target *model.Model, o BatchOptions) *Batch {
	if o.Policy == nil {
		o.Policy = Fixed{}
	}
	if o.Prior == nil {
		o.Prior = DefaultPrior
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = DefaultMaxSeqs
	}
	o.MaxSeqs = min(o.MaxSeqs, model.MaxRows)
	if o.Prefill <= 0 {
		o.Prefill = DefaultPrefill
	}
	return &Batch{target: target, o: o, pass: target.NewPass(), wake: make(chan struct{}, 1)}
}

// signal wakes Serve.
func (b *Batch) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Submit queues a request. It checks it before anything is allocated for
// it and refuses, naming the bound, a plan or prompt Engine.Run would
// refuse and a cache larger than the whole budget; the caller then keeps
// the source. Accepted, the request waits for room and runs from the next
// pass; ctx is its lifetime: once done, the request leaves before the
// next pass.
func (b *Batch) Submit(ctx context.Context, req Request) (*Handle, error) {
	e := &Engine{Target: b.target, Source: req.Source, Concurrent: req.Concurrent, faults: b.faults}
	r, err := e.newRun(req.Prompt, req.Config)
	if err != nil {
		return nil, err
	}
	capacity, err := r.capacity(req.Prompt)
	if err != nil {
		return nil, err
	}
	if b.o.Budget != nil {
		if err := b.o.Budget.Fits(b.target, capacity); err != nil {
			return nil, err
		}
	}
	if err := b.target.CheckCache(capacity); err != nil {
		return nil, err
	}
	if p := req.From; p != nil {
		if err := p.fits(e, req.Prompt); err != nil {
			return nil, err
		}
	}
	r.aheadMu = &b.ahead
	m := &member{ctx: ctx, h: &Handle{done: make(chan struct{})}, r: r, prompt: slices.Clone(req.Prompt), capacity: capacity, onAdmit: req.OnAdmit, from: req.From}
	m.h.stop = context.AfterFunc(ctx, b.signal) // a client gone wakes Serve
	b.mu.Lock()
	b.waiting = append(b.waiting, m)
	b.mu.Unlock()
	b.signal()
	return m.h, nil
}

// Stats is the batch's state now (from any goroutine).
func (b *Batch) Stats() BatchStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BatchStats{Waiting: len(b.waiting), Running: b.nRunning, Passes: b.passes, Emitted: b.emitted}
}

// Serve runs passes while requests run and waits for requests otherwise,
// until ctx is done (or a pass fails: every request then ends with its
// error, which Serve returns). The requests left when it returns end with
// its error.
func (b *Batch) Serve(ctx context.Context) error {
	for {
		n, err := b.Step(ctx)
		if err == nil && n == 0 {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-b.wake:
				continue
			}
		}
		if err != nil {
			b.Close(err)
			return err
		}
	}
}

// Close ends every request, waiting or running, with err, frees their
// caches and sources and the pass's scratch. It is called from the
// goroutine that runs Step (Serve calls it when it returns), or once that
// has returned; the batch may be used again after.
func (b *Batch) Close(err error) {
	for _, m := range b.running {
		if !m.left {
			b.leave(m, err)
		}
	}
	b.running = b.running[:0]
	b.mu.Lock()
	waiting := b.waiting
	b.waiting = nil
	b.nRunning = 0
	b.mu.Unlock()
	for _, m := range waiting {
		b.leave(m, err)
	}
	b.pass.Free()
	for _, p := range b.draftPasses {
		p.Free()
	}
}

// leave ends a request: its drafting ahead waited for, its cache and
// source freed, its handle told.
func (b *Batch) leave(m *member, err error) {
	r := m.r
	r.stopAOT()
	if r.cache != nil {
		r.cache.Free()
		r.cache = nil
	}
	if src := r.e.Source; src != nil {
		drafter.Free(src)
	}
	if m.decoding {
		r.res.Decode = time.Since(m.decoded)
	}
	m.h.res, m.h.err = r.res, err
	m.h.stop()
	m.left = true
	close(m.h.done)
	b.signal() // its room may admit a waiting request
}

// admit moves waiting requests into the running set while there is room
// for them (MaxSeqs, and the cache budget), in the order they came;
// requests whose context is done leave.
func (b *Batch) admit() {
	for {
		b.mu.Lock()
		if len(b.waiting) == 0 {
			b.mu.Unlock()
			return
		}
		m := b.waiting[0]
		if err := m.ctx.Err(); err != nil {
			b.waiting = b.waiting[1:]
			b.mu.Unlock()
			b.leave(m, err)
			continue
		}
		if len(b.running) >= b.o.MaxSeqs {
			b.mu.Unlock()
			return
		}
		var c *model.Cache
		var err error
		if b.o.Budget != nil {
			c, err = b.o.Budget.NewCache(b.target, m.capacity)
			if errors.Is(err, model.ErrBudgetFull) && len(b.running) > 0 {
				b.mu.Unlock()
				return // it waits for the running requests to leave room
			}
		} else {
			c = b.target.NewCache(m.capacity)
		}
		b.waiting = b.waiting[1:]
		b.mu.Unlock()
		if err != nil {
			b.leave(m, err)
			continue
		}
		m.r.open(c)
		m.admitted = time.Now()
		if m.onAdmit != nil {
			m.onAdmit()
		}
		if m.from != nil {
			if err := b.loadPrefix(m); err != nil {
				b.leave(m, err)
				continue
			}
		}
		if m.filled == len(m.prompt)-1 {
			if err := b.startDecoding(m); err != nil {
				b.leave(m, err)
				continue
			}
		}
		b.running = append(b.running, m)
		b.mu.Lock()
		b.nRunning = len(b.running)
		b.mu.Unlock()
	}
}

// startDecoding starts a request's source once its prompt is in the cache.
func (b *Batch) startDecoding(m *member) error {
	r := m.r
	if err := r.afterPrefill(m.ctx, m.prompt, m.capacity, m.hidden, len(m.prompt)-1); err != nil {
		return err
	}
	m.hidden = nil
	r.res.Prefill = time.Since(m.admitted)
	m.decoding, m.decoded = true, time.Now()
	return nil
}

// drop removes the members that have left from the running set.
func (b *Batch) drop() {
	b.running = slices.DeleteFunc(b.running, func(m *member) bool { return m.left })
	b.mu.Lock()
	b.nRunning = len(b.running)
	b.mu.Unlock()
}

// Step runs one pass: it admits waiting requests, lets the ones whose
// context is done leave, chooses the running requests' budgets, prepares
// their steps and their prompts' next chunks, runs them in one target
// pass and finishes every step. It returns how many requests the pass
// held (0: none ran, nothing to do). A failed pass ends every request in
// it with its error, which Step returns.
func (b *Batch) Step(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// requests whose client is gone leave first, making room for the
	// waiting ones
	for _, m := range b.running {
		if err := m.ctx.Err(); err != nil {
			b.leave(m, err)
		}
	}
	b.drop()
	b.admit()
	defer b.drop()
	if len(b.running) == 0 {
		return 0, nil
	}
	if err := b.target.CheckFile(); err != nil {
		for _, m := range b.running {
			if !m.left {
				b.leave(m, err)
			}
		}
		return 0, err
	}
	// the budgets: the policy's, for the steps; the prompts' chunks beside
	begun := time.Now()
	b.loads, b.budgets = b.loads[:0], b.budgets[:0]
	var steps []*member
	prefill := 0
	for _, m := range b.running {
		switch {
		case m.left:
		case m.decoding:
			r := m.r
			nodes, depth := r.room()
			n := min(r.nodes, nodes)
			if depth == 0 {
				n = 0
			}
			b.loads = append(b.loads, Load{Plan: r.full.Plan, Nodes: n, Accept: func(d, k int) float64 { return r.depthAcc.at(b.o.Prior, d, k) }, Context: r.cache.Len()})
			steps = append(steps, m)
		default:
			m.chunk = min(b.o.Prefill, len(m.prompt)-1-m.filled)
			prefill += m.chunk
		}
	}
	b.budgets = append(b.budgets, make([]int, len(b.loads))...)
	b.o.Policy.Budgets(prefill, b.loads, b.budgets)
	b.fit(steps, prefill)
	st := PassStats{Index: b.passes, Context: meanContext(b.loads)}
	b.seqs = b.seqs[:0]
	var in []*member
	for i, m := range steps {
		budget := min(max(b.budgets[i], 0), b.loads[i].Nodes)
		if budget >= b.loads[i].Nodes {
			budget = -1 // the plan as given, as a run alone drafts it
		}
		p, err := m.r.prepare(m.ctx, budget)
		if err != nil {
			m.r.cfg = m.r.full
			b.leave(m, err)
			continue
		}
		m.p = p
		b.seqs = append(b.seqs, model.Seq{Cache: m.r.cache, Batch: p.batch, Result: &m.r.fwd})
		in = append(in, m)
		st.Decoding++
		st.Drafted += p.st.Width - 1
	}
	for _, m := range b.running {
		if m.left || m.decoding || m.chunk == 0 {
			continue
		}
		b.seqs = append(b.seqs, model.Seq{Cache: m.r.cache, Batch: m.r.prefillBatch(m.prompt, m.filled, m.filled+m.chunk), Result: &m.r.fwd})
		in = append(in, m)
		st.PrefillRows += m.chunk
	}
	if len(in) == 0 {
		// every step failed and left: their room may admit waiting requests
		if b.Stats().Waiting > 0 {
			b.drop()
			return b.Step(ctx)
		}
		return 0, nil
	}
	for _, m := range in {
		if m.decoding {
			m.r.startAOT(m.ctx, m.p.tr)
		}
	}
	st.Seqs = len(in)
	for _, sq := range b.seqs {
		st.Rows += len(sq.Batch.Tokens)
	}
	t0 := time.Now()
	err := b.pass.Forward(ctx, b.seqs)
	st.Time = time.Since(t0)
	clear(b.seqs)
	// every request's drafting ahead is done before any step finishes, so
	// no source's device is called from two goroutines at once
	for _, m := range in {
		if h := m.r.aot; h != nil {
			<-h.done
		}
	}
	if err != nil {
		for _, m := range in {
			m.r.cfg = m.r.full
			b.leave(m, err)
		}
		return len(in), err
	}
	t := time.Now()
	b.beginDrafters(ctx, in)
	st.Prefilled += time.Since(t)
	for _, m := range in {
		var err error
		done := false
		if m.decoding {
			done, err = b.finishStep(m, st.Time)
			st.Accepted += m.p.st.Accepted
			st.Emitted += m.p.st.Emitted
			m.p = nil
		} else {
			t := time.Now()
			err = b.prefilled(m)
			st.Prefilled += time.Since(t)
		}
		if err != nil || done {
			b.leave(m, err)
		}
	}
	b.mu.Lock()
	b.passes++
	b.emitted += st.Emitted
	st.Waiting = len(b.waiting)
	b.mu.Unlock()
	st.Step = time.Since(begun)
	if o, ok := b.o.Policy.(PassObserver); ok {
		o.Observe(st)
	}
	if b.o.OnPass != nil {
		b.o.OnPass(st)
	}
	return len(in), nil
}

// beginDrafters reads the prompts this pass finished into their requests'
// draft models, one pass of several sequences a draft model
// (drafter.BeginAll), before each request's own start (startDecoding)
// finds its drafter begun: one Begin after another had held every running
// request's next pass (a wave of seven prompts on the bench pair: 6.6-8.1
// ms). Whatever fails here is left to each request's own Begin, which
// then runs it alone and reports it.
func (b *Batch) beginDrafters(ctx context.Context, in []*member) {
	type group struct {
		ds   []*drafter.Model
		seqs [][]int
	}
	var groups map[drafterKey]*group
	for _, m := range in {
		if m.decoding || m.filled+m.chunk < len(m.prompt)-1 {
			continue
		}
		d, ok := m.r.e.Source.(*drafter.Model)
		if !ok || m.r.readySource(m.capacity) != nil {
			continue
		}
		k := drafterKey{d.M, d.Layers}
		if groups == nil {
			groups = map[drafterKey]*group{}
		}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
		}
		g.ds, g.seqs = append(g.ds, d), append(g.seqs, m.prompt)
	}
	for k, g := range groups {
		if len(g.ds) < 2 {
			continue // alone, its own Begin is the same pass
		}
		p := b.draftPasses[k.m]
		if p == nil {
			p = k.m.NewPass()
			if b.draftPasses == nil {
				b.draftPasses = map[*model.Model]*model.Pass{}
			}
			b.draftPasses[k.m] = p
		}
		_ = drafter.BeginAll(ctx, p, g.ds, g.seqs)
	}
}

// drafterKey is what drafters share to begin in one pass: a model and
// the blocks they run of it.
type drafterKey struct {
	m      *model.Model
	layers int
}

// fit holds the pass to the rows one pass takes: prompt chunks first
// (they can wait a pass), then the largest budgets.
func (b *Batch) fit(steps []*member, prefill int) {
	rows := prefill
	for i := range steps {
		rows += 1 + max(b.budgets[i], 0)
	}
	for i := len(b.running) - 1; i >= 0 && rows > model.MaxRows; i-- {
		m := b.running[i]
		if m.decoding || m.chunk == 0 {
			continue
		}
		cut := min(m.chunk, rows-model.MaxRows)
		m.chunk -= cut
		rows -= cut
	}
	for rows > model.MaxRows {
		big := 0
		for i := range b.budgets {
			if b.budgets[i] > b.budgets[big] {
				big = i
			}
		}
		b.budgets[big]--
		rows--
	}
}

// finishStep finishes a request's step after the pass.
func (b *Batch) finishStep(m *member, pass time.Duration) (bool, error) {
	r := m.r
	t := time.Now()
	if err := b.target.CheckLogits(r.fwd.Logits); err != nil {
		r.cfg = r.full
		return false, err
	}
	m.p.st.Verify = pass + time.Since(t)
	return r.finish(m.ctx, m.p)
}

// loadPrefix copies the request's prefilled prompt into its cache and
// takes the prefill's hidden states, as the last prompt chunk's pass
// would have given them.
func (b *Batch) loadPrefix(m *member) error {
	hidden, err := m.r.loadPrefix(m.from)
	if err != nil {
		return err
	}
	m.filled = len(m.prompt) - 1
	if m.r.hs != nil {
		m.hidden = append(m.hidden[:0], hidden...)
	}
	return nil
}

// prefilled takes a prompt chunk's outputs; after the last chunk the
// request decodes from the next pass.
func (b *Batch) prefilled(m *member) error {
	r := m.r
	m.filled += m.chunk
	if r.hs != nil {
		m.hidden = append(m.hidden, r.fwd.Hidden...)
	}
	if m.filled < len(m.prompt)-1 {
		return nil
	}
	if r.needHidden {
		d := b.target.Dim
		r.hidden = append(r.hidden[:0], r.fwd.Hidden[len(r.fwd.Hidden)-d:]...)
	}
	return b.startDecoding(m)
}
