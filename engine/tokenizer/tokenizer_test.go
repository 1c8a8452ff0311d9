package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model/modeltest/testfiles"
)

func load(t testing.TB, path string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestConformance(t *testing.T) {
	dir := testfiles.Shared(t, "vocab")
	for _, name := range []string{"ggml-vocab-llama-spm", "ggml-vocab-phi-3", "ggml-vocab-gpt-2", "ggml-vocab-falcon"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, name+".gguf")
			tok := load(t, base)
			inp, err := os.ReadFile(base + ".inp")
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(base + ".out")
			if err != nil {
				t.Fatal(err)
			}
			cases := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
			// every case ends with the separator, so the split leaves an empty tail
			cases = cases[:len(cases)-1]
			wants := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(cases) != len(wants) {
				t.Fatalf("%d inputs but %d expected outputs", len(cases), len(wants))
			}
			fails := 0
			for i, in := range cases {
				var want []int
				for _, f := range strings.Fields(wants[i]) {
					n, err := strconv.Atoi(f)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, n)
				}
				got := tok.Encode(in, false, false)
				if !equal(got, want) {
					fails++
					t.Errorf("Encode(%q)\n got %v\nwant %v", in, got, want)
					continue
				}
				if dec := tok.DecodeText(got); dec != in && !(tok.Kind == SPM && dec == strings.TrimPrefix(in, " ")) {
					// SPM drops the space it added and cannot tell it from a leading one
					t.Errorf("Decode(Encode(%q)) = %q", in, dec)
				}
			}
			t.Logf("%d cases, %d failures", len(cases), fails)
		})
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzRoundTrip checks that encoding never panics and that decoding gives the
// text back, on arbitrary bytes (prompt files hold invalid UTF-8 too): the
// SentencePiece vocabulary's byte fallback returns the bytes exactly; the
// byte-level BPE, like llama.cpp's, reads each invalid byte as U+FFFD, so
// it returns the text as Go's []rune conversion reads it (identical for
// valid UTF-8).
func FuzzRoundTrip(f *testing.F) {
	dir := testfiles.Shared(f, "vocab")
	bpe := load(f, filepath.Join(dir, "ggml-vocab-gpt-2.gguf"))
	spm := load(f, filepath.Join(dir, "ggml-vocab-llama-spm.gguf"))
	for _, s := range []string{"", " ", "Hello world", "  \n\t x", "🦙.cpp", "нещо", "3333333", "'s 're", "\u2581", "caf\xe9 ok", "\xed\xa0\x80", "a\xc3", "x\x00y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := string([]rune(s))
		if got := bpe.Decode(bpe.Encode(s, false, false)); got != want {
			t.Errorf("BPE round trip of %q gave %q, want %q", s, got, want)
		}
		got := spm.DecodeText(spm.Encode(s, false, false))
		// SPM writes spaces as U+2581, so a literal U+2581 comes back as a space
		if got != s && !strings.HasPrefix(s, " ") && !strings.Contains(s, "\u2581") {
			t.Errorf("SPM round trip of %q gave %q", s, got)
		}
	})
}
