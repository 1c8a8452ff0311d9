package profiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"

	"arborist/engine/sample"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/hardware"
	"arborist/profiles/pairs"
)

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
	// MaxBody is the largest request body in bytes (default 1 MiB).
	MaxBody int64
	// MaxQueue is how many requests may wait for their turn behind the
	// one decoding (default 64); more are refused as busy.
	MaxQueue int
	// Grace is how long a request decoding when shutdown begins may run
	// on before it is cancelled (default 30 s).
	Grace time.Duration
	// OnRequest, when set, receives a line for each request answered.
	OnRequest func(line string)
}

func (o *ServeOptions) defaults(ctxLen int) {
	if o.MaxTokens <= 0 || o.MaxTokens > ctxLen {
		o.MaxTokens = ctxLen
	}
	if o.DefaultTokens <= 0 {
		o.DefaultTokens = 256
	}
	o.DefaultTokens = min(o.DefaultTokens, o.MaxTokens)
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = 64
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
}

// Server serves a config.yaml's plan and sampling on Arborist's own engine
// behind an OpenAI-compatible HTTP API (Handler): the pair is opened once,
// and each request decodes with the plan through the engine Run uses, one
// request at a time (the others wait their turn, in order of arrival).
type Server struct {
	b       *Bench
	opt     ServeOptions
	pair    *pairs.Pair
	eng     *spec.Engine
	base    spec.Config // the plan's engine configuration; sampling and budget are set per request
	sample  sample.Params
	plan    spec.Plan
	model   string
	ctxLen  int
	tmpl    *jinja.Template
	tmplErr error // why chat is refused (no template, or one that does not compile)
	created time.Time

	turn    chan struct{} // held by the request decoding
	closing chan struct{} // closed when shutdown begins
	once    sync.Once
	queued  atomic.Int32
	nextID  atomic.Int64

	mu    sync.Mutex
	stats ServeStats
}

// ServeStats are a server's figures since it started: requests, and the
// decoding totals of the requests it completed.
type ServeStats struct {
	Model     string        `json:"model"`
	Plan      string        `json:"plan"`
	Uptime    time.Duration `json:"uptime_ns"`
	Requests  int           `json:"requests"`  // answered, successfully or not
	Completed int           `json:"completed"` // decoded to the end
	Failed    int           `json:"failed"`    // refused or failed
	Queued    int           `json:"queued"`    // waiting for their turn now
	Busy      bool          `json:"busy"`      // a request is decoding now
	Prompt    int           `json:"prompt_tokens"`
	Totals    Totals        `json:"totals"`
	TPS       float64       `json:"tokens_per_s"`
	AAL       float64       `json:"aal"`
	Accept    float64       `json:"acceptance"`
}

// ParseConfig reads config.yaml text (name is for messages and resolves
// relative model paths): the Export screen serves the text it shows.
func ParseConfig(name string, data []byte) (*Config, error) { return config.Parse(name, data) }

// LoadConfig reads a config.yaml file.
func LoadConfig(path string) (*Config, error) { return config.Load(path) }

// OpenServer opens the config's pair and readies its plan for serving.
// Model hashes are checked (and cached) through this Bench's database.
func (b *Bench) OpenServer(ctx context.Context, c *Config, opt ServeOptions) (*Server, error) {
	r, err := ReplayConfig(ctx, c, b.path, opt.AllowChanged)
	if err != nil {
		return nil, err
	}
	ps := r.PairWith(PairSpec{Threads: opt.Threads})
	plan := r.Plan.Trim()
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
	eng, err := b.planEngine(ctx, ps, pair, plan, &cfg)
	if err != nil {
		pair.Close()
		return nil, err
	}
	s := &Server{b: b, opt: opt, pair: pair, eng: eng, base: cfg, sample: r.Sample, plan: plan, created: time.Now(),
		turn: make(chan struct{}, 1), closing: make(chan struct{})}
	s.ctxLen = pair.Target.CtxLen
	if n := c.Models.Target.MaxSeqLen; n > 0 && n < s.ctxLen {
		s.ctxLen, s.base.Ctx = n, n
	}
	s.opt.defaults(s.ctxLen)
	s.model = strings.TrimSuffix(filepath.Base(ps.Target), filepath.Ext(ps.Target))
	src := opt.ChatTemplate
	if src == "" {
		src, _ = pair.Target.File.String("tokenizer.chat_template")
	}
	switch {
	case src == "":
		s.tmplErr = fmt.Errorf("model %s has no chat template (tokenizer.chat_template in its GGUF metadata): use /v1/completions, or start the server with a chat template file", s.model)
	default:
		if s.tmpl, err = jinja.Compile(src); err != nil {
			s.tmpl, s.tmplErr = nil, fmt.Errorf("the chat template of %s does not compile: %v", s.model, err)
		}
	}
	s.stats.Model, s.stats.Plan = s.model, plan.String()
	return s, nil
}

