package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"arborist/engine/generate"
	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/engine/synth"
	"arborist/engine/tokenizer"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
	"arborist/profiles"
)

func runInspect(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "inspect", "[--ctx N] MODEL.gguf")
	ctxLen := fs.Int("ctx", 0, "context length for the memory estimate (default: the model's, at most 4096)")
	pos, err := parse(fs, args)
	if err != nil {
		return fail(fs, err)
	}
	if len(pos) != 1 {
		return fail(fs, usagef("want exactly one model file, got %d arguments", len(pos)))
	}
	if *ctxLen < 0 {
		return fail(fs, usagef("--ctx %d must be positive", *ctxLen))
	}
	f, err := gguf.Open(pos[0])
	if err != nil {
		return err
	}
	defer f.Close()
	w := env.Stdout
	fmt.Fprintf(w, "file:          %s (GGUF v%d, %d tensors, %d metadata keys)\n", f.Path, f.Version, len(f.Tensors), len(f.KV))
	name, _ := f.String("general.name")
	fmt.Fprintf(w, "name:          %s\n", name)
	if syn, _ := f.Bool("arborist.synthetic"); syn {
		shape, _ := f.String("arborist.synthetic_shape")
		fmt.Fprintf(w, "SYNTHETIC:     random weights with the shape of %s (timing only; text is noise)\n", shape)
	}
	fmt.Fprintf(w, "architecture:  %s\n", f.Architecture())
	fmt.Fprintf(w, "parameters:    %s (%d)\n", human(float64(f.Params()), ""), f.Params())
	fmt.Fprintf(w, "weights:       %s\n", humanBytes(f.WeightBytes()))
	fmt.Fprintln(w, "tensor types:")
	for _, tc := range f.TypeCounts() {
		fmt.Fprintf(w, "  %-6s %4d tensors  %10s params  %10s\n", tc.Type, tc.Tensors, human(float64(tc.Params), ""), humanBytes(tc.Bytes))
	}
	cfg, cerr := model.ReadConfig(f)
	if cerr == nil {
		fmt.Fprintf(w, "shape:         width %d, %d layers, %d heads (%d kv, head width %d), ffn %d, context %d\n",
			cfg.Dim, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.FFN, cfg.CtxLen)
		rope := "normal"
		if cfg.RopeNeox {
			rope = "neox"
		}
		fmt.Fprintf(w, "rope:          %s, %d dims, base %g, scaling %s\n", rope, cfg.RopeDim, cfg.RopeBase, cfg.RopeVariant())
		printFamily(w, &cfg)
		n := *ctxLen
		if n == 0 {
			n = min(cfg.CtxLen, 4096)
		}
		kv := cfg.KVBytes(n)
		fmt.Fprintf(w, "memory:        %s at context %d (weights %s mapped + KV cache %s)\n", humanBytes(f.WeightBytes()+kv), n, humanBytes(f.WeightBytes()), humanBytes(kv))
		if err := model.Check(f); err != nil { // issue 17: missing tensors, vocabulary mismatch
			fmt.Fprintf(w, "runnable:      no: %v\n", err)
		}
	} else {
		fmt.Fprintf(w, "runnable:      no: %v\n", cerr)
	}
	tok, terr := tokenizer.FromGGUF(f)
	if terr != nil {
		fmt.Fprintf(w, "tokenizer:     unusable: %v\n", terr)
	} else {
		kind := "SentencePiece (llama)"
		if tok.Kind == tokenizer.BPE {
			kind = fmt.Sprintf("byte-level BPE (gpt2, pre-tokenizer %q)", tok.Pre)
		}
		fmt.Fprintf(w, "tokenizer:     %s, %d tokens, BOS %d, EOS %d, add BOS %v\n", kind, tok.VocabSize(), tok.BOS, tok.EOS, tok.AddBOS)
	}
	return nil
}

func runTokenize(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "tokenize", "--model M [--no-bos] [--special] TEXT")
	path := fs.String("model", "", "GGUF model (or vocabulary-only GGUF) `file`")
	noBOS := fs.Bool("no-bos", false, "do not add the BOS token even if the vocabulary asks for it")
	special := fs.Bool("special", false, "parse control-token texts such as </s> in the input")
	pos, err := parse(fs, args)
	if err != nil {
		return fail(fs, err)
	}
	if *path == "" {
		return fail(fs, usagef("--model is required"))
	}
	if len(pos) != 1 {
		return fail(fs, usagef("want exactly one TEXT argument (quote it), got %d", len(pos)))
	}
	f, err := gguf.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	ids := tok.Encode(pos[0], !*noBOS, *special)
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = fmt.Sprint(id)
	}
	fmt.Fprintln(env.Stdout, strings.Join(strs, " "))
	return nil
}

// sampleFlags registers the sampling flags shared by generating verbs.
func sampleFlags(fs interface {
	Float64(string, float64, string) *float64
	Int(string, int, string) *int
	Uint64(string, uint64, string) *uint64
}) func() (sample.Params, error) {
	temp := fs.Float64("temp", 0, "temperature; 0 = greedy")
	topK := fs.Int("top-k", 0, "keep the K most likely tokens (0 = all)")
	topP := fs.Float64("top-p", 1, "nucleus sampling threshold (1 = off)")
	minP := fs.Float64("min-p", 0, "drop tokens below this fraction of the top probability")
	seed := fs.Uint64("seed", 1, "random seed")
	return func() (sample.Params, error) {
		p := sample.Params{Temp: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP), Seed: *seed}
		if err := p.Validate(); err != nil {
			return p, usagef("%v", err)
		}
		return p, nil
	}
}

