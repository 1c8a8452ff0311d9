// Package assets holds the files embedded in the Arborist binary: the
// application icon and the built-in prompt suites.
package assets

import (
	_ "embed"
	"strings"
)

// Icon is the application icon (256x256 PNG).
//
//go:embed icon.png
var Icon []byte

// DemoModel is stories260K (MIT, tinyllamas; see demo/NOTICE), the source of
// the built-in demo pair that engine/demo expands.
//
//go:embed demo/stories260K.gguf
var DemoModel []byte

// DemoNotice is the licence notice of DemoModel.
//
//go:embed demo/NOTICE
var DemoNotice string

//go:embed corpus/prompts.txt
var corpus string

// CorpusPrompts returns the built-in prompt corpus (assets/corpus/prompts.txt):
// a few hundred short openings of stories, dialogue, instructions, lists,
// code and facts, written for Arborist, that a target continues to make
// training data for a hidden-state drafter. Blank lines and lines starting
// with '#' are left out.
func CorpusPrompts() []string {
	var out []string
	for _, l := range strings.Split(corpus, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "# ") && l != "#" {
			out = append(out, l)
		}
	}
	return out
}

// Spread returns n of xs spread evenly from first to last (all of them
// when n <= 0 or n >= len(xs)), in order: a smaller training set drawn
// from the corpus then still covers its kinds of text, which are grouped
// in the file, instead of only the first of them.
func Spread[T any](xs []T, n int) []T {
	if n <= 0 || n >= len(xs) {
		return xs
	}
	out := make([]T, n)
	for i := range out {
		out[i] = xs[i*len(xs)/n]
	}
	return out
}

// TrainingPrompts are the prompts a trainer decodes: the given ones, then
// (with corpus) the built-in corpus, at most limit in all (0: no limit).
// The given prompts come first and the corpus fills what room is left,
// each spread evenly (Spread).
func TrainingPrompts[T any](given []T, corpus []T, limit int) []T {
	if limit <= 0 {
		return append(append([]T(nil), given...), corpus...)
	}
	out := append([]T(nil), Spread(given, limit)...)
	if room := limit - len(out); room > 0 {
		out = append(out, Spread(corpus, room)...)
	}
	return out
}
