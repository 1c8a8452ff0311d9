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
	"sync"
	"testing"
	"time"

	"arborist/engine/gguf"
	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/profiles"
	"arborist/profiles/config"
)

// serveConfig writes a config.yaml for the stories pair with the plan.
func serveConfig(t *testing.T, target, draft string, plan spec.Plan, ctx int) *config.Config {
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
	got, err := config.Load(p)
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

func openServer(t *testing.T, c *config.Config, opt Options) *Server {
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

// passGate holds the server's batch after a pass while it is closed
// (ServeOptions.OnPass), so a test sees requests running, waiting or gone
// with no pass in between.
type passGate struct {
	mu      sync.Mutex
	held    chan struct{} // nil: open
	maxSeqs int           // the most requests one pass held
}

func (g *passGate) onPass(seqs int) {
	g.mu.Lock()
	g.maxSeqs = max(g.maxSeqs, seqs)
	c := g.held
	g.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (g *passGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
}

// most is the most requests one pass held so far.
func (g *passGate) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxSeqs
}

func (g *passGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// TestServerShutdown: when its context ends, the server refuses requests
// still waiting for room in the batch with 503, lets the requests
// decoding finish and returns nil; a full queue is refused as busy, with
// Retry-After.
func TestServerShutdown(t *testing.T) {
	c := serveConfig(t, modeltest.Stories260K(t), modeltest.NoisyDraft(t), spec.Plan{Strategy: "chain", Gamma: 3}, 0)
	gate := &passGate{}
	s := openServer(t, c, Options{ServeOptions: profiles.ServeOptions{MaxQueue: 1, MaxSeqs: 1, OnPass: gate.onPass}})
	t.Cleanup(gate.open) // before Close: a failing test never leaves the batch held
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	// a full queue: the batch held with one request running, one waiting,
	// the next refused
	gate.close()
	running := make(chan int, 1)
	go func() {
		code, _ := post(t, url+"/v1/completions", `{"prompt": "Once", "max_tokens": 4}`)
		running <- code
	}()
	waitFor(t, "a request runs", func() bool { return s.Stats().Running == 1 })
	queued := make(chan int, 1)
	go func() {
		code, _ := post(t, url+"/v1/completions", `{"prompt": "Once", "max_tokens": 4}`)
		queued <- code
	}()
	waitFor(t, "a request waits for room", func() bool { return s.Stats().Queued == 1 })
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Once", "max_tokens": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	var busy map[string]any
	json.NewDecoder(resp.Body).Decode(&busy)
	resp.Body.Close()
	if e, _ := busy["error"].(map[string]any); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || e["code"] != "server_busy" {
		t.Errorf("beyond the queue: %d (Retry-After %q) %v", resp.StatusCode, resp.Header.Get("Retry-After"), busy)
	}
	gate.open()
	if code := <-running; code != 200 {
		t.Errorf("the running request: %d", code)
	}
	if code := <-queued; code != 200 {
		t.Errorf("the queued request: %d", code)
	}

	// a streaming request decoding when shutdown begins finishes: the
	// batch held after its first pass, a request arriving now waits
	gate.close()
	streamed := make(chan string, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 48, "stream": true}`))
		if err != nil {
			streamed <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		streamed <- string(b)
	}()
	waitFor(t, "the streaming request runs", func() bool { return s.Stats().Running == 1 })
	waiting := make(chan int, 1)
	go func() {
		code, _ := post(t, url+"/v1/completions", `{"prompt": "Once", "max_tokens": 4}`)
		waiting <- code
	}()
	waitFor(t, "a request waits for room", func() bool { return s.Stats().Queued == 1 })
	cancel()
	if code := <-waiting; code != 503 {
		t.Errorf("a request waiting at shutdown: %d, want 503", code)
	}
	gate.open() // the batch goes on: the stream decoding finishes
	if rest := <-streamed; !strings.HasSuffix(rest, "data: [DONE]\n\n") || !strings.Contains(rest, `"finish_reason":"`) {
		t.Errorf("the stream decoding at shutdown did not finish:\n%s", rest)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestServerConcurrentEqualsRun: eight greedy requests sent together over
// HTTP decode in one batch, and each answer equals what run decodes for
// its prompt alone; /metrics then counts them, consistently with their
// answers (tokens, requests, latencies, nothing left running or held).
func TestServerConcurrentEqualsRun(t *testing.T) {
	target := modeltest.Stories260K(t)
	c := serveConfig(t, target, modeltest.NoisyDraft(t), servePlan, 0)
	gate := &passGate{}
	s := openServer(t, c, Options{ServeOptions: profiles.ServeOptions{MaxSeqs: 8, OnPass: gate.onPass}})
	t.Cleanup(gate.open)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	prompts := []string{"Once upon a time", "The cat sat", "Lily and Tom", "One day, a little", "There was a big",
		"The sun was", "A little dog named", "Timmy went to the"}
	want := make([]strings.Builder, len(prompts))
	if _, err := openBench(t).Run(context.Background(), profiles.PairSpec{Target: target, Draft: c.Models.Draft.Path, Threads: 2},
		profiles.RunOptions{Plan: servePlan, Sample: profiles.SampleParams{TopP: 1, Seed: 1}, MaxTokens: 32, Prompts: prompts, NoStore: true,
			OnToken: func(pi int, piece string, _ bool) { want[pi].WriteString(piece) }}); err != nil {
		t.Fatal(err)
	}
	gate.close() // the first request's first pass waits for the others
	got := make([]string, len(prompts))
	tokens := make([]int, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			code, v := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": 32}`, p))
			if ch := choice(v); code == 200 && ch != nil {
				got[i], _ = ch["text"].(string)
				tokens[i] = int(v["usage"].(map[string]any)["completion_tokens"].(float64))
			} else {
				t.Errorf("%q: %d %v", p, code, v)
			}
		})
		if i == 0 {
			waitFor(t, "the first request runs", func() bool { return s.Stats().Running == 1 })
		}
	}
	waitFor(t, "every request has come", func() bool { st := s.Stats(); return st.Running+st.Queued == len(prompts) })
	gate.open()
	wg.Wait()
	sum := 0
	for i := range prompts {
		if got[i] != want[i].String() {
			t.Errorf("%q: server %q, run alone %q", prompts[i], got[i], want[i].String())
		}
		sum += tokens[i]
	}
	if m := gate.most(); m < len(prompts)-1 {
		t.Errorf("the most requests in one pass: %d, want them together", m)
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		var name string
		var v float64
		if _, err := fmt.Sscanf(line, "%s %g", &name, &v); err == nil && !strings.HasPrefix(name, "#") {
			metrics[name] = v
		}
	}
	for name, want := range map[string]float64{
		"arborist_requests_total": 8, "arborist_requests_completed_total": 8, "arborist_requests_queued": 0,
		"arborist_requests_running": 0, "arborist_max_seqs": 8, "arborist_completion_tokens_total": float64(sum),
		"arborist_tokens_in_flight": 0, "arborist_kv_used_bytes": 0, "arborist_body_bytes_in_flight": 0, "arborist_prompt_bytes_in_flight": 0,
	} {
		if v, ok := metrics[name]; !ok || v != want {
			t.Errorf("/metrics %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	for _, name := range []string{"arborist_tokens_per_second", "arborist_throughput_tokens_per_second", "arborist_acceptance",
		"arborist_time_to_first_token_seconds_p50", "arborist_time_per_output_token_seconds_p90", "arborist_emitted_tokens_total", "arborist_passes_total",
		"arborist_kv_spare_bytes"} { // the ended requests' caches, kept for the next ones
		if metrics[name] <= 0 {
			t.Errorf("/metrics %s = %v, want > 0", name, metrics[name])
		}
	}
	if metrics["arborist_emitted_tokens_total"] < float64(sum) || metrics["arborist_time_to_first_token_seconds_p90"] < metrics["arborist_time_to_first_token_seconds_p50"] {
		t.Errorf("/metrics inconsistent:\n%s", body)
	}
}

// TestServerClientGoneFreesSequence: a streaming client that disconnects
// mid-decoding has its request leave the batch before the next pass, its
// KV cache freed, without decoding the rest of its budget.
func TestServerClientGoneFreesSequence(t *testing.T) {
	c := serveConfig(t, modeltest.Stories260K(t), modeltest.NoisyDraft(t), spec.Plan{Strategy: "chain", Gamma: 3}, 0)
	gate := &passGate{}
	s := openServer(t, c, Options{ServeOptions: profiles.ServeOptions{OnPass: gate.onPass}})
	t.Cleanup(gate.open)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	gate.close()
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 200, "stream": true}`))
	req.Header.Set("Content-Type", "application/json")
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		gone <- err
	}()
	waitFor(t, "the request runs", func() bool { st := s.Stats(); return st.Running == 1 && st.KVUsed > 0 })
	leave()
	waitFor(t, "the server sees the client gone", func() bool { return s.Stats().Gone == 1 })
	gate.open()
	<-gone
	// the batch frees the sequence before the request's own goroutine
	// counts it failed: both waited for
	waitFor(t, "its sequence is freed and the request counted failed", func() bool {
		st := s.Stats()
		return st.Running == 0 && st.KVUsed == 0 && st.Failed == 1
	})
	if st := s.Stats(); st.Completed != 0 || st.Failed != 1 || st.Emitted >= 200 {
		t.Errorf("stats %+v: the request whose client left must end without decoding its budget", st)
	}
}
