package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"arborist/engine/gguf"
	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/profiles"
	"arborist/profiles/config"
)

// serveConfig writes a config.yaml for the stories pair with the plan.
func serveConfig(t *testing.T, target, draft string, plan spec.Plan, ctx int) *profiles.Config {
	t.Helper()
	c := &config.Config{Version: config.Version, Speculation: plan, Sampling: config.Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = config.Target{Path: target, Device: "cpu", Threads: 2, MaxSeqLen: ctx}
	c.Models.Draft = config.Draft{Kind: "model", Path: draft, Device: "cpu", Threads: 2}
	y, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, y, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := profiles.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// withChatTemplate copies a GGUF model, adding tokenizer.chat_template.
func withChatTemplate(t *testing.T, path, tmpl string) string {
	t.Helper()
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []gguf.WriteTensor
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: src.Data(ti)})
	}
	kvs := append(append([]gguf.KV(nil), src.KV...), gguf.String("tokenizer.chat_template", tmpl))
	out := filepath.Join(t.TempDir(), "chat.gguf")
	if err := gguf.WriteFile(out, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return out
}

var servePlan = spec.Plan{Strategy: "egt", EGT: []int{1, 1, 1, 1, 1, 1}, Branch: 1, WMax: 6, DepthPolicy: "threshold", DepthMin: 0.2}

// openBench opens the core on a new database in the test's temporary
// folder, closed when the test ends.
func openBench(t *testing.T) *profiles.Bench {
	t.Helper()
	b, err := profiles.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func openServer(t *testing.T, c *profiles.Config, opt Options) *Server {
	t.Helper()
	s, err := Open(context.Background(), openBench(t), c, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// post sends a JSON body and decodes the JSON answer.
func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("POST %s %s: the answer is not JSON: %v", url, body, err)
	}
	return resp.StatusCode, v
}

// stream sends a streaming request and returns its events' JSON, checking
// the stream ends with [DONE].
func stream(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("stream: status %d, content type %q", resp.StatusCode, ct)
	}
	var events []map[string]any
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || done {
			t.Fatalf("stream: unexpected line %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("stream: event %q: %v", data, err)
		}
		events = append(events, v)
	}
	if !done {
		t.Fatalf("stream ended without [DONE] after %d events", len(events))
	}
	return events
}

func choice(v map[string]any) map[string]any {
	cs, _ := v["choices"].([]any)
	if len(cs) != 1 {
		return nil
	}
	c, _ := cs[0].(map[string]any)
	return c
}

