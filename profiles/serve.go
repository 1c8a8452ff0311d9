package profiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/hardware"
	"arborist/profiles/pairs"
	"arborist/profiles/serving"
)

// Serving a config.yaml: the core opens the config's pair once (OpenServer)
// and decodes the requests it is given (Server.Complete) together, by
// continuous batching (spec.Batch): requests join and leave between passes,
// every running request's step is a sequence of one shared target pass,
// each drafts with its own instance of the pair's draft source
// (drafter.Fork), and a policy sizes each request's draft to the load
// before every pass. The core owns the prompt (text, token ids, or chat
// messages rendered with the model's chat template), the sampling, the
// budget, stop sequences, the admission of requests (how many run, how
// many wait, the bytes and tokens they hold) and the figures. A face puts
// a protocol around it: app/serve answers OpenAI-compatible HTTP requests
// with it. The core knows no protocol: a request it refuses is a
// serving.RequestError naming the field, or the bound, and why.

// ServeOptions bound and complete what a Server serves.
type ServeOptions struct {
	// Threads are the target's threads where the config names none.
	Threads int
	// AllowChanged serves a config whose model files' SHA-256 differ
	// from the ones it recorded.
	AllowChanged bool
	// ChatTemplate is a Jinja chat template used instead of the model's
	// own (tokenizer.chat_template), e.g. for a model that has none.
	ChatTemplate string
	// MaxTokens is the most tokens a request may ask for (default: the
	// context); DefaultTokens what a request that names none gets
	// (default 256, at most the room its prompt leaves).
	MaxTokens, DefaultTokens int
	// MaxSeqs is how many requests decode at once, in one batch (default
	// spec.DefaultMaxSeqs; at most serving.MaxSeqs and what the KV budget
	// holds of the smallest request).
	MaxSeqs int
	// MaxQueue is how many requests may wait for room behind the running
	// ones (default 64); more are refused as busy.
	MaxQueue int
	// Policy sizes the running requests' drafts (config.PolicyAdaptive,
	// PolicyPlan, PolicyPlain). Empty or adaptive: adaptive where the
	// target's latency curve is stored on this machine (arborist
	// profile), else the plan at its full size, the policy's description
	// saying why (Server.Policy).
	Policy string
	// KVBudget is the bytes of KV cache the running requests share
	// (default: half the memory available once the pair is open); a
	// request whose cache does not fit it is refused, one that does not
	// fit what the running ones leave waits. More than the machine's
	// memory is refused.
	KVBudget uint64
	// MaxTokensInFlight bounds the prompt tokens and max_tokens reserved
	// by the running and waiting requests together (default: as many
	// positions as the KV budget holds, times (MaxSeqs + MaxQueue) /
	// MaxSeqs, and at least the context); more are refused as busy.
	MaxTokensInFlight int
	// MaxPromptBytes bounds the bytes of the prompts being rendered and
	// tokenised at once, over all requests (default 8 MiB): a request
	// waits for the others' bytes; one larger than the whole bound is
	// refused.
	MaxPromptBytes int64
	// OnPass, when set, is called after each pass of the batch, on its
	// goroutine, with the requests the pass held; the next pass waits for
	// it (a test holds the batch in a known state with it).
	OnPass func(seqs int)

	// latency, when set (a test's), is the pass latency the adaptive
	// policy prices with instead of the stored curve.
	latency func(rows int) time.Duration
}

func (o *ServeOptions) defaults(ctxLen int) {
	if o.MaxTokens <= 0 || o.MaxTokens > ctxLen {
		o.MaxTokens = ctxLen
	}
	if o.DefaultTokens <= 0 {
		o.DefaultTokens = 256
	}
	o.DefaultTokens = min(o.DefaultTokens, o.MaxTokens)
	if o.MaxQueue <= 0 {
		o.MaxQueue = 64
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = spec.DefaultMaxSeqs
	}
	if o.MaxPromptBytes <= 0 {
		o.MaxPromptBytes = 8 << 20
	}
}

