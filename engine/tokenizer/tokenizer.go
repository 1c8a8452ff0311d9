// Package tokenizer turns text into token ids and back, from the vocabulary a
// GGUF file carries: SentencePiece-style ("llama": score-driven merges with
// byte fallback) and byte-level BPE ("gpt2": ranked merges over a byte-to-
// unicode alphabet, after a pre-tokenizer named by tokenizer.ggml.pre).
//
// Behaviour follows llama.cpp's llama-vocab.cpp, so that ids match the
// conformance files in ../shared/vocab exactly.
package tokenizer

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"arborist/engine/gguf"
)

// Token types as stored in tokenizer.ggml.token_type.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// ErrVocab reports a vocabulary the tokenizer cannot use.
var ErrVocab = errors.New("tokenizer: invalid vocabulary")

// Kind names a tokenizer algorithm.
type Kind string

// Tokenizer kinds.
const (
	SPM Kind = "llama" // SentencePiece
	BPE Kind = "gpt2"  // byte-level BPE
)

// Tokenizer encodes and decodes text for one vocabulary.
type Tokenizer struct {
	Kind    Kind
	Pre     string // BPE pre-tokenizer name
	Tokens  []string
	Scores  []float32
	Types   []int32
	BOS     int
	EOS     int
	UNK     int
	AddBOS  bool
	AddEOS  bool
	prefix  bool // SPM: add a leading space
	index   map[string]int
	ranks   map[[2]string]int
	special []int // user-defined, control and unknown tokens, longest text first
	pre     preTokenizer
	bytes   [256]int // SPM byte-fallback tokens, -1 when absent
}

// FromGGUF builds the tokenizer described by a GGUF file's metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	bad := func(format string, args ...any) error {
		return &gguf.Error{Path: f.Path, Err: fmt.Errorf("%w: "+format, append([]any{ErrVocab}, args...)...)}
	}
	model, ok := f.String("tokenizer.ggml.model")
	if !ok {
		return nil, bad("tokenizer.ggml.model is missing")
	}
	t := &Tokenizer{Kind: Kind(model), BOS: -1, EOS: -1, UNK: -1}
	if t.Tokens, ok = f.Strings("tokenizer.ggml.tokens"); !ok || len(t.Tokens) == 0 {
		return nil, bad("tokenizer.ggml.tokens is missing")
	}
	n := len(t.Tokens)
	if kv, ok := f.Get("tokenizer.ggml.scores"); ok {
		s, ok := kv.Value.([]float32)
		if !ok || len(s) != n {
			return nil, bad("tokenizer.ggml.scores has %T of wrong length", kv.Value)
		}
		t.Scores = s
	} else {
		t.Scores = make([]float32, n)
	}
	if kv, ok := f.Get("tokenizer.ggml.token_type"); ok {
		s, ok := kv.Value.([]int32)
		if !ok || len(s) != n {
			return nil, bad("tokenizer.ggml.token_type has %T of wrong length", kv.Value)
		}
		t.Types = s
	} else {
		t.Types = make([]int32, n)
		for i := range t.Types {
			t.Types[i] = TypeNormal
		}
	}
	id := func(key string, def int) int {
		if v, ok := f.Uint(key); ok && v < uint64(n) {
			return int(v)
		}
		return def
	}
	switch t.Kind {
	case SPM:
		t.BOS, t.EOS, t.UNK = id("tokenizer.ggml.bos_token_id", 1), id("tokenizer.ggml.eos_token_id", 2), id("tokenizer.ggml.unknown_token_id", 0)
		t.AddBOS, t.prefix = true, true
	case BPE:
		t.BOS, t.EOS = id("tokenizer.ggml.bos_token_id", 11), id("tokenizer.ggml.eos_token_id", 11)
		t.UNK = id("tokenizer.ggml.unknown_token_id", -1)
		merges, ok := f.Strings("tokenizer.ggml.merges")
		if !ok {
			return nil, bad("byte-level BPE vocabulary has no tokenizer.ggml.merges")
		}
		t.ranks = make(map[[2]string]int, len(merges))
		for i, m := range merges {
			a, b, ok := strings.Cut(m, " ")
			if !ok {
				return nil, bad("merge %d (%q) is not two tokens", i, m)
			}
			t.ranks[[2]string{a, b}] = i
		}
		t.Pre, _ = f.String("tokenizer.ggml.pre")
		pre, err := newPreTokenizer(t.Pre)
		if err != nil {
			return nil, bad("%v", err)
		}
		t.pre = pre
		t.AddBOS = bpeAddsBOS(t.Pre)
	default:
		return nil, bad("tokenizer.ggml.model %q is not supported (Arborist reads \"llama\" and \"gpt2\")", model)
	}
	if v, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		t.AddBOS = v
	}
	if v, ok := f.Bool("tokenizer.ggml.add_eos_token"); ok {
		t.AddEOS = v
	}
	if v, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok {
		t.prefix = v
	}
	t.build()
	return t, nil
}

