package profiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"arborist/assets"
	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/llamacpp"
	"arborist/profiles/loadtest"
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

// The servers a load test compares, as its results and stored runs name
// them.
const (
	LoadArboristPlan     = "arborist-plan"
	LoadArboristAdaptive = "arborist-adaptive"
	LoadArboristPlain    = "arborist-plain"
	LoadLlamaServer      = "llama-server"
	LoadLlamaServerPlain = "llama-server-plain"
	LoadURL              = "url"
)

// Load test defaults: small, so a default run on a small pair ends within
// a few minutes (3 rounds x 3 levels x 3 servers, 13 clients' requests of
// 32 tokens each a round).
var (
	DefaultLoadConcurrency = []int{1, 4, 8}
)

const (
	DefaultLoadRounds    = 3
	DefaultLoadMaxTokens = 32
	DefaultLoadPerClient = 2
	DefaultLoadPrompts   = 8 // the first prompts of the built-in corpus
	// MaxLoadRounds bounds --rounds, MaxLoadTokens the tokens a request
	// asks for, MaxLoadPerClient the requests a client sends a round.
	MaxLoadRounds    = 100
	MaxLoadTokens    = 4096
	MaxLoadPerClient = 1000
)

// CheckConcurrency refuses a concurrency (named by what, for the message)
// outside 1..config.MaxConcurrency.
func CheckConcurrency(what string, n int) error { return config.CheckConcurrency(what, n) }

// LoadTestOptions is what a load test runs.
type LoadTestOptions struct {
	// Config is the config.yaml whose plan is served; ConfigYAML, where
	// Config is "", its text (the Export screen's, as edited), written
	// to a temporary file for the servers for the test's duration.
	Config     string
	ConfigYAML []byte
	// Concurrency are the levels (default 1, 4, 8), each 1..MaxConcurrency.
	Concurrency []int
	// Rounds at each level (default 3); MaxTokens a request asks for
	// (default 32); PerClient requests each client sends a round
	// (default 2).
	Rounds, MaxTokens, PerClient int
	// Prompts are the requests' prompts, taken in turn (default: the
	// first eight of the built-in corpus).
	Prompts []string
	// Chat sends chat completions (the prompt as a user message).
	Chat bool
	// Arborist is this program, run as `arborist serve` for Arborist's
	// servers ("" with URL).
	Arborist string
	// LlamaCpp is the folder of llama.cpp's binaries ("" for none; with
	// it llama-server joins).
	LlamaCpp string
	// URL drives a server already running there instead of starting
	// any (the config then names the pair its runs are stored under).
	URL string
	// AllowChanged serves a config whose model files changed since it
	// was exported.
	AllowChanged bool
	// NoStore measures without storing runs.
	NoStore bool
}

// LoadPlan is what a load test will run, known before it starts.
type LoadPlan struct {
	Servers     []string
	Concurrency []int
	Rounds      int
	// Requests and Tokens are every request and the tokens they ask for
	// over the whole test; Starts the servers started.
	Requests, Tokens, Starts int
	// Estimate is the expected duration, 0 where nothing measured on this
	// machine gives a rate (EstimateFrom says what it rests on).
	Estimate     time.Duration
	EstimateFrom string
	// Dropped are the exported llama.cpp options its build does not know,
	// left out of its server's command line (llama.cpp's default then).
	Dropped []string
}

// LoadLevel is one server at one concurrency over the rounds.
type LoadLevel struct {
	Server      string
	Concurrency int
	loadtest.Summary
	RunID int64 // its stored run (0 with NoStore)
	// Predicted is the cost model's aggregate tokens/s for Arborist's
	// servers at this level, for the test's own requests (its prompts'
	// median tokens and its max tokens), from the pair's stored curves
	// and calibration (costmodel.PredictLoad); 0 where nothing is stored.
	Predicted float64 `json:",omitempty"`
	// PredictedTTFT and PredictedTPOT are the model's time to first token
	// and time per output token there
	PredictedTTFT, PredictedTPOT time.Duration `json:",omitempty"`
	// Err is why the server failed at this level (a crash, a refused
	// request): its rounds stop there, nothing of it is stored, and the
	// other servers and levels go on.
	Err string `json:",omitempty"`
}

// LoadTestResult is a load test's figures, by level and server.
type LoadTestResult struct {
	Plan   LoadPlan
	Levels []LoadLevel
	Wall   time.Duration
}