// Server decodes requests with a config.yaml's plan and sampling on
// Arborist's own engine: the pair is opened once, and the requests decode
// together, each with the plan through the engine Run uses, its step one
// sequence of every shared pass (the others wait for room, in order of
// arrival).
type Server struct {
	opt     ServeOptions
	pair    *pairs.Pair
	eng     *spec.Engine
	base    spec.Config // the plan's engine configuration; sampling and budget are set per request
	sample  sample.Params
	plan    spec.Plan
	model   string
	ctxLen  int
	tmpl    *chatTemplate
	tmplErr error // why chat is refused (no template, or one that does not compile)
	created time.Time
	// tokBytes is the most bytes one token of the vocabulary stands for:
	// a text of n bytes is at least n/tokBytes tokens, so a prompt the
	// context cannot hold is refused before it is tokenised.
	tokBytes int

	batch     *spec.Batch
	emitted   []*serveReq // the requests the running pass gave tokens (the batch's goroutine alone)
	budget    *model.CacheBudget
	policy    string // the policy as it runs, described
	maxTokens int    // MaxTokensInFlight, resolved
	stop      context.CancelFunc
	served    chan struct{} // closed when the batch's loop has returned
	prep      chan struct{} // held while a prompt is rendered and tokenised
	gate      *byteGate     // the bytes of the prompts being rendered and tokenised
	closing   chan struct{} // closed when draining begins
	once      sync.Once
	nextID    atomic.Int64

	mu        sync.Mutex
	waiting   map[*serveReq]struct{} // submitted, not yet admitted
	inflight  int                    // submitted, not yet ended
	reserved  int                    // prompt tokens and max_tokens of those
	busySince time.Time              // when inflight last went from 0 to 1
	busy      time.Duration          // time with a request in flight before that
	failed    error                  // the batch's loop ended with it
	stats     ServeStats
	ttft      window
	tpot      window
}

// ServeStats are a server's figures since it started: requests, the
// batch's state and passes, the decoding totals of the requests it
// completed, and running quantiles of the latencies clients see.
type ServeStats struct {
	Model     string        `json:"model"`
	Plan      string        `json:"plan"`
	Policy    string        `json:"policy"`
	Uptime    time.Duration `json:"uptime_ns"`
	Requests  int           `json:"requests"`     // answered, successfully or not
	Completed int           `json:"completed"`    // decoded to the end
	Failed    int           `json:"failed"`       // refused or failed
	Gone      int           `json:"clients_gone"` // requests whose client left before their end
	Queued    int           `json:"queued"`       // waiting for room now
	Running   int           `json:"running"`      // decoding now, in the batch
	Busy      bool          `json:"busy"`         // a request is decoding now
	MaxSeqs   int           `json:"max_seqs"`
	MaxQueue  int           `json:"max_queue"`
	// TokensInFlight are the prompt tokens and max_tokens reserved by the
	// running and waiting requests, at most MaxTokensInFlight.
	TokensInFlight    int `json:"tokens_in_flight"`
	MaxTokensInFlight int `json:"max_tokens_in_flight"`
	// KVBudget is the bytes of KV cache the running requests share,
	// KVUsed what their caches hold now, and KVSpare what the caches of
	// requests that ended hold, kept within the budget for the next ones.
	KVBudget uint64 `json:"kv_budget_bytes"`
	KVUsed   uint64 `json:"kv_used_bytes"`
	KVSpare  uint64 `json:"kv_spare_bytes"`
	// BodyBytes are the request bodies a face holds now (set by the face).
	BodyBytes int64 `json:"body_bytes_in_flight"`
	// PromptBytes are the bytes of the prompts being rendered and
	// tokenised now, at most MaxPromptBytes; PromptWaiting the requests
	// waiting for room under that bound.
	PromptBytes    int64 `json:"prompt_bytes_in_flight"`
	MaxPromptBytes int64 `json:"max_prompt_bytes"`
	PromptWaiting  int   `json:"prompt_waiting"`
	// Passes are the batch's target passes, and Emitted the tokens they
	// emitted (cancelled requests' included).
	Passes  int `json:"passes"`
	Emitted int `json:"emitted_tokens"`
	Prompt  int `json:"prompt_tokens"`
	// Totals are the completed requests' decoding; TPS is their tokens a
	// second of their own decoding (what one client sees), Throughput
	// the tokens every request emitted a second the server had requests
	// in flight (what the machine delivers).
	Totals     Totals  `json:"totals"`
	TPS        float64 `json:"tokens_per_s"`
	Throughput float64 `json:"throughput_tokens_per_s"`
	AAL        float64 `json:"aal"`
	Accept     float64 `json:"acceptance"`
	// TTFT is the time from a request's arrival to its first token
	// (waiting and prefill included), TPOT the time per output token
	// after the first, over the last requests (window).
	TTFT latencyQuantiles `json:"time_to_first_token_s"`
	TPOT latencyQuantiles `json:"time_per_output_token_s"`
	// Started is when the server opened (request ids and model objects
	// carry it).
	Started time.Time `json:"-"`
}