// Model is the id clients name the served model by (the target's file
// name without .gguf).
func (s *Server) Model() string { return s.model }

// Plan is the plan the server decodes with.
func (s *Server) Plan() Plan { return s.plan }

// Chat says whether chat completions are served, or why not.
func (s *Server) Chat() error { return s.tmplErr }

// Close releases the pair.
func (s *Server) Close() { s.pair.Close() }

// Stats are the server's figures now.
func (s *Server) Stats() ServeStats {
	s.mu.Lock()
	st := s.stats
	s.mu.Unlock()
	st.Uptime = time.Since(s.created)
	st.Queued = int(s.queued.Load())
	st.Busy = len(s.turn) > 0
	st.TPS, st.AAL, st.Accept = st.Totals.TPS(), st.Totals.AAL(), st.Totals.Acceptance()
	return st
}

// Serve answers requests on ln until ctx is done, then shuts down: new
// connections are refused, requests still waiting for their turn are
// answered 503, the request decoding is given ServeOptions.Grace to
// finish (and is cancelled after it), and Serve returns nil once every
// handler has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	decodeCtx, cancelDecode := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDecode()
	hs := &http.Server{Handler: s.Handler(), BaseContext: func(net.Listener) context.Context { return decodeCtx },
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.once.Do(func() { close(s.closing) })
	grace := time.AfterFunc(s.opt.Grace, cancelDecode)
	defer grace.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), s.opt.Grace+30*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ServeAddr listens on addr (host:port; port 0 picks a free one), calls
// ready with the base URL once it accepts connections, and serves until
// ctx is done (Serve).
func (s *Server) ServeAddr(ctx context.Context, addr string, ready func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}
	return s.Serve(ctx, ln)
}

// Serving is a server running in the background (the Export screen's).
type Serving struct {
	URL    string
	srv    *Server
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// StartServing opens a server for the config and serves it on addr in the
// background until Stop.
func (b *Bench) StartServing(ctx context.Context, c *Config, addr string, opt ServeOptions) (*Serving, error) {
	srv, err := b.OpenServer(ctx, c, opt)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sv := &Serving{URL: "http://" + ln.Addr().String(), srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sv.done)
		defer srv.Close()
		sv.err = srv.Serve(sctx, ln)
	}()
	return sv, nil
}

// Server is the server behind the listener.
func (sv *Serving) Server() *Server { return sv.srv }

// Stop shuts the server down (Serve) and waits until it has.
func (sv *Serving) Stop() error {
	sv.cancel()
	<-sv.done
	return sv.err
}

// Done is closed once the server has stopped.
func (sv *Serving) Done() <-chan struct{} { return sv.done }

// Errors a request can meet before or while it decodes.
var (
	errBusy     = errors.New("the server is busy: too many requests are waiting")
	errClosing  = errors.New("the server is shutting down")
	errStopText = errors.New("stop sequence reached")
)