// withDefaults fills in the defaults and checks the bounds.
func (o LoadTestOptions) withDefaults() (LoadTestOptions, error) {
	if o.Config == "" && len(o.ConfigYAML) == 0 {
		return o, fmt.Errorf("loadtest: a config.yaml is required")
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = DefaultLoadConcurrency
	}
	o.Concurrency = slices.Clone(o.Concurrency)
	for _, c := range o.Concurrency {
		if err := config.CheckConcurrency("concurrency", c); err != nil {
			return o, fmt.Errorf("loadtest: %w", err)
		}
	}
	slices.Sort(o.Concurrency)
	o.Concurrency = slices.Compact(o.Concurrency)
	def := func(v *int, d, most int, name string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 1 || *v > most {
			return fmt.Errorf("loadtest: %s %d: want 1 to %d", name, *v, most)
		}
		return nil
	}
	if err := errors.Join(def(&o.Rounds, DefaultLoadRounds, MaxLoadRounds, "rounds"), def(&o.MaxTokens, DefaultLoadMaxTokens, MaxLoadTokens, "max tokens"),
		def(&o.PerClient, DefaultLoadPerClient, MaxLoadPerClient, "requests per client")); err != nil {
		return o, err
	}
	if len(o.Prompts) == 0 {
		o.Prompts = assets.CorpusPrompts()[:DefaultLoadPrompts]
	}
	if o.URL == "" && o.Arborist == "" {
		return o, fmt.Errorf("loadtest: no arborist program to serve with, and no --url")
	}
	return o, nil
}

// config is the config the test serves: the file's, else the text's.
func (o LoadTestOptions) config() (*config.Config, error) {
	if o.Config != "" {
		return config.Load(o.Config)
	}
	return config.Parse("config.yaml", o.ConfigYAML)
}

// loadServers are the servers a load test compares for the config c.
// Dropped names the exported options the llama.cpp build lacks, left out
// of its server's command line so that it starts.
func loadServers(ctx context.Context, c *config.Config, o LoadTestOptions, db string) (servers []loadtest.Server, dropped []string, err error) {
	if o.URL != "" {
		return []loadtest.Server{loadtest.AtURL(LoadURL, o.URL)}, nil, nil
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
		out = append(out, serve(LoadArboristPlan, config.PolicyPlan), serve(LoadArboristAdaptive, config.PolicyAdaptive))
	}
	out = append(out, serve(LoadArboristPlain, config.PolicyPlain))
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
			out = append(out, llama(LoadLlamaServer, true))
		}
		out = append(out, llama(LoadLlamaServerPlain, false))
	}
	return out, dropped, nil
}

