package config

import (
	"fmt"
	"strconv"
	"strings"

	"arborist/engine/spec"
)

// The runtime releases the exported settings are written for: flag and
// field names change between releases (llama.cpp's draft defaults, vLLM's
// draft-model method), so each block names the one it was written for.
// docs/EXPORT.md holds the mapping as one table per runtime.
const (
	LlamaCppVersion = "b6000"
	VLLMVersion     = "0.15"
	SGLangVersion   = "0.5.5"
)

// The placeholders an exported vLLM or SGLang line carries where the
// runtime needs a model's Hugging Face form (an id or a downloaded folder)
// and the config holds a GGUF file.
const (
	HFTokenizer = "HF_TOKENIZER"
	HFTarget    = "HF_TARGET_MODEL"
	HFDraft     = "HF_DRAFT_MODEL"
)

// Equivalent is one runtime's closest settings for a plan: the command
// lines, what they assume or carry differently (Notes), and what the plan
// does that the runtime cannot express, each with what the runtime does
// instead (Cannot).
type Equivalent struct {
	Runtime string // llama.cpp, vLLM, SGLang
	Version string // the release the lines were written for
	Program string // the program the lines run
	Lines   []string
	Notes   []string
	Cannot  []string
}

// Render writes the block as the export shows it: a header naming the
// runtime and release, the lines, then the notes and the cannot-express
// lines as comments. The whole block is safe to paste into a shell (the
// GUI's Copy copies it): every argument of a line is quoted (ShellLine),
// and a comment can never end early, since a line break in what it quotes
// (a model path, a version a runtime printed) is written as \n.
func (e Equivalent) Render() string {
	var b strings.Builder
	if e.Runtime == "llama.cpp" && e.Version == LlamaCppVersion {
		// the release the flags are written for, not a build anyone ran:
		// "llama.cpp b6000" read as the user's own build
		b.WriteString(comment(fmt.Sprintf("%s (%s): flags for release %s or later", e.Runtime, e.Program, e.Version)))
	} else {
		b.WriteString(comment(fmt.Sprintf("%s %s (%s)", e.Runtime, e.Version, e.Program)))
	}
	for _, l := range e.Lines {
		b.WriteString(l + "\n")
	}
	for _, n := range e.Notes {
		b.WriteString(comment("note: " + n))
	}
	for _, n := range e.Cannot {
		b.WriteString(comment("cannot express: " + n))
	}
	return b.String()
}

// comment is text as one shell comment line.
func comment(text string) string {
	return "# " + strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(text) + "\n"
}