// Completion is a decoded request.
type Completion struct {
	Seq    int64 // the request's number (serving.Request.OnStart)
	Text   string
	Prompt int    // prompt tokens
	Tokens int    // tokens decoded up to the end of Text
	Finish string // "stop": a stop sequence or the end of text; "length": the budget or the context ran out
	// Totals are the decoding's figures (every token the engine decoded).
	Totals Totals
}

func refuse(param, code, format string, args ...any) *serving.RequestError {
	return &serving.RequestError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

func busy(code, format string, args ...any) *serving.RequestError {
	return &serving.RequestError{Code: code, Message: fmt.Sprintf(format, args...), Busy: true}
}

var (
	// errStopText cancels a decoding that reached a stop sequence.
	errStopText = errors.New("stop sequence reached")
	// errDraining cancels a request still waiting when draining begins.
	errDraining = errors.New("the server is shutting down")
)

// OpenServer opens the config's pair, readies its plan for serving and
// starts the batch its requests decode in. Model hashes are checked (and
// cached) through this Bench's database, where the target's latency curve
// and the pair's calibration are read for the adaptive policy. Options
// the machine cannot hold (more requests at once than the KV budget holds,
// a KV budget beyond its memory) are refused before anything is
// allocated for requests.
func (b *Bench) OpenServer(ctx context.Context, c *config.Config, opt ServeOptions) (*Server, error) {
	if opt.MaxSeqs != 0 {
		if err := serving.CheckMaxSeqs("--max-seqs", opt.MaxSeqs); err != nil {
			return nil, err
		}
	}
	if opt.Policy == "" {
		opt.Policy = c.Serving.Policy // config.yaml's serving.policy; adaptive where it names none
	}
	if opt.Policy != "" {
		if err := serving.CheckPolicy("--policy", opt.Policy); err != nil {
			return nil, err
		}
	}
	if total := hardware.MemTotal(); opt.KVBudget > 0 && total > 0 && opt.KVBudget > total {
		return nil, fmt.Errorf("--kv-budget: %d MiB of KV cache is more than this machine's %d MiB of memory", opt.KVBudget>>20, total>>20)
	}
	r, err := replayConfig(ctx, c, b.path, opt.AllowChanged)
	if err != nil {
		return nil, err
	}
	ps := r.pairWith(PairSpec{Threads: opt.Threads})
	plan := r.Plan.Trim()
	if opt.Policy == config.PolicyPlain {
		// no request drafts: none gets a draft source of its own, whose
		// prefill of every prompt (1 ms a request on the bench pair, eight
		// at once in a wave of eight) would hold the others' next pass,
		// and the server opens no draft model
		plan, ps = spec.PlainPlan(), ps.TargetOnly()
	}
	if plan.NeedsSource() && ps.Sources() == 0 {
		return nil, fmt.Errorf("strategy %s needs a draft source", plan.Strategy)
	}
	cfg, err := runConfig(plan, r.Sample, 1)
	if err != nil {
		return nil, err
	}
	pair, err := b.openPair(ps, plan.Concurrent())
	if err != nil {
		return nil, err
	}
	s, err := b.newServer(ctx, c, ps, pair, plan, cfg, r.Sample, opt)
	if err != nil {
		pair.Close()
		return nil, err
	}
	return s, nil
}

// newServer readies a server on an open pair and starts its batch.
func (b *Bench) newServer(ctx context.Context, c *config.Config, ps PairSpec, pair *pairs.Pair, plan spec.Plan, cfg spec.Config, smp sample.Params, opt ServeOptions) (*Server, error) {
	eng, err := b.planEngine(ctx, ps, pair, plan, &cfg)
	if err != nil {
		return nil, err
	}
	if eng.Source != nil {
		// every request drafts with an instance of its own
		src, err := drafter.Fork(eng.Source)
		if err != nil {
			return nil, fmt.Errorf("serving %s: %w", plan, err)
		}
		drafter.Free(src)
	}
	s := &Server{opt: opt, pair: pair, eng: eng, base: cfg, sample: smp, plan: plan, created: time.Now(),
		closing: make(chan struct{}), served: make(chan struct{}), waiting: map[*serveReq]struct{}{}}
	s.ctxLen = pair.Target.CtxLen
	if n := c.Models.Target.MaxSeqLen; n > 0 && n < s.ctxLen {
		s.ctxLen, s.base.Ctx = n, n
	}
	s.opt.defaults(s.ctxLen)
	s.model = strings.TrimSuffix(filepath.Base(ps.Target), filepath.Ext(ps.Target))
	tok := pair.Target.Tok
	s.tokBytes = 4 // an unknown character is one token of up to 4 bytes
	for _, t := range tok.Tokens {
		s.tokBytes = max(s.tokBytes, len(t))
	}
	s.prep = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/4))
	s.gate = newByteGate(s.opt.MaxPromptBytes)
	src := opt.ChatTemplate
	if src == "" {
		src, _ = pair.Target.File.String("tokenizer.chat_template")
	}
	switch {
	case src == "":
		s.tmplErr = fmt.Errorf("model %s has no chat template (tokenizer.chat_template in its GGUF metadata): use /v1/completions, or start the server with a chat template file", s.model)
	default:
		if s.tmpl, err = compileChatTemplate(src); err != nil {
			s.tmpl, s.tmplErr = nil, fmt.Errorf("the chat template of %s does not compile: %v", s.model, err)
		}
	}
	if s.budget, err = s.kvBudget(); err != nil {
		return nil, err
	}
	pol, prior, err := b.servePolicy(ctx, ps, pair, plan, &s.opt)
	if err != nil {
		return nil, err
	}
	s.policy = pol.name
	bo := spec.BatchOptions{Policy: pol.policy, Prior: prior, MaxSeqs: s.opt.MaxSeqs, Budget: s.budget}
	bo.OnPass = func(p spec.PassStats) {
		s.deliver() // before a test's hold on the batch: the pass's text is out
		if on := s.opt.OnPass; on != nil {
			on(p.Seqs)
		}
	}
	s.batch = spec.NewBatch(pair.Target, bo)
	s.stats.Model, s.stats.Plan, s.stats.Policy, s.stats.Started = s.model, plan.String(), s.policy, s.created
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = cancel
	go func() {
		defer close(s.served)
		err := s.batch.Serve(sctx)
		if sctx.Err() == nil {
			s.mu.Lock()
			s.failed = err
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// kvBudget is the KV cache the running requests share: the option's, or
// half of what the machine has available with the pair open; it must hold
// MaxSeqs of the smallest request (a one-token prompt and one token, with
// the plan's tree). It resolves MaxTokensInFlight too.
func (s *Server) kvBudget() (*model.CacheBudget, error) {
	m := s.pair.Target
	perPos := max(m.KVBytesAs(1, m.KVType), 1)
	limit := s.opt.KVBudget
	if limit == 0 {
		if avail := hardware.MemAvailable(); avail > 0 {
			limit = avail / 2
		} else { // unknown: every running request may take the whole context
			limit = uint64(s.opt.MaxSeqs) * m.KVBytesAs(s.ctxLen, m.KVType)
		}
	}
	smallest := min(s.ctxLen, 3+s.plan.Nodes())
	one := m.KVBytesAs(smallest, m.KVType)
	if fit := limit / max(one, 1); uint64(s.opt.MaxSeqs) > fit {
		return nil, fmt.Errorf("--max-seqs %d: the KV budget of %d MiB holds at most %d requests at once, each at least %d positions (%d KiB) of %s's %s cache",
			s.opt.MaxSeqs, limit>>20, fit, smallest, one>>10, s.model, m.KVType)
	}
	if s.opt.MaxTokensInFlight <= 0 {
		positions := limit / perPos
		n := positions / uint64(s.opt.MaxSeqs) * uint64(s.opt.MaxSeqs+s.opt.MaxQueue)
		if n/uint64(s.opt.MaxSeqs+s.opt.MaxQueue) != positions/uint64(s.opt.MaxSeqs) || n > math.MaxInt32 {
			n = math.MaxInt32
		}
		s.opt.MaxTokensInFlight = max(int(n), s.ctxLen)
	}
	s.maxTokens = s.opt.MaxTokensInFlight
	return model.NewCacheBudget(limit), nil
}

// Chat says whether chat requests are served, or why not.
func (s *Server) Chat() error { return s.tmplErr }

// Policy names the policy that sizes the running requests' drafts, with
// what it prices them on.
func (s *Server) Policy() string { return s.policy }

// Close stops the batch and releases the pair; every request must have
// returned.
func (s *Server) Close() {
	s.stop()
	<-s.served
	s.budget.Release() // the spare caches kept for the next requests
	s.pair.Close()
}

// Drain begins the server's end: requests waiting for room, and any that
// arrive, are refused as busy; the running ones go on.
func (s *Server) Drain() {
	s.once.Do(func() {
		close(s.closing)
		s.mu.Lock()
		for rq := range s.waiting {
			rq.cancel(errDraining)
		}
		s.mu.Unlock()
	})
}

// Stats are the server's figures now.
func (s *Server) Stats() ServeStats {
	bs := s.batch.Stats()
	s.mu.Lock()
	st := s.stats
	st.Queued = len(s.waiting)
	st.TokensInFlight = s.reserved
	busy := s.busy
	if s.inflight > 0 {
		busy += time.Since(s.busySince)
	}
	st.TTFT, st.TPOT = s.ttft.quantiles(), s.tpot.quantiles()
	s.mu.Unlock()
	st.Uptime = time.Since(s.created)
	st.Running, st.Busy = bs.Running, bs.Running > 0
	st.Passes, st.Emitted = bs.Passes, bs.Emitted
	st.MaxSeqs, st.MaxQueue, st.MaxTokensInFlight = s.opt.MaxSeqs, s.opt.MaxQueue, s.maxTokens
	st.PromptBytes, st.PromptWaiting = s.gate.state()
	st.MaxPromptBytes = s.opt.MaxPromptBytes
	st.KVBudget = s.budget.Limit()
	st.KVUsed, _ = s.budget.Used()
	st.KVSpare, _ = s.budget.Spare()
	st.TPS, st.AAL, st.Accept = st.Totals.TPS(), st.Totals.AAL(), st.Totals.Acceptance()
	if busy > 0 {
		st.Throughput = float64(st.Emitted) / busy.Seconds()
	}
	return st
}

// Complete decodes one request with the plan, in the batch. A request the
// server refuses (a value out of bounds, a prompt that does not fit, a
// full queue, too many tokens in flight, a draining server) is a
// *serving.RequestError; one whose ctx ends (a client gone) leaves the batch
// before the next pass, its cache freed, and returns ctx's error; a
// decoding failing returns that error. Every request counts in Stats.
func (s *Server) Complete(ctx context.Context, req serving.Request) (out *Completion, err error) {
	arrived := time.Now()
	defer func() { s.record(out, err) }()
	gone := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.stats.Gone++
		s.mu.Unlock()
	})
	defer gone()
	smp, err := s.sampling(req)
	if err != nil {
		return nil, err
	}
	stops, err := checkStops(req.Stop)
	if err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	ids, err := s.preparePrompt(ctx, req)
	if err != nil {
		return nil, err
	}
	n, err := s.checkRoom(len(ids), req.MaxTokens)
	if err != nil {
		return nil, err
	}
	cfg := s.base
	cfg.Sample, cfg.MaxTokens, cfg.StopAtEOS = smp, n, true
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rq := newServeReq(s, stops, cancel, arrived)
	cfg.OnToken = rq.token
	h, err := s.submit(rctx, rq, ids, n, cfg)
	if err != nil {
		return nil, err
	}
	defer s.end(rq, len(ids)+n)
	out, err = rq.follow(rctx, h, req)
	if err != nil {
		if errors.Is(context.Cause(rctx), errDraining) {
			return nil, busy("server_busy", "the server is shutting down")
		}
		return nil, err
	}
	out.Prompt = len(ids)
	return out, nil
}