// LoadTestPlan is what LoadTest will run for opt, with an estimate of its
// duration from this machine's newest stored run of the config's target
// (one request at a time: the estimate errs long), before anything
// starts.
func (b *Bench) LoadTestPlan(ctx context.Context, opt LoadTestOptions) (*LoadPlan, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := opt.config()
	if err != nil {
		return nil, err
	}
	servers, dropped, err := loadServers(ctx, c, opt, b.path)
	if err != nil {
		return nil, err
	}
	p := &LoadPlan{Concurrency: opt.Concurrency, Rounds: opt.Rounds, Dropped: dropped}
	for _, s := range servers {
		p.Servers = append(p.Servers, s.Name)
	}
	for _, n := range opt.Concurrency {
		p.Requests += opt.Rounds * len(servers) * n * opt.PerClient
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
func (b *Bench) LoadTest(ctx context.Context, opt LoadTestOptions, progress Progress) (*LoadTestResult, error) {
	plan, err := b.LoadTestPlan(ctx, opt)
	if err != nil {
		return nil, err
	}
	opt, _ = opt.withDefaults()
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
	predicted := b.predictLoads(ctx, r, opt)
	rounds := map[key][]loadtest.Round{}
	failed := map[key]string{}
	total := opt.Rounds * len(opt.Concurrency) * len(servers)
	done := 0
	start := time.Now()
	res := &LoadTestResult{Plan: *plan}
	for round := 1; round <= opt.Rounds; round++ {
		for _, n := range opt.Concurrency {
			for _, s := range servers {
				stage := fmt.Sprintf("round %d of %d, %d at once, %s", round, opt.Rounds, n, s.Name)
				k := key{s.Name, n}
				if failed[k] != "" {
					done++
					continue
				}
				progress.send("load test", done, total, stage+": starting")
				rd, err := loadRound(ctx, s, loadtest.Drive{Chat: opt.Chat, Prompts: opt.Prompts, Concurrency: n, PerClient: opt.PerClient, MaxTokens: opt.MaxTokens})
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
		}
	}
	res.Wall = time.Since(start)
	var st *store.Store
	if !opt.NoStore {
		if st, err = b.db(ctx); err != nil {
			return res, err
		}
	}
	fp := hardware.DetectHardware().Fingerprint
	for _, n := range opt.Concurrency {
		for _, s := range servers {
			lp := predicted[key{s.Name, n}]
			l := LoadLevel{Server: s.Name, Concurrency: n, Summary: loadtest.Summarize(rounds[key{s.Name, n}]), Err: failed[key{s.Name, n}],
				Predicted: lp.TokensPerSec, PredictedTTFT: lp.TTFT, PredictedTPOT: lp.TPOT}
			if st != nil && l.Err == "" {
				if l.RunID, err = storeLoad(ctx, st, fp, r, s.Name, l, opt); err != nil {
					return res, err
				}
			}
			res.Levels = append(res.Levels, l)
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
// the target's tokens and its max tokens. Nothing is measured; with
// nothing stored (or a plan the model cannot price) there is no
// prediction.
func (b *Bench) predictLoads(ctx context.Context, r *replay, opt LoadTestOptions) map[loadKey]costmodel.LoadPrediction {
	in, err := b.Inputs(ctx, r.Pair, InputsOptions{}, nil)
	if err != nil || !in.Profiled || in.Acc == nil {
		return nil
	}
	pair, err := b.openPair(r.Pair, false)
	if err != nil {
		return nil
	}
	lens := make([]int, 0, len(opt.Prompts))
	for _, p := range opt.Prompts {
		lens = append(lens, len(pair.Target.Tok.Encode(p, true, false)))
	}
	pair.Close()
	if len(lens) == 0 {
		return nil
	}
	slices.Sort(lens)
	req := costmodel.Requests{Prompt: lens[len(lens)/2], Tokens: opt.MaxTokens}
	price := func(p costmodel.Plan) (costmodel.Prediction, error) { return costmodel.Predict(p, in.Acc, in.Costs) }
	pr, err := price(r.Plan)
	if err != nil {
		return nil
	}
	out := map[loadKey]costmodel.LoadPrediction{}
	for _, n := range opt.Concurrency {
		for server, policy := range map[string]string{LoadArboristPlan: costmodel.PolicyFixed, LoadArboristAdaptive: costmodel.PolicyGoodput, LoadArboristPlain: costmodel.PolicyPlain} {
			at := pr
			if policy == costmodel.PolicyPlain || !r.Plan.NeedsSource() {
				at, policy = costmodel.Prediction{Plan: spec.PlainPlan()}, costmodel.PolicyPlain
			}
			if lp, err := costmodel.PredictLoad(at, in.Acc, in.Costs, n, policy, req, price); err == nil {
				out[loadKey{server, n}] = lp
			}
		}
	}
	return out
}

// loadRound starts s for the round's level, warms it with one short
// request (a server's first request pays for what it sets up), drives the
// round and stops it.
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
	warm.Concurrency, warm.PerClient, warm.MaxTokens = 1, 1, min(4, d.MaxTokens)
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
func storeLoad(ctx context.Context, st *store.Store, fp string, r *replay, server string, l LoadLevel, opt LoadTestOptions) (int64, error) {
	plan := r.Plan
	if server == LoadArboristPlain || server == LoadLlamaServerPlain {
		plan = spec.PlainPlan()
	}
	drafter := r.Pair.SourceName()
	if plan.Strategy == spec.PlainStrategy() {
		drafter = ""
	}
	run := &store.Run{Hardware: fp, Target: r.Pair.Target, Drafter: drafter, Strategy: plan.Strategy, Plan: planJSON(plan),
		Settings: map[string]any{"server": server, "concurrency": l.Concurrency, "max_tokens": opt.MaxTokens, "requests_per_client": opt.PerClient,
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

// MarshalJSON writes a load test as `loadtest --json` prints it: what
// ran, and each server's figures at each level (times in milliseconds).
func (r *LoadTestResult) MarshalJSON() ([]byte, error) {
	type level struct {
		Server      string  `json:"server"`
		Concurrency int     `json:"concurrency"`
		TPS         float64 `json:"tokens_per_s"`
		TPSP10      float64 `json:"tokens_per_s_p10"`
		TPSP90      float64 `json:"tokens_per_s_p90"`
		TTFT        float64 `json:"ttft_ms"`
		TTFTP90     float64 `json:"ttft_p90_ms"`
		TPOT        float64 `json:"tpot_ms"`
		TPOTP90     float64 `json:"tpot_p90_ms"`
		Rounds      int     `json:"rounds"`
		Requests    int     `json:"requests"`
		Tokens      int     `json:"tokens"`
		RunID       int64   `json:"run_id,omitempty"`
		Predicted   float64 `json:"predicted_tokens_per_s,omitempty"`
		PredTTFT    float64 `json:"predicted_ttft_ms,omitempty"`
		PredTPOT    float64 `json:"predicted_tpot_ms,omitempty"`
		Err         string  `json:"error,omitempty"`
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	out := struct {
		Servers     []string `json:"servers"`
		Concurrency []int    `json:"concurrency"`
		Rounds      int      `json:"rounds"`
		WallS       float64  `json:"wall_s"`
		Levels      []level  `json:"levels"`
	}{Servers: r.Plan.Servers, Concurrency: r.Plan.Concurrency, Rounds: r.Plan.Rounds, WallS: r.Wall.Seconds(), Levels: []level{}}
	for _, l := range r.Levels {
		out.Levels = append(out.Levels, level{Server: l.Server, Concurrency: l.Concurrency, TPS: l.TPS, TPSP10: l.TPSP10, TPSP90: l.TPSP90,
			TTFT: ms(l.TTFT), TTFTP90: ms(l.TTFTP90), TPOT: ms(l.TPOT), TPOTP90: ms(l.TPOTP90), Rounds: l.Rounds, Requests: l.Requests, Tokens: l.Tokens, RunID: l.RunID, Predicted: l.Predicted,
			PredTTFT: ms(l.PredictedTTFT), PredTPOT: ms(l.PredictedTPOT), Err: l.Err})
	}
	return json.Marshal(out)
}
