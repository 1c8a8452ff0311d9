package profiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// Serving a config.yaml: the core opens the config's pair once (OpenServer)
// and decodes each request it is given (Server.Complete): the prompt (text,
// token ids, or chat messages rendered with the model's chat template), the
// sampling, the budget, stop sequences, the admission of requests (one
// decodes, the others wait their turn in order of arrival, up to a queue)
// and the figures. A face puts a protocol around it: app/serve answers
// OpenAI-compatible HTTP requests with it. The core knows no protocol: a
// request it refuses is a RequestError naming the field and why.

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
	// MaxQueue is how many requests may wait for their turn behind the
	// one decoding (default 64); more are refused as busy.
	MaxQueue int
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
}

// Server decodes requests with a config.yaml's plan and sampling on
// Arborist's own engine: the pair is opened once, and each request decodes
// with the plan through the engine Run uses, one request at a time (the
// others wait their turn, in order of arrival).
type Server struct {
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
	closing chan struct{} // closed when draining begins
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
	// Started is when the server opened (request ids and model objects
	// carry it).
	Started time.Time `json:"-"`
}

// ServeRequest is one request to decode: its prompt, budget, sampling and
// stop sequences, and callbacks for the decoding's start and its text.
type ServeRequest struct {
	// Chat renders Messages with the chat template as the prompt; else
	// the prompt is IDs (token ids as given) where not nil, or Text
	// (encoded with BOS).
	Chat     bool
	Messages []Message
	IDs      []int
	Text     string
	// MaxTokens is the most tokens to decode (0: the server's default,
	// at most the room the prompt leaves).
	MaxTokens int
	// Sampling: the config's, each field given here overriding it. A
	// request without a seed that samples draws afresh, reproducibly per
	// server run.
	Temperature, TopP, MinP *float64
	TopK                    *int // -1: every token
	Seed                    *int64
	// Stop are up to 16 stop sequences of up to 256 bytes each: the text
	// ends before the first one found ("" are ignored).
	Stop []string
	// OnStart, when set, is called once the request has its turn, before
	// it decodes, with its number (counted from 1 in the order requests
	// got their turn).
	OnStart func(seq int64)
	// OnText, when set, receives the text as it is decoded: whole UTF-8
	// characters, never past a stop sequence.
	OnText func(string)
}

// Message is one chat message.
type Message struct {
	Role, Content, Name string
}

// Completion is a decoded request.
type Completion struct {
	Seq    int64 // the request's number (ServeRequest.OnStart)
	Text   string
	Prompt int    // prompt tokens
	Tokens int    // tokens decoded up to the end of Text
	Finish string // "stop": a stop sequence or the end of text; "length": the budget or the context ran out
	// Totals are the decoding's figures (every token the engine decoded).
	Totals Totals
}

// RequestError is a request the server refuses: the field at fault
// (Param, "" for none), a code naming what is wrong (invalid_value,
// invalid_type, missing_required_parameter, context_length_exceeded,
// no_chat_template, chat_template_error; server_busy when the queue is
// full or the server is draining) and a message.
type RequestError struct {
	Param, Code, Message string
}

func (e *RequestError) Error() string { return e.Message }

