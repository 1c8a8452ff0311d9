package generate

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/model"
	"arborist/engine/sample"
	"arborist/kernels/cpu"
)

func sharedModels(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "models")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared models %s not found (expected ../shared beside the checkout): %v", dir, err)
	}
	return dir
}

// TestStories260KReference reproduces a mature C/C++ engine's greedy
// continuations of stories260K exactly.
func TestStories260KReference(t *testing.T) {
	dir := sharedModels(t)
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(filepath.Join(dir, "stories260K.gguf"), be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, err := os.Open(filepath.Join(dir, "reference", "stories260K-greedy-64.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var ref struct {
			Prompt       string `json:"prompt"`
			NPredict     int    `json:"n_predict"`
			AddBOS       bool   `json:"add_bos"`
			Continuation string `json:"continuation"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ref); err != nil {
			t.Fatal(err)
		}
		ids := m.Tok.Encode(ref.Prompt, ref.AddBOS, false)
		out, _, err := Run(context.Background(), m, ids, Options{MaxTokens: ref.NPredict, Sample: sample.Params{}, StopAtEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		// The reference tool prints "\n\n" after the last token; those are
		// not tokens, as the full count of generated tokens shows.
		want := ref.Continuation
		if len(out) == ref.NPredict {
			want = strings.TrimSuffix(want, "\n\n")
		}
		if got := m.Tok.Decode(out); got != want {
			t.Errorf("prompt %q:\n got %q\nwant %q", ref.Prompt, got, want)
		}
		n++
	}
	if n == 0 {
		t.Fatal("reference file has no cases")
	}
}
