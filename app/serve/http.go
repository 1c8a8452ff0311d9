package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"arborist/profiles/serving"
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

// refusal is a request the core refused, as OpenAI's API answers it: 503
// with Retry-After when the server is busy (a full queue, too many tokens
// in flight, shutting down: clients retry), 413 for a prompt larger than
// the server tokenises at once, 400 for the rest.
func refusal(e *serving.RequestError) *apiError {
	switch {
	case e.Busy:
		return withCode(http.StatusServiceUnavailable, "server_error", e.Code, e.Message)
	case e.Code == "prompt_too_large":
		ae := withCode(http.StatusRequestEntityTooLarge, "invalid_request_error", e.Code, e.Message)
		ae.Param = &e.Param
		return ae
	}
	return badRequest(e.Param, e.Code, "%s", e.Message)
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
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "model": s.model, "plan": s.plan})
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
	fmt.Fprintf(&b, "# Arborist server: model %s, plan %s, policy %s; up to %d requests decode together in one batch\n", st.Model, st.Plan, st.Policy, st.MaxSeqs)
	for _, m := range []struct {
		name string
		v    float64
	}{
		{"arborist_uptime_seconds", st.Uptime.Seconds()},
		{"arborist_requests_total", float64(st.Requests)},
		{"arborist_requests_completed_total", float64(st.Completed)},
		{"arborist_requests_failed_total", float64(st.Failed)},
		{"arborist_requests_queued", float64(st.Queued)},
		{"arborist_requests_running", float64(st.Running)},
		{"arborist_max_seqs", float64(st.MaxSeqs)},
		{"arborist_max_queue", float64(st.MaxQueue)},
		{"arborist_passes_total", float64(st.Passes)},
		{"arborist_emitted_tokens_total", float64(st.Emitted)},
		{"arborist_throughput_tokens_per_second", st.Throughput},
		{"arborist_tokens_in_flight", float64(st.TokensInFlight)},
		{"arborist_max_tokens_in_flight", float64(st.MaxTokensInFlight)},
		{"arborist_kv_budget_bytes", float64(st.KVBudget)},
		{"arborist_kv_used_bytes", float64(st.KVUsed)},
		{"arborist_kv_spare_bytes", float64(st.KVSpare)},
		{"arborist_body_bytes_in_flight", float64(st.BodyBytes)},
		{"arborist_prompt_bytes_in_flight", float64(st.PromptBytes)},
		{"arborist_prompt_waiting", float64(st.PromptWaiting)},
		{"arborist_time_to_first_token_seconds_p50", st.TTFT.P50},
		{"arborist_time_to_first_token_seconds_p90", st.TTFT.P90},
		{"arborist_time_per_output_token_seconds_p50", st.TPOT.P50},
		{"arborist_time_per_output_token_seconds_p90", st.TPOT.P90},
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
	return map[string]any{"id": s.model, "object": "model", "created": s.started.Unix(), "owned_by": "arborist"}
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
	defer body.Close() // the body is read whole here: its bytes are given back once decoded
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

// decode reads a request as the core takes it: it refuses what this
// server does not implement, naming the field, and reads the budget, the
// stop sequences, the prompt and the sampling (which the core bounds).
func (s *Server) decode(req *request, chat bool) (serving.Request, error) {
	sr := serving.Request{Chat: chat, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, MinP: req.MinP, Seed: req.Seed}
	unsupported := func(param, what string) error {
		return badRequest(param, "unsupported_parameter", "%s is not supported by this server (%s)", param, what)
	}
	switch {
	case req.N != nil && *req.N != 1:
		return sr, unsupported("n", "one choice per request")
	case req.BestOf != nil && *req.BestOf != 1:
		return sr, unsupported("best_of", "one choice per request")
	case req.Echo:
		return sr, unsupported("echo", "the prompt is not repeated")
	case req.Suffix != nil && *req.Suffix != "":
		return sr, unsupported("suffix", "no insertion")
	case len(req.Logprobs) > 0 && !bytes.Equal(req.Logprobs, []byte("null")) && !bytes.Equal(req.Logprobs, []byte("false")):
		return sr, unsupported("logprobs", "no log probabilities")
	case req.TopLogprobs != nil && *req.TopLogprobs != 0:
		return sr, unsupported("top_logprobs", "no log probabilities")
	case req.PresencePenalty != nil && *req.PresencePenalty != 0:
		return sr, unsupported("presence_penalty", "speculative decoding here is lossless for the target's own distribution")
	case req.FrequencyPenalty != nil && *req.FrequencyPenalty != 0:
		return sr, unsupported("frequency_penalty", "speculative decoding here is lossless for the target's own distribution")
	case len(req.LogitBias) > 0:
		return sr, unsupported("logit_bias", "speculative decoding here is lossless for the target's own distribution")
	case len(req.Tools) > 0 && !bytes.Equal(req.Tools, []byte("null")):
		return sr, unsupported("tools", "no tool calls")
	case req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text":
		return sr, unsupported("response_format", "text only")
	}
	// max_tokens and its newer name: the smaller where both are given
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v == nil {
			continue
		}
		if *v < 1 {
			return sr, badRequest("max_tokens", "invalid_value", "max_tokens %d must be at least 1", *v)
		}
		if sr.MaxTokens == 0 || *v < sr.MaxTokens {
			sr.MaxTokens = *v
		}
	}
	var err error
	if sr.Stop, err = readStop(req.Stop); err != nil {
		return sr, err
	}
	if chat {
		sr.Messages, err = s.messages(req.Messages)
	} else {
		sr.Text, sr.IDs, err = readPrompt(req.Prompt)
	}
	return sr, err
}

