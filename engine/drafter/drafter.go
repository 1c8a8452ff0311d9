// Package drafter holds the draft sources of speculative decoding: a separate
// draft model (GGUF), the target's own first layers (layer-skip self-draft),
// and n-gram prompt lookup. All sit behind one interface that speaks in token
// paths, so the strategies in engine/spec can grow chains, static trees and
// Equal-Growth Trees from any of them.
//
// A path is the token sequence after the root (the last committed token); the
// empty path is the root itself. Expand returns the drafter's next-token
// distribution after each requested path. Sources keep their own state (a KV
// cache for model drafters) and reuse work across calls in a step and, after
// Commit, across steps.
package drafter

import (
	"context"
	"fmt"
	"strings"

	"arborist/engine/sample"
	"arborist/engine/tokenizer"
)

// Source proposes draft tokens.
type Source interface {
	// Name describes the source for traces ("draft:file.gguf", "ngram:3", ...).
	Name() string
	// Begin starts a sequence whose committed tokens are committed (the
	// prompt; its last token is the first root). It discards prior state.
	Begin(ctx context.Context, committed []int) error
	// Expand writes into dst[i] (vocabulary-sized) the drafter's next-token
	// distribution after paths[i]. An all-zero row means "no proposal".
	Expand(ctx context.Context, paths [][]int, dst [][]float32) error
	// Commit appends the step's accepted tokens and the bonus token to the
	// committed sequence (the bonus becomes the next root).
	Commit(accepted []int, bonus int) error
	// Vocab is the size of the distributions Expand writes.
	Vocab() int
}

// Forker is a source that can make another instance of itself for a
// generation of its own: one sharing what is read-only (a model's
// weights, precomputed tables) with state of its own (its cache, its
// committed tokens, its scratch). A server running many requests at once
// drafts each with its own instance.
type Forker interface {
	Fork() (Source, error)
}

// Fork makes another instance of src (Forker), or says why it cannot.
func Fork(src Source) (Source, error) {
	f, ok := src.(Forker)
	if !ok {
		return nil, fmt.Errorf("drafter: source %s cannot make an instance for another sequence", src.Name())
	}
	return f.Fork()
}

// Free releases what src holds of its own (a cache on its device), where
// it holds any; src must not be used afterwards. An instance made by Fork
// is freed when its generation ends, at once, rather than when the
// garbage collector finds it.
func Free(src Source) {
	if f, ok := src.(interface{ Free() }); ok {
		f.Free()
	}
}

// HiddenSource is the extension a source implements when it drafts from the
// target's hidden states (the hidden-state drafter design,
// docs/HIDDEN-DRAFTER.md): the engine hands it the target's last hidden
// state for each committed token.
type HiddenSource interface {
	Source
	ObserveHidden(hidden []float32, rows int) error
}

// Sampled is a source that proposes from its model's distribution after
// the sampling transforms (temperature, top-k, top-p, min-p): the target
// verifies a sampled run at its sampling, and a drafter proposing from
// the same transformed distribution is accepted most often.
type Sampled interface {
	SetSample(p sample.Params)
}

// SetSample tells src the sampling of the generation it drafts for next,
// where it proposes from a sampled distribution (Sampled); others, such
// as n-gram lookup, propose the same whatever the sampling. The engine
// calls it at the start of every generation with the run's own sampling
// (spec.Config.Sample): the one route by which the sampling reaches a
// draft source, whoever runs the generation.
func SetSample(src Source, p sample.Params) {
	if s, ok := src.(Sampled); ok {
		s.SetSample(p)
	}
}

// Dist converts logits to the distribution a source proposes from: the
// sampler's transformed distribution in sampled runs, the plain softmax in
// greedy runs (the ranking needs probabilities; the greedy rule needs none).
func Dist(p sample.Params) func(logits, dst []float32) {
	if p.Greedy() {
		p = sample.Params{Temp: 1}
	}
	s := sample.New(p)
	return func(logits, dst []float32) { s.Probs(logits, dst) }
}

// CheckVocab verifies a drafter shares the target's vocabulary: identical
// token lists pass; otherwise the error says how many and which differ.
func CheckVocab(target, draft *tokenizer.Tokenizer) error {
	if target.Kind != draft.Kind {
		return fmt.Errorf("drafter: vocabulary mismatch: target tokenizer is %s, drafter's is %s", target.Kind, draft.Kind)
	}
	nt, nd := target.VocabSize(), draft.VocabSize()
	var diff []int
	for i := 0; i < min(nt, nd); i++ {
		if target.Tokens[i] != draft.Tokens[i] {
			diff = append(diff, i)
		}
	}
	if nt == nd && len(diff) == 0 {
		// the same tokens with another end-of-generation or start token
		// would stop (or start) drafts where the target does not
		if target.EOS != draft.EOS || target.BOS != draft.BOS {
			return fmt.Errorf("drafter: vocabulary mismatch: the tokens agree but the target's BOS/EOS ids are %d/%d and the drafter's %d/%d", target.BOS, target.EOS, draft.BOS, draft.EOS)
		}
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "drafter: vocabulary mismatch: target has %d tokens, drafter %d; %d of the shared ids differ", nt, nd, len(diff))
	for i, id := range diff {
		if i == 5 {
			fmt.Fprintf(&b, ", ...")
			break
		}
		fmt.Fprintf(&b, "%s id %d: %q vs %q", map[bool]string{true: " (", false: ","}[i == 0], id, target.Tokens[id], draft.Tokens[id])
	}
	if len(diff) > 0 {
		b.WriteString(")")
	}
	return fmt.Errorf("%s", b.String())
}
