package profiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"arborist/engine/sample"
)

// The OpenAI-compatible API (docs/EXPORT.md, "Serving"): /v1/models,
// /v1/completions, /v1/chat/completions (streamed as server-sent events
// with stream: true), /health and /metrics. Every error is a JSON body
// {"error": {"message", "type", "param", "code"}}, as OpenAI's API
// writes them, and leaves the server serving.

// apiError is an error answered as OpenAI's API shapes it.
type apiError struct {
	status int
	Msg    string  `json:"message"`
	Type   string  `json:"type"`
	Param  *string `json:"param"`
	Code   *string `json:"code"`
}

func (e *apiError) Error() string { return e.Msg }

func badRequest(param, code, format string, args ...any) *apiError {
	e := &apiError{status: http.StatusBadRequest, Msg: fmt.Sprintf(format, args...), Type: "invalid_request_error"}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

func withCode(status int, typ, code, msg string) *apiError {
	return &apiError{status: status, Msg: msg, Type: typ, Code: &code}
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/metrics", s.metrics)
	mux.HandleFunc("/v1/models", s.models)
	mux.HandleFunc("/v1/models/{id}", s.models)
	mux.HandleFunc("/v1/completions", s.completions)
	mux.HandleFunc("/v1/chat/completions", s.chat)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, withCode(http.StatusNotFound, "invalid_request_error", "not_found", fmt.Sprintf("no route %s %s: this server answers /v1/models, /v1/completions, /v1/chat/completions, /health and /metrics", r.Method, r.URL.Path)))
	})
	return mux
}

// writeJSON writes v with the status, without escaping <, > and & (chat
// templates and model text are full of them).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail answers err as OpenAI's API shapes errors and logs the request.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, Msg: err.Error(), Type: "server_error"}
	}
	if ae.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	if ae.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", "GET, POST")
	}
	writeJSON(w, ae.status, map[string]any{"error": ae})
	s.logf("%s %s %d: %s", r.Method, r.URL.Path, ae.status, ae.Msg)
}

func (s *Server) logf(format string, args ...any) {
	if s.opt.OnRequest != nil {
		s.opt.OnRequest(fmt.Sprintf(format, args...))
	}
}

func method(r *http.Request, want string) error {
	if r.Method != want && !(want == http.MethodGet && r.Method == http.MethodHead) {
		return &apiError{status: http.StatusMethodNotAllowed, Msg: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, want), Type: "invalid_request_error"}
	}
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if err := method(r, http.MethodGet); err != nil {
		s.fail(w, r, err)
		return
	}
	select {
	case <-s.closing:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting down"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "model": s.model, "plan": s.plan.String()})
	}
}

