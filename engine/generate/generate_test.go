package generate

import (
	"context"
	"strings"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/engine/sample"
	"arborist/kernels/cpu"
)

// TestStories260KReference reproduces a mature C/C++ engine's greedy
// continuations of stories260K exactly (the references the project keeps
// in testdata, the model embedded when ../shared is absent).
func TestStories260KReference(t *testing.T) {
	be := cpu.New(2)
	defer be.Close()
	m, err := model.Load(testfiles.Stories260K(t), be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, ref := range testfiles.Stories260KGreedy(t) {
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
	}
}