// TestServerGreedyEqualsRun: the server's greedy completion of a prompt,
// whole and streamed, is the text `arborist run` decodes with the same
// config (plan, sampling, prompt, budget); chat renders the model's own
// chat template (with its BOS written once) and decodes it the same way.
func TestServerGreedyEqualsRun(t *testing.T) {
	tmpl := "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
	target := withChatTemplate(t, modeltest.Stories260K(t), tmpl)
	c := serveConfig(t, target, modeltest.NoisyDraft(t), servePlan, 0)
	s := openServer(t, c, Options{})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	b := openBench(t)
	want := func(prompt string, n int) (string, int) {
		t.Helper()
		var text strings.Builder
		res, err := b.Run(context.Background(), profiles.PairSpec{Target: target, Draft: c.Models.Draft.Path, Threads: 2},
			profiles.RunOptions{Plan: servePlan, Sample: profiles.SampleParams{TopP: 1, Seed: 1}, MaxTokens: n, Prompts: []string{prompt}, NoStore: true,
				OnToken: func(_ int, piece string, _ bool) { text.WriteString(piece) }})
		if err != nil {
			t.Fatal(err)
		}
		return text.String(), res.Totals.Tokens
	}
	for _, prompt := range []string{"Once upon a time", "The little dog"} {
		wantText, wantToks := want(prompt, 40)
		code, v := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"model": %q, "prompt": %q, "max_tokens": 40}`, s.Model(), prompt))
		ch := choice(v)
		if code != 200 || ch == nil {
			t.Fatalf("completion: %d %v", code, v)
		}
		if ch["text"] != wantText {
			t.Errorf("%q: server %q, run %q", prompt, ch["text"], wantText)
		}
		usage := v["usage"].(map[string]any)
		if int(usage["completion_tokens"].(float64)) != wantToks {
			t.Errorf("%q: %v completion tokens, run decoded %d", prompt, usage["completion_tokens"], wantToks)
		}
		var streamed strings.Builder
		events := stream(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": 40, "stream": true, "stream_options": {"include_usage": true}}`, prompt))
		for _, e := range events[:len(events)-1] {
			streamed.WriteString(choice(e)["text"].(string))
		}
		if streamed.String() != wantText {
			t.Errorf("%q streamed: %q, run %q", prompt, streamed.String(), wantText)
		}
		if last := events[len(events)-1]; last["usage"] == nil || len(last["choices"].([]any)) != 0 {
			t.Errorf("include_usage: last event %v", last)
		}
		if fin := choice(events[len(events)-2]); fin["finish_reason"] == nil {
			t.Errorf("the last choice has no finish_reason: %v", fin)
		}
	}

	// chat: the template's text decoded as a completion of it
	wantText, _ := want("user: Once upon a time\nassistant:", 32)
	code, v := post(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 32}`)
	ch := choice(v)
	if code != 200 || ch == nil {
		t.Fatalf("chat: %d %v", code, v)
	}
	if msg := ch["message"].(map[string]any); msg["content"] != wantText || msg["role"] != "assistant" {
		t.Errorf("chat: %v, want %q", msg, wantText)
	}
	var streamed strings.Builder
	events := stream(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "text", "text": "Once upon a time"}]}], "max_tokens": 32, "stream": true}`)
	for _, e := range events {
		if d, ok := choice(e)["delta"].(map[string]any); ok {
			if s, ok := d["content"].(string); ok {
				streamed.WriteString(s)
			}
		}
		if e["object"] != "chat.completion.chunk" {
			t.Errorf("chat chunk object %v", e["object"])
		}
	}
	if streamed.String() != wantText {
		t.Errorf("chat streamed %q, want %q", streamed.String(), wantText)
	}

	// a stop sequence ends the text before it
	full, _ := want("Once upon a time", 40)
	cut := strings.Index(full[1:], " ") + 1 // the second word's space
	code, v = post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt": "Once upon a time", "max_tokens": 40, "stop": [%q]}`, full[cut:cut+3]))
	if ch := choice(v); code != 200 || ch["text"] != full[:cut] || ch["finish_reason"] != "stop" {
		t.Errorf("stop %q: %d %v, want text %q", full[cut:cut+3], code, v, full[:cut])
	}

	// the figures count the completed requests
	resp, err := http.Get(ts.URL + "/metrics?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st profiles.ServeStats
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Completed != 7 || st.Totals.Tokens == 0 || st.TPS <= 0 || st.AAL < 1 {
		t.Errorf("metrics: %+v", st)
	}
	resp, err = http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"arborist_tokens_per_second ", "arborist_acceptance ", "arborist_aal ", "arborist_requests_completed_total 7"} {
		if !strings.Contains(string(text), m) {
			t.Errorf("metrics text lacks %q:\n%s", m, text)
		}
	}
}