func (t *Tokenizer) build() {
	t.index = make(map[string]int, len(t.Tokens))
	for i, s := range t.Tokens {
		if _, dup := t.index[s]; !dup {
			t.index[s] = i
		}
	}
	for i := range t.bytes {
		t.bytes[i] = -1
		if id, ok := t.index[fmt.Sprintf("<0x%02X>", i)]; ok {
			t.bytes[i] = id
		}
	}
	t.special = t.special[:0]
	for i, ty := range t.Types {
		if (ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown) && t.Tokens[i] != "" {
			t.special = append(t.special, i)
		}
	}
	sort.SliceStable(t.special, func(a, b int) bool { return len(t.Tokens[t.special[a]]) > len(t.Tokens[t.special[b]]) })
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.Tokens) }

// IsEOG reports whether id ends generation.
func (t *Tokenizer) IsEOG(id int) bool { return id == t.EOS }

// Lookup returns the id of an exact token text.
func (t *Tokenizer) Lookup(s string) (int, bool) { id, ok := t.index[s]; return id, ok }

// fragment is a piece of input: raw text, or an already-identified token.
type fragment struct {
	text  string
	token int // -1 for raw text
}

// partition splits out special tokens. User-defined tokens are always
// matched; control and unknown tokens only when parseSpecial is set.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{text, -1}}
	for _, id := range t.special {
		ty := t.Types[id]
		if !parseSpecial && (ty == TypeControl || ty == TypeUnknown) {
			continue
		}
		s := t.Tokens[id]
		var out []fragment
		for _, fr := range frags {
			if fr.token >= 0 || !strings.Contains(fr.text, s) {
				out = append(out, fr)
				continue
			}
			rest := fr.text
			for {
				i := strings.Index(rest, s)
				if i < 0 {
					break
				}
				if i > 0 {
					out = append(out, fragment{rest[:i], -1})
				}
				out = append(out, fragment{"", id})
				rest = rest[i+len(s):]
			}
			if rest != "" {
				out = append(out, fragment{rest, -1})
			}
		}
		frags = out
	}
	return frags
}

// Encode tokenizes text. addSpecial adds BOS/EOS as the vocabulary asks;
// parseSpecial lets control-token texts such as "</s>" in the input become
// those tokens.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int {
	var out []int
	if addSpecial && t.AddBOS && t.BOS >= 0 {
		out = append(out, t.BOS)
	}
	prevSpecial := true
	for _, fr := range t.partition(text, parseSpecial) {
		if fr.token >= 0 {
			out = append(out, fr.token)
			prevSpecial = true
			continue
		}
		if fr.text == "" {
			continue
		}
		switch t.Kind {
		case SPM:
			s := fr.text
			if t.prefix && prevSpecial {
				s = " " + s
			}
			out = t.encodeSPM(strings.ReplaceAll(s, " ", "\u2581"), out)
		case BPE:
			for _, w := range t.pre.split(fr.text) {
				out = t.encodeBPE(byteEncode(w), out)
			}
		}
		prevSpecial = false
	}
	if addSpecial && t.AddEOS && t.EOS >= 0 {
		out = append(out, t.EOS)
	}
	return out
}

// Piece returns the text of one token as it appears in output: control
// tokens are empty, byte tokens are their byte.
func (t *Tokenizer) Piece(id int) string {
	if id < 0 || id >= len(t.Tokens) {
		return ""
	}
	s := t.Tokens[id]
	switch t.Types[id] {
	case TypeControl, TypeUnknown, TypeUnused:
		return ""
	case TypeByte:
		var b byte
		if _, err := fmt.Sscanf(s, "<0x%02X>", &b); err == nil {
			return string([]byte{b})
		}
		return ""
	case TypeUserDefined:
		return s
	}
	if t.Kind == SPM {
		return strings.ReplaceAll(s, "\u2581", " ")
	}
	return byteDecode(s)
}

// Decode concatenates the pieces of ids.
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.Piece(id))
	}
	return b.String()
}

// DecodeText decodes a whole sequence the way a user reads it: for SPM, the
// space added as a prefix during encoding is removed again.
func (t *Tokenizer) DecodeText(ids []int) string {
	s := t.Decode(ids)
	if t.Kind == SPM && t.prefix {
		s = strings.TrimPrefix(s, " ")
	}
	return s
}

// bpeAddsBOS is llama.cpp's default for adding BOS to a byte-level BPE
// vocabulary whose file has no tokenizer.ggml.add_bos_token: on for the
// Llama-3-style, tekken and chameleon pre-tokenizers, off for the others.
func bpeAddsBOS(pre string) bool {
	switch pre {
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano", "tekken", "chameleon":
		return true
	}
	return false
}