// metrics answers the figures as Prometheus-style text, or as JSON when
// asked (?format=json, or Accept: application/json).
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if err := method(r, http.MethodGet); err != nil {
		s.fail(w, r, err)
		return
	}
	st := s.Stats()
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		writeJSON(w, http.StatusOK, st)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Arborist server: model %s, plan %s; requests decode one at a time\n", st.Model, st.Plan)
	for _, m := range []struct {
		name string
		v    float64
	}{
		{"arborist_uptime_seconds", st.Uptime.Seconds()},
		{"arborist_requests_total", float64(st.Requests)},
		{"arborist_requests_completed_total", float64(st.Completed)},
		{"arborist_requests_failed_total", float64(st.Failed)},
		{"arborist_requests_queued", float64(st.Queued)},
		{"arborist_prompt_tokens_total", float64(st.Prompt)},
		{"arborist_completion_tokens_total", float64(st.Totals.Tokens)},
		{"arborist_decode_seconds_total", st.Totals.Decode.Seconds()},
		{"arborist_prefill_seconds_total", st.Totals.Prefill.Seconds()},
		{"arborist_steps_total", float64(st.Totals.Steps)},
		{"arborist_drafted_tokens_total", float64(st.Totals.Drafted)},
		{"arborist_accepted_tokens_total", float64(st.Totals.Accepted)},
		{"arborist_tokens_per_second", st.TPS},
		{"arborist_acceptance", st.Accept},
		{"arborist_aal", st.AAL},
	} {
		fmt.Fprintf(&b, "%s %s\n", m.name, strconv.FormatFloat(m.v, 'g', 6, 64))
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write([]byte(b.String()))
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.model, "object": "model", "created": s.created.Unix(), "owned_by": "arborist"}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if err := method(r, http.MethodGet); err != nil {
		s.fail(w, r, err)
		return
	}
	if id := r.PathValue("id"); id != "" {
		if id != s.model {
			s.fail(w, r, withCode(http.StatusNotFound, "invalid_request_error", "model_not_found", fmt.Sprintf("the model %q does not exist: this server serves %q", id, s.model)))
			return
		}
		writeJSON(w, http.StatusOK, s.modelObject())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

// request holds the fields of a completion or chat request; the ones
// this server does not implement are read so that it can refuse them.
type request struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N                *int               `json:"n"`
	BestOf           *int               `json:"best_of"`
	Echo             bool               `json:"echo"`
	Suffix           *string            `json:"suffix"`
	Logprobs         json.RawMessage    `json:"logprobs"`
	TopLogprobs      *int               `json:"top_logprobs"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	Tools            json.RawMessage    `json:"tools"`
	ResponseFormat   *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// chatMessage is one message; content is a string or a list of text parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

// readRequest decodes a request body, bounded in size.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (*request, error) {
	if err := method(r, http.MethodPost); err != nil {
		return nil, err
	}
	body := http.MaxBytesReader(w, r.Body, s.opt.MaxBody)
	var req request
	dec := json.NewDecoder(body)
	if err := dec.Decode(&req); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, withCode(http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", fmt.Sprintf("the request body is larger than this server accepts (%d bytes)", s.opt.MaxBody))
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, badRequest(te.Field, "invalid_type", "%s: want %s, got a JSON %s", te.Field, te.Type, te.Value)
		}
		return nil, badRequest("", "invalid_json", "the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, badRequest("", "invalid_json", "the request body holds more than one JSON value")
	}
	return &req, nil
}

// check refuses what this server does not implement, naming the field,
// and reads the sampling, budget and stop sequences.
func (s *Server) check(req *request) (sample.Params, int, []string, error) {
	p := s.sample
	unsupported := func(param, what string) error {
		return badRequest(param, "unsupported_parameter", "%s is not supported by this server (%s)", param, what)
	}
	switch {
	case req.N != nil && *req.N != 1:
		return p, 0, nil, unsupported("n", "one choice per request")
	case req.BestOf != nil && *req.BestOf != 1:
		return p, 0, nil, unsupported("best_of", "one choice per request")
	case req.Echo:
		return p, 0, nil, unsupported("echo", "the prompt is not repeated")
	case req.Suffix != nil && *req.Suffix != "":
		return p, 0, nil, unsupported("suffix", "no insertion")
	case len(req.Logprobs) > 0 && !bytes.Equal(req.Logprobs, []byte("null")) && !bytes.Equal(req.Logprobs, []byte("false")):
		return p, 0, nil, unsupported("logprobs", "no log probabilities")
	case req.TopLogprobs != nil && *req.TopLogprobs != 0:
		return p, 0, nil, unsupported("top_logprobs", "no log probabilities")
	case req.PresencePenalty != nil && *req.PresencePenalty != 0:
		return p, 0, nil, unsupported("presence_penalty", "speculative decoding here is lossless for the target's own distribution")
	case req.FrequencyPenalty != nil && *req.FrequencyPenalty != 0:
		return p, 0, nil, unsupported("frequency_penalty", "speculative decoding here is lossless for the target's own distribution")
	case len(req.LogitBias) > 0:
		return p, 0, nil, unsupported("logit_bias", "speculative decoding here is lossless for the target's own distribution")
	case len(req.Tools) > 0 && !bytes.Equal(req.Tools, []byte("null")):
		return p, 0, nil, unsupported("tools", "no tool calls")
	case req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text":
		return p, 0, nil, unsupported("response_format", "text only")
	}
	// sampling: the config's, each field a request names overriding it
	if req.Temperature != nil {
		if *req.Temperature < 0 || *req.Temperature > 2 || math.IsNaN(*req.Temperature) {
			return p, 0, nil, badRequest("temperature", "invalid_value", "temperature %g must be in [0, 2]", *req.Temperature)
		}
		p.Temp = float32(*req.Temperature)
	}
	if req.TopP != nil {
		if !(*req.TopP > 0 && *req.TopP <= 1) {
			return p, 0, nil, badRequest("top_p", "invalid_value", "top_p %g must be in (0, 1]", *req.TopP)
		}
		p.TopP = float32(*req.TopP)
	}
	if req.TopK != nil {
		switch {
		case *req.TopK == -1:
			p.TopK = 0 // all tokens
		case *req.TopK < 0:
			return p, 0, nil, badRequest("top_k", "invalid_value", "top_k %d must be >= 0 (or -1: all tokens)", *req.TopK)
		default:
			p.TopK = *req.TopK
		}
	}
	if req.MinP != nil {
		if !(*req.MinP >= 0 && *req.MinP <= 1) {
			return p, 0, nil, badRequest("min_p", "invalid_value", "min_p %g must be in [0, 1]", *req.MinP)
		}
		p.MinP = float32(*req.MinP)
	}
	if req.Seed != nil {
		p.Seed = uint64(*req.Seed)
	} else if !p.Greedy() {
		p.Seed += uint64(s.nextID.Load()) // each request draws afresh, reproducibly per server run
	}
	n := 0
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v == nil {
			continue
		}
		if *v < 1 {
			return p, 0, nil, badRequest("max_tokens", "invalid_value", "max_tokens %d must be at least 1", *v)
		}
		if n == 0 || *v < n {
			n = *v
		}
	}
	stops, err := readStop(req.Stop)
	return p, n, stops, err
}

// readStop reads stop: a string or a list of up to 16 strings.
func readStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		raw, _ = json.Marshal([]string{one})
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or a list of strings")
	}
	if len(list) > 16 {
		return nil, badRequest("stop", "invalid_value", "stop has %d sequences; at most 16", len(list))
	}
	var out []string
	for _, s := range list {
		if len(s) > 256 {
			return nil, badRequest("stop", "invalid_value", "a stop sequence of %d bytes; at most 256", len(s))
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// promptIDs reads a completion prompt: a string, a list of one string, or
// a list of token ids.
func (s *Server) promptIDs(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest("prompt", "missing_required_parameter", "prompt is required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		if text == "" {
			return nil, badRequest("prompt", "invalid_value", "prompt is empty")
		}
		return s.pair.Target.Tok.Encode(text, true, false), nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 || texts[0] == "" {
			return nil, badRequest("prompt", "invalid_value", "prompt: one non-empty prompt per request (got %d)", len(texts))
		}
		return s.pair.Target.Tok.Encode(texts[0], true, false), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil && len(ids) > 0 {
		for _, id := range ids {
			if id < 0 || id >= s.pair.Target.Vocab {
				return nil, badRequest("prompt", "invalid_value", "prompt: token id %d is outside the vocabulary of %d", id, s.pair.Target.Vocab)
			}
		}
		return ids, nil
	}
	return nil, badRequest("prompt", "invalid_type", "prompt must be a string, a list of one string, or a list of token ids")
}

// chatPrompt renders the messages with the model's chat template and
// encodes the result, special tokens included.
func (s *Server) chatPrompt(msgs []chatMessage) ([]int, error) {
	if s.tmpl == nil {
		return nil, withCode(http.StatusBadRequest, "invalid_request_error", "no_chat_template", s.tmplErr.Error())
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "missing_required_parameter", "messages is required")
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value", "role %q: want system, developer, user, assistant or tool", m.Role)
		}
		content, err := messageText(m.Content)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "invalid_type", "%v", err)
		}
		msg := map[string]any{"role": m.Role, "content": content}
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
		return nil, badRequest("messages", "chat_template_error", "the model's chat template refused the messages: %v", err)
	}
	ids := tok.Encode(text, true, true)
	if len(ids) > 1 && tok.BOS >= 0 && ids[0] == tok.BOS && ids[1] == tok.BOS {
		ids = ids[1:] // the template wrote BOS itself
	}
	return ids, nil
}

// messageText is a message's content: a string, or the text of a list of
// text parts.
func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q: only text is supported", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) }
func (s *Server) chat(w http.ResponseWriter, r *http.Request)        { s.complete(w, r, true) }

// complete answers a completion or chat completion request, whole or
// streamed.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	t0 := time.Now()
	req, err := s.readRequest(w, r)
	if err != nil {
		s.record(nil, err)
		s.fail(w, r, err)
		return
	}
	smp, n, stops, err := s.check(req)
	var ids []int
	if err == nil {
		if chat {
			ids, err = s.chatPrompt(req.Messages)
		} else {
			ids, err = s.promptIDs(req.Prompt)
		}
	}
	if err == nil {
		n, err = s.checkRoom(len(ids), n)
	}
	if err == nil {
		if err = s.acquire(r.Context()); err != nil {
			switch {
			case errors.Is(err, errBusy), errors.Is(err, errClosing):
				err = withCode(http.StatusServiceUnavailable, "server_error", "server_busy", err.Error())
			default: // the client left while it waited
				err = withCode(499, "invalid_request_error", "client_closed", "the client closed the request while it waited")
			}
		}
	}
	if err != nil {
		s.record(nil, err)
		s.fail(w, r, err)
		return
	}
	defer s.release()
	seq := s.nextID.Add(1)
	id := fmt.Sprintf("cmpl-%d-%d", s.created.Unix(), seq)
	object := "text_completion"
	if chat {
		id, object = fmt.Sprintf("chatcmpl-%d-%d", s.created.Unix(), seq), "chat.completion"
	}
	created := time.Now().Unix()
	g := genRequest{ids: ids, maxTokens: n, sample: smp, stop: stops}
	var sse *eventStream
	if req.Stream {
		sse = newEventStream(w)
		if chat {
			sse.send(s.chunk(id, created, chat, map[string]any{"role": "assistant", "content": ""}, nil))
		}
		g.onText = func(text string) {
			if chat {
				sse.send(s.chunk(id, created, chat, map[string]any{"content": text}, nil))
			} else {
				sse.send(s.chunk(id, created, chat, text, nil))
			}
		}
	}
	out, err := s.generate(r.Context(), g)
	s.record(out, err)
	if err != nil {
		if r.Context().Err() != nil {
			err = withCode(http.StatusServiceUnavailable, "server_error", "cancelled", "the request was cancelled: "+context.Cause(r.Context()).Error())
		}
		if sse != nil {
			ae, ok := err.(*apiError)
			if !ok {
				ae = &apiError{Msg: err.Error(), Type: "server_error"}
			}
			sse.send(map[string]any{"error": ae})
			sse.done()
			s.logf("%s %s stream failed: %v", r.Method, r.URL.Path, err)
			return
		}
		s.fail(w, r, err)
		return
	}
	usage := map[string]int{"prompt_tokens": out.prompt, "completion_tokens": out.toks, "total_tokens": out.prompt + out.toks}
	timings := s.timings(out)
	s.logf("%s %s 200: %d+%d tokens, %.1f tokens/s, AAL %.2f, acceptance %.0f%%, %s", r.Method, r.URL.Path, out.prompt, out.toks,
		out.res.TokensPerSecond(), out.res.AAL(), 100*out.res.Acceptance(), time.Since(t0).Round(time.Millisecond))
	if sse != nil {
		final := s.chunk(id, created, chat, "", &out.finish)
		if chat {
			final = s.chunk(id, created, chat, map[string]any{}, &out.finish)
		}
		final["timings"] = timings
		sse.send(final)
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			sse.send(map[string]any{"id": id, "object": object + chunkSuffix(chat), "created": created, "model": s.model, "choices": []any{}, "usage": usage})
		}
		sse.done()
		return
	}
	choice := map[string]any{"index": 0, "finish_reason": out.finish, "logprobs": nil}
	if chat {
		choice["message"] = map[string]any{"role": "assistant", "content": out.text}
	} else {
		choice["text"] = out.text
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": object, "created": created, "model": s.model,
		"choices": []any{choice}, "usage": usage, "timings": timings})
}

// timings are a request's decoding figures (beside OpenAI's fields, as
// llama-server adds its own).
func (s *Server) timings(g *genResult) map[string]any {
	res := g.res
	d, a := 0, 0
	for _, st := range res.Steps {
		d += st.Drafted
		a += st.Accepted
	}
	return map[string]any{"plan": s.plan.String(), "prefill_ms": float64(res.Prefill.Microseconds()) / 1000, "decode_ms": float64(res.Decode.Microseconds()) / 1000,
		"tokens_per_second": res.TokensPerSecond(), "steps": len(res.Steps), "drafted": d, "accepted": a, "acceptance": res.Acceptance(), "aal": res.AAL()}
}

func chunkSuffix(chat bool) string {
	if chat {
		return ".chunk"
	}
	return ""
}

// chunk is one streamed event: for chat a delta, for a completion text.
func (s *Server) chunk(id string, created int64, chat bool, content any, finish *string) map[string]any {
	choice := map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil}
	object := "text_completion"
	if chat {
		choice["delta"] = content
		object = "chat.completion.chunk"
	} else {
		choice["text"] = content
	}
	return map[string]any{"id": id, "object": object, "created": created, "model": s.model, "choices": []any{choice}}
}

// eventStream writes server-sent events: "data: JSON" per event, and
// "data: [DONE]" at the end, as OpenAI's API streams.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error // the first write error: the client has gone
}

func newEventStream(w http.ResponseWriter) *eventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

func (e *eventStream) write(data []byte) {
	if e.err != nil {
		return
	}
	if _, e.err = e.w.Write(data); e.err == nil {
		e.err = e.rc.Flush()
	}
}

func (e *eventStream) send(v any) {
	var b bytes.Buffer
	b.WriteString("data: ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // ends with a newline
	b.WriteString("\n")
	e.write(b.Bytes())
}

func (e *eventStream) done() { e.write([]byte("data: [DONE]\n\n")) }
