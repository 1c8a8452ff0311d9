package drafter

import (
	"strings"
	"testing"

	"arborist/engine/tokenizer"
)

// TestCheckVocabEOS: a drafter whose EOS id differs from the target's is
// refused.
func TestCheckVocabEOS(t *testing.T) {
	toks := []string{"<unk>", "<s>", "</s>", "a", "b"}
	target := &tokenizer.Tokenizer{Kind: tokenizer.SPM, Tokens: toks, BOS: 1, EOS: 2}
	same := &tokenizer.Tokenizer{Kind: tokenizer.SPM, Tokens: toks, BOS: 1, EOS: 2}
	if err := CheckVocab(target, same); err != nil {
		t.Fatal(err)
	}
	other := &tokenizer.Tokenizer{Kind: tokenizer.SPM, Tokens: toks, BOS: 1, EOS: 4}
	if err := CheckVocab(target, other); err == nil || !strings.Contains(err.Error(), "EOS") {
		t.Errorf("different EOS: %v", err)
	}
}
