package spec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"arborist/engine/drafter"
	"arborist/engine/generate"
	"arborist/engine/model"
	"arborist/engine/tokenizer"
)

// cycleBudgets is a policy that gives each request, pass after pass, every
// budget from its whole plan down to none in turn (each request at a
// different point of the cycle): every shrunk size of every plan is run.
type cycleBudgets struct{ pass *int }

func (c cycleBudgets) Budgets(_ int, loads []Load, out []int) {
	*c.pass++
	for i, l := range loads {
		out[i] = l.Nodes - (*c.pass+i)%(l.Nodes+1)
	}
}

// batchRequest is one request of a batch test: its prompt and token
// budget, the pass before which it joins, and (cancelAt > 0) the number
// of tokens after which its client goes away.
type batchRequest struct {
	prompt   []int
	max      int
	join     int
	cancelAt int
}

// eightRequests are eight requests of different prompts and lengths that
// join at different passes, the sixth leaving once it has six tokens.
func eightRequests(t *testing.T, tok *tokenizer.Tokenizer) []batchRequest {
	ps := prompts(t)
	var out []batchRequest
	for i := range 8 {
		text := ps[i%len(ps)]
		if i >= len(ps) {
			text += " and then they"
		}
		r := batchRequest{prompt: tok.Encode(text, true, false), max: 12 + 5*i, join: []int{0, 0, 0, 1, 2, 4, 7, 11}[i]}
		if i == 5 {
			r.cancelAt = 6
		}
		out = append(out, r)
	}
	return out
}

