package drafter

import (
	"context"
	"fmt"
)

// NGram drafts by prompt lookup: it finds earlier occurrences of the longest
// suffix (up to N tokens, down to 1) of the context, and proposes the tokens
// that followed them, weighted by how often each did. No model runs, so it
// costs microseconds; it shines on text that repeats its context.
type NGram struct {
	N         int // longest suffix tried
	vocab     int
	committed []int
}

// MaxNGram is the longest suffix n-gram lookup takes: a suffix is matched
// against the whole context at every step, and longer ones never match.
const MaxNGram = 1024

// NewNGram makes a prompt-lookup drafter over a vocabulary of vocab tokens.
func NewNGram(n, vocab int) *NGram { return &NGram{N: max(1, n), vocab: vocab} }

// Fork makes another lookup drafter of the same suffix length, with a
// sequence of its own (Forker).
func (g *NGram) Fork() (Source, error) { return NewNGram(g.N, g.vocab), nil }

// Name describes the source.
func (g *NGram) Name() string { return fmt.Sprintf("ngram:%d", g.N) }

// Vocab is the vocabulary size.
func (g *NGram) Vocab() int { return g.vocab }

// Begin resets to a new committed sequence.
func (g *NGram) Begin(_ context.Context, committed []int) error {
	g.committed = append(g.committed[:0], committed...)
	return nil
}

// Commit appends the accepted tokens and the bonus.
func (g *NGram) Commit(accepted []int, bonus int) error {
	g.committed = append(append(g.committed, accepted...), bonus)
	return nil
}

// Expand proposes, after each path, the continuation frequencies of the
// longest matching suffix; a row of zeros when nothing matches.
func (g *NGram) Expand(_ context.Context, paths [][]int, dst [][]float32) error {
	for i, p := range paths {
		ctx := append(append([]int(nil), g.committed...), p...)
		q := dst[i]
		for j := range q {
			q[j] = 0
		}
		for n := min(g.N, len(ctx)-1); n >= 1; n-- {
			suffix := ctx[len(ctx)-n:]
			total := 0
			for s := len(ctx) - n - 1; s >= 0; s-- {
				if equalInts(ctx[s:s+n], suffix) {
					if next := ctx[s+n]; next >= 0 && next < len(q) {
						q[next]++
						total++
					}
				}
			}
			if total > 0 {
				for j := range q {
					q[j] /= float32(total)
				}
				break
			}
		}
	}
	return nil
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
