package profiles

import (
	"context"
	"errors"
	"strings"
	"testing"

	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/serving"
)

// TestServerComplete: the core's serving object decodes a request as Run
// decodes the same prompt, numbers requests in the order they get their
// turn, ends the text before a stop sequence, refuses what is out of
// bounds as a serving.RequestError naming the field, and once draining refuses
// new requests as busy; every request counts in its figures.
func TestServerComplete(t *testing.T) {
	ps := storiesPair(t)
	plan := spec.Plan{Strategy: "chain", Gamma: 3}
	c := &config.Config{Version: config.Version, Speculation: plan, Sampling: config.Sampling{TopP: 1, Seed: 1}}
	c.Models.Target = config.Target{Path: ps.Target, Device: "cpu", Threads: 2}
	c.Models.Draft = config.Draft{Kind: "model", Path: ps.Draft, Device: "cpu", Threads: 2}
	c, err := config.Load(writeConfig(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := openBench(t)
	s, err := b.OpenServer(ctx, c, ServeOptions{MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var want strings.Builder
	res, err := b.Run(ctx, ps, RunOptions{Plan: plan, Sample: SampleParams{TopP: 1, Seed: 1}, MaxTokens: 24, Prompts: []string{"Once upon a time"}, NoStore: true,
		OnToken: func(_ int, piece string, _ bool) { want.WriteString(piece) }})
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	var seqs []int64
	texts, flushed, unflushed := 0, 0, 0 // OnText calls, OnFlush calls, texts not yet flushed
	out, err := s.Complete(ctx, serving.Request{Text: "Once upon a time", MaxTokens: 24,
		OnText:  func(t string) { streamed.WriteString(t); texts++; unflushed++ },
		OnFlush: func() { flushed++; unflushed = 0 },
		OnStart: func(seq int64) { seqs = append(seqs, seq) }})
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != want.String() || streamed.String() != out.Text || out.Tokens != res.Totals.Tokens || out.Seq != 1 || len(seqs) != 1 || seqs[0] != 1 {
		t.Fatalf("completion %+v (streamed %q, started %v), run decoded %q (%d tokens)", out, streamed.String(), seqs, want.String(), res.Totals.Tokens)
	}
	// every text flushed, at most once a pass (a chain's pass emits
	// several tokens), never with nothing to send
	if unflushed != 0 || flushed < 1 || flushed > res.Totals.Steps+1 || flushed > texts ||
		(res.Totals.Tokens > res.Totals.Steps+1 && flushed >= texts) {
		t.Errorf("%d texts, %d flushes, %d texts left unflushed; %d passes", texts, flushed, unflushed, res.Totals.Steps)
	}
	// a stop sequence: the text ends before it
	cut := strings.Index(out.Text[1:], " ") + 1
	stopped, err := s.Complete(ctx, serving.Request{Text: "Once upon a time", MaxTokens: 24, Stop: []string{"", out.Text[cut : cut+3]}})
	if err != nil || stopped.Text != out.Text[:cut] || stopped.Finish != "stop" || stopped.Seq != 2 {
		t.Fatalf("stop %q: %+v, %v", out.Text[cut:cut+3], stopped, err)
	}
	two, neg := 2.5, -2
	for _, c := range []struct {
		req         serving.Request
		param, code string
	}{
		{serving.Request{Text: "Once", Temperature: &two}, "temperature", "invalid_value"},
		{serving.Request{Text: "Once", TopK: &neg}, "top_k", "invalid_value"},
		{serving.Request{Text: "Once", MaxTokens: 65}, "max_tokens", "invalid_value"},
		// past the context as well: the request's own bound is named first
		{serving.Request{Text: "Once upon a time", MaxTokens: 100000}, "max_tokens", "invalid_value"},
		{serving.Request{Text: strings.Repeat("the cat sat on the mat. ", 400), MaxTokens: 8}, "max_tokens", "context_length_exceeded"},
		{serving.Request{IDs: []int{1, 1 << 20}}, "prompt", "invalid_value"},
		{serving.Request{Text: "Once", Stop: make([]string, 17)}, "stop", "invalid_value"},
		{serving.Request{Chat: true, Messages: []serving.Message{{Role: "user", Content: "hi"}}}, "", "no_chat_template"},
	} {
		var re *serving.RequestError
		if _, err := s.Complete(ctx, c.req); !errors.As(err, &re) || re.Param != c.param || re.Code != c.code || re.Message == "" {
			t.Errorf("%+v: %v, want %s on %q", c.req, err, c.code, c.param)
		}
	}
	s.Drain()
	var re *serving.RequestError
	if _, err := s.Complete(ctx, serving.Request{Text: "Once", MaxTokens: 4}); !errors.As(err, &re) || re.Code != "server_busy" {
		t.Errorf("after Drain: %v", err)
	}
	// the last request's pass ends after its answer: waited for, not sampled
	waitUntil(t, "the batch is idle", func() bool { st := s.Stats(); return !st.Busy && st.Queued == 0 })
	if st := s.Stats(); st.Requests != 11 || st.Completed != 2 || st.Failed != 9 || st.Totals.Tokens == 0 || st.Busy || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRuneCut: streamed text is cut only between whole UTF-8 characters.
func TestRuneCut(t *testing.T) {
	b := []byte("aé€") // 1 + 2 + 3 bytes
	for n, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 3, 4: 3, 5: 3, 6: 6} {
		if got := runeCut(b, n); got != want {
			t.Errorf("runeCut(%q, %d) = %d, want %d", b, n, got, want)
		}
	}
	if got := runeCut(b[:5], 5); got != 3 { // the euro sign incomplete
		t.Errorf("runeCut of an incomplete character = %d, want 3", got)
	}
	if got := firstStop([]byte("one two three"), []string{"three", "two"}); got != 4 {
		t.Errorf("firstStop = %d, want 4", got)
	}
}