// ShellQuote is s as one word of a POSIX shell: as it is when every byte
// is one no shell treats specially, otherwise in single quotes (a single
// quote inside closes them, is escaped with a backslash and reopens them),
// so a file name holding ; | & $( ) ` < > * ? [ ] { } ! # ~ quotes,
// spaces, tabs or line breaks reaches the program as it is and runs
// nothing.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := s[0] != '=' // zsh expands a word that starts with = to a program's path
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_-+=:,./@%", c) >= 0
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellLine is a program and its arguments as one shell line, each word
// quoted where it needs it (ShellQuote).
func ShellLine(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

// Equivalents writes the closest settings for llama.cpp, vLLM and SGLang,
// one block each (Runtimes).
func (c *Config) Equivalents() string {
	var parts []string
	for _, e := range c.Runtimes() {
		parts = append(parts, e.Render())
	}
	return strings.Join(parts, "\n")
}

// Runtimes maps the plan onto llama.cpp, vLLM and SGLang.
func (c *Config) Runtimes() []Equivalent {
	sh := planShape(c.Speculation)
	return []Equivalent{c.llamaCpp(sh), c.vllm(sh), c.sglang(sh)}
}

// shape is what the runtimes can take of a plan's verified tree: its
// depth (a chain's length), its nodes and the most children of one node.
type shape struct {
	depth, nodes, topk int
}

func (s shape) branched() bool { return s.nodes > s.depth }

// planShape reads the tree a plan verifies under an acceptance that favours
// each node's first child, so a pruned tree (EGT's w-max) keeps its deepest
// chain as the engine's would on real text.
func planShape(p spec.Plan) shape {
	ex, err := p.Expect(func(_, r int) float64 {
		if r == 0 {
			return 0.9
		}
		return 0.05
	})
	if err != nil {
		return shape{}
	}
	sh := shape{nodes: len(ex.Values)}
	children := map[int]int{}
	for i, d := range ex.Depths() {
		sh.depth = max(sh.depth, d)
		children[ex.Parents[i]]++
	}
	for _, n := range children {
		sh.topk = max(sh.topk, n)
	}
	return sh
}

// plain says whether the config decodes without drafting.
func (c *Config) plain() bool {
	return c.Models.Draft.Kind == "none" || c.Models.Draft.Kind == "" || !c.Speculation.NeedsSource()
}

// threshold is the plan's minimum path probability when it stops drafting
// by one (0: it drafts to its full depth).
func (c *Config) threshold() float64 {
	return c.Speculation.DepthThreshold()
}

// unexpressed lists, for a runtime that verifies one chain drafted after
// each verification, what of the plan it cannot express and what it does
// instead.
func (c *Config) unexpressed(runtime string, sh shape, chain bool) []string {
	var out []string
	s := c.Speculation
	if sh.branched() && chain {
		out = append(out, fmt.Sprintf("%s verifies chains only: the %s plan's tree (%d nodes, at most %d children a node) runs as a chain of its depth (%d), the drafter's top token at each depth", runtime, s.Strategy, sh.nodes, sh.topk, sh.depth))
	}
	for _, u := range s.OneChainLimits(sh.depth) { // what the plan's strategy says such a runtime lacks
		out = append(out, fmt.Sprintf("%s: %s %s", u.What, runtime, u.Instead))
	}
	return out
}

// split is the note for a drafter placed on another device than the
// target (DuoDecoding's split), or "".
func (c *Config) split() string {
	t, d := c.Models.Target, c.Models.Draft
	if d.Device != "" && t.Device != "" && d.Device != t.Device {
		return fmt.Sprintf("this plan drafts on %s while the target verifies on %s (DuoDecoding's split)", d.Device, t.Device)
	}
	return ""
}

// kindName names a draft kind in prose.
func kindName(kind string) string {
	switch kind {
	case "layers":
		return "layer-skip self-drafting (the target's first layers as the drafter)"
	case "hidden":
		return "hidden-state drafter"
	}
	return kind + " drafting"
}

// onGPU says whether a config's device is a GPU's (anything but the CPU).
func onGPU(device string) bool { return device != "" && device != "cpu" }

// LlamaCppArgs are the exported llama.cpp settings as argument lists, so
// that a check of the export in llama.cpp runs exactly what was exported:
// Model is the target with its threads and context; Draft the draft model
// with the draft length, its bounds, --draft-p-min, the draft threads and
// context (nil where llama.cpp has no counterpart of the plan's drafter or
// the plan is plain decoding); Layers and DraftLayers place the two models
// on a GPU (-ngl, -ngld; nil where all is on the CPU); Sampling is the
// plan's sampling, every setting written out (llama.cpp's defaults, top-k
// 40, top-p 0.95, min-p 0.05, are not the plan's).
type LlamaCppArgs struct {
	Model, Draft, Layers, DraftLayers, Sampling []string
	// Depth is the draft length (--draft-max) and PMin --draft-p-min.
	Depth int
	PMin  float64
}

// LlamaCpp is the plan's llama.cpp settings as argument lists.
func (c *Config) LlamaCpp() LlamaCppArgs {
	t, d, sm := c.Models.Target, c.Models.Draft, c.Sampling
	var a LlamaCppArgs
	a.Model = []string{"-m", t.Path}
	if t.Threads > 0 {
		a.Model = append(a.Model, "-t", strconv.Itoa(t.Threads))
	}
	if t.MaxSeqLen > 0 {
		a.Model = append(a.Model, "-c", strconv.Itoa(t.MaxSeqLen))
	}
	a.Sampling = []string{"--temp", fmtG(sm.Temperature), "--top-k", strconv.Itoa(sm.TopK), "--top-p", fmtG(sm.TopP), "--min-p", fmtG(sm.MinP),
		"--seed", strconv.FormatUint(sm.Seed, 10)}
	tg := onGPU(t.Device)
	if tg {
		a.Layers = []string{"-ngl", "99"} // every layer on the GPU
	}
	if c.plain() || d.Kind != "model" {
		return a
	}
	a.Depth, a.PMin = planShape(c.Speculation).depth, c.threshold()
	if tl := c.llamaTuned(); tl != nil {
		if !tl.Speculate {
			return a // measured fastest without speculation
		}
		a.Depth, a.PMin = tl.DraftMax, tl.DraftPMin
	}
	a.Draft = []string{"-md", d.Path, "--draft-max", strconv.Itoa(a.Depth), "--draft-min", "0", "--draft-p-min", fmtG(a.PMin)}
	// llama.cpp drafts and verifies in turn, so the draft model gets the
	// target's threads unless it has threads of its own elsewhere
	dthreads := t.Threads
	if d.Threads > 0 && !c.Speculation.Concurrent() {
		dthreads = d.Threads
	}
	if dthreads > 0 {
		a.Draft = append(a.Draft, "-td", strconv.Itoa(dthreads))
	}
	if t.MaxSeqLen > 0 {
		a.Draft = append(a.Draft, "-cd", strconv.Itoa(t.MaxSeqLen))
	}
	// -ngl / -ngld: the target's and the draft model's layers on the GPU
	// (99: all of them), as the plan places each model
	dg := onGPU(d.Device)
	switch {
	case tg && !dg:
		a.DraftLayers = []string{"-ngld", "0"} // target on the GPU, draft model on the CPU
	case dg:
		a.Layers, a.DraftLayers = []string{"-ngl", "0"}, []string{"-ngld", "99"}
		if tg {
			a.Layers = []string{"-ngl", "99"}
		}
	}
	return a
}

// llamaTuned is the llama.cpp setting measured for the plan, or nil.
func (c *Config) llamaTuned() *LlamaCppTuned {
	if c.Measured == nil {
		return nil
	}
	return c.Measured.LlamaCpp
}

func fmtG(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// line joins a program and its argument lists into a shell line.
func line(program string, lists ...[]string) string {
	parts := []string{program}
	for _, l := range lists {
		parts = append(parts, l...)
	}
	return ShellLine(parts...)
}

// llamaCpp maps the plan onto llama-server (a draft model), llama-lookup
// (n-gram prompt lookup) or plain llama-server (no drafter it can run).
func (c *Config) llamaCpp(sh shape) (e Equivalent) {
	e = Equivalent{Runtime: "llama.cpp", Version: LlamaCppVersion, Program: "llama-server"}
	d := c.Models.Draft
	a := c.LlamaCpp()
	n := c.Concurrency()
	// -np: as many sequences as the plan was tuned for, -c sized for them
	plainLine := line("llama-server", c.LlamaServer(n, false))
	specLine := line("llama-server", c.LlamaServer(n, true))
	samplingNote := "llama-server takes these sampling settings as the defaults of a request; a request's own settings override them"
	defer func() {
		if e.Program == "llama-server" {
			e.Notes = append(e.Notes, c.slotsNote(n)...)
		}
	}()
	if c.plain() {
		e.Lines = []string{plainLine}
		e.Notes = []string{samplingNote}
		return e
	}
	if d.Kind == "model" && !c.speculatesAt() {
		// Arborist's model says drafting does not pay at this load
		e.Lines = []string{plainLine}
		e.Notes = []string{c.notAtLoad(), samplingNote}
		return e
	}
	tl := c.llamaTuned()
	if tl != nil && d.Kind == "model" {
		if v := tl.Version; v != "" {
			e.Version = v
		}
		if !tl.Speculate {
			e.Lines = []string{plainLine}
			e.Notes = []string{fmt.Sprintf("no speculation: in llama.cpp on this machine no draft length measured faster than its plain decoding (the best %.2fx, %.2f-%.2fx; arborist check-export --tune)", tl.Speedup, tl.Low, tl.High), samplingNote}
			return e
		}
		e.Lines = []string{specLine}
		e.Cannot = append(e.Cannot, c.byLoad("llama.cpp", "llama-server drafts in every slot at any load")...)
		e.Notes = append(e.Notes, fmt.Sprintf("--draft-max %d --draft-p-min %g measured fastest in llama.cpp on this machine: %.2fx its plain decoding (%.2f-%.2fx; arborist check-export --tune), in place of the plan's draft length, which was tuned for Arborist's engine", tl.DraftMax, tl.DraftPMin, tl.Speedup, tl.Low, tl.High))
		e.Cannot = append(e.Cannot, c.unexpressed("llama.cpp", sh, true)...)
		e.Notes = append(e.Notes, samplingNote)
		return e
	}
	switch d.Kind {
	case "model":
		e.Lines = []string{specLine}
		e.Cannot = append(e.Cannot, c.byLoad("llama.cpp", "llama-server drafts in every slot at any load")...)
		if a.PMin > 0 {
			e.Notes = append(e.Notes, fmt.Sprintf("--draft-p-min %g is the plan's threshold depth policy; llama.cpp compares it with each drafted token's own probability, the plan with the path's product, so llama.cpp may draft deeper than the plan", a.PMin))
		} else {
			e.Notes = append(e.Notes, fmt.Sprintf("--draft-p-min 0 drafts all %d tokens every step, as the plan does; without it llama.cpp stops drafting at its own cut-off (0.75 or more, by release)", a.Depth))
		}
	case "ngram":
		e.Program = "llama-lookup"
		e.Lines = []string{line("llama-lookup", a.Model[:2], []string{"--draft", strconv.Itoa(sh.depth)}, a.Model[2:], a.Layers, a.Sampling, []string{"-p", "PROMPT"})}
		e.Notes = append(e.Notes, fmt.Sprintf("prompt lookup decoding; llama-lookup matches n-grams of 1 to 4 tokens (fixed), the plan suffixes of up to %d; it has no probability cut-off (--draft-p-min does not apply) and llama-server has no n-gram drafter in this release", d.NGram))
	default:
		e.Lines = []string{plainLine}
		e.Cannot = append(e.Cannot, fmt.Sprintf("llama.cpp has no %s: the line above decodes plainly (1.00x) instead", kindName(d.Kind)))
		e.Notes = append(e.Notes, samplingNote)
		return e
	}
	e.Cannot = append(e.Cannot, c.unexpressed("llama.cpp", sh, true)...)
	if d.Kind == "ngram" && n > 1 {
		e.Cannot = append(e.Cannot, fmt.Sprintf("serving %d requests at once: llama-lookup decodes one prompt; llama-server (the plain line's program) serves -np %d without n-gram drafting", n, n))
	}
	if s := c.split(); s != "" {
		e.Notes = append(e.Notes, s+"; -ngl and -ngld place the two models the same way")
	}
	e.Notes = append(e.Notes, samplingNote,
		"the draft length was tuned for Arborist's engine: llama.cpp's verification costs differ, so its speedup must be measured in llama.cpp (arborist check-export)")
	return e
}

// vllmModel is the target as vllm serve takes it: a GGUF file with the
// tokenizer of its Hugging Face original.
func (c *Config) vllmModel() (string, string) {
	p := c.Models.Target.Path
	if strings.HasSuffix(strings.ToLower(p), ".gguf") {
		return ShellQuote(p) + " --tokenizer " + HFTokenizer, "vLLM's GGUF loading is experimental (single-file models) and needs --tokenizer: put the original model's Hugging Face id or folder in place of " + HFTokenizer + ", or serve the Hugging Face model itself in place of the .gguf"
	}
	return ShellQuote(p), ""
}

// vllm maps the plan onto vllm serve's speculative_config.
func (c *Config) vllm(sh shape) Equivalent {
	e := Equivalent{Runtime: "vLLM", Version: VLLMVersion, Program: "vllm serve, V1 engine"}
	t, d, sm := c.Models.Target, c.Models.Draft, c.Sampling
	model, ggufNote := c.vllmModel()
	tail := ""
	if t.MaxSeqLen > 0 {
		tail += fmt.Sprintf(" --max-model-len %d", t.MaxSeqLen)
	}
	tail += fmt.Sprintf(" --max-num-seqs %d", c.Concurrency())
	// vLLM turns speculation off for new requests while more than
	// disable_by_batch_size run: off from the level where it stops paying
	byBatch := ""
	if at := c.SpeculationStopsAt(); at > 1 {
		byBatch = fmt.Sprintf(", \"disable_by_batch_size\": %d", at-1)
	}
	topK := sm.TopK
	if topK == 0 {
		topK = -1 // vLLM's "all tokens"
	}
	tail += fmt.Sprintf(" --seed %d --generation-config vllm --override-generation-config '{\"temperature\": %g, \"top_p\": %g, \"top_k\": %d, \"min_p\": %g}'", sm.Seed, sm.Temperature, sm.TopP, topK, sm.MinP)
	notes := func() {
		if ggufNote != "" {
			e.Notes = append(e.Notes, ggufNote)
		}
		if !onGPU(t.Device) {
			e.Notes = append(e.Notes, "vLLM serves on a GPU; the plan was tuned on "+orCPU(t.Device)+", so nothing here predicts its speed there")
		}
		e.Notes = append(e.Notes, "the generation config sets the plan's sampling as the default of a request; a request's own settings override it")
	}
	plainLine := "vllm serve " + model + tail
	line := ""
	switch {
	case c.plain():
	case !c.speculatesAt():
		e.Notes = append(e.Notes, c.notAtLoad())
	case d.Kind == "model":
		line = fmt.Sprintf("vllm serve %s --speculative-config '{\"method\": \"draft_model\", \"model\": \"%s\", \"num_speculative_tokens\": %d%s}'%s", model, HFDraft, sh.depth, byBatch, tail)
		e.Notes = append(e.Notes, fmt.Sprintf("a GGUF draft model (%s) is not a documented input of vLLM's draft_model method: put the draft model's Hugging Face id or folder in place of %s; vLLM 0.10 to 0.13 have no draft-model speculation at all", d.Path, HFDraft))
	case d.Kind == "ngram":
		line = fmt.Sprintf("vllm serve %s --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": %d, \"prompt_lookup_max\": %d, \"prompt_lookup_min\": 1%s}'%s", model, sh.depth, d.NGram, byBatch, tail)
	}
	if at := c.SpeculationStopsAt(); line != "" {
		e.Notes = append(e.Notes, fmt.Sprintf("disable_by_batch_size %d: vLLM stops speculating for new requests while more than %d run, from %d on (%s)", at-1, at-1, at, c.stopsWhy()))
		if c.Policy() == PolicyAdaptive {
			e.Cannot = append(e.Cannot, "the adaptive policy (each pass shrinks every request's drafting to what pays at the load): vLLM drafts num_speculative_tokens for every request until disable_by_batch_size turns speculation off")
		}
	}
	c.serve(&e, sh, server{
		name:    "vLLM",
		chains:  true,
		hidden:  "EAGLE heads ('{\"method\": \"eagle3\", \"model\": ...}')",
		drafts:  "vLLM drafts num_speculative_tokens every step",
		line:    line,
		plainly: plainLine,
	})
	notes()
	return e
}

// sglang maps the plan onto sglang.launch_server's speculative flags.
func (c *Config) sglang(sh shape) Equivalent {
	e := Equivalent{Runtime: "SGLang", Version: SGLangVersion, Program: "python -m sglang.launch_server"}
	t, d, sm := c.Models.Target, c.Models.Draft, c.Sampling
	tail := ""
	if t.MaxSeqLen > 0 {
		tail += fmt.Sprintf(" --context-length %d", t.MaxSeqLen)
	}
	tail += fmt.Sprintf(" --max-running-requests %d --random-seed %d", c.Concurrency(), sm.Seed)
	notes := func() {
		e.Notes = append(e.Notes, fmt.Sprintf("SGLang serves Hugging Face models: put the target's Hugging Face id or folder (the original of %s) in place of %s", t.Path, HFTarget))
		if !onGPU(t.Device) {
			e.Notes = append(e.Notes, "SGLang serves on a GPU; the plan was tuned on "+orCPU(t.Device)+", so nothing here predicts its speed there")
		}
		topK := sm.TopK
		if topK == 0 {
			topK = -1
		}
		e.Notes = append(e.Notes, fmt.Sprintf("SGLang takes sampling per request: send temperature %g, top_p %g, top_k %d, min_p %g", sm.Temperature, sm.TopP, topK, sm.MinP))
	}
	plainLine := "python -m sglang.launch_server --model-path " + HFTarget + tail
	line := ""
	switch {
	case c.plain():
	case !c.speculatesAt():
		e.Notes = append(e.Notes, c.notAtLoad())
	case d.Kind == "model":
		line = fmt.Sprintf("python -m sglang.launch_server --model-path %s --speculative-algorithm STANDALONE --speculative-draft-model-path %s --speculative-num-steps %d --speculative-eagle-topk %d --speculative-num-draft-tokens %d%s",
			HFTarget, HFDraft, sh.depth, max(1, sh.topk), sh.nodes+1, tail)
		e.Notes = append(e.Notes, fmt.Sprintf("a GGUF draft model (%s) is not a documented input of SGLang: put the draft model's Hugging Face id or folder in place of %s", d.Path, HFDraft))
		if sh.branched() {
			e.Notes = append(e.Notes, fmt.Sprintf("SGLang grows its tree by keeping the %d best children at each of %d steps and verifies the %d most likely tokens; the %s plan's exact shape is not kept", max(1, sh.topk), sh.depth, sh.nodes, c.Speculation.Strategy))
		}
	case d.Kind == "ngram":
		line = fmt.Sprintf("python -m sglang.launch_server --model-path %s --speculative-algorithm NGRAM --speculative-num-draft-tokens %d --speculative-ngram-min-match-window-size 1 --speculative-ngram-max-match-window-size %d%s",
			HFTarget, sh.nodes+1, d.NGram, tail)
		e.Notes = append(e.Notes, "SGLang's n-gram drafting runs on CUDA only and drafts from a cache of earlier requests as well as this one")
	}
	if line != "" {
		e.Cannot = append(e.Cannot, c.byLoad("SGLang", "SGLang speculates at every batch size; --max-running-requests bounds the batch instead")...)
	}
	c.serve(&e, sh, server{
		name:    "SGLang",
		hidden:  "EAGLE heads (--speculative-algorithm EAGLE3)",
		drafts:  "SGLang drafts all its steps every step",
		line:    line,
		plainly: plainLine,
	})
	notes()
	return e
}

// server is what a serving runtime (vLLM, SGLang) has for a plan, for
// serve to finish its mapping with.
type server struct {
	name   string
	chains bool   // verifies chains only (unexpressed's chain)
	hidden string // its nearest to a hidden-state drafter
	drafts string // how much it drafts, where the plan stops at a threshold
	// line is its speculative line for the plan's drafter, "" where it
	// has none (or the plan does not speculate): plainly then
	line, plainly string
}

// serve finishes a serving runtime's mapping e: its speculative line and
// what the plan holds that the runtime cannot express, or where it has no
// counterpart for the plan's drafter, its plain line and why. Both
// runtimes place the draft model with the target, so a split plan says so.
func (c *Config) serve(e *Equivalent, sh shape, s server) {
	if s.line == "" {
		e.Lines = []string{s.plainly}
		switch kind := c.Models.Draft.Kind; {
		case c.plain(), !c.speculatesAt(): // nothing to draft, or not at this load (said in a note)
		case kind == "hidden":
			e.Cannot = append(e.Cannot, s.name+" has no hidden-state drafter of this kind: the line above decodes plainly (1.00x) instead; its closest are "+s.hidden+", trained for the target")
		default:
			e.Cannot = append(e.Cannot, fmt.Sprintf("%s has no %s: the line above decodes plainly (1.00x) instead", s.name, kindName(kind)))
		}
		return
	}
	e.Lines = []string{s.line}
	e.Cannot = append(e.Cannot, c.unexpressed(s.name, sh, s.chains)...)
	if c.threshold() > 0 {
		e.Cannot = append(e.Cannot, fmt.Sprintf("the threshold depth policy (stop below a path probability of %g): %s", c.threshold(), s.drafts))
	}
	if sp := c.split(); sp != "" {
		e.Notes = append(e.Notes, sp+"; vLLM and SGLang run the draft model on the target's GPU and cannot place it elsewhere")
	}
}

// byLoad is the cannot-express line of a runtime that speculates at any
// load (instead says what it does), where the plan's serving turns
// speculation off past a level: the level Arborist's model gives, or the
// rule SpeculationStopsAt states; none where the plan does not speculate.
func (c *Config) byLoad(runtime, instead string) []string {
	at := c.SpeculationStopsAt()
	if at == 0 {
		return nil
	}
	why := c.stopsWhy()
	if c.Policy() == PolicyAdaptive {
		return []string{fmt.Sprintf("the adaptive policy (each pass shrinks every request's drafting to what pays at the load) and turning speculation off at %d requests at once (%s): %s", at, why, instead)}
	}
	return []string{fmt.Sprintf("turning speculation off at %d requests at once (%s): %s", at, why, instead)}
}

// stopsWhy says where SpeculationStopsAt's level comes from.
func (c *Config) stopsWhy() string {
	if c.Serving.SpeculationStopsAt == 0 {
		return fmt.Sprintf("the level after the tuned one (twice serving.concurrency %d: no level tune priced had plain batching first)", c.Concurrency())
	}
	return "where Arborist's cost model says it stops paying: serving.speculation_stops_at"
}

// notAtLoad is the note of a line that decodes plainly because the plan's
// speculation does not pay at its concurrency.
func (c *Config) notAtLoad() string {
	return fmt.Sprintf("no speculation: Arborist's cost model says it stops paying at %d requests at once (serving.speculation_stops_at), and this plan serves %d", c.SpeculationStopsAt(), c.Concurrency())
}

// slotsNote says how the llama.cpp line is sized for the concurrency.
func (c *Config) slotsNote(n int) []string {
	ctx := c.Models.Target.MaxSeqLen
	if ctx == 0 {
		return []string{fmt.Sprintf("-np %d: llama-server serves %s at once (serving.concurrency) and splits its context among them; add -c %d times the context one request needs", n, requests(n), n)}
	}
	return []string{fmt.Sprintf("-np %d -c %d: llama-server serves %s at once (serving.concurrency), each with %d tokens of context (-c is shared among the -np slots)", n, n*ctx, requests(n), ctx)}
}

// requests counts requests: "1 request", "4 requests".
func requests(n int) string {
	if n == 1 {
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}

func orCPU(device string) string {
	if device == "" {
		return "cpu"
	}
	return device
}
