package profiles

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/serving"
)

// passGate holds a server's batch after a pass while it is closed
// (ServeOptions.OnPass), so a test sees the server in a known state:
// requests running, waiting, or gone, with no pass in between.
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

func (g *passGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

func (g *passGate) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxSeqs
}

// waitUntil waits until cond holds (a state the test caused), failing
// after a generous limit; it never samples a state after a sleep.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// servePair is a config.yaml of the stories pair with a chain plan, and
// the plan.
func serveStories(t *testing.T) (*config.Config, PairSpec, spec.Plan) {
	t.Helper()
	ps := storiesPair(t)
	plan := spec.Plan{Strategy: "chain", Gamma: 3}
	c := &config.Config{Version: config.Version, Speculation: plan, Sampling: config.Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = config.Target{Path: ps.Target, Device: "cpu", Threads: 2}
	c.Models.Draft = config.Draft{Kind: "model", Path: ps.Draft, Device: "cpu", Threads: 2}
	c, err := config.Load(writeConfig(t, c))
	if err != nil {
		t.Fatal(err)
	}
	return c, ps, plan
}

var batchPrompts = []string{"Once upon a time", "The cat sat", "Lily and Tom", "One day, a little", "There was a big",
	"The sun was", "A little dog named", "Timmy went to the"}

// TestServerBatchEqualsRun: eight greedy requests decoded together, under
// every policy (the plan at its size, plain, and the adaptive policy on a
// latency that makes it shrink drafts), each equal what Run decodes for
// its prompt alone, token for token; the passes held several requests at
// once.
func TestServerBatchEqualsRun(t *testing.T) {
	c, ps, plan := serveStories(t)
	ctx := context.Background()
	b := openBench(t)
	const n = 24
	want := make([]strings.Builder, len(batchPrompts))
	res, err := b.Run(ctx, ps, RunOptions{Plan: plan, Sample: SampleParams{TopP: 1, Seed: 1}, MaxTokens: n, Prompts: batchPrompts, NoStore: true,
		OnToken: func(pi int, piece string, _ bool) { want[pi].WriteString(piece) }})
	if err != nil || res.Totals.Tokens == 0 {
		t.Fatalf("run: %v", err)
	}
	for _, pol := range []struct {
		name    string
		opt     ServeOptions
		contain string
	}{
		{"plan", ServeOptions{Policy: config.PolicyPlan}, "plan"},
		{"plain", ServeOptions{Policy: config.PolicyPlain}, "plain"},
		// a pass costs 1 ms and 1 ms more for every row: drafts pay only
		// where they are accepted
		{"adaptive", ServeOptions{Policy: config.PolicyAdaptive, latency: func(rows int) time.Duration { return time.Duration(rows) * time.Millisecond }}, "adaptive"},
		// no --policy: config.yaml's serving.policy is replayed
		{"config", ServeOptions{}, "plain"},
	} {
		t.Run(pol.name, func(t *testing.T) {
			gate := &passGate{}
			opt := pol.opt
			c := *c
			if pol.name == "config" {
				c.Serving.Policy = config.PolicyPlain
			}
			opt.MaxTokens, opt.MaxSeqs, opt.OnPass = 64, len(batchPrompts), gate.onPass
			s, err := b.OpenServer(ctx, &c, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			defer gate.open() // before Close: a failing test never leaves the batch held
			if !strings.Contains(s.Policy(), pol.contain) {
				t.Errorf("policy %q, want %s", s.Policy(), pol.contain)
			}
			// the first request's first pass holds the batch until every
			// request has come: they then decode together
			gate.close()
			outs := make([]*Completion, len(batchPrompts))
			errs := make([]error, len(batchPrompts))
			var wg sync.WaitGroup
			for i, p := range batchPrompts {
				wg.Go(func() { outs[i], errs[i] = s.Complete(ctx, serving.Request{Text: p, MaxTokens: n}) })
				if i == 0 {
					waitUntil(t, "the first request runs", func() bool { return s.Stats().Running == 1 })
				}
			}
			waitUntil(t, "every request has come", func() bool { st := s.Stats(); return st.Running+st.Queued == len(batchPrompts) })
			gate.open()
			wg.Wait()
			for i := range batchPrompts {
				if errs[i] != nil {
					t.Errorf("request %d (%q): %v", i, batchPrompts[i], errs[i])
				} else if outs[i].Text != want[i].String() {
					t.Errorf("request %d (%q):\n got %q\nwant %q", i, batchPrompts[i], outs[i].Text, want[i].String())
				}
			}
			if m := gate.most(); m < len(batchPrompts)-1 {
				t.Errorf("the most requests in one pass: %d, want them together", m)
			}
			// a request's answer comes before the batch lets it go (its
			// cache freed at the pass's end): wait for that, not sample it
			waitUntil(t, "every request has left the batch", func() bool { st := s.Stats(); return st.Running == 0 && st.KVUsed == 0 })
			st := s.Stats()
			if st.Completed != len(batchPrompts) || st.Running != 0 || st.Queued != 0 || st.KVUsed != 0 || st.TTFT.N != len(batchPrompts) || st.TPOT.N == 0 {
				t.Errorf("stats after: %+v", st)
			}
			// a plain server gives its requests no draft source to
			// prefill, and opens no draft model
			if plain := pol.contain == "plain"; plain != (st.Plan == spec.PlainPlan().String()) || plain != (s.eng.Source == nil) || plain != (s.pair.Source == nil && s.pair.DraftModel == nil) {
				t.Errorf("policy %s: serves plan %q, draft source %v, draft model %v", s.Policy(), st.Plan, s.eng.Source != nil, s.pair.DraftModel != nil)
			}
		})
	}
}

// TestServerClientGone: a request whose client leaves while it decodes
// leaves the batch before the next pass, its cache freed at once, and the
// request waiting behind it runs; a full queue refuses the next as busy.
func TestServerClientGone(t *testing.T) {
	c, _, _ := serveStories(t)
	ctx := context.Background()
	b := openBench(t)
	gate := &passGate{}
	s, err := b.OpenServer(ctx, c, ServeOptions{MaxSeqs: 1, MaxQueue: 1, OnPass: gate.onPass, Policy: config.PolicyPlan})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer gate.open()
	gate.close()
	cctx, leave := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		_, err := s.Complete(cctx, serving.Request{Text: "Once upon a time", MaxTokens: 200})
		gone <- err
	}()
	waitUntil(t, "the request runs", func() bool { st := s.Stats(); return st.Running == 1 && st.KVUsed > 0 })
	waiting := make(chan error, 1)
	go func() {
		_, err := s.Complete(ctx, serving.Request{Text: "Once", MaxTokens: 4})
		waiting <- err
	}()
	waitUntil(t, "a request waits", func() bool { return s.Stats().Queued == 1 })
	var re *serving.RequestError
	if _, err := s.Complete(ctx, serving.Request{Text: "Once", MaxTokens: 4}); !errors.As(err, &re) || !re.Busy || re.Code != "server_busy" {
		t.Errorf("beyond the queue: %v, want busy", err)
	}
	leave() // the client goes while its pass is held
	waitUntil(t, "the server sees the client gone", func() bool { return s.Stats().Gone == 1 })
	gate.open()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("the request whose client left: %v", err)
	}
	if err := <-waiting; err != nil {
		t.Errorf("the request waiting behind it: %v", err)
	}
	waitUntil(t, "every cache is freed", func() bool { st := s.Stats(); return st.Running == 0 && st.KVUsed == 0 })
	if st := s.Stats(); st.Completed != 1 || st.Emitted >= 200 {
		t.Errorf("stats %+v: the request that left must not have decoded its 200 tokens", st)
	}
}