// soloOutputs is each request's plain greedy decoding.
func soloOutputs(t *testing.T, m *model.Model, reqs []batchRequest) [][]int {
	t.Helper()
	want := make([][]int, len(reqs))
	for i, r := range reqs {
		out, _, err := generate.Run(context.Background(), m, r.prompt, generate.Options{MaxTokens: r.max, StopAtEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out
	}
	return want
}

// stepAll runs b's passes until none runs.
func stepAll(t *testing.T, b *Batch) {
	t.Helper()
	for {
		n, err := b.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// runBatch runs reqs through b, each with a source mk makes (nil: plain
// decoding), joining at their passes, and returns each one's handle.
func runBatch(t *testing.T, ctx context.Context, b *Batch, reqs []batchRequest, cfg Config, mk func() (drafter.Source, bool)) []*Handle {
	t.Helper()
	hs := make([]*Handle, len(reqs))
	cancels := make([]context.CancelFunc, len(reqs))
	defer func() {
		for _, c := range cancels {
			if c != nil {
				c()
			}
		}
	}()
	submit := func(i int) {
		r := reqs[i]
		c := cfg
		c.MaxTokens, c.StopAtEOS = r.max, true
		rctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		if r.cancelAt > 0 {
			n := 0
			c.OnToken = func(int, bool) {
				if n++; n == r.cancelAt {
					cancel() // the client goes away: the request leaves before the next pass
				}
			}
		}
		var src drafter.Source
		conc := false
		if mk != nil {
			src, conc = mk()
		}
		h, err := b.Submit(rctx, Request{Prompt: r.prompt, Config: c, Source: src, Concurrent: conc})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		hs[i] = h
	}
	for pass := 0; ; pass++ {
		for i, r := range reqs {
			if r.join == pass {
				submit(i)
			}
		}
		n, err := b.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && !slices.ContainsFunc(reqs, func(r batchRequest) bool { return r.join > pass }) {
			break
		}
		if pass > 10000 {
			t.Fatal("the batch does not end")
		}
	}
	for i, h := range hs {
		select {
		case <-h.Done():
		default:
			t.Fatalf("request %d has not ended although the batch is idle (%+v)", i, b.Stats())
		}
	}
	return hs
}

// TestBatchGreedyLossless: eight requests of different prompts and
// lengths, joining at different passes, one of them cancelled mid-way,
// each produce exactly their solo greedy output, for every strategy's
// examples and every draft source (each request forking its own), while
// the budgets their steps get cycle from none to the whole plan, and with
// their caches admitted by a budget that holds only some of them at once.
func TestBatchGreedyLossless(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	reqs := eightRequests(t, p.target.Tok)
	want := soloOutputs(t, p.target, reqs)
	for _, name := range Strategies() {
		s := registry[name]
		for ei, plan := range s.Examples() {
			for sname, mk := range sources(p, 512) {
				if !plan.NeedsSource() && sname != "draft" {
					continue
				}
				t.Run(fmt.Sprintf("%s#%d/%s", name, ei, sname), func(t *testing.T) {
					src, conc := mk()
					if plan.Concurrent() && !conc {
						t.Skip("drafting beside the target needs the drafter's own device")
					}
					fork := func() (drafter.Source, bool) {
						if !plan.NeedsSource() {
							return nil, false
						}
						f, err := drafter.Fork(src)
						if err != nil {
							t.Fatal(err)
						}
						return f, conc
					}
					pass := 0
					cfg, err := plan.Config()
					if err != nil {
						t.Fatal(err)
					}
					// room for the first four requests' caches (and the
					// largest): later ones wait for earlier ones to leave
					room, largest := 0, 0
					for i, r := range reqs {
						c := cfg
						c.MaxTokens = r.max
						n, err := (&run{e: &Engine{Target: p.target}, cfg: c}).capacity(r.prompt)
						if err != nil {
							t.Fatal(err)
						}
						if i < 4 {
							room += n
						}
						largest = max(largest, n)
					}
					room = max(room, largest)
					budget := model.NewCacheBudget(p.target.KVBytesAs(room, p.target.KVType))
					b := NewBatch(p.target, BatchOptions{Policy: cycleBudgets{&pass}, Budget: budget})
					maxWait := 0
					b.o.OnPass = func(s PassStats) { maxWait = max(maxWait, s.Waiting) }
					hs := runBatch(t, ctx, b, reqs, cfg, fork)
					accepted := 0
					for i, h := range hs {
						res, err := h.Result()
						if reqs[i].cancelAt > 0 {
							if !errors.Is(err, context.Canceled) || len(res.Tokens) < reqs[i].cancelAt || len(res.Tokens) >= len(want[i]) ||
								!slices.Equal(res.Tokens, want[i][:len(res.Tokens)]) {
								t.Fatalf("request %d, cancelled after %d tokens: %v, tokens %v, want a prefix of %v", i, reqs[i].cancelAt, err, res.Tokens, want[i])
							}
							continue
						}
						if err != nil {
							t.Fatalf("request %d: %v", i, err)
						}
						if !slices.Equal(res.Tokens, want[i]) {
							t.Fatalf("request %d:\n got %v\nwant %v", i, res.Tokens, want[i])
						}
						for _, st := range res.Steps {
							accepted += st.Accepted
						}
					}
					if used, held := budget.Used(); used != 0 || held != 0 {
						t.Errorf("every request ended, %d bytes of %d caches still taken", used, held)
					}
					if maxWait == 0 {
						t.Error("no request ever waited for room in the cache budget")
					}
					if plan.NeedsSource() && sname == "draft" && accepted == 0 {
						t.Error("no draft token was ever accepted")
					}
					// the first three requests' prompts end in one pass: a
					// model drafter reads them in one pass of its own
					if _, isModel := src.(*drafter.Model); isModel && plan.NeedsSource() && len(b.draftPasses) == 0 {
						t.Error("no pass's prompts were read into their draft models together")
					}
				})
			}
		}
	}
}

// TestBatchLeaves: a request whose client goes away leaves before the
// next pass, its cache's bytes back in the budget and its source freed at
// once, while the others go on to their solo outputs; a request that
// ends frees both too.
func TestBatchLeaves(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	budget := model.NewCacheBudget(1 << 30)
	b := NewBatch(p.target, BatchOptions{Budget: budget})
	freed := map[int]int{}
	ids := [][]int{p.target.Tok.Encode("Once upon a time", true, false), p.target.Tok.Encode("The little bird wanted to fly", true, false)}
	var hs []*Handle
	var cancel context.CancelFunc
	for i, pr := range ids {
		rctx, c := context.WithCancel(ctx)
		if i == 0 {
			cancel = c
		} else {
			defer c()
		}
		src := &freeCounter{Model: drafter.NewModel(p.draft, 0, 512, "draft"), freed: &freed, id: i}
		h, err := b.Submit(rctx, Request{Prompt: pr, Config: Config{Plan: ChainPlan(3), MaxTokens: 30}, Source: src})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for range 3 {
		if _, err := b.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, held := budget.Used()
	if held != 2 || len(freed) != 0 {
		t.Fatalf("two requests running hold %d caches, %d sources freed", held, len(freed))
	}
	cancel()
	if _, err := b.Step(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hs[0].Done():
	default:
		t.Fatal("a cancelled request was still running after the next pass")
	}
	if _, held := budget.Used(); held != 1 || freed[0] != 1 {
		t.Fatalf("after the client left: %d caches held, its source freed %d times", held, freed[0])
	}
	if _, err := hs[0].Result(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled request ended with %v", err)
	}
	stepAll(t, b)
	res, err := hs[1].Wait()
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := generate.Run(ctx, p.target, ids[1], generate.Options{MaxTokens: 30})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want) {
		t.Fatalf("the request left running:\n got %v\nwant %v", res.Tokens, want)
	}
	if used, held := budget.Used(); used != 0 || held != 0 || freed[1] != 1 {
		t.Fatalf("every request ended: %d bytes in %d caches, the last source freed %d times", used, held, freed[1])
	}
}

// TestBatchOnAdmit: a request's OnAdmit is called once, when it leaves
// the queue for the running set, before any of its tokens; a request
// that leaves while it waits is never admitted.
func TestBatchOnAdmit(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	b := NewBatch(p.target, BatchOptions{MaxSeqs: 1})
	ids := p.target.Tok.Encode("Once upon a time", true, false)
	admitted := make([]int, 3)
	tokensAtAdmit := make([]int, 3)
	tokens := make([]int, 3)
	var hs []*Handle
	wctx, leave := context.WithCancel(ctx)
	for i := range 3 {
		rctx := ctx
		if i == 2 {
			rctx = wctx
		}
		cfg := Config{Plan: ChainPlan(2), MaxTokens: 6, OnToken: func(int, bool) { tokens[i]++ }}
		h, err := b.Submit(rctx, Request{Prompt: ids, Config: cfg, Source: drafter.NewModel(p.draft, 0, 512, "draft"),
			OnAdmit: func() { admitted[i]++; tokensAtAdmit[i] = tokens[i] }})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if _, err := b.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if admitted[0] != 1 || admitted[1] != 0 || admitted[2] != 0 {
		t.Fatalf("after the first pass with room for one: admitted %v", admitted)
	}
	leave() // the third leaves while it waits
	stepAll(t, b)
	for i, h := range hs {
		_, err := h.Wait()
		if i == 2 {
			if !errors.Is(err, context.Canceled) || admitted[2] != 0 {
				t.Errorf("the request that left while waiting: %v, admitted %d times", err, admitted[2])
			}
			continue
		}
		if err != nil || admitted[i] != 1 || tokensAtAdmit[i] != 0 || tokens[i] == 0 {
			t.Errorf("request %d: %v, admitted %d times with %d tokens then, %d in all", i, err, admitted[i], tokensAtAdmit[i], tokens[i])
		}
	}
}

// freeCounter counts how often its source is freed.
type freeCounter struct {
	*drafter.Model
	freed *map[int]int
	id    int
}

func (f *freeCounter) Free() {
	(*f.freed)[f.id]++
	f.Model.Free()
}

// TestBatchPrefillChunks: a long prompt is prefilled in chunks of the
// configured rows, one a pass, while the requests already running decode
// a step in every one of those passes; its output is its solo output.
func TestBatchPrefillChunks(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	long := p.target.Tok.Encode(strings.Join(prompts(t), ". "), true, false)
	short := p.target.Tok.Encode("Tom and his dog went to the park", true, false)
	const chunk, n = 8, 200
	var passes []PassStats
	b := NewBatch(p.target, BatchOptions{Prefill: chunk, OnPass: func(s PassStats) { passes = append(passes, s) }})
	cfg := Config{Plan: ChainPlan(3), MaxTokens: n}
	mk := func() drafter.Source { return drafter.NewModel(p.draft, 0, 512, "draft") }
	h1, err := b.Submit(ctx, Request{Prompt: short, Config: cfg, Source: mk()})
	if err != nil {
		t.Fatal(err)
	}
	chunks := func(prompt []int) int { return (len(prompt) - 1 + chunk - 1) / chunk }
	for range chunks(short) + 1 { // its prompt, and its first step
		if _, err := b.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	first := len(passes)
	h2, err := b.Submit(ctx, Request{Prompt: long, Config: cfg, Source: mk()})
	if err != nil {
		t.Fatal(err)
	}
	stepAll(t, b)
	// the short request emits at most gamma + 1 = 4 tokens a pass, so it
	// decodes in every pass of the long prompt's prefill
	got := 0
	for _, s := range passes[first:] {
		if s.PrefillRows == 0 {
			break
		}
		got++
		if s.PrefillRows > chunk || s.Decoding != 1 || s.Seqs != 2 {
			t.Fatalf("pass %d took %d prompt rows (the chunk is %d) beside %d steps of %d sequences", s.Index, s.PrefillRows, chunk, s.Decoding, s.Seqs)
		}
	}
	if got != chunks(long) {
		t.Fatalf("the long prompt took %d passes, want %d for %d tokens in chunks of %d", got, chunks(long), len(long), chunk)
	}
	for i, c := range []struct {
		h      *Handle
		prompt []int
	}{{h1, short}, {h2, long}} {
		res, err := c.h.Wait()
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := generate.Run(ctx, p.target, c.prompt, generate.Options{MaxTokens: n})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Tokens, want) {
			t.Fatalf("request %d:\n got %v\nwant %v", i, res.Tokens, want)
		}
	}
}

// TestBatchSubmitRefuses: a request is refused before anything is
// allocated for it, naming the bound: a cache larger than the whole
// budget, a plan that cannot run, a prompt that leaves no room.
func TestBatchSubmitRefuses(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	budget := model.NewCacheBudget(p.target.KVBytesAs(30, p.target.KVType))
	b := NewBatch(p.target, BatchOptions{Budget: budget})
	ids := p.target.Tok.Encode("Once upon a time", true, false)
	other, err := (&Engine{Target: p.target}).Prefill(ctx, p.target.Tok.Encode("Once upon a day", true, false))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Free()
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"over budget", Request{Prompt: ids, Config: Config{Plan: PlainPlan(), MaxTokens: 100}}, "larger than the whole cache budget"},
		{"bad plan", Request{Prompt: ids, Config: Config{Plan: ChainPlan(0), MaxTokens: 10}, Source: drafter.NewNGram(2, p.target.Vocab)}, "gamma"},
		{"no source", Request{Prompt: ids, Config: Config{Plan: ChainPlan(2), MaxTokens: 10}}, "needs a draft source"},
		{"no room", Request{Prompt: ids, Config: Config{Plan: PlainPlan(), MaxTokens: 10, Ctx: len(ids)}}, "leaves no room"},
		{"another prompt's prefix", Request{Prompt: ids, Config: Config{Plan: PlainPlan(), MaxTokens: 10}, From: other}, "a prefix of another prompt"},
	} {
		if _, err := b.Submit(ctx, c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if st := b.Stats(); st.Waiting != 0 {
		t.Fatalf("refused requests wait: %+v", st)
	}
	h, err := b.Submit(ctx, Request{Prompt: ids, Config: Config{Plan: PlainPlan(), MaxTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- b.Serve(sctx) }()
	res, err := h.Wait()
	stop()
	if err != nil || len(res.Tokens) != 10 {
		t.Fatalf("a request that fits: %v, %d tokens", err, len(res.Tokens))
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v once its context was done", err)
	}
}

// TestBatchServeWakes: Serve waits for requests and runs them as they
// come, from any goroutine, and ends the ones left with its context's
// error when it stops.
func TestBatchServeWakes(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx, stop := context.WithCancel(context.Background())
	b := NewBatch(p.target, BatchOptions{MaxSeqs: 2})
	done := make(chan error)
	go func() { done <- b.Serve(ctx) }()
	ids := p.target.Tok.Encode("Once upon a time", true, false)
	want, _, err := generate.Run(ctx, p.target, ids, generate.Options{MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	var hs []*Handle
	for range 5 {
		h, err := b.Submit(ctx, Request{Prompt: ids, Config: Config{Plan: ChainPlan(2), MaxTokens: 20}, Source: drafter.NewNGram(3, p.target.Vocab)})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		res, err := h.Wait()
		if err != nil || !slices.Equal(res.Tokens, want) {
			t.Fatalf("request %d: %v, %v", i, err, res.Tokens)
		}
	}
	// a request still running when Serve stops ends with its error: Serve
	// is stopped from the request's first token
	var once sync.Once
	h, err := b.Submit(ctx, Request{Prompt: ids, Config: Config{Plan: PlainPlan(), MaxTokens: 400,
		OnToken: func(int, bool) { once.Do(stop) }}})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve returned %v", err)
	}
	res, err := h.Wait()
	if !errors.Is(err, context.Canceled) || len(res.Tokens) != 1 {
		t.Fatalf("the request running when Serve stopped: %v after %d tokens", err, len(res.Tokens))
	}
}

// recordBudgets is Goodput that remembers the budgets it gave.
type recordBudgets struct {
	Goodput
	seen map[[2]int]bool // (budget, nodes)
}

func (r recordBudgets) Budgets(fixed int, loads []Load, out []int) {
	r.Goodput.Budgets(fixed, loads, out)
	for i, l := range loads {
		r.seen[[2]int{out[i], l.Nodes}] = true
	}
}

// TestBatchGoodputLossless: under the goodput policy, whose budgets follow
// each request's running acceptance and the pass's size, eight requests
// still produce exactly their solo greedy output, and the policy did give
// steps less than their plan and more than none.
func TestBatchGoodputLossless(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx := context.Background()
	reqs := eightRequests(t, p.target.Tok)
	want := soloOutputs(t, p.target, reqs)
	// a pass of 2 ms and 0.25 ms a row
	lat := func(rows int) time.Duration { return 2*time.Millisecond + time.Duration(rows)*250*time.Microsecond }
	for _, plan := range []Plan{ChainPlan(6), TreePlan([]int{3, 2, 1}), {Strategy: "egt", EGT: []int{1, 2, 3, 3, 2}, Branch: 2, WMax: 12}} {
		t.Run(plan.String(), func(t *testing.T) {
			pol := recordBudgets{Goodput{Latency: lat}, map[[2]int]bool{}}
			b := NewBatch(p.target, BatchOptions{Policy: pol})
			cfg, err := plan.Config()
			if err != nil {
				t.Fatal(err)
			}
			hs := runBatch(t, ctx, b, reqs, cfg, func() (drafter.Source, bool) {
				return drafter.NewModel(p.draft, 0, 512, "draft"), false
			})
			for i, h := range hs {
				res, _ := h.Result()
				if reqs[i].cancelAt == 0 && !slices.Equal(res.Tokens, want[i]) {
					t.Fatalf("request %d:\n got %v\nwant %v", i, res.Tokens, want[i])
				}
			}
			shrunk := false
			for k := range pol.seen {
				shrunk = shrunk || (k[0] > 0 && k[0] < k[1])
			}
			if !shrunk {
				t.Errorf("the policy never shrank a plan: %v", fmt.Sprint(pol.seen))
			}
		})
	}
}

// failingSource is a draft source whose drafting fails.
type failingSource struct{ drafter.Source }

func (failingSource) Expand(context.Context, [][]int, [][]float32) error {
	return errors.New("the drafter broke")
}

// TestBatchFailedStepMakesRoom: a request whose step fails leaves with
// the error, alone, and the room it leaves admits a waiting request at
// once: the pass goes on with it, and Serve, with no other request
// coming to wake it, runs it to its end.
func TestBatchFailedStepMakesRoom(t *testing.T) {
	p := loadPair(t, "stories260K.gguf", "bench/draft-noisy-0.05.gguf")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ids := p.target.Tok.Encode("Once upon a time", true, false)
	want, _, err := generate.Run(ctx, p.target, ids, generate.Options{MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, serve := range []bool{false, true} {
		b := NewBatch(p.target, BatchOptions{MaxSeqs: 1})
		broken, err := b.Submit(ctx, Request{Prompt: ids, Config: Config{Plan: ChainPlan(3), MaxTokens: 20}, Source: failingSource{drafter.NewNGram(3, p.target.Vocab)}})
		if err != nil {
			t.Fatal(err)
		}
		next, err := b.Submit(ctx, Request{Prompt: ids, Config: Config{Plan: PlainPlan(), MaxTokens: 20}})
		if err != nil {
			t.Fatal(err)
		}
		if serve {
			go b.Serve(ctx)
		} else {
			stepAll(t, b)
		}
		if _, err := broken.Wait(); err == nil || !strings.Contains(err.Error(), "the drafter broke") {
			t.Fatalf("the broken request ended with %v", err)
		}
		res, err := next.Wait()
		if err != nil || !slices.Equal(res.Tokens, want) {
			t.Fatalf("the waiting request: %v, %v", err, res.Tokens)
		}
	}
}
