package drafter

import (
	"strings"
	"testing"

	"arborist/engine/tokenizer"
)

// TestCheckVocabEOS is issue 17 item 11: a drafter whose EOS id differed
// from the target's was accepted.
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