// open refuses requests once draining began or the batch failed, and
// beyond the queue, before their prompts are read.
func (s *Server) open() error {
	select {
	case <-s.closing:
		return busy("server_busy", "the server is shutting down")
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return fmt.Errorf("the server's batch stopped: %w", s.failed)
	}
	if len(s.waiting) >= s.opt.MaxQueue {
		return busy("server_busy", "the server is busy: %d requests are waiting for room (--max-queue %d)", len(s.waiting), s.opt.MaxQueue)
	}
	return nil
}

// submit queues a request in the batch once the server's bounds allow it:
// the queue, and the tokens the requests in flight reserve. It numbers
// the request in the order of the queue.
func (s *Server) submit(ctx context.Context, rq *serveReq, ids []int, n int, cfg spec.Config) (*spec.Handle, error) {
	var src drafter.Source
	if s.eng.Source != nil {
		var err error
		if src, err = drafter.Fork(s.eng.Source); err != nil {
			return nil, err
		}
	}
	freeSrc := func() {
		if src != nil {
			drafter.Free(src)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		freeSrc()
		return nil, busy("server_busy", "the server is shutting down")
	default:
	}
	if len(s.waiting) >= s.opt.MaxQueue {
		freeSrc()
		return nil, busy("server_busy", "the server is busy: %d requests are waiting for room (--max-queue %d)", len(s.waiting), s.opt.MaxQueue)
	}
	need := len(ids) + n
	if s.reserved+need > s.maxTokens {
		freeSrc()
		return nil, busy("tokens_in_flight", "the server is busy: the requests in flight hold %d prompt and new tokens of %d, and this one asks for %d more", s.reserved, s.maxTokens, need)
	}
	rq.seq = s.nextID.Add(1)
	s.waiting[rq] = struct{}{}
	h, err := s.batch.Submit(ctx, spec.Request{Prompt: ids, Config: cfg, Source: src, Concurrent: s.eng.Concurrent, OnAdmit: rq.admit})
	if err != nil {
		delete(s.waiting, rq)
		freeSrc()
		if errors.Is(err, model.ErrOverBudget) {
			return nil, refuse("max_tokens", "context_length_exceeded", "prompt (%d tokens) + %d new tokens need more KV cache than this server holds: %v", len(ids), n, err)
		}
		return nil, err
	}
	if s.inflight == 0 {
		s.busySince = time.Now()
	}
	s.inflight++
	s.reserved += need
	return h, nil
}

// end releases what a request held in the server's bounds once it has
// left the batch.
func (s *Server) end(rq *serveReq, need int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, rq)
	s.reserved -= need
	if s.inflight--; s.inflight == 0 {
		s.busy += time.Since(s.busySince)
	}
}

