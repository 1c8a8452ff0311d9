package costmodel

import (
	"strings"
	"testing"
	"time"

	"arborist/engine/spec"
	"arborist/profiles/latency"
)

// passCurve is a stand-in curve of passes of seqs sequences: a fixed
// cost (the weights, read once) and perRow a row, at seqs*1..64 rows.
func passCurve(seqs int, fixed, perRow time.Duration) PassCurve {
	var pts []latency.Point
	for w := seqs; w <= 64; w *= 2 {
		pts = append(pts, latency.Point{W: w, Median: fixed + time.Duration(w)*perRow, Reps: 5})
	}
	return PassCurve{Seqs: seqs, Verify: pts}
}

// loadCosts: passes whose rows cost little beside the weights (steep:
// false) or a lot (steep: true, a compute-bound machine).
func loadCosts(perRow time.Duration) Costs {
	c := Costs{Overhead: 50 * time.Microsecond}
	for _, s := range []int{1, 2, 4, 8} {
		c.Passes = append(c.Passes, passCurve(s, 10*time.Millisecond, perRow))
	}
	c.Verify = c.Passes[0].Verify
	return c
}

func rankAt(t *testing.T, c Costs, levels []int) []LoadLevel {
	t.Helper()
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	var preds []Prediction
	for _, g := range []int{2, 4, 7} {
		pr, err := price(Plan{Strategy: "chain", Gamma: g})
		if err != nil {
			t.Fatal(err)
		}
		preds = append(preds, pr)
	}
	return RankLoads(preds, acc, c, levels, Requests{Prompt: 100}, 10, price)
}

func find(lv LoadLevel, policy string, gamma int) (LoadPrediction, int) {
	for i, lp := range lv.Ranked {
		if lp.Policy == policy && (policy == PolicyPlain || lp.Plan.Gamma == gamma) {
			return lp, i
		}
	}
	return LoadPrediction{}, -1
}

// TestRankLoadsPerConcurrency: where a pass's rows are nearly free,
// speculation pays at every concurrency; where each row costs much (a
// compute-bound pass), the fixed long chain that wins at one request
// loses to plain batching at eight, and the adaptive policy is never
// below the better of the two (it may choose either's budgets). Plain
// batching's speedup is 1 at every level, its aggregate tokens/s grows
// with the requests, and each level is ranked by aggregate tokens/s.
func TestRankLoadsPerConcurrency(t *testing.T) {
	steep := rankAt(t, loadCosts(2*time.Millisecond), []int{1, 8})
	one, eight := steep[0], steep[1]
	if one.Err != "" || eight.Err != "" {
		t.Fatalf("levels not priced: %q %q", one.Err, eight.Err)
	}
	for _, lv := range steep {
		for i := 1; i < len(lv.Ranked); i++ {
			if lv.Ranked[i].TokensPerSec > lv.Ranked[i-1].TokensPerSec {
				t.Fatalf("C=%d: not ranked by aggregate tokens/s at %d", lv.Concurrency, i)
			}
		}
	}
	p1, _ := find(one, PolicyPlain, 0)
	p8, _ := find(eight, PolicyPlain, 0)
	if p1.Speedup != 1 || p8.Speedup != 1 || p8.TokensPerSec <= p1.TokensPerSec {
		t.Errorf("plain batching: %.0f tokens/s at 1, %.0f at 8 (speedups %.2f, %.2f)", p1.TokensPerSec, p8.TokensPerSec, p1.Speedup, p8.Speedup)
	}
	f1, _ := find(one, PolicyFixed, 7)
	f8, _ := find(eight, PolicyFixed, 7)
	if f1.Speedup <= 1 {
		t.Errorf("the chain of 7 at one request: %.2fx, want a gain", f1.Speedup)
	}
	if f8.Speedup >= 1 {
		t.Errorf("the chain of 7 at eight requests on a compute-bound pass: %.2fx, want a loss", f8.Speedup)
	}
	if f8.Rows != 8*8 || f8.Low > f8.Speedup || f8.High < f8.Speedup {
		t.Errorf("fixed chain at 8: %d rows, interval %.2f-%.2f around %.2f", f8.Rows, f8.Low, f8.High, f8.Speedup)
	}
	for _, lv := range steep {
		g, _ := find(lv, PolicyGoodput, 7)
		f, _ := find(lv, PolicyFixed, 7)
		p, _ := find(lv, PolicyPlain, 0)
		if g.TokensPerSec < 0.999*max(f.TokensPerSec, p.TokensPerSec) {
			t.Errorf("C=%d: the adaptive policy at %.2fx (budget %.1f), fixed %.2fx", lv.Concurrency, g.Speedup, g.Budget, f.Speedup)
		}
		if g.TPOT <= 0 || g.TTFT <= g.Pass {
			t.Errorf("C=%d: TPOT %v, TTFT %v (a pass %v)", lv.Concurrency, g.TPOT, g.TTFT, g.Pass)
		}
	}
	g8, _ := find(eight, PolicyGoodput, 7)
	t.Logf("compute-bound: chain of 7 %.2fx at 1, %.2fx at 8; adaptive at 8 %.2fx on %.1f nodes; plain %.0f and %.0f tokens/s", f1.Speedup, f8.Speedup, g8.Speedup, g8.Budget, p1.TokensPerSec, p8.TokensPerSec)
	if g8.Budget >= 7 {
		t.Errorf("the adaptive policy kept the whole chain at 8 on a compute-bound pass (budget %.1f)", g8.Budget)
	}

	// nearly free rows: the chain pays at eight too
	flat := rankAt(t, loadCosts(10*time.Microsecond), []int{8})
	if f, _ := find(flat[0], PolicyFixed, 7); f.Speedup <= 1 {
		t.Errorf("the chain of 7 at eight requests with nearly free rows: %.2fx", f.Speedup)
	}
}