// readStop reads stop: a string or a list of strings.
func readStop(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or a list of strings")
	}
	return list, nil
}

// readPrompt reads a completion prompt: a string, a list of one string, or
// a list of token ids.
func readPrompt(raw json.RawMessage) (string, []int, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil, badRequest("prompt", "missing_required_parameter", "prompt is required")
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		if text == "" {
			return "", nil, badRequest("prompt", "invalid_value", "prompt is empty")
		}
		return text, nil, nil
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) != 1 || texts[0] == "" {
			return "", nil, badRequest("prompt", "invalid_value", "prompt: one non-empty prompt per request (got %d)", len(texts))
		}
		return texts[0], nil, nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil && len(ids) > 0 {
		return "", ids, nil
	}
	return "", nil, badRequest("prompt", "invalid_type", "prompt must be a string, a list of one string, or a list of token ids")
}

// messages reads the chat messages' text; a server without a chat
// template refuses chat before reading them.
func (s *Server) messages(msgs []chatMessage) ([]serving.Message, error) {
	if err := s.core.Chat(); err != nil {
		return nil, withCode(http.StatusBadRequest, "invalid_request_error", "no_chat_template", err.Error())
	}
	out := make([]serving.Message, len(msgs))
	for i, m := range msgs {
		content, err := messageText(m.Content)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "invalid_type", "%v", err)
		}
		out[i] = serving.Message{Role: m.Role, Content: content, Name: m.Name}
	}
	return out, nil
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
	release, err := s.holdBody(r)
	if err != nil {
		s.refused.Add(1)
		s.fail(w, r, err)
		return
	}
	req, err := s.readRequest(w, r)
	release()
	var sr serving.Request
	if err == nil {
		sr, err = s.decode(req, chat)
	}
	if err != nil {
		s.refused.Add(1)
		s.fail(w, r, err)
		return
	}
	model := s.model
	started := s.started.Unix()
	object := "text_completion"
	if chat {
		object = "chat.completion"
	}
	var id string
	var created int64
	var sse *eventStream
	begun := false // the request left the queue for the batch
	sr.OnStart = func(seq int64) {
		begun = true
		id = fmt.Sprintf("cmpl-%d-%d", started, seq)
		if chat {
			id = fmt.Sprintf("chatcmpl-%d-%d", started, seq)
		}
		created = time.Now().Unix()
		if req.Stream {
			sse = newEventStream(w)
			if chat {
				sse.send(chunk(id, model, created, chat, map[string]any{"role": "assistant", "content": ""}, nil))
			}
		}
	}
	if req.Stream {
		sr.OnText = func(text string) {
			if chat {
				sse.queue(chunk(id, model, created, chat, map[string]any{"content": text}, nil))
			} else {
				sse.queue(chunk(id, model, created, chat, text, nil))
			}
		}
		sr.OnFlush = func() { sse.flush() }
	}
	out, err := s.core.Complete(r.Context(), sr)
	if err != nil {
		var re *serving.RequestError
		switch {
		case errors.As(err, &re):
			err = refusal(re)
		case !begun: // the client left while it waited
			err = withCode(499, "invalid_request_error", "client_closed", "the client closed the request while it waited")
		case r.Context().Err() != nil:
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
	usage := map[string]int{"prompt_tokens": out.Prompt, "completion_tokens": out.Tokens, "total_tokens": out.Prompt + out.Tokens}
	t := &out.Totals
	timings := map[string]any{"plan": s.plan, "prefill_ms": float64(t.Prefill.Microseconds()) / 1000, "decode_ms": float64(t.Decode.Microseconds()) / 1000,
		"tokens_per_second": t.TPS(), "steps": t.Steps, "drafted": t.Drafted, "accepted": t.Accepted, "acceptance": t.Acceptance(), "aal": t.AAL()}
	s.logf("%s %s 200: %d+%d tokens, %.1f tokens/s, AAL %.2f, acceptance %.0f%%, %s", r.Method, r.URL.Path, out.Prompt, out.Tokens,
		t.TPS(), t.AAL(), 100*t.Acceptance(), time.Since(t0).Round(time.Millisecond))
	if sse != nil {
		final := chunk(id, model, created, chat, "", &out.Finish)
		if chat {
			final = chunk(id, model, created, chat, map[string]any{}, &out.Finish)
		}
		final["timings"] = timings
		sse.send(final)
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			sse.send(map[string]any{"id": id, "object": object + chunkSuffix(chat), "created": created, "model": model, "choices": []any{}, "usage": usage})
		}
		sse.done()
		return
	}
	choice := map[string]any{"index": 0, "finish_reason": out.Finish, "logprobs": nil}
	if chat {
		choice["message"] = map[string]any{"role": "assistant", "content": out.Text}
	} else {
		choice["text"] = out.Text
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": object, "created": created, "model": model,
		"choices": []any{choice}, "usage": usage, "timings": timings})
}