// TestServerRefusesOverMemory: options and requests the machine cannot
// hold are refused before anything is allocated for requests, naming the
// bound: a KV budget beyond the machine's memory, more requests at once
// than the budget holds, a request whose cache is larger than the whole
// budget.
func TestServerRefusesOverMemory(t *testing.T) {
	c, _, _ := serveStories(t)
	ctx := context.Background()
	b := openBench(t)
	for _, cs := range []struct {
		opt  ServeOptions
		want string
	}{
		{ServeOptions{KVBudget: 1 << 62}, "more than this machine's"},
		{ServeOptions{KVBudget: 64 << 10, MaxSeqs: 64}, "--max-seqs 64: the KV budget"},
		{ServeOptions{MaxSeqs: 0 - 1}, "--max-seqs -1"},
		{ServeOptions{MaxSeqs: serving.MaxSeqs + 1}, fmt.Sprintf("--max-seqs %d", serving.MaxSeqs+1)},
		{ServeOptions{Policy: "fastest"}, `--policy "fastest"`},
	} {
		s, err := b.OpenServer(ctx, c, cs.opt)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), cs.want) {
			t.Errorf("%+v: %v, want %q", cs.opt, err, cs.want)
		}
	}
	// a budget that holds a short request but not a long one
	s, err := b.OpenServer(ctx, c, ServeOptions{KVBudget: 64 << 10, MaxSeqs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Complete(ctx, serving.Request{Text: "Once", MaxTokens: 4}); err != nil {
		t.Errorf("a short request: %v", err)
	}
	var re *serving.RequestError
	_, err = s.Complete(ctx, serving.Request{Text: "Once", MaxTokens: 400})
	if !errors.As(err, &re) || re.Code != "context_length_exceeded" || !strings.Contains(re.Message, "budget") {
		t.Errorf("a request larger than the KV budget: %v", err)
	}
	// the short request's cache is freed at its pass's end, after its
	// answer: waited for; the refused one never held any
	waitUntil(t, "nothing is held after the refusal", func() bool { st := s.Stats(); return st.KVUsed == 0 && st.Running == 0 })
}

// TestServerPromptBytes: the bytes of prompts being tokenised are bounded
// over all requests: a request waits while others hold the bound, runs
// once they give it back, and a prompt larger than the whole bound is
// refused before it is tokenised.
func TestServerPromptBytes(t *testing.T) {
	c, _, _ := serveStories(t)
	ctx := context.Background()
	b := openBench(t)
	s, err := b.OpenServer(ctx, c, ServeOptions{MaxPromptBytes: 64, Policy: config.PolicyPlan})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var re *serving.RequestError
	if _, err := s.Complete(ctx, serving.Request{Text: strings.Repeat("a", 65), MaxTokens: 4}); !errors.As(err, &re) || re.Code != "prompt_too_large" || re.Param != "prompt" {
		t.Errorf("a prompt over the whole bound: %v", err)
	}
	// other requests hold 60 of the 64 bytes: a 16-byte prompt waits
	if err := s.gate.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Complete(ctx, serving.Request{Text: "Once upon a time", MaxTokens: 4})
		done <- err
	}()
	waitUntil(t, "the request waits for prompt bytes", func() bool { st := s.Stats(); return st.PromptWaiting == 1 && st.PromptBytes == 60 })
	select {
	case err := <-done:
		t.Fatalf("the request did not wait: %v", err)
	default:
	}
	s.gate.release(60)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.PromptBytes != 0 || st.PromptWaiting != 0 || st.MaxPromptBytes != 64 {
		t.Errorf("after: %+v", st)
	}
}

