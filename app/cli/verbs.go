package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"arborist/app/present"
	"arborist/profiles"
)

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
	ids, err := profiles.Tokenize(*path, pos[0], !*noBOS, *special)
	if err != nil {
		return err
	}
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = fmt.Sprint(id)
	}
	fmt.Fprintln(env.Stdout, strings.Join(strs, " "))
	return nil
}

// sampleFlags registers the sampling flags shared by generating verbs,
// one per sampling field (its flag, default, help and bounds), and returns
// what reads them once the flags are parsed. A value out of a field's
// bounds is refused as the flag is parsed.
func sampleFlags(fs *flag.FlagSet) func() (profiles.SampleParams, error) {
	p := profiles.DefaultSampling()
	for _, f := range profiles.SamplingFields() {
		fs.Var(sampleFlag{&p, f.Name}, f.Flag, f.Usage())
	}
	return func() (profiles.SampleParams, error) {
		if err := p.Validate(); err != nil {
			return p, usagef("%v", err)
		}
		return p, nil
	}
}

// sampleFlag is one sampling field as a flag.Value.
type sampleFlag struct {
	p    *profiles.SampleParams
	name string
}

func (f sampleFlag) String() string {
	if f.p == nil { // the zero value flag.PrintDefaults compares against
		return ""
	}
	return f.p.Get(f.name)
}

func (f sampleFlag) Set(v string) error { return f.p.Set(f.name, v) }

func runGenerate(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "generate", "--model M (--prompt P | --ids 1,2,3) [--print-ids] [-n N] [--temp T --top-k K --top-p P --min-p P --seed S --threads N]")
	path := fs.String("model", "", "GGUF model `file`")
	prompt := fs.String("prompt", "", "prompt text")
	idList := fs.String("ids", "", "prompt as comma-separated token ids, BOS included if wanted (no tokenizer involved: for comparing engines)")
	printIDs := fs.Bool("print-ids", false, "print the generated token ids (space-separated) instead of text")
	stopEOS := fs.Bool("stop-eos", false, "with --ids: stop at an end-of-generation token (off: ids are ids, as in a reference comparison)")
	n := fs.Int("n", 128, "tokens to generate")
	var backend string
	var threads int
	backendFlags(fs, &backend, &threads)
	noBOS := fs.Bool("no-bos", false, "do not add BOS before the prompt")
	noMmap := fs.Bool("no-mmap", false, "read the model into memory instead of mapping it")
	var kv string
	kvFlag(fs, &kv)
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
	if *idList != "" && *prompt != "" {
		return fail(fs, usagef("give --prompt or --ids, not both"))
	}
	if *n <= 0 {
		return fail(fs, usagef("-n %d must be positive", *n))
	}
	if err := checkBackend(backend, threads); err != nil {
		return fail(fs, err)
	}
	if err := checkKV(kv); err != nil {
		return fail(fs, err)
	}
	params, err := sp()
	if err != nil {
		return fail(fs, err)
	}
	opt := profiles.GenerateOptions{Model: *path, Backend: backend, Threads: threads, NoMmap: *noMmap, KV: kv, Prompt: *prompt, NoBOS: *noBOS,
		MaxTokens: *n, Sample: params}
	if *idList != "" {
		if opt.IDs, err = parseIDs(*idList); err != nil {
			return fail(fs, err)
		}
		opt.IgnoreEOS = !*stopEOS
	}
	w := &utf8Writer{w: env.Stdout}
	sep := ""
	opt.OnToken = func(id int, piece string) {
		if *printIDs {
			fmt.Fprintf(env.Stdout, "%s%d", sep, id)
			sep = " "
		} else {
			w.write(piece)
		}
	}
	res, err := profiles.Generate(ctx, opt)
	w.flush()
	if errors.Is(err, profiles.ErrEmptyPrompt) {
		return fail(fs, usagef("%v: give --prompt", err))
	}
	if errors.Is(err, profiles.ErrTokenID) {
		return fail(fs, usagef("--ids: %v", err))
	}
	fmt.Fprintln(env.Stdout)
	if err != nil {
		if errors.Is(err, context.Canceled) && res != nil {
			fmt.Fprintf(env.Stderr, "stopped after %d tokens\n", len(res.Tokens))
		}
		return err
	}
	if *printIDs {
		return nil
	}
	st := res.Stats
	fmt.Fprintf(env.Stdout, "\nprefill: %d tokens in %.1f ms, %.1f tokens/s\n", st.PromptTokens, ms(st.Prefill.Seconds()), st.PrefillTPS())
	fmt.Fprintf(env.Stdout, "decode:  %d tokens in %.1f ms, %.1f tokens/s (%d threads, %s backend)\n", st.Tokens, ms(st.Decode.Seconds()), st.DecodeTPS(), res.Threads, res.Backend)
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
	shapeName := fs.String("shape", "", "named shape ("+strings.Join(profiles.Choices().SynthShapes, ", ")+") or custom:...")
	typName := fs.String("type", "Q8_0", "weight type of the matrices (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS), or Q4_K_M / Q5_K_M: llama.cpp's mixes of those with Q6_K")
	out := fs.String("o", "", "output `file`")
	seed := fs.Uint64("seed", 1, "random seed for the weights")
	force := fs.Bool("force", false, "overwrite an existing output file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *shapeName == "" || *out == "" {
		return fail(fs, usagef("--shape and -o are required"))
	}
	if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("%s already exists (use --force to overwrite)", *out)
	}
	last := -1
	m, err := profiles.Synth(ctx, *out, *shapeName, *typName, *seed, func(done, total uint64) {
		if last < 0 {
			fmt.Fprintf(env.Stderr, "writing synthetic model to %s\n", *out)
		}
		if pct := int(done * 100 / max(total, 1)); pct/10 != last/10 {
			last = pct
			fmt.Fprintf(env.Stderr, "  %3d%%  %s of %s\n", pct, present.HumanBytes(done), present.HumanBytes(total))
		}
	})
	if err != nil {
		if m == nil { // refused before writing
			return fail(fs, usagef("%v", err))
		}
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s: synthetic %s (%s parameters, %s)\n", *out, m.Shape, present.Human(float64(m.Params), ""), m.Type)
	return nil
}