func runGenerate(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "generate", "--model M --prompt P [-n N] [--temp T --top-k K --top-p P --min-p P --seed S --threads N]")
	path := fs.String("model", "", "GGUF model `file`")
	prompt := fs.String("prompt", "", "prompt text")
	n := fs.Int("n", 128, "tokens to generate")
	threads := fs.Int("threads", cpu.DefaultThreads(), "CPU worker threads")
	noBOS := fs.Bool("no-bos", false, "do not add BOS before the prompt")
	noMmap := fs.Bool("no-mmap", false, "read the model into memory instead of mapping it")
	sp := sampleFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return fail(fs, err)
	}
	if len(pos) > 0 {
		return fail(fs, usagef("unexpected argument %q (the prompt goes in --prompt)", pos[0]))
	}
	if *path == "" {
		return fail(fs, usagef("--model is required"))
	}
	if *n <= 0 {
		return fail(fs, usagef("-n %d must be positive", *n))
	}
	if err := profiles.CheckThreads("--threads", *threads); err != nil { // issue 17: capped at the machine's cores
		return fail(fs, usagef("%v", err))
	}
	params, err := sp()
	if err != nil {
		return fail(fs, err)
	}
	be := cpu.New(*threads)
	defer be.Close()
	m, err := model.LoadWith(*path, be, gguf.Options{NoMmap: *noMmap})
	if err != nil {
		return err
	}
	defer m.Close()
	ids := m.Tok.Encode(*prompt, !*noBOS, false)
	if len(ids) == 0 {
		return fail(fs, usagef("the prompt is empty and the model adds no BOS token: give --prompt"))
	}
	if len(ids)+*n > m.CtxLen {
		return fmt.Errorf("prompt (%d tokens) + %d new tokens exceed the model's context of %d", len(ids), *n, m.CtxLen)
	}
	w := &utf8Writer{w: env.Stdout}
	out, st, err := generate.Run(ctx, m, ids, generate.Options{
		MaxTokens: *n, Sample: params, StopAtEOS: true,
		OnToken: func(id int) { w.write(m.Tok.Piece(id)) },
	})
	w.flush()
	fmt.Fprintln(env.Stdout)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(env.Stderr, "stopped after %d tokens\n", len(out))
		}
		return err
	}
	fmt.Fprintf(env.Stdout, "\nprefill: %d tokens in %.1f ms, %.1f tokens/s\n", st.PromptTokens, ms(st.Prefill.Seconds()), st.PrefillTPS())
	fmt.Fprintf(env.Stdout, "decode:  %d tokens in %.1f ms, %.1f tokens/s (%d threads, %s backend)\n", st.Tokens, ms(st.Decode.Seconds()), st.DecodeTPS(), be.Threads(), be.Name())
	return nil
}

func ms(s float64) float64 { return s * 1000 }

// utf8Writer holds back the bytes of an incomplete UTF-8 sequence (byte
// tokens arrive one byte at a time) so the terminal never sees half a rune.
type utf8Writer struct {
	w   interface{ Write([]byte) (int, error) }
	buf []byte
}

func (u *utf8Writer) write(s string) {
	u.buf = append(u.buf, s...)
	end := len(u.buf)
	// find the start of a trailing incomplete sequence, if any
	for i := len(u.buf) - 1; i >= 0 && i >= len(u.buf)-4; i-- {
		if utf8.RuneStart(u.buf[i]) {
			if !utf8.FullRune(u.buf[i:]) {
				end = i
			}
			break
		}
	}
	u.w.Write(u.buf[:end])
	u.buf = append(u.buf[:0], u.buf[end:]...)
}

func (u *utf8Writer) flush() {
	u.w.Write(u.buf)
	u.buf = u.buf[:0]
}

func runSynth(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "synth", "--shape NAME|custom:dim=..,layers=..,heads=..,kv=..,ffn=..,vocab=.. [--type Q8_0] -o FILE")
	shapeName := fs.String("shape", "", "named shape ("+strings.Join(synth.ShapeNames(), ", ")+") or custom:...")
	typName := fs.String("type", "Q8_0", "weight type of the matrices (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)")
	out := fs.String("o", "", "output `file`")
	seed := fs.Uint64("seed", 1, "random seed for the weights")
	force := fs.Bool("force", false, "overwrite an existing output file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *shapeName == "" || *out == "" {
		return fail(fs, usagef("--shape and -o are required"))
	}
	shape, err := synth.ParseShape(*shapeName)
	if err != nil {
		return fail(fs, usagef("%v", err))
	}
	typ, err := quant.ParseType(strings.ToUpper(*typName))
	if err != nil || !typ.Supported() {
		return fail(fs, usagef("--type %q is not a supported weight type", *typName))
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("%s already exists (use --force to overwrite)", *out)
	}
	fmt.Fprintf(env.Stderr, "writing synthetic %s (%s parameters, %s) to %s\n", shape.Name, human(float64(shape.Params()), ""), typ, *out)
	last := -1
	err = synth.WriteFile(ctx, *out, shape, synth.Options{Type: typ, Seed: *seed, Progress: func(done, total uint64) {
		if pct := int(done * 100 / max(total, 1)); pct/10 != last/10 {
			last = pct
			fmt.Fprintf(env.Stderr, "  %3d%%  %s of %s\n", pct, humanBytes(done), humanBytes(total))
		}
	}})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", *out)
	return nil
}

func human(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fB%s", v/1e9, unit)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM%s", v/1e6, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK%s", v/1e3, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

func humanBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
