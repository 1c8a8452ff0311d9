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