// acquire waits for the request's turn to decode.
func (s *Server) acquire(ctx context.Context) error {
	select {
	case <-s.closing:
		return errClosing
	default:
	}
	if int(s.queued.Add(1)) > s.opt.MaxQueue {
		s.queued.Add(-1)
		return errBusy
	}
	defer s.queued.Add(-1)
	select {
	case s.turn <- struct{}{}:
		select {
		case <-s.closing: // shutdown began while it waited
			<-s.turn
			return errClosing
		default:
			return nil
		}
	case <-s.closing:
		return errClosing
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) release() { <-s.turn }

// genRequest is one request's decoding: the prompt's tokens, the budget,
// the sampling, stop sequences, and a callback receiving the text as it
// is decoded (whole UTF-8 characters, never past a stop sequence).
type genRequest struct {
	ids       []int
	maxTokens int
	sample    sample.Params
	stop      []string
	onText    func(string)
}

// genResult is a finished decoding.
type genResult struct {
	text         string
	prompt, toks int
	finish       string // stop or length
	res          *spec.Result
}

// generate decodes one request with the plan. The caller holds the turn.
func (s *Server) generate(ctx context.Context, g genRequest) (*genResult, error) {
	cfg := s.base
	cfg.Sample, cfg.MaxTokens, cfg.StopAtEOS = g.sample, g.maxTokens, true
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := &genResult{prompt: len(g.ids)}
	var text bytes.Buffer // emitted
	var pending []byte    // decoded, not yet emitted
	hold := 0             // bytes held back so a stop sequence split across tokens is still found
	for _, st := range g.stop {
		hold = max(hold, len(st)-1)
	}
	emit := func(n int) {
		if n <= 0 {
			return
		}
		chunk := string(pending[:n])
		text.WriteString(chunk)
		pending = pending[n:]
		if g.onText != nil {
			g.onText(chunk)
		}
	}
	stopped := false
	tok := s.pair.Target.Tok
	cfg.OnToken = func(id int, _ bool) {
		if stopped {
			return
		}
		out.toks++
		pending = append(pending, tok.Piece(id)...)
		if i := firstStop(pending, g.stop); i >= 0 {
			pending = pending[:i]
			stopped = true
			emit(len(pending))
			cancel(errStopText)
			return
		}
		emit(runeCut(pending, len(pending)-hold))
	}
	res, err := s.eng.Run(cctx, g.ids, cfg)
	if stopped && errors.Is(context.Cause(cctx), errStopText) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	emit(len(pending))
	out.text, out.res = text.String(), res
	// stop: a stop sequence or the end of text; length: the budget or
	// the context ran out
	out.finish = "length"
	if stopped || (len(res.Tokens) > 0 && tok.IsEOG(res.Tokens[len(res.Tokens)-1])) {
		out.finish = "stop"
	}
	return out, nil
}

// firstStop is where the first stop sequence begins in b, or -1.
func firstStop(b []byte, stops []string) int {
	at := -1
	for _, st := range stops {
		if i := bytes.Index(b, []byte(st)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// runeCut is the largest k <= n such that b[:k] does not end inside a
// UTF-8 character: streamed text is sent in whole characters.
func runeCut(b []byte, n int) int {
	if n <= 0 {
		return 0
	}
	k := min(n, len(b))
	for i := 0; i < utf8.UTFMax && k > 0 && k < len(b) && !utf8.RuneStart(b[k]); i++ {
		k--
	}
	if k == len(b) {
		// the last character may still be incomplete
		j := k - 1
		for i := 0; i < utf8.UTFMax-1 && j > 0 && !utf8.RuneStart(b[j]); i++ {
			j--
		}
		if j >= 0 && !utf8.FullRune(b[j:]) {
			k = j
		}
	}
	return k
}

// record adds a finished request to the figures.
func (s *Server) record(g *genResult, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	if err != nil || g == nil {
		s.stats.Failed++
		return
	}
	s.stats.Completed++
	s.stats.Prompt += g.prompt
	s.stats.Totals.add(g.res)
}

// checkRoom bounds a request's budget by the server's limit and the room
// its prompt leaves in the context; 0 asks for the default.
func (s *Server) checkRoom(prompt, maxTokens int) (int, error) {
	if maxTokens > s.opt.MaxTokens {
		return 0, badRequest("max_tokens", "invalid_value", "max_tokens %d is more than this server allows (%d)", maxTokens, s.opt.MaxTokens)
	}
	n := maxTokens
	if n == 0 {
		n = max(1, min(s.opt.DefaultTokens, s.ctxLen-prompt))
	}
	if err := hardware.CheckRoom(prompt, n, s.ctxLen); err != nil {
		return 0, badRequest("max_tokens", "context_length_exceeded", "%v", err)
	}
	return n, nil
}
