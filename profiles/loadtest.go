package profiles

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"arborist/engine/spec"
	"arborist/engine/tokenizer"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/llamacpp"
	"arborist/profiles/loadtest"
	"arborist/profiles/measure"
	"arborist/profiles/outfile"
	"arborist/profiles/store"
)

// A load test drives servers of a config.yaml's plan with C concurrent
// streaming clients through their OpenAI API, at each level of a list
// of concurrencies, and measures per request the time to first token and
// the time per output token, and per round the aggregate tokens/s. It
// compares Arborist's serve with the plan, with the adaptive policy and
// plainly, and (given llama.cpp's folder) llama-server with the exported
// settings and plainly, each started afresh at each level with its
// sequences sized for it. Servers and levels are interleaved round by
// round, so a machine that slows down over the test slows every server
// alike. Each server's figures at each level are stored as a run.

// loadConfig is the config the test o serves: the file's, else the
// text's.
func loadConfig(o loadtest.Options) (*config.Config, error) {
	if o.Config != "" {
		return config.Load(o.Config)
	}
	return config.Parse("config.yaml", o.ConfigYAML)
}

// loadServers are the servers a load test compares for the config c.
// Dropped names the exported options the llama.cpp build lacks, left out
// of its server's command line so that it starts.
func loadServers(ctx context.Context, c *config.Config, o loadtest.Options, db string) (servers []loadtest.Server, dropped []string, err error) {
	if o.URL != "" {
		return []loadtest.Server{loadtest.AtURL(loadtest.URLServer, o.URL)}, nil, nil
	}
	serve := func(name, policy string) loadtest.Server {
		return loadtest.Child(name, o.Arborist, func(port, n int) []string {
			args := []string{"serve", "--config", o.Config, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--quiet", "--db", db,
				"--policy", policy, "--max-seqs", strconv.Itoa(n), "--max-queue", strconv.Itoa(max(64, 2*n))}
			if o.AllowChanged {
				args = append(args, "--allow-changed-model")
			}
			return args
		})
	}
	speculates := c.Speculation.NeedsSource() && c.Models.Draft.Kind != "none" && c.Models.Draft.Kind != ""
	var out []loadtest.Server
	if speculates {
		out = append(out, serve(loadtest.ArboristPlan, config.PolicyPlan), serve(loadtest.ArboristAdaptive, config.PolicyAdaptive))
	}
	out = append(out, serve(loadtest.ArboristPlain, config.PolicyPlain))
	if o.LlamaCpp != "" {
		prog, err := llamacpp.ServerProgram(o.LlamaCpp)
		if err != nil {
			return nil, nil, err
		}
		flags, err := llamacpp.HelpFlags(ctx, prog, 20*time.Second)
		if err != nil {
			return nil, nil, err
		}
		_, dropped = flags.Drop(c.LlamaServer(1, true))
		llama := func(name string, spec bool) loadtest.Server {
			return loadtest.Child(name, prog, func(port, n int) []string {
				args, _ := flags.Drop(c.LlamaServer(n, spec))
				return append(args, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
			})
		}
		if len(c.LlamaCpp().Draft) > 0 { // the exported settings speculate
			out = append(out, llama(loadtest.LlamaServer, true))
		}
		out = append(out, llama(loadtest.LlamaServerPlain, false))
	}
	return out, dropped, nil
}

// LoadTestPlan is what LoadTest will run for opt, with an estimate of its
// duration from this machine's newest stored run of the config's target
// (one request at a time: the estimate errs long), before anything
// starts.
func (b *Bench) LoadTestPlan(ctx context.Context, opt loadtest.Options) (*loadtest.Plan, error) {
	opt, err := opt.WithDefaults()
	if err != nil {
		return nil, err
	}
	c, err := loadConfig(opt)
	if err != nil {
		return nil, err
	}
	servers, dropped, err := loadServers(ctx, c, opt, b.path)
	if err != nil {
		return nil, err
	}
	p := &loadtest.Plan{Concurrency: opt.Concurrency, Rounds: opt.Rounds, Dropped: dropped}
	for _, s := range servers {
		p.Servers = append(p.Servers, s.Name)
	}
	for _, n := range opt.Concurrency {
		p.Requests += opt.Rounds * len(servers) * n * opt.RequestsAt(n)
	}
	p.Tokens = p.Requests * opt.MaxTokens
	p.Starts = opt.Rounds * len(servers) * len(opt.Concurrency)
	if opt.URL != "" {
		p.Starts = 0
	}
	if st, err := b.db(ctx); err == nil {
		if runs, err := st.Runs(ctx, 200); err == nil {
			fp := hardware.DetectHardware().Fingerprint
			for _, r := range runs {
				if r.Status == "done" && r.Target == c.Models.Target.Path && r.Hardware == fp && r.TokensPerSecond > 0 && r.Load == nil {
					// a start loads the models: about a run's prompt of decoding, counted as 2 s
					p.Estimate = time.Duration(float64(p.Tokens)/r.TokensPerSecond*float64(time.Second)) + time.Duration(p.Starts)*2*time.Second
					p.EstimateFrom = fmt.Sprintf("run %d's %.1f tokens/s at one request, and 2 s a server start", r.ID, r.TokensPerSecond)
					break
				}
			}
		}
	}
	return p, nil
}

// LoadTest runs the load test opt asks for: every round, every level,
// every server in turn, each server started for its level and stopped
// after it (a cancelled test ends the one running). Progress counts the
// server-levels done of all, with the estimate of what is left from the
// rate measured so far.
func (b *Bench) LoadTest(ctx context.Context, opt loadtest.Options, progress Progress) (*loadtest.Result, error) {
	plan, err := b.LoadTestPlan(ctx, opt)
	if err != nil {
		return nil, err
	}
	opt, _ = opt.WithDefaults()
	if opt.Config == "" { // the servers read a file: the text's, for the test's duration
		dir, err := os.MkdirTemp("", "arborist-loadtest-")
		if err != nil {
			return nil, fmt.Errorf("loadtest: %w", err)
		}
		defer os.RemoveAll(dir)
		opt.Config = filepath.Join(dir, "config.yaml")
		if err := outfile.WriteFile(opt.Config, opt.ConfigYAML); err != nil {
			return nil, err
		}
	}
	c, err := config.Load(opt.Config)
	if err != nil {
		return nil, err
	}
	r, err := replayConfig(ctx, c, b.path, opt.AllowChanged)
	if err != nil {
		return nil, err
	}
	servers, _, err := loadServers(ctx, c, opt, b.path)
	if err != nil {
		return nil, err
	}
	type key = loadKey
	var plain *loadtest.Server
	for i := range servers {
		if servers[i].Name == loadtest.ArboristPlain {
			plain = &servers[i]
		}
	}
	predicted, on, over, rc := b.predictLoads(ctx, r, opt, plain, progress)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var pc *pace // the machine's pace beside each level, where the prices rest on a re-check
	if len(predicted) > 0 && !opt.NoRecheck {
		var why string
		if pc, why = b.newPace(ctx, r.Pair, rc); why != "" {
			on += "\n" + why
		}
		defer pc.close()
	}
	rounds := map[key][]loadtest.Round{}
	failed := map[key]string{}
	total := opt.Rounds * len(opt.Concurrency) * len(servers)
	done := 0
	start := time.Now()
	res := &loadtest.Result{Plan: *plan, PredictedOn: on, OverheadFirst: over.First, OverheadLast: over.Last, OverheadStream: over.Stream,
		OverheadStreamPass: over.StreamPass}
	for round := 1; round <= opt.Rounds; round++ {
		for _, n := range opt.Concurrency {
			if pc != nil {
				progress.send("load test", done, total, fmt.Sprintf("round %d of %d, %d at once: the machine's pace", round, opt.Rounds, n))
				pc.read(ctx, n)
			}
			for _, s := range servers {
				stage := fmt.Sprintf("round %d of %d, %d at once, %s", round, opt.Rounds, n, s.Name)
				k := key{s.Name, n}
				if failed[k] != "" {
					done++
					continue
				}
				progress.send("load test", done, total, stage+": starting")
				rd, err := loadRound(ctx, s, loadtest.Drive{Chat: opt.Chat, Prompts: opt.Prompts, Concurrency: n, PerClient: opt.RequestsAt(n), MaxTokens: opt.MaxTokens})
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				if err != nil {
					// a server that fails at a level is out of it; the
					// others are still measured, and the report says why
					failed[k] = fmt.Sprintf("%s: %v", stage, err)
					done++
					progress.send("load test", done, total, stage+": failed")
					continue
				}
				rounds[k] = append(rounds[k], rd)
				done++
				left := time.Duration(float64(time.Since(start)) / float64(done) * float64(total-done))
				progress.send("load test", done, total, fmt.Sprintf("%s: %.1f tokens/s; about %s left", stage, rd.TPS(), left.Round(time.Second)))
			}
			pc.read(ctx, n) // and after the round
		}
	}
	res.Wall = time.Since(start)
	for _, n := range opt.Concurrency {
		for _, s := range servers {
			lp := predicted[key{s.Name, n}]
			res.Levels = append(res.Levels, loadtest.Level{Server: s.Name, Concurrency: n, Summary: loadtest.Summarize(rounds[key{s.Name, n}]), Err: failed[key{s.Name, n}],
				Predicted: lp.TokensPerSec, PredictedTTFT: lp.TTFT, PredictedTPOT: lp.TPOT})
		}
	}
	if note := pc.apply(res.Levels); note != "" {
		res.PredictedOn += "\n" + note
	}
	var st *store.Store
	if !opt.NoStore {
		if st, err = b.db(ctx); err != nil {
			return res, err
		}
	}
	fp := hardware.DetectHardware().Fingerprint
	for i := range res.Levels {
		l := &res.Levels[i]
		if st != nil && l.Err == "" {
			if l.RunID, err = storeLoad(ctx, st, fp, r, l.Server, *l, opt); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// loadKey is a server at a level.
type loadKey struct {
	server string
	level  int
}

// predictLoads prices the config's plan at each level of the test under
// each of Arborist's serving policies, from the pair's stored curves and
// calibration, for the test's own requests: its prompts' median length in
// the target's tokens and its max tokens (each token's pass priced at its
// context, Inputs.CostsAt), its clients in step, and the
// server's own time in a request, timed on plain (when given: Arborist's
// plain server) by serverOverhead. Unless opt.NoRecheck, the curves are
// re-checked first, as tune does; it also says what the prices rest on
// (the re-check's report and the overhead's), or why there are none
// (nothing stored, or a plan the model cannot price), and plain
// re-check the prices rest on (nil: none).
func (b *Bench) predictLoads(ctx context.Context, r *replay, opt loadtest.Options, plain *loadtest.Server, progress Progress) (map[loadKey]costmodel.LoadPrediction, string, overhead, *measure.Recheck) {
	var over overhead
	in, err := b.Inputs(ctx, r.Pair, InputsOptions{Recheck: !opt.NoRecheck}, progress)
	switch {
	case err != nil:
		return nil, "no prediction: " + err.Error(), over, nil
	case !in.Profiled || in.Acc == nil:
		return nil, "no prediction: " + in.missing(), over, nil
	}
	on := "the stored curves as they are (--no-recheck)"
	if in.Recheck != nil {
		on = in.Recheck.String()
	}
	lens := make([]int, 0, len(opt.Prompts))
	err = withTokenizer(r.Pair.Target, func(tok *tokenizer.Tokenizer) {
		for _, p := range opt.Prompts {
			lens = append(lens, len(tok.Encode(p, true, false)))
		}
	})
	if err != nil || len(lens) == 0 {
		return nil, fmt.Sprintf("no prediction: the prompts' lengths in the target's tokens (%v)", err), over, nil
	}
	shortest := opt.Prompts[slices.Index(lens, slices.Min(lens))] // lens[0] tokens, once sorted
	slices.Sort(lens)
	// the test's clients each send an equal request when the last ends:
	// they start together and stay in step, every prompt sent as often
	// as the others, so a wave's prompts and the test's tokens/s add up
	// the prompts' mean length (the median had priced the eight default
	// prompts on the bench pair, 15 to 30 tokens, at 176 rows a wave
	// where they are 166)
	req := costmodel.Requests{Prompt: meanLength(lens), Tokens: opt.MaxTokens, Together: true}
	// priced at the test's own requests' contexts, each token's from the
	// prompt's end on, where the calibration's steps were priced at
	// theirs: its story prompts' steps ran after 5-85 tokens, the load
	// test's after 17-81
	ctxs := make([]int, max(opt.MaxTokens, 1))
	for k := range ctxs {
		ctxs[k] = req.Prompt + k
	}
	costs := in.CostsAt(ctxs)
	if costs.Context.Steps > 0 {
		on += "\nthe requests' passes priced at " + costs.Context.String()
	}
	price := func(p costmodel.Plan) (costmodel.Prediction, error) { return costmodel.Predict(p, in.Acc, costs) }
	pr, err := price(r.Plan)
	if err != nil {
		return nil, "no prediction: " + err.Error(), over, nil
	}
	if plain != nil {
		most := slices.Max(opt.Concurrency)
		what := "one-token requests to " + plain.Name + ", then requests streamed and whole at one client"
		if most > 1 {
			what += fmt.Sprintf(" and at %d at once", most)
		}
		progress.send("server overhead", 0, overheadRequests, what)
		// the engine's part of a one-token request: its prompt but the
		// last token prefilled, and one plain pass
		one, err := costmodel.PredictLoad(costmodel.Prediction{Plan: spec.PlainPlan()}, in.Acc, in.CostsAt([]int{lens[0]}), 1, costmodel.PolicyPlain,
			costmodel.Requests{Prompt: lens[0], Tokens: 1}, price)
		if err == nil {
			over, err = serverOverhead(ctx, *plain, opt.Chat, shortest, one.TTFT, opt.MaxTokens, most)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, "", over, nil
			}
			on += fmt.Sprintf("\nserver overhead not timed (%v): the engine priced alone", err)
		} else {
			on += "\n" + over.String()
			req.First, req.Last, req.Stream, req.StreamPass = over.First, over.Last, over.Stream, over.StreamPass
		}
	}
	out := map[loadKey]costmodel.LoadPrediction{}
	for _, n := range opt.Concurrency {
		for server, policy := range map[string]string{loadtest.ArboristPlan: costmodel.PolicyFixed, loadtest.ArboristAdaptive: costmodel.PolicyGoodput, loadtest.ArboristPlain: costmodel.PolicyPlain} {
			at := pr
			if policy == costmodel.PolicyPlain || !r.Plan.NeedsSource() {
				at, policy = costmodel.Prediction{Plan: spec.PlainPlan()}, costmodel.PolicyPlain
			}
			if lp, err := costmodel.PredictLoad(at, in.Acc, costs, n, policy, req, price); err == nil {
				out[loadKey{server, n}] = lp
			}
		}
	}
	return out, on, over, in.Recheck
}

// overheadRequests is how many one-token requests serverOverhead times.
const overheadRequests = 8

// overhead is a server's own time in a request beyond the engine's
// passes: First before its first token (the request read, tokenized and
// admitted, the token streamed), Last after it (the stream's end, and the
// client's next request), medians of Requests one-token requests at one
// client, Engine the engine's priced part of each; and what streaming
// their text costs a pass: the median over StreamPairs pairs of requests
// of the test's length at one client, one streamed and one whole, of
// their difference a token (a plain server's pass emits one), and the
// same over StreamAtPairs pairs of StreamAt clients at once, split into
// the part a pass pays once (StreamPass) and the part each request in
// it adds (Stream): the two add up to the one client's.
type overhead struct {
	First, Last, Engine, Stream, StreamPass time.Duration
	Requests, StreamPairs                   int
	StreamAt, StreamAtPairs                 int
	StreamErr                               string // why Stream was not timed
}

func (o overhead) String() string {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	s := fmt.Sprintf("server overhead: %.1f ms before a request's first token, %.1f ms after its last (%d one-token requests at one client, beyond the engine's priced %.1f ms)",
		ms(o.First), ms(o.Last), o.Requests, ms(o.Engine))
	switch {
	case o.StreamAtPairs > 0:
		s += fmt.Sprintf(", %.2f ms a streamed pass and %.2f ms for each request's streamed text in it (%d requests streamed and %d whole, in turn, at one client; %d pairs of rounds at %d at once)",
			ms(o.StreamPass), ms(o.Stream), o.StreamPairs, o.StreamPairs, o.StreamAtPairs, o.StreamAt)
	case o.StreamPairs > 0:
		s += fmt.Sprintf(", %.2f ms a pass for each request's streamed text (%d requests streamed and %d whole, in turn)", ms(o.Stream), o.StreamPairs, o.StreamPairs)
		if o.StreamErr != "" { // timed at one client only
			s += fmt.Sprintf(" (not timed %s)", o.StreamErr)
		}
	case o.StreamErr != "":
		s += fmt.Sprintf(", a streamed token's cost not timed (%s)", o.StreamErr)
	}
	return s + "; added to every level's requests"
}

// streamPairs is how many pairs of requests, streamed and whole, time a
// streamed token's cost at one client, and streamAtPairs how many pairs
// of rounds of the most clients time it there.
const (
	streamPairs   = 10
	streamAtPairs = 5
)

// serverOverhead starts s for one client, warms it with one request of
// one token and times overheadRequests more, one after another, of
// prompt: what each takes beyond engine (the engine's priced time for
// it) before its first token, and from there to the next request's
// start. Timed with the engine's share this small, the server's own
// work shows: on the bench pair about 2 ms of a 6 ms request, which the
// load test's 32-token requests at one client each paid on top of their
// passes (predicted 1,128 tokens/s with the plan, measured 950).
func serverOverhead(ctx context.Context, s loadtest.Server, chat bool, prompt string, engine time.Duration, tokens, most int) (overhead, error) {
	o := overhead{Engine: engine, Requests: overheadRequests}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	run, err := s.Start(ctx, 1)
	if err != nil {
		return o, err
	}
	defer run.Stop()
	d := loadtest.Drive{URL: run.URL, Chat: chat, Prompts: []string{prompt}, Concurrency: 1, PerClient: 1, MaxTokens: 1}
	if _, err := d.Run(ctx); err != nil {
		return o, fmt.Errorf("warm-up request: %w", err)
	}
	d.PerClient = overheadRequests
	rd, err := d.Run(ctx)
	if err != nil {
		return o, err
	}
	first, after := make([]float64, len(rd.Requests)), make([]float64, len(rd.Requests))
	gap := rd.Wall
	for i, q := range rd.Requests {
		first[i], after[i] = float64(q.TTFT), float64(q.Total-q.TTFT)
		gap -= q.Total
	}
	gap /= time.Duration(len(rd.Requests)) // between one request's end and the next one's start
	o.First = max(time.Duration(loadtest.Quantile(first, 0.5))-engine, 0)
	o.Last = max(time.Duration(loadtest.Quantile(after, 0.5))+gap, 0)
	// a streamed token's cost: the same request streamed and whole, in
	// turn (which first alternates), its difference a token; on two
	// cores a plain server's passes ran 9-11% slower streamed, its write
	// of each token taking a worker's core
	if tokens < 2 {
		return o, nil
	}
	d.PerClient, d.MaxTokens = 1, tokens
	st, n, err := streamCost(ctx, d, streamPairs, func(r loadtest.Round) (time.Duration, int) { return r.Requests[0].Total, r.Requests[0].Tokens })
	switch {
	case err != nil && ctx.Err() != nil:
		return o, err
	case err != nil:
		o.StreamErr = err.Error() // the rest stands: priced without it
		return o, nil
	case n == 0:
		return o, nil
	}
	o.Stream, o.StreamPairs = st, n
	run.Stop() // the one client's server gone before the most clients' starts
	if most > 1 {
		at, n, err := streamAt(ctx, s, d, most)
		switch {
		case err != nil && ctx.Err() != nil:
			return o, err
		case err != nil:
			o.StreamErr = fmt.Sprintf("at %d at once: %v", most, err) // priced as at one client
		case n > 0:
			o.Stream, o.StreamPass = splitStream(o.Stream, at, most)
			o.StreamAt, o.StreamAtPairs = most, n
		}
	}
	return o, nil
}

// splitStream splits what streaming costs a pass, one at one client and
// at with most clients at once, into the part each request in a pass
// adds and the part the pass pays once, where one = pass + request and at
// = pass + most*request; neither below zero, so a pass of one request
// costs one whatever the noise in at.
func splitStream(one, at time.Duration, most int) (request, pass time.Duration) {
	request = min(max((at-one)/time.Duration(most-1), 0), one)
	return request, one - request
}

// streamAt starts s for most clients and times what streaming costs a
// pass there: rounds of most equal requests at once (d's, one each),
// streamed and whole in turn, the median over the pairs of their walls'
// difference a token (the clients start together and decode in step, a
// pass a token), and the pairs it compared.
func streamAt(ctx context.Context, s loadtest.Server, d loadtest.Drive, most int) (time.Duration, int, error) {
	run, err := s.Start(ctx, most)
	if err != nil {
		return 0, 0, err
	}
	defer run.Stop()
	d.URL, d.Concurrency, d.PerClient = run.URL, most, 1
	warm := d
	warm.MaxTokens = 1
	if _, err := warm.Run(ctx); err != nil {
		return 0, 0, fmt.Errorf("warm-up round: %w", err)
	}
	return streamCost(ctx, d, streamAtPairs, func(r loadtest.Round) (time.Duration, int) { return r.Wall, r.Tokens() })
}

// streamCost drives pairs pairs of d's rounds, one streamed and one
// whole, in turn (which goes first alternates), and returns the median
// over the pairs that decoded alike of what the streamed round took more
// a pass, never below zero, and how many pairs it compared: took reads
// a round's time and its tokens, and d.Concurrency requests decoding in
// step take tokens/d.Concurrency passes.
func streamCost(ctx context.Context, d loadtest.Drive, pairs int, took func(loadtest.Round) (time.Duration, int)) (time.Duration, int, error) {
	per := make([]float64, 0, pairs)
	for i := range pairs {
		var t [2]time.Duration // whole, streamed
		tokens := [2]int{-1, -2}
		for k := range 2 {
			w := d
			w.Whole = (i+k)%2 == 0
			r, err := w.Run(ctx)
			if err != nil {
				return 0, 0, err
			}
			x := 1
			if w.Whole {
				x = 0
			}
			t[x], tokens[x] = took(r)
		}
		if tokens[0] != tokens[1] || tokens[0] < d.Concurrency {
			continue // not the same decoding: nothing to compare
		}
		per = append(per, float64(t[1]-t[0])*float64(d.Concurrency)/float64(tokens[1]))
	}
	if len(per) == 0 {
		return 0, 0, nil
	}
	return max(time.Duration(loadtest.Quantile(per, 0.5)), 0), len(per), nil
}

// loadRound starts s for the round's level, warms it with one untimed
// request from each of the level's clients at once, as long as the
// round's, drives the round and stops it. A server's first requests pay
// for what it sets up (KV caches, their pages, the threads' first passes
// over them): warmed with one 4-token request, Arborist's server at one
// client measured 700-800 tokens/s and a TTFT of 17-19 ms in the round's
// two requests, where the same server warm gives 990-1,060 tokens/s and
// 11-12 ms over the same prompts (bench pair, chain gamma 7); a
// deployment serves warm.
func loadRound(ctx context.Context, s loadtest.Server, d loadtest.Drive) (loadtest.Round, error) {
	run, err := s.Start(ctx, d.Concurrency)
	if err != nil {
		return loadtest.Round{}, err
	}
	defer run.Stop()
	d.URL = run.URL
	// a server Arborist did not write is not trusted to answer: the round
	// is bounded by a second a token asked for, and ten minutes more
	limit := 10*time.Minute + time.Duration((1+d.Concurrency*d.PerClient)*d.MaxTokens)*time.Second
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	warm := d
	warm.PerClient = 1
	_, err = warm.Run(rctx)
	if err != nil {
		err = fmt.Errorf("warm-up request: %w", err)
	}
	var r loadtest.Round
	if err == nil {
		r, err = d.Run(rctx)
	}
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return r, fmt.Errorf("the round did not finish within %s (a second a token asked for, and ten minutes): %w", limit, err)
	}
	return r, err
}

// storeLoad stores one server's figures at one level as a run.
func storeLoad(ctx context.Context, st *store.Store, fp string, r *replay, server string, l loadtest.Level, opt loadtest.Options) (int64, error) {
	plan := r.Plan
	if server == loadtest.ArboristPlain || server == loadtest.LlamaServerPlain {
		plan = spec.PlainPlan()
	}
	drafter := r.Pair.SourceName()
	if plan.Strategy == spec.PlainStrategy() {
		drafter = ""
	}
	run := &store.Run{Hardware: fp, Target: r.Pair.Target, Drafter: drafter, Strategy: plan.Strategy, Plan: planJSON(plan),
		Settings: map[string]any{"server": server, "concurrency": l.Concurrency, "max_tokens": opt.MaxTokens, "requests_per_client": opt.RequestsAt(l.Concurrency),
			"chat": opt.Chat, "url": opt.URL},
		Prompts: opt.Prompts,
		Load:    &store.Load{Server: server, Concurrency: l.Concurrency}}
	if _, err := st.CreateRun(ctx, run); err != nil {
		return 0, err
	}
	run.Status, run.Tokens, run.Decode, run.TokensPerSecond = "done", l.Tokens, l.Wall, l.TPS
	run.Load = &store.Load{Server: server, Concurrency: l.Concurrency, TTFT: l.TTFT, TTFTP90: l.TTFTP90, TPOT: l.TPOT, TPOTP90: l.TPOTP90,
		TPSP10: l.TPSP10, TPSP90: l.TPSP90, Rounds: l.Rounds, Requests: l.Requests}
	return run.ID, st.FinishRun(ctx, run)
}

// meanLength is the mean of lens (at least one), rounded to a token.
func meanLength(lens []int) int {
	sum := 0
	for _, n := range lens {
		sum += n
	}
	return max(1, (2*sum+len(lens))/(2*len(lens)))
}