// TestServerChatTemplateBounds: a chat template that would take the
// server down (a macro calling itself, a huge loop, a string doubled in a
// loop, content repeated 100 million times) is refused for the request
// with a clear error; the server stays up and answers the next request.
func TestServerChatTemplateBounds(t *testing.T) {
	c, _, _ := serveStories(t)
	ctx := context.Background()
	b := openBench(t)
	for _, tc := range []struct{ name, tmpl string }{
		{"a macro calling itself", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
		{"a loop over a huge range", "{% for i in range(1000000000) %}x{% endfor %}"},
		{"a string doubled in a loop", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"},
		{"content repeated", "{% for m in messages %}{{ m['content'] * 100000000 }}{% endfor %}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := b.OpenServer(ctx, c, ServeOptions{ChatTemplate: tc.tmpl, Policy: config.PolicyPlan})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var re *serving.RequestError
			_, err = s.Complete(ctx, serving.Request{Chat: true, Messages: []serving.Message{{Role: "user", Content: "hello"}}, MaxTokens: 4})
			if !errors.As(err, &re) || re.Code != "chat_template_error" || !strings.Contains(re.Message, "template limit") {
				t.Fatalf("%v, want a chat_template_error naming the limit", err)
			}
			if out, err := s.Complete(ctx, serving.Request{Text: "Once", MaxTokens: 4}); err != nil || out.Tokens == 0 {
				t.Fatalf("the next request: %v", err)
			}
		})
	}
	// the negative control: an ordinary template renders and decodes
	s, err := b.OpenServer(ctx, c, ServeOptions{ChatTemplate: "{% for m in messages %}{{ m['content'] }}{% endfor %}", Policy: config.PolicyPlan})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if out, err := s.Complete(ctx, serving.Request{Chat: true, Messages: []serving.Message{{Role: "user", Content: "Once upon a time"}}, MaxTokens: 4}); err != nil || out.Tokens == 0 {
		t.Fatalf("an ordinary template: %v", err)
	}
}