// sampling is the config's sampling with the request's fields over it.
func (s *Server) sampling(req serving.Request) (sample.Params, error) {
	p := s.sample
	if t := req.Temperature; t != nil {
		if err := sample.CheckTemp(*t); err != nil {
			return p, refuse("temperature", "invalid_value", "%v", err)
		}
		p.Temp = float32(*t)
	}
	if v := req.TopP; v != nil {
		if !(*v > 0 && *v <= 1) {
			return p, refuse("top_p", "invalid_value", "top_p %g must be in (0, 1]", *v)
		}
		p.TopP = float32(*v)
	}
	if k := req.TopK; k != nil {
		switch {
		case *k == -1:
			p.TopK = 0 // all tokens
		case *k < 0:
			return p, refuse("top_k", "invalid_value", "top_k %d must be >= 0 (or -1: all tokens)", *k)
		default:
			p.TopK = *k
		}
	}
	if v := req.MinP; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return p, refuse("min_p", "invalid_value", "min_p %g must be in [0, 1]", *v)
		}
		p.MinP = float32(*v)
	}
	if req.Seed != nil {
		p.Seed = uint64(*req.Seed)
	} else if !p.Greedy() {
		p.Seed += uint64(s.nextID.Load()) // each request draws afresh, reproducibly per server run
	}
	return p, nil
}