// TestRankLoadsBounds: a concurrency between measured pass sizes is
// priced between them; one past the most measured is not priced (the
// level says which to profile); a pass wider than its curve leaves the
// plan out, never extrapolated.
func TestRankLoadsBounds(t *testing.T) {
	c := loadCosts(2 * time.Millisecond)
	c.Passes[2] = passCurve(4, 20*time.Millisecond, 2*time.Millisecond) // passes of 4 dearer than of 2
	lv := rankAt(t, c, []int{2, 3, 4, 16})
	p2, _ := find(lv[0], PolicyPlain, 0)
	p3, _ := find(lv[1], PolicyPlain, 0)
	p4, _ := find(lv[2], PolicyPlain, 0)
	per := func(p LoadPrediction) time.Duration { return p.Pass }
	if !(per(p3) > per(p2) && per(p3) < per(p4)) {
		t.Errorf("a pass of 3 sequences %v, not between 2's %v and 4's %v", p3.Pass, p2.Pass, p4.Pass)
	}
	if lv[3].Err == "" || !strings.Contains(lv[3].Err, "--seqs 16") || len(lv[3].Ranked) != 0 {
		t.Errorf("16 sequences past the most measured: %+v", lv[3])
	}
	// chains of 7 at 8 requests fill 64 rows; of 15 they would need 128
	c = loadCosts(2 * time.Millisecond)
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	long, err := price(Plan{Strategy: "chain", Gamma: 15})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PredictLoad(long, acc, c, 8, PolicyFixed, Requests{Prompt: 100}, price); err == nil {
		t.Error("a pass of 128 rows priced on a curve measured to 64")
	}
	got := RankLoads([]Prediction{long}, acc, c, []int{8}, Requests{Prompt: 100}, 5, price)
	if got[0].Left == 0 {
		t.Errorf("the chain of 15 at 8 not counted as left out: %+v", got[0])
	}
	if _, err := PredictLoad(long, acc, c, 8, "sometimes", Requests{Prompt: 100}, price); err == nil {
		t.Error("an unknown policy priced")
	}
}

