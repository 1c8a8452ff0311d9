package profiles

import (
	"context"
	"strings"
	"testing"

	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/serving"
)

// TestRunAndServeDraftAlike: one config.yaml that samples (temperature
// 0.8, top-p 0.95, seed 7), run as `run --config` runs it and served by
// the core's serving object, drafts and emits the same tokens: the same
// steps, drafts and acceptances, and the same text. Both give the
// config's sampling to the decoding, whose draft source proposes at it.
// Negative control: the server at another temperature decodes otherwise,
// so the comparison can fail.
func TestRunAndServeDraftAlike(t *testing.T) {
	ps := storiesPair(t)
	c := &config.Config{Version: config.Version, Speculation: spec.Plan{Strategy: "chain", Gamma: 3},
		Sampling: config.Sampling{Temperature: 0.8, TopP: 0.95, Seed: 7}}
	c.Models.Target = config.Target{Path: ps.Target, Device: "cpu", Threads: 2}
	c.Models.Draft = config.Draft{Kind: "model", Path: ps.Draft, Device: "cpu", Threads: 2}
	path := writeConfig(t, c)
	ctx := context.Background()
	b := openBench(t)
	const prompt, n = "Once upon a time", 40

	r, err := b.ConfigRun(ctx, path, Overrides{NoStore: true})
	if err != nil || len(r.Refused) > 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	if r.Options.Sample.Greedy() {
		t.Fatalf("the config's run is greedy: %+v", r.Options.Sample)
	}
	var ran strings.Builder
	opt := r.Options
	opt.Prompts, opt.MaxTokens, opt.NoStore = []string{prompt}, n, true
	opt.OnToken = func(_ int, piece string, _ bool) { ran.WriteString(piece) }
	res, err := b.Run(ctx, r.Pair, opt)
	if err != nil {
		t.Fatal(err)
	}

	loaded, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.OpenServer(ctx, loaded, ServeOptions{MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed := int64(c.Sampling.Seed) // the config's; a request without one draws afresh
	out, err := s.Complete(ctx, serving.Request{Text: prompt, MaxTokens: n, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	type drafting struct{ Tokens, Steps, Drafted, Accepted int }
	of := func(t Totals) drafting { return drafting{t.Tokens, t.Steps, t.Drafted, t.Accepted} }
	if out.Text != ran.String() || of(out.Totals) != of(res.Totals) {
		t.Fatalf("served %q, %+v\n     ran %q, %+v", out.Text, of(out.Totals), ran.String(), of(res.Totals))
	}
	if res.Totals.Drafted == 0 || res.Totals.Accepted == res.Totals.Drafted {
		t.Fatalf("%+v: nothing drafted, or every draft accepted (the sampling would not matter)", of(res.Totals))
	}

	cooler := 0.5
	other, err := s.Complete(ctx, serving.Request{Text: prompt, MaxTokens: n, Seed: &seed, Temperature: &cooler})
	if err != nil {
		t.Fatal(err)
	}
	if other.Text == out.Text && of(other.Totals) == of(out.Totals) {
		t.Fatal("temperatures 0.5 and 0.8 decoded alike: the comparison above cannot fail")
	}
}