// checkStops bounds the stop sequences (16 of up to 256 bytes) and drops
// empty ones.
func checkStops(list []string) ([]string, error) {
	if len(list) > 16 {
		return nil, refuse("stop", "invalid_value", "stop has %d sequences; at most 16", len(list))
	}
	var out []string
	for _, st := range list {
		if len(st) > 256 {
			return nil, refuse("stop", "invalid_value", "a stop sequence of %d bytes; at most 256", len(st))
		}
		if st != "" {
			out = append(out, st)
		}
	}
	return out, nil
}

// preparePrompt is the request's prompt as token ids. Rendering and
// tokenising hold the prompt's bytes under the server's bound over all
// requests (ServeOptions.MaxPromptBytes) and take a few slots at a time
// (Server.prep), so requests arriving together can neither add up past
// the machine's memory nor take the CPUs the batch decodes on; a text the
// context could not hold is refused before it is tokenised.
func (s *Server) preparePrompt(ctx context.Context, req serving.Request) ([]int, error) {
	if req.IDs != nil && !req.Chat {
		if err := s.checkBytes("prompt", len(req.IDs), 1, req.MaxTokens); err != nil {
			return nil, err
		}
		for _, id := range req.IDs {
			if id < 0 || id >= s.pair.Target.Vocab {
				return nil, refuse("prompt", "invalid_value", "prompt: token id %d is outside the vocabulary of %d", id, s.pair.Target.Vocab)
			}
		}
		return req.IDs, nil
	}
	param, n := "prompt", int64(len(req.Text))
	if !req.Chat {
		if err := s.checkBytes("prompt", len(req.Text), s.tokBytes, req.MaxTokens); err != nil {
			return nil, err
		}
	} else {
		param, n = "messages", 0
		for _, m := range req.Messages {
			n += int64(len(m.Content) + len(m.Name) + len(m.Role))
		}
		n *= 2 // the messages and the text rendered from them
	}
	if n > s.opt.MaxPromptBytes {
		return nil, refuse(param, "prompt_too_large", "the %s take %d bytes to render and tokenise, more than this server holds for all prompts at once (%d bytes)", param, n, s.opt.MaxPromptBytes)
	}
	if err := s.gate.acquire(ctx, n); err != nil {
		return nil, err
	}
	defer s.gate.release(n)
	select {
	case s.prep <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.prep }()
	if req.Chat {
		return s.chatPrompt(ctx, req.Messages, req.MaxTokens)
	}
	return s.pair.Target.Tok.Encode(req.Text, true, false), nil
}