// TestPromptLength: a prompt starts where the steps' contexts fall back.
func TestPromptLength(t *testing.T) {
	acc := withContexts(100, 102, 104, 300, 302, 50, 52, 400)
	if got := acc.PromptLength(); got != 300 {
		t.Errorf("median of prompts 100, 300, 50, 400: %d", got)
	}
	if got := withContexts(0, 0).PromptLength(); got != 0 {
		t.Errorf("no contexts: %d", got)
	}
	// each step emits 2 (1 accepted): the prompts of 100, 300, 50 and 400
	// generate 7, 5, 5 and 3 tokens, the first out of the prefill
	if got := acc.Requests(); got != (Requests{Prompt: 300, Tokens: 5}) {
		t.Errorf("requests %+v, want prompts of 300 and 5 tokens", got)
	}
	acc.MaxTokens = 64 // the length asked for, where the calibration stored it
	if got := acc.Requests(); got != (Requests{Prompt: 300, Tokens: 64}) {
		t.Errorf("requests %+v, want prompts of 300 and 64 tokens", got)
	}
}

// TestLoadRequestLife: requests that end price their prompts' prefill
// into the aggregate: C clients keep C requests running, each living its
// own prefill (all but the prompt's last token, which its first step
// verifies), n/AAL passes and the other requests' prefills. Longer
// generations approach the never-ending requests' figure from below; a
// longer prompt costs more at every concurrency.
func TestLoadRequestLife(t *testing.T) {
	c := loadCosts(100 * time.Microsecond)
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	pr, err := price(Plan{Strategy: "chain", Gamma: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, conc := range []int{1, 4, 8} {
		at := func(req Requests) LoadPrediction {
			lp, err := PredictLoad(pr, acc, c, conc, PolicyFixed, req, price)
			if err != nil {
				t.Fatal(err)
			}
			return lp
		}
		endless := at(Requests{Prompt: 100})
		pc, err := newPassCost(c, conc)
		if err != nil {
			t.Fatal(err)
		}
		pre := pc.prefill(99)
		for _, n := range []int{2, 32, 1024} {
			lp := at(Requests{Prompt: 100, Tokens: n})
			wait := time.Duration(0)
			if conc > 1 {
				wait = lp.Pass / 2
			}
			ttft := wait + pre + lp.Pass
			life := float64(wait+pre) + max(1, float64(n)/lp.Tokens)*float64(lp.Pass) + float64(conc-1)*float64(pre)
			want := float64(conc*n) / (life / 1e9)
			if lp.TPOT < 0 {
				t.Errorf("C=%d, %d tokens: TPOT %v", conc, n, lp.TPOT)
			}
			if lp.TTFT != ttft || (lp.TokensPerSec-want)/want > 1e-9 || (want-lp.TokensPerSec)/want > 1e-9 {
				t.Errorf("C=%d, %d tokens: %.1f tokens/s, TTFT %v; want %.1f, %v", conc, n, lp.TokensPerSec, lp.TTFT, want, ttft)
			}
			if lp.TokensPerSec >= endless.TokensPerSec {
				t.Errorf("C=%d, %d tokens: %.1f tokens/s, not below never-ending requests' %.1f", conc, n, lp.TokensPerSec, endless.TokensPerSec)
			}
			if long := at(Requests{Prompt: 1000, Tokens: n}); long.TokensPerSec >= lp.TokensPerSec {
				t.Errorf("C=%d, %d tokens: prompts of 1000 give %.1f tokens/s, of 100 %.1f", conc, n, long.TokensPerSec, lp.TokensPerSec)
			}
		}
	}
}

// TestPassTimes: a pass of one sequence is the one-sequence curve's, of a
// measured pass size that size's curve's, between measured sizes
// between them; past the largest size measured, or more rows than
// measured, it is not priced.
func TestPassTimes(t *testing.T) {
	c := Costs{Verify: passCurve(1, 10*time.Millisecond, time.Millisecond).Verify}
	c.Passes = []PassCurve{passCurve(1, 10*time.Millisecond, time.Millisecond), passCurve(2, 12*time.Millisecond, time.Millisecond), passCurve(8, 20*time.Millisecond, time.Millisecond)}
	pt := NewPassTimes(c)
	for _, tc := range []struct {
		seqs, rows int
		want       time.Duration
		ok         bool
	}{
		{1, 4, 14 * time.Millisecond, true},
		{2, 8, 20 * time.Millisecond, true},
		{8, 16, 36 * time.Millisecond, true},
		{5, 16, 32 * time.Millisecond, true}, // halfway from 2 (28 ms) to 8 (36 ms)
		{16, 16, 0, false},
		{8, 65, 0, false},
	} {
		got, ok := pt.At(tc.seqs, tc.rows)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%d sequences, %d rows: %v %v, want %v %v", tc.seqs, tc.rows, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPredictLoadTogether: requests in step (a closed loop of equal
// requests, as loadtest drives) wait for no pass, but their first token
// waits for every prompt of their wave, prefilled together; requests that
// come one at a time wait half a pass and their own prompt. The wave's
// prompts together cost no more than one at a time, and no less than
// one, so in step is faster by the wait and what joining the prompts
// saves (within 10% here); at one request the two are the same.
func TestPredictLoadTogether(t *testing.T) {
	c := loadCosts(2 * time.Millisecond)
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	plain := Prediction{Plan: spec.PlainPlan()}
	pc, err := newPassCost(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	pre := pc.prefill(19)
	for _, conc := range []int{1, 4} {
		wavePre := pc.prefill(conc * 19)
		if conc > 1 {
			wavePre = pc.wave(conc * 19)
		}
		one, err := PredictLoad(plain, acc, c, conc, PolicyPlain, Requests{Prompt: 20, Tokens: 32}, price)
		if err != nil {
			t.Fatal(err)
		}
		wave, err := PredictLoad(plain, acc, c, conc, PolicyPlain, Requests{Prompt: 20, Tokens: 32, Together: true}, price)
		if err != nil {
			t.Fatal(err)
		}
		if conc == 1 {
			if one.TTFT != wave.TTFT || one.TokensPerSec != wave.TokensPerSec {
				t.Errorf("one request: apart %v %.1f tokens/s, together %v %.1f", one.TTFT, one.TokensPerSec, wave.TTFT, wave.TokensPerSec)
			}
			continue
		}
		if want := wavePre + wave.Pass; wave.TTFT != want {
			t.Errorf("%d in step: TTFT %v, want the wave's %d prompts prefilled together (%v) and a pass (%v): %v", conc, wave.TTFT, conc, wavePre, wave.Pass, want)
		}
		if wavePre > time.Duration(conc)*pre || wavePre < pre {
			t.Errorf("%d prompts prefilled together %v, one alone %v", conc, wavePre, pre)
		}
		if want := one.Pass/2 + pre + one.Pass; one.TTFT != want {
			t.Errorf("%d one at a time: TTFT %v, want half a pass, its prompt and a pass: %v", conc, one.TTFT, want)
		}
		if !(wave.TokensPerSec > one.TokensPerSec) || wave.TokensPerSec > one.TokensPerSec*1.1 {
			t.Errorf("%d: in step %.1f tokens/s, one at a time %.1f: the same prompts, only the wait apart", conc, wave.TokensPerSec, one.TokensPerSec)
		}
	}
}

// TestPredictLoadServerOverhead: the server's own time in a request
// (Requests.First, Last) adds First to the TTFT and both to the
// request's life, once at every level, and leaves the passes as they
// are; none prices the engine alone. Its streamed text adds to every
// pass Requests.StreamPass once and Requests.Stream for each request in
// it.
func TestPredictLoadServerOverhead(t *testing.T) {
	c := loadCosts(2 * time.Millisecond)
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	pr, err := price(Plan{Strategy: "chain", Gamma: 4})
	if err != nil {
		t.Fatal(err)
	}
	first, last := 3*time.Millisecond, 1500*time.Microsecond
	for _, conc := range []int{1, 4} {
		for _, policy := range []string{PolicyPlain, PolicyFixed} {
			at := pr
			if policy == PolicyPlain {
				at = Prediction{Plan: spec.PlainPlan()}
			}
			req := Requests{Prompt: 20, Tokens: 32, Together: true}
			bare, err := PredictLoad(at, acc, c, conc, policy, req, price)
			if err != nil {
				t.Fatal(err)
			}
			req.First, req.Last = first, last
			with, err := PredictLoad(at, acc, c, conc, policy, req, price)
			if err != nil {
				t.Fatal(err)
			}
			if with.Pass != bare.Pass || with.TTFT != bare.TTFT+first {
				t.Errorf("%s at %d: pass %v TTFT %v with the overhead, %v %v without: want the same pass and %v more to the first token",
					policy, conc, with.Pass, with.TTFT, bare.Pass, bare.TTFT, first)
			}
			lifeBare := float64(conc) * 32 / bare.TokensPerSec
			lifeWith := float64(conc) * 32 / with.TokensPerSec
			if d := time.Duration((lifeWith - lifeBare) * float64(time.Second)); d < first+last-time.Microsecond || d > first+last+time.Microsecond {
				t.Errorf("%s at %d: a request lives %v longer with the overhead, want %v", policy, conc, d, first+last)
			}
			// a streamed pass's writes: each request in the pass adds its own
			req.Stream = 100 * time.Microsecond
			streamed, err := PredictLoad(at, acc, c, conc, policy, req, price)
			if err != nil {
				t.Fatal(err)
			}
			if want := with.Pass + time.Duration(conc)*req.Stream; streamed.Pass != want || streamed.TokensPerSec >= with.TokensPerSec {
				t.Errorf("%s at %d: a pass of %v streamed (%.0f tokens/s), want %v (below %.0f)", policy, conc, streamed.Pass, streamed.TokensPerSec, want, with.TokensPerSec)
			}
			// and the part a streamed pass pays once
			req.StreamPass = 300 * time.Microsecond
			once, err := PredictLoad(at, acc, c, conc, policy, req, price)
			if err != nil {
				t.Fatal(err)
			}
			if want := streamed.Pass + req.StreamPass; once.Pass != want {
				t.Errorf("%s at %d: a pass of %v with its streaming's fixed part, want %v", policy, conc, once.Pass, want)
			}
		}
	}
}

// TestPredictLoadExtraFromTheContexts: a pass of several sequences costs
// its curve plus what each sequence's rows cost more at the steps'
// contexts than at the short one, the priced curve against the one it
// was priced from (Costs.Short); a one-sequence pass curve as stored,
// beside a Verify the re-check rescaled, adds nothing (it once priced
// the rescale as every sequence's extra), and priced at longer contexts
// the extra is there (the control).
func TestPredictLoadExtraFromTheContexts(t *testing.T) {
	c := loadCosts(2 * time.Millisecond)
	var faster []latency.Point // the re-check found the machine 1.5x slower than stored
	for _, p := range c.Verify {
		p.Median = p.Median * 3 / 2
		faster = append(faster, p)
	}
	c.Verify = faster
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	plain := Prediction{Plan: spec.PlainPlan()}
	lp, err := PredictLoad(plain, acc, c, 8, PolicyPlain, Requests{Prompt: 20}, price)
	if err != nil {
		t.Fatal(err)
	}
	if want := Interp(c.Passes[3].Verify, 8); lp.Pass != want {
		t.Errorf("plain batching at 8: a pass of %v, want the curve of 8 sequences' %v", lp.Pass, want)
	}
	// priced at contexts four times as dear: each of the 8 sequences'
	// row costs more by its curve's difference
	long := c
	long.Short, long.Verify = c.Verify, nil
	for _, p := range c.Verify {
		p.Median *= 4
		long.Verify = append(long.Verify, p)
	}
	lq, err := PredictLoad(plain, acc, long, 8, PolicyPlain, Requests{Prompt: 20}, price)
	if err != nil {
		t.Fatal(err)
	}
	extra := 8 * (Interp(long.Verify, 1) - Interp(long.Short, 1))
	if want := Interp(c.Passes[3].Verify, 8) + extra; lq.Pass != want {
		t.Errorf("at longer contexts: a pass of %v, want %v (the curve and 8 sequences' extra)", lq.Pass, want)
	}
}

// TestPredictLoadDraftPrefill: a request drafting with a draft model has
// its prompt read by the drafter before its first step, a wave's prompts
// in one drafter pass in the step after the wave's prefill; plain
// decoding reads it with the target alone, and the hidden-state drafter
// takes the target's states instead of a pass of its own.
func TestPredictLoadDraftPrefill(t *testing.T) {
	c := loadCosts(2 * time.Millisecond)
	c.Draft = []latency.Point{{W: 1, Median: 300 * time.Microsecond}, {W: 8, Median: time.Millisecond}, {W: 32, Median: 3 * time.Millisecond}}
	acc := Uniform(0.7, 0.4, 8, 4)
	price := func(p Plan) (Prediction, error) { return Predict(p, acc, c) }
	pr, err := price(Plan{Strategy: "chain", Gamma: 4})
	if err != nil {
		t.Fatal(err)
	}
	const conc, prompt = 4, 20
	pc, err := newPassCost(c, conc)
	if err != nil {
		t.Fatal(err)
	}
	read, waveRead := Interp(c.Draft, prompt-1), Interp(c.Draft, conc*(prompt-1))
	if read <= time.Millisecond || read >= 3*time.Millisecond || waveRead <= 3*time.Millisecond {
		t.Fatalf("the drafter's pass over %d tokens priced %v, over %d %v", prompt-1, read, conc*(prompt-1), waveRead)
	}
	req := Requests{Prompt: prompt, Tokens: 32, Together: true}
	wave := pc.prefill(conc * (prompt - 1))
	for _, tc := range []struct {
		policy  string
		perNode bool
		want    time.Duration
	}{{PolicyFixed, false, waveRead}, {PolicyGoodput, false, waveRead}, {PolicyPlain, false, 0}, {PolicyFixed, true, 0}} {
		cc := c
		cc.DraftPerChild = tc.perNode
		at := pr
		if tc.policy == PolicyPlain {
			at = Prediction{Plan: spec.PlainPlan()}
		}
		lp, err := PredictLoad(at, acc, cc, conc, tc.policy, req, price)
		if err != nil {
			t.Fatal(err)
		}
		if got := lp.TTFT - wave - lp.Pass; got != tc.want {
			t.Errorf("%s (per node %v): TTFT %v is the wave's prefill %v, a pass %v and %v, want %v of the drafter's reading", tc.policy, tc.perNode, lp.TTFT, wave, lp.Pass, got, tc.want)
		}
	}
	// one at a time: each request's own prompt, and the others' in its life
	apart, err := PredictLoad(pr, acc, c, conc, PolicyFixed, Requests{Prompt: prompt, Tokens: 32}, price)
	if err != nil {
		t.Fatal(err)
	}
	if want := apart.Pass/2 + pc.prefill(prompt-1) + read + apart.Pass; apart.TTFT != want {
		t.Errorf("one at a time: TTFT %v, want half a pass, its prompt read by both models and a pass: %v", apart.TTFT, want)
	}
}

// TestWavePrefill: a wave of C prompts prefilled together is priced as
// the passes of C sequences it is (T_C), in chunks of the widest such
// pass measured, not on the one-sequence curve; at one sequence, and
// where no pass size's curve prices it, as one prompt of all its rows.
func TestWavePrefill(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Verify: passCurve(1, 10*ms, 2*ms).Verify}
	// eight sequences' passes cost less a row than one sequence's (the
	// curves of two moments, or a machine where they do)
	c.Passes = []PassCurve{passCurve(1, 10*ms, 2*ms), passCurve(8, 12*ms, ms)}
	pc, err := newPassCost(c, 8)
	if err != nil {
		t.Fatal(err)
	}
	// 150 rows: two passes of 64 (76 ms each) and one of 22 (34 ms)
	if got := pc.wave(150); got != 186*ms {
		t.Errorf("150 rows over 8 sequences: %v, want 186ms", got)
	}
	// a last chunk smaller than a row a sequence is a pass of 8 rows
	if got := pc.wave(66); got != 76*ms+20*ms {
		t.Errorf("66 rows over 8 sequences: %v, want 96ms", got)
	}
	one, err := newPassCost(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := one.wave(150), one.prefill(150); got != want {
		t.Errorf("one sequence: %v, want its prefill %v", got, want)
	}
	c.Passes = nil
	if _, err := newPassCost(c, 8); err == nil {
		t.Error("8 sequences priced with no curve of them")
	}
}
