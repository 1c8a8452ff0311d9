package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"arborist/engine/generate"
	"arborist/engine/model"
	"arborist/kernels/cpu"
)

// The verbs in this file exist to compare Arborist with another engine on
// the same weights: token ids in, logits or token ids out, no tokenizer in
// between.

// printFamily writes inspect's lines on the architecture's switches
// (sliding window, soft-capping, norms), only those a family uses.
func printFamily(w io.Writer, cfg *model.Config) {
	var parts []string
	if cfg.Window > 0 {
		which := "every layer"
		if cfg.SWAPattern > 0 {
			which = fmt.Sprintf("%d of every %d layers (the last of each %d global)", cfg.SWAPattern-1, cfg.SWAPattern, cfg.SWAPattern)
		}
		parts = append(parts, fmt.Sprintf("sliding window %d on %s", cfg.Window, which))
	}
	if cfg.QKNorm {
		parts = append(parts, "q/k norms")
	}
	if cfg.PostNorms {
		parts = append(parts, "post-attention and post-FFN norms")
	}
	if cfg.AttnSoftcap != 0 {
		parts = append(parts, fmt.Sprintf("attention soft-cap %g", cfg.AttnSoftcap))
	}
	if cfg.FinalSoftcap != 0 {
		parts = append(parts, fmt.Sprintf("final logit soft-cap %g", cfg.FinalSoftcap))
	}
	if cfg.EmbedScale != 0 {
		parts = append(parts, fmt.Sprintf("embeddings x%.4g", cfg.EmbedScale))
	}
	if cfg.GELU {
		parts = append(parts, "GELU (tanh) FFN")
	}
	if cfg.QKVBias {
		parts = append(parts, "Q/K/V biases")
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "family:        %s\n", strings.Join(parts, ", "))
	}
	for _, f := range []struct {
		name string
		v    []float32
	}{{"rope_freqs", cfg.RopeFreqs}, {"rope short", cfg.RopeShort}, {"rope long", cfg.RopeLong}} {
		if f.v != nil {
			fmt.Fprintf(w, "%-15s%s\n", f.name+":", strings.Trim(fmt.Sprintf("%.4g", f.v), "[]"))
		}
	}
}

// loadOnCPU opens a model on a CPU backend of its own; done releases both.
func loadOnCPU(path string, threads int) (m *model.Model, done func(), err error) {
	be := cpu.New(threads)
	if m, err = model.Load(path, be); err != nil {
		be.Close()
		return nil, nil, err
	}
	return m, func() { m.Close(); be.Close() }, nil
}

// parseIDs reads a comma-separated list of token ids.
func parseIDs(s string, vocab int) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, usagef("--ids: %q is not a token id", f)
		}
		if id < 0 || id >= vocab {
			return nil, usagef("--ids: token id %d is outside the vocabulary [0, %d)", id, vocab)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, usagef("--ids is empty")
	}
	return ids, nil
}

