package tokenizer

import (
	"fmt"
	"unicode"
)

// A matcher returns the length in runes of the match starting at pos in r,
// or 0 when its pattern does not match there.
type matcher func(r []rune, pos int) int

// preTokenizer splits text into words by running its steps in turn: each step
// splits every piece left by the previous one into matches and the unmatched
// text between them, as llama.cpp's unicode_regex_split does.
type preTokenizer struct {
	steps []matcher
}

func newPreTokenizer(name string) (preTokenizer, error) {
	switch name {
	case "gpt-2", "gpt2", "":
		// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
		return preTokenizer{[]matcher{matchGPT2}}, nil
	case "default":
		// [\p{P}\$\+<=>\^~\|]+, then gpt2, then \p{N}+, then [0-9][0-9][0-9]
		return preTokenizer{[]matcher{matchPunct(false), matchGPT2, matchNumbers, matchDigits3}}, nil
	case "falcon":
		// [\p{P}\$\+<=>\^~\|`]+, then gpt2, then [0-9][0-9][0-9]
		return preTokenizer{[]matcher{matchPunct(true), matchGPT2, matchDigits3}}, nil
	case "llama3", "llama-bpe", "llama-v3", "smaug-bpe":
		return preTokenizer{[]matcher{matchLlama3(3)}}, nil
	case "qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan":
		return preTokenizer{[]matcher{matchLlama3(1)}}, nil
	}
	return preTokenizer{}, fmt.Errorf("pre-tokenizer %q is not supported (Arborist knows default, gpt-2, falcon, llama-bpe/llama3, qwen2)", name)
}

func (p preTokenizer) split(text string) []string {
	pieces := [][]rune{[]rune(text)}
	for _, m := range p.steps {
		var next [][]rune
		for _, r := range pieces {
			start := 0
			for pos := 0; pos < len(r); {
				n := m(r, pos)
				if n == 0 {
					pos++
					continue
				}
				if pos > start {
					next = append(next, r[start:pos])
				}
				next = append(next, r[pos:pos+n])
				pos += n
				start = pos
			}
			if start < len(r) {
				next = append(next, r[start:])
			}
		}
		pieces = next
	}
	out := make([]string, len(pieces))
	for i, r := range pieces {
		out[i] = string(r)
	}
	return out
}

// at returns r[i], or -1 past the end.
func at(r []rune, i int) rune {
	if i < 0 || i >= len(r) {
		return -1
	}
	return r[i]
}

func isLetter(c rune) bool { return c >= 0 && unicode.IsLetter(c) }
func isNumber(c rune) bool { return c >= 0 && unicode.IsNumber(c) }
func isSpace(c rune) bool  { return c >= 0 && unicode.IsSpace(c) }

// defined reports whether c is an assigned code point (llama.cpp gives
// unassigned ones no flags, so they never join a run).
func defined(c rune) bool {
	if c < 0 || c > unicode.MaxRune {
		return false
	}
	return unicode.IsGraphic(c) || unicode.IsControl(c) || unicode.IsSpace(c) ||
		unicode.In(c, unicode.Cf, unicode.Co, unicode.Cs)
}

// other reports [^\s\p{L}\p{N}] for a defined code point.
func other(c rune) bool { return defined(c) && !isSpace(c) && !isLetter(c) && !isNumber(c) }

func contraction(r []rune, pos int, fold bool) int {
	if at(r, pos) != '\'' {
		return 0
	}
	lower := func(c rune) rune {
		if fold {
			return unicode.ToLower(c)
		}
		return c
	}
	c1, c2 := lower(at(r, pos+1)), lower(at(r, pos+2))
	switch c1 {
	case 's', 't', 'm', 'd':
		return 2
	}
	if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
		return 3
	}
	return 0
}

// whitespace handles \s+(?!\S)|\s+ : a run of spaces gives up its last one
// when a non-space follows, so that space can lead the next word.
func whitespace(r []rune, pos int) int {
	n := 0
	for isSpace(at(r, pos+n)) {
		n++
	}
	if n > 1 && pos+n < len(r) {
		return n - 1
	}
	return n
}

func matchGPT2(r []rune, pos int) int {
	if n := contraction(r, pos, false); n > 0 {
		return n
	}
	c := r[pos]
	p := pos
	if c == ' ' {
		p++
	}
	c2 := at(r, p)
	switch {
	case isLetter(c2):
		for isLetter(at(r, p)) {
			p++
		}
		return p - pos
	case isNumber(c2):
		for isNumber(at(r, p)) {
			p++
		}
		return p - pos
	case other(c2):
		for other(at(r, p)) {
			p++
		}
		return p - pos
	}
	if n := whitespace(r, pos); n > 0 {
		return n
	}
	return 1
}

// matchLlama3 is
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchLlama3(digits int) matcher {
	return func(r []rune, pos int) int {
		if n := contraction(r, pos, true); n > 0 {
			return n
		}
		c := r[pos]
		if !(c == '\r' || c == '\n' || isNumber(c)) && (isLetter(c) || isLetter(at(r, pos+1))) {
			p := pos + 1
			for isLetter(at(r, p)) {
				p++
			}
			return p - pos
		}
		if isNumber(c) {
			p := pos
			for p-pos < digits && isNumber(at(r, p)) {
				p++
			}
			return p - pos
		}
		p := pos
		if c == ' ' {
			p++
		}
		if other(at(r, p)) {
			for other(at(r, p)) {
				p++
			}
			for at(r, p) == '\r' || at(r, p) == '\n' {
				p++
			}
			return p - pos
		}
		n, lastNL := 0, 0
		for isSpace(at(r, pos+n)) {
			if c := r[pos+n]; c == '\r' || c == '\n' {
				lastNL = n + 1
			}
			n++
		}
		if lastNL > 0 {
			return lastNL
		}
		if n > 0 {
			return whitespace(r, pos)
		}
		return 1
	}
}

func matchPunct(backtick bool) matcher {
	in := func(c rune) bool {
		if c < 0 {
			return false
		}
		switch c {
		case '$', '+', '<', '=', '>', '^', '~', '|':
			return true
		case '`':
			return backtick
		}
		return unicode.IsPunct(c)
	}
	return func(r []rune, pos int) int {
		p := pos
		for in(at(r, p)) {
			p++
		}
		return p - pos
	}
}

func matchNumbers(r []rune, pos int) int {
	p := pos
	for isNumber(at(r, p)) {
		p++
	}
	return p - pos
}

func matchDigits3(r []rune, pos int) int {
	for i := 0; i < 3; i++ {
		if c := at(r, pos+i); c < '0' || c > '9' {
			return 0
		}
	}
	return 3
}