// checkBytes refuses a prompt of n bytes (or ids, each per bytes) that is
// at least more tokens than the context leaves beside the tokens asked
// for, before it is tokenised.
func (s *Server) checkBytes(param string, n, per, maxTokens int) error {
	if err := s.checkMaxTokens(maxTokens); err != nil {
		return err // the request's own bound first: it names the field to change
	}
	least := (n + per - 1) / per
	if least+max(maxTokens, 1) > s.ctxLen {
		what := fmt.Sprintf("%d bytes are at least %d tokens (a token of this vocabulary holds at most %d bytes)", n, least, per)
		if per == 1 {
			what = fmt.Sprintf("%d tokens", n)
		}
		return refuse(param, "context_length_exceeded", "the prompt's %s: with %d new tokens more than the context of %d", what, max(maxTokens, 1), s.ctxLen)
	}
	return nil
}

// chatPrompt renders the messages with the model's chat template, its
// output bounded by what the context can hold, and encodes the result,
// special tokens included.
func (s *Server) chatPrompt(ctx context.Context, msgs []serving.Message, maxTokens int) ([]int, error) {
	if s.tmpl == nil {
		return nil, refuse("", "no_chat_template", "%v", s.tmplErr)
	}
	if len(msgs) == 0 {
		return nil, refuse("messages", "missing_required_parameter", "messages is required")
	}
	list := make([]any, len(msgs))
	size := 0
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, refuse(fmt.Sprintf("messages[%d].role", i), "invalid_value", "role %q: want system, developer, user, assistant or tool", m.Role)
		}
		msg := map[string]any{"role": m.Role, "content": m.Content}
		if m.Name != "" {
			msg["name"] = m.Name
		}
		list[i] = msg
		size += len(m.Content) + len(m.Name)
	}
	if err := s.checkBytes("messages", size, s.tokBytes, maxTokens); err != nil {
		return nil, err
	}
	tok := s.pair.Target.Tok
	special := func(id int) string {
		if id >= 0 && id < len(tok.Tokens) {
			return tok.Tokens[id]
		}
		return ""
	}
	limits := defaultTemplateLimits
	limits.Output = min(limits.Output, s.ctxLen*s.tokBytes)
	text, err := s.tmpl.render(ctx, map[string]any{"messages": list, "add_generation_prompt": true,
		"bos_token": special(tok.BOS), "eos_token": special(tok.EOS)}, limits)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, refuse("messages", "chat_template_error", "the model's chat template refused the messages: %v", err)
	}
	if err := s.checkBytes("messages", len(text), s.tokBytes, maxTokens); err != nil {
		return nil, err
	}
	ids := tok.Encode(text, true, true)
	if len(ids) > 1 && tok.BOS >= 0 && ids[0] == tok.BOS && ids[1] == tok.BOS {
		ids = ids[1:] // the template wrote BOS itself
	}
	return ids, nil
}

