package tokenizer

import (
	"container/heap"
	"unicode/utf8"
)

// symbol is a span of the input being merged; prev/next link the live spans.
type symbol struct {
	start, n   int
	prev, next int
}

// bigram is a candidate merge of symbols left and right (adjacent when
// pushed; stale once either has changed size).
type bigram struct {
	left, right int
	score       float32 // SPM: token score (higher first)
	rank        int     // BPE: merge rank (lower first)
	size        int
}

type bigramHeap struct {
	items []bigram
	bpe   bool
}

func (h *bigramHeap) Len() int { return len(h.items) }
func (h *bigramHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if h.bpe {
		if a.rank != b.rank {
			return a.rank < b.rank
		}
	} else if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}
func (h *bigramHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *bigramHeap) Push(x any)    { h.items = append(h.items, x.(bigram)) }
func (h *bigramHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// splitChars makes one symbol per UTF-8 character of text.
func splitChars(text string) []symbol {
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		_, n := utf8.DecodeRuneInString(text[off:])
		syms = append(syms, symbol{start: off, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

// encodeSPM merges the highest-scoring adjacent pair that forms a known token
// until none is left, then emits tokens, falling back to byte tokens.
func (t *Tokenizer) encodeSPM(text string, out []int) []int {
	syms := splitChars(text)
	h := &bigramHeap{}
	revMerge := map[string][2]int{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[r].start+syms[r].n]
		id, ok := t.index[s]
		if !ok {
			return
		}
		heap.Push(h, bigram{left: l, right: r, score: t.Scores[id], size: len(s)})
		revMerge[s] = [2]int{l, r}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for h.Len() > 0 {
		bg := heap.Pop(h).(bigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
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
	var reseg func(i int)
	reseg = func(i int) {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.index[s]; ok {
			out = append(out, id)
			return
		}
		if p, ok := revMerge[s]; ok {
			reseg(p[0])
			reseg(p[1])
			return
		}
		for j := 0; j < len(s); j++ {
			if id := t.bytes[s[j]]; id >= 0 {
				out = append(out, id)
			} else if t.UNK >= 0 {
				out = append(out, t.UNK)
			}
		}
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		reseg(i)
	}
	return out
}