func refuse(param, code, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errStopText cancels a decoding that reached a stop sequence.
var errStopText = errors.New("stop sequence reached")

// ParseConfig reads config.yaml text (name is for messages and resolves
// relative model paths): the Export screen serves the text it shows.
func ParseConfig(name string, data []byte) (*Config, error) { return config.Parse(name, data) }

// LoadConfig reads a config.yaml file.
func LoadConfig(path string) (*Config, error) { return config.Load(path) }

// OpenServer opens the config's pair and readies its plan for serving.
// Model hashes are checked (and cached) through this Bench's database.
func (b *Bench) OpenServer(ctx context.Context, c *Config, opt ServeOptions) (*Server, error) {
	r, err := replayConfig(ctx, c, b.path, opt.AllowChanged)
	if err != nil {
		return nil, err
	}
	ps := r.pairWith(PairSpec{Threads: opt.Threads})
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
	s := &Server{opt: opt, pair: pair, eng: eng, base: cfg, sample: r.Sample, plan: plan, created: time.Now(),
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
	s.stats.Model, s.stats.Plan, s.stats.Started = s.model, plan.String(), s.created
	return s, nil
}

// Chat says whether chat requests are served, or why not.
func (s *Server) Chat() error { return s.tmplErr }

// Close releases the pair; every request must have returned.
func (s *Server) Close() { s.pair.Close() }

// Drain begins the server's end: requests waiting for their turn, and any
// that arrive, are refused as busy; the one decoding goes on.
func (s *Server) Drain() { s.once.Do(func() { close(s.closing) }) }

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

// Complete decodes one request with the plan, once it has its turn. A
// request the server refuses (a value out of bounds, a prompt that does
// not fit, a full queue, a draining server) is a *RequestError; one whose
// ctx ends while it waits returns ctx's error; a decoding stopped by ctx
// or failing returns that error. Every request counts in Stats.
func (s *Server) Complete(ctx context.Context, req ServeRequest) (out *Completion, err error) {
	defer func() { s.record(out, err) }()
	smp, err := s.sampling(req)
	if err != nil {
		return nil, err
	}
	stops, err := checkStops(req.Stop)
	if err != nil {
		return nil, err
	}
	ids, err := s.prompt(req)
	if err != nil {
		return nil, err
	}
	n, err := s.checkRoom(len(ids), req.MaxTokens)
	if err != nil {
		return nil, err
	}
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.release()
	seq := s.nextID.Add(1)
	if req.OnStart != nil {
		req.OnStart(seq)
	}
	out, err = s.generate(ctx, ids, n, smp, stops, req.OnText)
	if out != nil {
		out.Seq = seq
	}
	return out, err
}

// sampling is the config's sampling with the request's fields over it.
func (s *Server) sampling(req ServeRequest) (sample.Params, error) {
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

// prompt is the request's prompt as token ids.
func (s *Server) prompt(req ServeRequest) ([]int, error) {
	switch {
	case req.Chat:
		return s.chatPrompt(req.Messages)
	case req.IDs != nil:
		for _, id := range req.IDs {
			if id < 0 || id >= s.pair.Target.Vocab {
				return nil, refuse("prompt", "invalid_value", "prompt: token id %d is outside the vocabulary of %d", id, s.pair.Target.Vocab)
			}
		}
		return req.IDs, nil
	}
	return s.pair.Target.Tok.Encode(req.Text, true, false), nil
}

// chatPrompt renders the messages with the model's chat template and
// encodes the result, special tokens included.
func (s *Server) chatPrompt(msgs []Message) ([]int, error) {
	if s.tmpl == nil {
		return nil, refuse("", "no_chat_template", "%v", s.tmplErr)
	}
	if len(msgs) == 0 {
		return nil, refuse("messages", "missing_required_parameter", "messages is required")
	}
	list := make([]any, len(msgs))
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
	}
	tok := s.pair.Target.Tok
	special := func(id int) string {
		if id >= 0 && id < len(tok.Tokens) {
			return tok.Tokens[id]
		}
		return ""
	}
	text, err := s.tmpl.Render(map[string]any{"messages": list, "add_generation_prompt": true,
		"bos_token": special(tok.BOS), "eos_token": special(tok.EOS)})
	if err != nil {
		return nil, refuse("messages", "chat_template_error", "the model's chat template refused the messages: %v", err)
	}
	ids := tok.Encode(text, true, true)
	if len(ids) > 1 && tok.BOS >= 0 && ids[0] == tok.BOS && ids[1] == tok.BOS {
		ids = ids[1:] // the template wrote BOS itself
	}
	return ids, nil
}

// checkRoom bounds a request's budget by the server's limit and the room
// its prompt leaves in the context; 0 asks for the default.
func (s *Server) checkRoom(prompt, maxTokens int) (int, error) {
	if maxTokens > s.opt.MaxTokens {
		return 0, refuse("max_tokens", "invalid_value", "max_tokens %d is more than this server allows (%d)", maxTokens, s.opt.MaxTokens)
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

// acquire waits for the request's turn to decode.
func (s *Server) acquire(ctx context.Context) error {
	closing := refuse("", "server_busy", "the server is shutting down")
	select {
	case <-s.closing:
		return closing
	default:
	}
	if int(s.queued.Add(1)) > s.opt.MaxQueue {
		s.queued.Add(-1)
		return refuse("", "server_busy", "the server is busy: too many requests are waiting")
	}
	defer s.queued.Add(-1)
	select {
	case s.turn <- struct{}{}:
		select {
		case <-s.closing: // draining began while it waited
			<-s.turn
			return closing
		default:
			return nil
		}
	case <-s.closing:
		return closing
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) release() { <-s.turn }

// generate decodes the prompt ids with the plan. The caller holds the turn.
func (s *Server) generate(ctx context.Context, ids []int, maxTokens int, smp sample.Params, stops []string, onText func(string)) (*Completion, error) {
	cfg := s.base
	cfg.Sample, cfg.MaxTokens, cfg.StopAtEOS = smp, maxTokens, true
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := &Completion{Prompt: len(ids)}
	var text bytes.Buffer // emitted
	var pending []byte    // decoded, not yet emitted
	hold := 0             // bytes held back so a stop sequence split across tokens is still found
	for _, st := range stops {
		hold = max(hold, len(st)-1)
	}
	emit := func(n int) {
		if n <= 0 {
			return
		}
		chunk := string(pending[:n])
		text.WriteString(chunk)
		pending = pending[n:]
		if onText != nil {
			onText(chunk)
		}
	}
	stopped := false
	tok := s.pair.Target.Tok
	cfg.OnToken = func(id int, _ bool) {
		if stopped {
			return
		}
		out.Tokens++
		pending = append(pending, tok.Piece(id)...)
		if i := firstStop(pending, stops); i >= 0 {
			pending = pending[:i]
			stopped = true
			emit(len(pending))
			cancel(errStopText)
			return
		}
		emit(runeCut(pending, len(pending)-hold))
	}
	res, err := s.eng.Run(cctx, ids, cfg)
	if stopped && errors.Is(context.Cause(cctx), errStopText) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	emit(len(pending))
	out.Text = text.String()
	out.Totals.add(res)
	// stop: a stop sequence or the end of text; length: the budget or
	// the context ran out
	out.Finish = "length"
	if stopped || (len(res.Tokens) > 0 && tok.IsEOG(res.Tokens[len(res.Tokens)-1])) {
		out.Finish = "stop"
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
