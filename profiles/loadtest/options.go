package loadtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"arborist/assets"
	"arborist/profiles/config"
)

// The servers a load test compares, as its results and stored runs name
// them.
const (
	ArboristPlan     = "arborist-plan"
	ArboristAdaptive = "arborist-adaptive"
	ArboristPlain    = "arborist-plain"
	LlamaServer      = "llama-server"
	LlamaServerPlain = "llama-server-plain"
	URLServer        = "url" // a server already running (Options.URL)
)

// Defaults are a load test's defaults: small, so a default run on a
// small pair ends within a few minutes (3 rounds x 3 levels x 3 servers,
// 32 requests of 32 tokens a server a round: each level sends every
// prompt, RequestsAt), on the first eight prompts of the built-in corpus.
func Defaults() Options {
	return Options{Concurrency: []int{1, 4, 8}, Rounds: 3, MaxTokens: 32, PerClient: 2, Prompts: assets.CorpusPrompts()[:8]}
}

// MaxRounds bounds Options.Rounds, MaxTokens the tokens a request asks
// for, MaxPerClient the requests a client sends a round.
const (
	MaxRounds    = 100
	MaxTokens    = 4096
	MaxPerClient = 1000
)

// Options is what a load test runs.
type Options struct {
	// Config is the config.yaml whose plan is served; ConfigYAML, where
	// Config is "", its text (the Export screen's, as edited), written
	// to a temporary file for the servers for the test's duration.
	Config     string
	ConfigYAML []byte
	// Concurrency are the levels (default 1, 4, 8), each
	// 1..config.MaxConcurrency.
	Concurrency []int
	// Rounds at each level (default 3); MaxTokens a request asks for
	// (default 32); PerClient requests each client sends a round at
	// least (default 2; RequestsAt).
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
	// NoRecheck prices the levels on the stored curves as they are; by
	// default the prediction first re-times T_verify as tune does and
	// rescales stale curves (the machine may be busier or freer than when
	// it was profiled).
	NoRecheck bool
}

// Plan is what a load test will run, known before it starts.
type Plan struct {
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

// Level is one server at one concurrency over the rounds.
type Level struct {
	Server      string
	Concurrency int
	Summary
	RunID int64 // its stored run (0 with NoStore)
	// Predicted is the cost model's aggregate tokens/s for Arborist's
	// servers at this level, for the test's own requests (its prompts'
	// median tokens and its max tokens), from the pair's stored curves
	// and calibration (costmodel.PredictLoad); 0 where nothing is stored.
	Predicted float64 `json:",omitempty"`
	// PredictedTTFT and PredictedTPOT are the model's time to first token
	// and time per output token there
	PredictedTTFT, PredictedTPOT time.Duration `json:",omitempty"`
	// Pace is the machine's pace beside the level's rounds against the
	// re-check's the predictions were priced on (plain decoding's token
	// on the target read between the rounds: 1.1 took 10% longer), which
	// the predictions above are brought to; 0 where it was not followed.
	Pace float64 `json:",omitempty"`
	// Err is why the server failed at this level (a crash, a refused
	// request): its rounds stop there, nothing of it is stored, and the
	// other servers and levels go on.
	Err string `json:",omitempty"`
}

// RequestsAt is how many requests each of n clients sends a round:
// PerClient, or more where that many would leave some of the prompts
// unsent, so every level sends every prompt. With two a client, one
// client sent the suite's first two prompts alone, and the level was set
// against the others on other prompts: on the bench pair those two took
// 37-41 ms a request where the rest took 26-30.
func (o Options) RequestsAt(n int) int {
	if n < 1 {
		return o.PerClient
	}
	return max(o.PerClient, (len(o.Prompts)+n-1)/n)
}

// Result is a load test's figures, by level and server.
type Result struct {
	Plan   Plan
	Levels []Level
	Wall   time.Duration
	// PredictedOn is what the predictions rest on: the re-check of the
	// stored curves (its report, several lines) and the server's own time
	// in a request, or why there are none.
	PredictedOn string
	// OverheadFirst and OverheadLast are Arborist's server's own time in
	// a request beyond the engine's priced passes, before its first
	// token and after its last, timed on one-token requests before the
	// rounds and added to every prediction (0: not timed); OverheadStream
	// is what each pass a request is in costs more for streaming its text,
	// and OverheadStreamPass what a streamed pass costs more once (0: not
	// timed, or nothing).
	OverheadFirst, OverheadLast, OverheadStream, OverheadStreamPass time.Duration
}

// WithDefaults fills in the defaults (Defaults) and checks the bounds.
func (o Options) WithDefaults() (Options, error) {
	if o.Config == "" && len(o.ConfigYAML) == 0 {
		return o, fmt.Errorf("loadtest: a config.yaml is required")
	}
	d := Defaults()
	if len(o.Concurrency) == 0 {
		o.Concurrency = d.Concurrency
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
	if err := errors.Join(def(&o.Rounds, d.Rounds, MaxRounds, "rounds"), def(&o.MaxTokens, d.MaxTokens, MaxTokens, "max tokens"),
		def(&o.PerClient, d.PerClient, MaxPerClient, "requests per client")); err != nil {
		return o, err
	}
	if len(o.Prompts) == 0 {
		o.Prompts = d.Prompts
	}
	if o.URL == "" && o.Arborist == "" {
		return o, fmt.Errorf("loadtest: no arborist program to serve with, and no --url")
	}
	return o, nil
}

// MarshalJSON writes a load test as `loadtest --json` prints it: what
// ran, and each server's figures at each level (times in milliseconds).
func (r *Result) MarshalJSON() ([]byte, error) {
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
		PredictedOn string   `json:"predicted_on,omitempty"`
		First       float64  `json:"overhead_first_ms,omitempty"`
		Last        float64  `json:"overhead_last_ms,omitempty"`
		Stream      float64  `json:"overhead_stream_ms,omitempty"`
		StreamPass  float64  `json:"overhead_stream_pass_ms,omitempty"`
	}{Servers: r.Plan.Servers, Concurrency: r.Plan.Concurrency, Rounds: r.Plan.Rounds, WallS: r.Wall.Seconds(), Levels: []level{}, PredictedOn: r.PredictedOn,
		First: ms(r.OverheadFirst), Last: ms(r.OverheadLast), Stream: ms(r.OverheadStream),
		StreamPass: ms(r.OverheadStreamPass)}
	for _, l := range r.Levels {
		out.Levels = append(out.Levels, level{Server: l.Server, Concurrency: l.Concurrency, TPS: l.TPS, TPSP10: l.TPSP10, TPSP90: l.TPSP90,
			TTFT: ms(l.TTFT), TTFTP90: ms(l.TTFTP90), TPOT: ms(l.TPOT), TPOTP90: ms(l.TPOTP90), Rounds: l.Rounds, Requests: l.Requests, Tokens: l.Tokens, RunID: l.RunID, Predicted: l.Predicted,
			PredTTFT: ms(l.PredictedTTFT), PredTPOT: ms(l.PredictedTPOT), Err: l.Err})
	}
	return json.Marshal(out)
}
