package tokenizer

import (
	"reflect"
	"testing"
)

// TestPreTokenizers checks each pre-tokenizer's split of one string that
// exercises letters, digit grouping, punctuation with newlines and the
// whitespace look-ahead, against splits worked out from the regexes.
func TestPreTokenizers(t *testing.T) {
	in := "Hello world 12345!!\n\n  x"
	cases := []struct {
		pre  string
		want []string
	}{
		{"gpt-2", []string{"Hello", " world", " 12345", "!!", "\n\n ", " x"}},
		{"llama-bpe", []string{"Hello", " world", " ", "123", "45", "!!\n\n", " ", " x"}},
		{"qwen2", []string{"Hello", " world", " ", "1", "2", "3", "4", "5", "!!\n\n", " ", " x"}},
		{"falcon", []string{"Hello", " world", " ", "123", "45", "!!", "\n\n ", " x"}},
	}
	for _, c := range cases {
		p, err := newPreTokenizer(c.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.split(in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: split(%q)\n got %q\nwant %q", c.pre, in, got, c.want)
		}
	}
	if _, err := newPreTokenizer("mystery"); err == nil {
		t.Error("unknown pre-tokenizer accepted")
	}
	// contractions: case-insensitive for llama3, case-sensitive for gpt-2
	l3, _ := newPreTokenizer("llama3")
	if got := l3.split("I'M"); !reflect.DeepEqual(got, []string{"I", "'M"}) {
		t.Errorf("llama3 I'M: %q", got)
	}
	g2, _ := newPreTokenizer("gpt-2")
	if got := g2.split("I'M"); !reflect.DeepEqual(got, []string{"I", "'", "M"}) {
		t.Errorf("gpt-2 I'M: %q", got)
	}
}