// TestServerRefusesBadRequests: malformed, oversized and unsupported
// requests get OpenAI-shaped JSON errors with the right status, and the
// server goes on serving.
func TestServerRefusesBadRequests(t *testing.T) {
	c := serveConfig(t, modeltest.Stories260K(t), modeltest.NoisyDraft(t), spec.Plan{Strategy: "chain", Gamma: 3}, 64)
	s := openServer(t, c, Options{MaxBody: 4096, ServeOptions: profiles.ServeOptions{MaxTokens: 32}})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	long := strings.Repeat("the cat sat on the mat. ", 30)
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/v1/completions", `{"prompt": "Once`, 400, "invalid_json"},
		{"/v1/completions", `{"prompt": 7}`, 400, "invalid_type"},
		{"/v1/completions", `{"max_tokens": "many", "prompt": "a"}`, 400, "invalid_type"},
		{"/v1/completions", `{"max_tokens": 4}`, 400, "missing_required_parameter"},
		{"/v1/completions", `{"prompt": "Once", "max_tokens": 33}`, 400, "invalid_value"},
		{"/v1/completions", `{"prompt": "Once", "max_tokens": 0}`, 400, "invalid_value"},
		{"/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": 8}`, long[:200]), 400, "context_length_exceeded"},
		{"/v1/completions", fmt.Sprintf(`{"prompt": %q}`, strings.Repeat(long, 10)), 413, "request_too_large"},
		{"/v1/completions", `{"prompt": "Once", "n": 2}`, 400, "unsupported_parameter"},
		{"/v1/completions", `{"prompt": "Once", "temperature": 3}`, 400, "invalid_value"},
		{"/v1/completions", `{"prompt": [1, 2, 999999]}`, 400, "invalid_value"},
		{"/v1/completions", `{"prompt": "Once", "stop": 5}`, 400, "invalid_type"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`, 400, "no_chat_template"},
		{"/v1/nothing", `{}`, 404, "not_found"},
	} {
		code, v := post(t, ts.URL+tc.path, tc.body)
		e, _ := v["error"].(map[string]any)
		if code != tc.status || e == nil || e["message"] == "" || e["type"] == nil || (tc.code != "" && e["code"] != tc.code) {
			t.Errorf("%s %.60s: %d %v, want %d with code %q", tc.path, tc.body, code, v, tc.status, tc.code)
		}
	}
	if !strings.Contains(s.Chat().Error(), "no chat template") {
		t.Errorf("chat refusal: %v", s.Chat())
	}
	resp, err := http.Get(ts.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/completions: %d", resp.StatusCode)
	}
	// still serving
	if code, v := post(t, ts.URL+"/v1/completions", `{"prompt": "Once upon a time", "max_tokens": 8}`); code != 200 || choice(v)["finish_reason"] == nil {
		t.Errorf("after the bad requests: %d %v", code, v)
	}
	if st := s.Stats(); st.Completed != 1 || st.Failed != 14 {
		t.Errorf("stats %+v, want 1 completed and 14 failed", st)
	}
	resp, err = http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct{ ID string }
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Data) != 1 || list.Data[0].ID != "stories260K" {
		t.Errorf("models: %+v", list)
	}
}

// waitFor waits until cond holds (a state the test caused), failing after
// a generous limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// holdTurn makes a request through the core that, once it has its turn,
// holds it until release is called; release returns once the request has.
func holdTurn(t *testing.T, s *Server) (release func()) {
	t.Helper()
	got, rel, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		s.core.Complete(context.Background(), profiles.ServeRequest{Text: "Once", MaxTokens: 1, OnStart: func(int64) {
			close(got)
			<-rel
		}})
	}()
	<-got
	return func() {
		close(rel)
		<-done
	}
}

// TestServerShutdown: when its context ends, the server refuses requests
// still waiting for their turn with 503, lets the request decoding finish
// and returns nil; a full queue is refused as busy.
func TestServerShutdown(t *testing.T) {
	c := serveConfig(t, modeltest.Stories260K(t), modeltest.NoisyDraft(t), spec.Plan{Strategy: "chain", Gamma: 3}, 0)
	s := openServer(t, c, Options{ServeOptions: profiles.ServeOptions{MaxQueue: 1}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	// a full queue: the turn held, one request waiting, the next refused
	release := holdTurn(t, s)
	queued := make(chan int, 1)
	go func() {
		code, _ := post(t, url+"/v1/completions", `{"prompt": "Once", "max_tokens": 4}`)
		queued <- code
	}()
	waitFor(t, "a request waits for its turn", func() bool { return s.Stats().Queued == 1 })
	if code, v := post(t, url+"/v1/completions", `{"prompt": "Once", "max_tokens": 4}`); code != 503 || v["error"].(map[string]any)["code"] != "server_busy" {
		t.Errorf("beyond the queue: %d %v", code, v)
	}
	release()
	if code := <-queued; code != 200 {
		t.Errorf("the queued request: %d", code)
	}

	// a streaming request decoding when shutdown begins finishes
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 48, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if first, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(first, "data: {") {
		t.Fatalf("first event %q, %v", first, err)
	}
	release = holdTurn(t, s) // the next turn held: a request arriving now waits
	waiting := make(chan int, 1)
	go func() {
		code, _ := post(t, url+"/v1/completions", `{"prompt": "Once", "max_tokens": 4}`)
		waiting <- code
	}()
	waitFor(t, "a request waits for its turn", func() bool { return s.Stats().Queued == 1 })
	cancel()
	if code := <-waiting; code != 503 {
		t.Errorf("a request waiting at shutdown: %d, want 503", code)
	}
	release()
	rest, _ := io.ReadAll(rd)
	resp.Body.Close()
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || !strings.Contains(string(rest), `"finish_reason":"`) {
		t.Errorf("the stream decoding at shutdown did not finish:\n%s", rest)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
