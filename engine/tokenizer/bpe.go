package tokenizer

import (
	"container/heap"
	"strings"
	"unicode/utf8"
)

// byteToRune is GPT-2's reversible map from bytes to printable runes:
// printable Latin-1 bytes map to themselves, the rest to U+0100 onwards.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

func byteEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

func byteDecode(s string) string {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return string(out)
}

// encodeBPE applies ranked merges to one pre-tokenized, byte-encoded word.
func (t *Tokenizer) encodeBPE(word string, out []int) []int {
	if word == "" {
		return out
	}
	syms := splitChars(word)
	h := &bigramHeap{bpe: true}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		a := word[syms[l].start : syms[l].start+syms[l].n]
		b := word[syms[r].start : syms[r].start+syms[r].n]
		rank, ok := t.ranks[[2]string{a, b}]
		if !ok {
			return
		}
		heap.Push(h, bigram{left: l, right: r, rank: rank, size: len(a) + len(b)})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for h.Len() > 0 {
		bg := heap.Pop(h).(bigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size || l.next != bg.right {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		s := word[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.index[s]; ok {
			out = append(out, id)
			continue
		}
		for _, r := range s {
			if id, ok := t.index[string(r)]; ok {
				out = append(out, id)
			} else if t.UNK >= 0 {
				out = append(out, t.UNK)
			}
		}
	}
	return out
}
