package testfiles

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/assets"
)

// TestStories260K: the model is found, with or without ../shared, and is
// the embedded bytes.
func TestStories260K(t *testing.T) {
	data, err := os.ReadFile(Stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, assets.DemoModel) {
		t.Error("../shared/models/stories260K.gguf differs from the embedded copy")
	}
	t.Setenv(SharedEnv, filepath.Join(t.TempDir(), "none"))
	data, err = os.ReadFile(Stories260K(t))
	if err != nil || !bytes.Equal(data, assets.DemoModel) {
		t.Errorf("without the shared folder: %v", err)
	}
}

// TestGreedyReferences: the project's copy of the greedy references reads
// as six story prompts with their 64-token continuations.
func TestGreedyReferences(t *testing.T) {
	refs := Stories260KGreedy(t)
	if len(refs) != 6 || refs[0].Prompt != "Once upon a time" || refs[0].NPredict != 64 || !refs[0].AddBOS || refs[0].Continuation == "" {
		t.Errorf("unexpected references: %d, first %+v", len(refs), refs[0])
	}
}

// TestGreedyCopy: the project's greedy references are those of the
// shared folder, and carry the shared story prompts in order.
func TestGreedyCopy(t *testing.T) {
	own, err := os.ReadFile(filepath.Join(ModuleDir(t), GreedyFile))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := os.ReadFile(Shared(t, "models/reference/stories260K-greedy-64.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(own, shared) {
		t.Errorf("%s differs from ../shared/models/reference/stories260K-greedy-64.jsonl", GreedyFile)
	}
	prompts, err := os.ReadFile(Shared(t, "prompts/stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(StoryPrompts(t), "\n"), strings.TrimSpace(string(prompts)); got != want {
		t.Errorf("the references' prompts are not ../shared/prompts/stories.txt:\n%s\nwant\n%s", got, want)
	}
}

// TestSharedSkips: a missing shared file skips the test, naming the folder.
func TestSharedSkips(t *testing.T) {
	t.Setenv(SharedEnv, filepath.Join(t.TempDir(), "none"))
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Shared(t, "conformance/models")
	})
	if !skipped {
		t.Error("Shared did not skip without the shared folder")
	}
}
