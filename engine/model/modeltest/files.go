package modeltest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"arborist/assets"
	"arborist/engine/demo"
	"arborist/engine/model/modeltest/testfiles"
)

// The test files, as package testfiles finds them (the engine's own tests
// use that package, which imports nothing of the engine).

// SharedEnv is the environment variable that, when set, replaces ../shared
// as the folder of the shared models and reference data
// (ARBORIST_SHARED=/nonexistent runs the tests as a clean clone would).
const SharedEnv = testfiles.SharedEnv

// Greedy is one greedy reference of stories260K (see Stories260KGreedy).
type Greedy = testfiles.Greedy

// SharedDir is the folder of the shared models and reference data:
// $ARBORIST_SHARED when set, else ../shared beside the module's checkout.
// It may not exist.
func SharedDir(t testing.TB) string { t.Helper(); return testfiles.SharedDir(t) }

// Shared is the path of rel (slash-separated, such as "conformance/models"
// or "models/bench/target-60m-q8_0.gguf") under SharedDir; when it is
// absent the test is skipped with a message naming ../shared/rel.
func Shared(t testing.TB, rel string) string { t.Helper(); return testfiles.Shared(t, rel) }

// Stories260K is the path of the stories260K model:
// ../shared/models/stories260K.gguf when present, else the copy the binary
// embeds (the same bytes) written to the test's temporary folder. It never
// skips.
func Stories260K(t testing.TB) string { t.Helper(); return testfiles.Stories260K(t) }

// Stories260KGreedy reads stories260K's greedy references, which the
// project keeps in testdata/stories260K-greedy-64.jsonl: per story prompt,
// the continuation (64 tokens at most, BOS first, stopping at EOS) the
// engine must reproduce exactly.
func Stories260KGreedy(t testing.TB) []Greedy { t.Helper(); return testfiles.Stories260KGreedy(t) }

// StoryPrompts are the six story prompts of those references, in order
// (the lines of ../shared/prompts/stories.txt).
func StoryPrompts(t testing.TB) []string { t.Helper(); return testfiles.StoryPrompts(t) }

// StoryPromptsFile is a prompt suite file holding StoryPrompts, one a
// line, in the test's temporary folder.
func StoryPromptsFile(t testing.TB) string { t.Helper(); return testfiles.StoryPromptsFile(t) }

// ModelsDir is a folder laid out as ../shared/models is, for the files the
// project carries (stories260K.gguf, and the story prompts in
// ../prompts/stories.txt): ../shared/models when present, else a
// temporary copy. A test reading another model from it calls Shared for
// that model first, to skip without ../shared.
func ModelsDir(t testing.TB) string { t.Helper(); return testfiles.ModelsDir(t) }

// NoisyDraft is a drafter for stories260K that agrees with it often but
// not always: ../shared/models/bench/draft-noisy-0.05.gguf when present,
// else the same construction (Gaussian noise of 0.05 times each matrix's
// standard deviation on stories260K's matrices, engine/demo's drafter)
// written to the test's temporary folder. It never skips.
func NoisyDraft(t testing.TB) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), "models", "bench", "draft-noisy-0.05.gguf")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	// the smallest target the construction allows: only its drafter is used
	_, draft, err := demo.Write(context.Background(), assets.DemoModel, t.TempDir(), demo.Options{Widen: 1, Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	return draft
}