// checkMaxTokens refuses a request asking more new tokens than the server
// allows (--max-tokens).
func (s *Server) checkMaxTokens(maxTokens int) error {
	if maxTokens > s.opt.MaxTokens {
		return refuse("max_tokens", "invalid_value", "max_tokens %d is more than this server allows (%d)", maxTokens, s.opt.MaxTokens)
	}
	return nil
}

// checkRoom bounds a request's budget by the server's limit and the room
// its prompt leaves in the context; 0 asks for the default.
func (s *Server) checkRoom(prompt, maxTokens int) (int, error) {
	if err := s.checkMaxTokens(maxTokens); err != nil {
		return 0, err
	}
	n := maxTokens
	if n == 0 {
		n = max(1, min(s.opt.DefaultTokens, s.ctxLen-prompt))
	}
	if err := hardware.CheckRoom(prompt, n, s.ctxLen); err != nil {
		return 0, refuse("max_tokens", "context_length_exceeded", "%v", err)
	}
	return n, nil
}

// record adds a finished request to the figures.
func (s *Server) record(c *Completion, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	if err != nil || c == nil {
		s.stats.Failed++
		return
	}
	s.stats.Completed++
	s.stats.Prompt += c.Prompt
	s.stats.Totals.merge(c.Totals)
}

// latencies adds a request's time to its first token and per output token
// to the running quantiles.
func (s *Server) latencies(ttft time.Duration, tpot time.Duration, tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tokens > 0 {
		s.ttft.add(ttft.Seconds())
	}
	if tokens > 1 {
		s.tpot.add(tpot.Seconds())
	}
}