func chunkSuffix(chat bool) string {
	if chat {
		return ".chunk"
	}
	return ""
}

// chunk is one streamed event: for chat a delta, for a completion text.
func chunk(id, model string, created int64, chat bool, content any, finish *string) map[string]any {
	choice := map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil}
	object := "text_completion"
	if chat {
		choice["delta"] = content
		object = "chat.completion.chunk"
	} else {
		choice["text"] = content
	}
	return map[string]any{"id": id, "object": object, "created": created, "model": model, "choices": []any{choice}}
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

// write sends data at once.
func (e *eventStream) write(data []byte) {
	e.put(data)
	e.flush()
}

// put writes data into the response's buffer (nothing after a failed
// write: the client has gone).
func (e *eventStream) put(data []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(data)
	}
}

func (e *eventStream) send(v any) {
	e.queue(v)
	e.flush()
}

// queue writes an event into the response's buffer without sending it:
// the events of one pass's tokens go to the client together (flush).
func (e *eventStream) queue(v any) {
	if e.err != nil {
		return
	}
	var b bytes.Buffer
	b.WriteString("data: ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // ends with a newline
	b.WriteString("\n")
	e.put(b.Bytes())
}

// flush sends what was queued.
func (e *eventStream) flush() {
	if e.err == nil {
		e.err = e.rc.Flush()
	}
}

func (e *eventStream) done() { e.write([]byte("data: [DONE]\n\n")) }