// runLogits prints, for every position of the teacher-forced ids, the top
// logits as one JSON line {"pos": i, "top": [[id, logit], ...]}.
func runLogits(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "logits", "--model M --ids 1,2,3 [--top 8] [--threads N]")
	path := fs.String("model", "", "GGUF model `file`")
	idList := fs.String("ids", "", "comma-separated token ids, BOS included if wanted (no tokenizer is involved)")
	top := fs.Int("top", 8, "logits per position, highest first (lower id first on a tie)")
	threads := fs.Int("threads", cpu.DefaultThreads(), "CPU worker threads")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" || *idList == "" {
		return fail(fs, usagef("--model and --ids are required"))
	}
	if *top <= 0 {
		return fail(fs, usagef("--top %d must be positive", *top))
	}
	if *threads <= 0 {
		return fail(fs, usagef("--threads %d must be positive", *threads))
	}
	m, closeModel, err := loadOnCPU(*path, *threads)
	if err != nil {
		return err
	}
	defer closeModel()
	ids, err := parseIDs(*idList, m.Vocab)
	if err != nil {
		return fail(fs, err)
	}
	if len(ids) > m.CtxLen {
		return fmt.Errorf("%d ids exceed the model's context of %d", len(ids), m.CtxLen)
	}
	var res model.Result
	if err := m.Forward(ctx, m.NewCache(len(ids)), model.Batch{Tokens: ids}, &res); err != nil {
		return err
	}
	k := min(*top, m.Vocab)
	order := make([]int, m.Vocab)
	enc := json.NewEncoder(env.Stdout)
	for i := range ids {
		row := res.Logits[i*m.Vocab : (i+1)*m.Vocab]
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		line := struct {
			Pos int          `json:"pos"`
			Top [][2]float64 `json:"top"`
		}{Pos: i, Top: make([][2]float64, k)}
		for j, id := range order[:k] {
			line.Top[j] = [2]float64{float64(id), float64(row[id])}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}

// runGenerateIDs is generate with --ids (token ids instead of a prompt)
// and --print-ids (the generated ids instead of text); any other call goes
// to the text generate verb unchanged.
func runGenerateIDs(ctx context.Context, env Env, args []string) error {
	idMode := false
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "ids" || name == "print-ids") {
			idMode = true
		}
		if a == "--" {
			break
		}
	}
	if !idMode {
		return runGenerate(ctx, env, args)
	}
	fs := newFlags(env, "generate", "--model M (--ids 1,2,3 | --prompt P) [--print-ids] [-n N] [--temp T ...] [--stop-eos]")
	path := fs.String("model", "", "GGUF model `file`")
	idList := fs.String("ids", "", "comma-separated prompt token ids, BOS included if wanted")
	prompt := fs.String("prompt", "", "prompt text (instead of --ids; BOS added as the vocabulary asks)")
	printIDs := fs.Bool("print-ids", false, "print the generated token ids (space-separated) instead of text")
	n := fs.Int("n", 128, "tokens to generate")
	stopEOS := fs.Bool("stop-eos", false, "stop at an end-of-generation token (off: ids are ids, as in a reference comparison)")
	threads := fs.Int("threads", cpu.DefaultThreads(), "CPU worker threads")
	sp := sampleFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" || (*idList == "") == (*prompt == "") {
		return fail(fs, usagef("--model and exactly one of --ids and --prompt are required"))
	}
	if *n <= 0 {
		return fail(fs, usagef("-n %d must be positive", *n))
	}
	if *threads <= 0 {
		return fail(fs, usagef("--threads %d must be positive", *threads))
	}
	params, err := sp()
	if err != nil {
		return fail(fs, err)
	}
	m, closeModel, err := loadOnCPU(*path, *threads)
	if err != nil {
		return err
	}
	defer closeModel()
	var ids []int
	if *idList != "" {
		if ids, err = parseIDs(*idList, m.Vocab); err != nil {
			return fail(fs, err)
		}
	} else if ids = m.Tok.Encode(*prompt, true, false); len(ids) == 0 {
		return fail(fs, usagef("the prompt is empty and the model adds no BOS token"))
	}
	if len(ids)+*n > m.CtxLen {
		return fmt.Errorf("prompt (%d tokens) + %d new tokens exceed the model's context of %d", len(ids), *n, m.CtxLen)
	}
	w := &utf8Writer{w: env.Stdout}
	sep := ""
	out, _, err := generate.Run(ctx, m, ids, generate.Options{
		MaxTokens: *n, Sample: params, StopAtEOS: *stopEOS,
		OnToken: func(id int) {
			if *printIDs {
				fmt.Fprintf(env.Stdout, "%s%d", sep, id)
				sep = " "
			} else {
				w.write(m.Tok.Piece(id))
			}
		},
	})
	w.flush()
	fmt.Fprintln(env.Stdout)
	if err != nil {
		return fmt.Errorf("after %d tokens: %w", len(out), err)
	}
	return nil
}
