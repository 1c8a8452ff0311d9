// Package llamacheck holds the values of a check and a tune of an
// exported plan in llama.cpp (profiles' CheckExport and TuneLlamaCpp):
// what they run (Options, with its defaults and bounds), what a round
// measured, and what they found, each as its verb's --json prints it.
// The workflows, which run llama.cpp's programs and store the runs, are
// the core's.
package llamacheck

import (
	"fmt"
	"time"

	"arborist/profiles/config"
)

// Options describe a check of an exported plan in llama.cpp.
type Options struct {
	// LlamaCpp is the folder holding llama.cpp's binaries ("": found on
	// PATH).
	LlamaCpp string
	Prompts  []string
	// MaxTokens per prompt (default 128) and Rounds (default 3): each
	// round decodes every prompt plainly and with the exported settings,
	// the two in turn, the order swapped every round.
	MaxTokens, Rounds int
	NoStore           bool
	// CallLimit bounds each llama.cpp call (0: CallLimitFor, derived
	// from the tokens asked for and the prompt's size); a call past it is
	// ended, with the processes it started, and the check fails naming
	// it.
	CallLimit time.Duration
	// OnRound, when set, receives each finished round.
	OnRound func(i int, r Round)
	// Out, for TuneLlamaCpp, is the file the tuned config is written to,
	// refused before anything is measured where it names the database, a
	// model the config names or one of Inputs (the config tuned from, the
	// prompt suite).
	Out    string
	Inputs []string
}

// Round is one round's figures in llama.cpp: decode tokens/s of plain
// decoding and of the exported speculative settings over the prompts,
// their ratio, and the drafted and accepted tokens.
type Round struct {
	Plain    float64 `json:"plain_tokens_per_s"`
	Spec     float64 `json:"speculative_tokens_per_s"`
	Speedup  float64 `json:"speedup"`
	Drafted  int     `json:"drafted"`
	Accepted int     `json:"accepted"`
}

// Result is the speedup the exported settings give in llama.cpp.
type Result struct {
	Runtime     string   `json:"runtime"`
	Version     string   `json:"version,omitempty"` // what the binaries print for --version
	Plain       []string `json:"plain_command"`     // the commands, the prompt as PROMPT
	Speculative []string `json:"speculative_command"`
	// PlainLine and SpeculativeLine are the commands as shell lines, every
	// word quoted where it needs it, safe to paste.
	PlainLine       string  `json:"plain_line"`
	SpeculativeLine string  `json:"speculative_line"`
	Rounds          []Round `json:"rounds"`
	Speedup         float64 `json:"speedup"` // the median round's
	Acceptance      float64 `json:"acceptance"`
	// Predicted is Arborist's prediction for its own engine (the config's).
	Predicted float64 `json:"predicted_arborist,omitempty"`
	PlainRun  int64   `json:"plain_run_id,omitempty"`
	SpecRun   int64   `json:"speculative_run_id,omitempty"`
	// Min and Max are the rounds' range.
	Min float64 `json:"speedup_min"`
	Max float64 `json:"speedup_max"`
}

// maxCheckTokens bounds the tokens a check asks llama.cpp for per prompt.
const maxCheckTokens = 1 << 20

// Complete fills in a check's or a tune's defaults (128 tokens a prompt,
// 3 rounds) and refuses one without prompts or with more tokens a prompt
// than the config's context (or maxCheckTokens); what names the work.
func (opt *Options) Complete(what string, c *config.Config) error {
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 128
	}
	if opt.Rounds <= 0 {
		opt.Rounds = 3
	}
	if len(opt.Prompts) == 0 {
		return fmt.Errorf("no prompts to %s with", what)
	}
	if ctx := c.Models.Target.MaxSeqLen; ctx > 0 && opt.MaxTokens > ctx {
		return fmt.Errorf("%d tokens a prompt (-n) exceed the config's context (models.target.max_seq_len %d)", opt.MaxTokens, ctx)
	}
	if opt.MaxTokens > maxCheckTokens {
		return fmt.Errorf("%d tokens a prompt (-n): at most %d", opt.MaxTokens, maxCheckTokens)
	}
	return nil
}

// CallLimitFor is how long one llama.cpp call on prompt may take: two
// minutes to load the models, two seconds for each token asked for and
// 20 ms for each byte of the prompt (far beyond any machine llama.cpp runs on: a model
// that slow is not worth checking).
func (opt *Options) CallLimitFor(prompt string) time.Duration {
	if opt.CallLimit > 0 {
		return opt.CallLimit
	}
	return 2*time.Minute + time.Duration(opt.MaxTokens)*2*time.Second + time.Duration(len(prompt))*20*time.Millisecond
}

// Setting is one llama.cpp speculative setting a tune measures:
// --draft-max and --draft-p-min, with its rounds' speedups over llama.cpp's
// plain decoding (the median and the range) and its acceptance there.
type Setting struct {
	DraftMax   int       `json:"draft_max"`
	DraftPMin  float64   `json:"draft_p_min"`
	Exported   bool      `json:"exported"` // the plan's own mapping
	Speedups   []float64 `json:"speedups"` // one a round
	Speedup    float64   `json:"speedup"`  // the median
	Low, High  float64   `json:"-"`
	Acceptance float64   `json:"acceptance"`
}

// TuneResult is what a tune for llama.cpp measured: every setting,
// the best one (nil where none was faster than plain decoding: then
// llama.cpp should not speculate on this pair and machine), and the
// config with that setting written into it for export.
type TuneResult struct {
	Version   string         `json:"version,omitempty"`
	Settings  []Setting      `json:"settings"`
	Best      *Setting       `json:"best"`
	Exported  *Setting       `json:"exported"` // the plain export's setting, measured beside the others
	Predicted float64        `json:"predicted_arborist,omitempty"`
	Config    *config.Config `json:"-"`
	PlainRun  int64          `json:"plain_run_id,omitempty"`
	BestRun   int64          `json:"best_run_id,omitempty"`
}
