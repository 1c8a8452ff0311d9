// Package testfiles finds the files the engine's tests read: the shared
// models and reference data kept beside the checkout (../shared, or the
// folder ARBORIST_SHARED names), and what the project carries itself so
// that a clean clone still tests the engine end to end: stories260K, which
// the binary embeds (arborist/assets), and its greedy references
// (testdata/stories260K-greedy-64.jsonl).
//
// It imports nothing of the engine, so every engine package's own tests
// can use it; engine/model/modeltest re-exports it for the tests above the
// engine.
package testfiles

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"arborist/assets"
)

// SharedEnv is the environment variable that, when set, replaces ../shared
// as the folder of the shared models and reference data. Pointing it at a
// folder that does not exist (ARBORIST_SHARED=/nonexistent) runs the tests
// as a clean clone without ../shared would.
const SharedEnv = "ARBORIST_SHARED"

// ModuleDir is the module's root (the folder holding go.mod), found from
// the test's working folder.
func ModuleDir(t testing.TB) string {
	t.Helper()
	dir, ok := moduleDir()
	if !ok {
		t.Fatal("no go.mod above the test's working folder")
	}
	return dir
}

func moduleDir() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// SharedDir is the folder of the shared models and reference data:
// $ARBORIST_SHARED when set, else ../shared beside the module's checkout
// (../shared from the working folder outside a module). It may not exist;
// Shared skips when what a test needs is absent.
func SharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(SharedEnv); d != "" {
		return d
	}
	if dir, ok := moduleDir(); ok {
		return filepath.Join(dir, "..", "shared")
	}
	return filepath.Join("..", "shared")
}

// Shared is the path of rel (slash-separated, such as
// "conformance/models" or "models/bench/target-60m-q8_0.gguf") under
// SharedDir. When it is absent the test is skipped with a message naming
// ../shared/rel and where it was looked for.
func Shared(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("needs ../shared/%s (the shared models and reference data beside the checkout, or $%s): %v", rel, SharedEnv, err)
	}
	return p
}

// Stories260K is the path of stories260K (a real 260K-parameter Llama
// trained on TinyStories, F32, vocabulary 512): ../shared/models/
// stories260K.gguf when present, else the copy the binary embeds
// (assets.DemoModel, the same bytes) written to the test's temporary
// folder. It never skips.
func Stories260K(t testing.TB) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), "models", "stories260K.gguf")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	p = filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := os.WriteFile(p, assets.DemoModel, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Greedy is one greedy reference of stories260K: the continuation a
// widely used C/C++ GGUF engine produces for Prompt (greedy, NPredict
// tokens at most, a BOS first when AddBOS, stopping at EOS). The engine
// must reproduce it exactly; the reference tool printed "\n\n" after the
// last token when all NPredict tokens were generated.
type Greedy struct {
	Prompt       string `json:"prompt"`
	NPredict     int    `json:"n_predict"`
	AddBOS       bool   `json:"add_bos"`
	Continuation string `json:"continuation"`
}

// GreedyFile is the project's copy of ../shared/models/reference/
// stories260K-greedy-64.jsonl, relative to the module's root.
const GreedyFile = "testdata/stories260K-greedy-64.jsonl"

// Stories260KGreedy reads the greedy references of stories260K
// (GreedyFile), one per story prompt.
func Stories260KGreedy(t testing.TB) []Greedy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ModuleDir(t), filepath.FromSlash(GreedyFile)))
	if err != nil {
		t.Fatal(err)
	}
	var out []Greedy
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var g Greedy
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", GreedyFile, err)
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no references", GreedyFile)
	}
	return out
}

// StoryPrompts are the prompts of the greedy references, in order: the
// lines of ../shared/prompts/stories.txt (six openings of TinyStories
// stories), which the project cannot carry itself.
func StoryPrompts(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, g := range Stories260KGreedy(t) {
		out = append(out, g.Prompt)
	}
	return out
}

// StoryPromptsFile is a prompt suite file (one prompt a line) holding the
// story prompts, written to the test's temporary folder.
func StoryPromptsFile(t testing.TB) string {
	t.Helper()
	var b bytes.Buffer
	for _, p := range StoryPrompts(t) {
		b.WriteString(p + "\n")
	}
	path := filepath.Join(t.TempDir(), "stories.txt")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ModelsDir is a folder laid out as ../shared/models is, for the files the
// project carries: ../shared/models itself when present (with the story
// prompts in ../prompts/stories.txt beside it), else a temporary folder
// holding stories260K.gguf (the embedded copy) with the story prompts in
// ../prompts/stories.txt. A test that reads another model from it calls
// Shared for that model first, so that it skips without ../shared.
func ModelsDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(SharedDir(t), "models")
	if _, err := os.Stat(filepath.Join(dir, "stories260K.gguf")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "..", "prompts", "stories.txt")); err == nil {
			return dir
		}
	}
	root := t.TempDir()
	dir = filepath.Join(root, "models")
	prompts := filepath.Join(root, "prompts")
	for _, d := range []string{dir, prompts} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "stories260K.gguf"), assets.DemoModel, 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, p := range StoryPrompts(t) {
		b.WriteString(p + "\n")
	}
	if err := os.WriteFile(filepath.Join(prompts, "stories.txt"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
