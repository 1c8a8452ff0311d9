package tokenizer

import (
	"path/filepath"
	"testing"

	"arborist/engine/gguf"
)

// TestBPEDefaultBOS: without tokenizer.ggml.add_bos_token, a byte-level BPE
// vocabulary adds BOS exactly for the pre-tokenizers llama.cpp adds it for
// (Llama 3 files rely on it); the key, when present, decides.
func TestBPEDefaultBOS(t *testing.T) {
	cases := []struct {
		pre  string
		key  *bool
		want bool
	}{
		{"llama-bpe", nil, true},
		{"llama3", nil, true},
		{"gpt-2", nil, false},
		{"qwen2", nil, false},
		{"default", nil, false},
		{"llama-bpe", ptr(false), false},
		{"gpt-2", ptr(true), true},
	}
	for _, c := range cases {
		kvs := []gguf.KV{
			gguf.String("tokenizer.ggml.model", "gpt2"),
			gguf.String("tokenizer.ggml.pre", c.pre),
			gguf.Array("tokenizer.ggml.tokens", []string{"a", "b", "ab", "<|begin_of_text|>"}),
			gguf.Array("tokenizer.ggml.merges", []string{"a b"}),
			gguf.Uint32("tokenizer.ggml.bos_token_id", 3),
		}
		if c.key != nil {
			kvs = append(kvs, gguf.Bool("tokenizer.ggml.add_bos_token", *c.key))
		}
		p := filepath.Join(t.TempDir(), "v.gguf")
		if err := gguf.WriteFile(p, kvs, nil); err != nil {
			t.Fatal(err)
		}
		tok := load(t, p)
		if tok.AddBOS != c.want {
			t.Errorf("pre %q, add_bos_token %v: AddBOS = %v, want %v", c.pre, c.key, tok.AddBOS, c.want)
		}
		ids := tok.Encode("ab", true, false)
		if got := len(ids) > 0 && ids[0] == 3; got != c.want {
			t.Errorf("pre %q: Encode gave %v (BOS first: %v, want %v)", c.pre, ids, got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
