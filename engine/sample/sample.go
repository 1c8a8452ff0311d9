// Package sample turns logits into tokens: greedy, or seeded sampling with
// temperature, top-k, top-p and min-p. Probs exposes the full distribution
// the sampler draws from, because lossless speculative verification needs
// the target's and the drafter's probabilities after the same transforms.
package sample

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Params selects the sampling rule. Temp <= 0 means greedy.
type Params struct {
	Temp float32 // temperature; 0 = greedy
	TopK int     // keep the K most likely tokens; 0 = all
	TopP float32 // keep the smallest set with cumulative probability >= TopP; 0 or 1 = all
	MinP float32 // drop tokens below MinP * max probability; 0 = none
	Seed uint64
}

// Greedy reports whether p picks the argmax.
func (p Params) Greedy() bool { return p.Temp <= 0 }

// Sampler draws tokens reproducibly from a seed.
type Sampler struct {
	P   Params
	rng *rand.Rand
	idx []int
}

// New makes a sampler; the same Params (seed included) give the same draws.
func New(p Params) *Sampler {
	return &Sampler{P: p, rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))}
}

// Float returns a uniform draw in [0, 1), from the sampler's stream (the
// verifier's acceptance tests use it so a seed fixes a whole session).
func (s *Sampler) Float() float64 { return s.rng.Float64() }

// Argmax returns the index of the largest logit (the lowest index on ties).
func Argmax[T float32 | float64](logits []T) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// Probs writes into dst (len(logits)) the distribution that Sample draws
// from: for greedy params, a point mass on the argmax; otherwise softmax of
// logits/Temp, restricted by top-k, top-p and min-p and renormalised.
func (s *Sampler) Probs(logits, dst []float32) {
	p := s.P
	if p.Greedy() {
		for i := range dst {
			dst[i] = 0
		}
		dst[Argmax(logits)] = 1
		return
	}
	maxL := logits[Argmax(logits)]
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64((v - maxL) / p.Temp))
		dst[i] = float32(e)
		sum += e
	}
	for i := range dst {
		dst[i] = float32(float64(dst[i]) / sum)
	}
	if p.TopK == 0 && (p.TopP == 0 || p.TopP >= 1) && p.MinP == 0 {
		return
	}
	// rank tokens by probability, then cut
	if cap(s.idx) < len(dst) {
		s.idx = make([]int, len(dst))
	}
	idx := s.idx[:len(dst)]
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return dst[idx[a]] > dst[idx[b]] })
	keep := len(idx)
	if p.TopK > 0 && p.TopK < keep {
		keep = p.TopK
	}
	if p.MinP > 0 {
		floor := p.MinP * dst[idx[0]]
		for k := 1; k < keep; k++ {
			if dst[idx[k]] < floor {
				keep = k
				break
			}
		}
	}
	if p.TopP > 0 && p.TopP < 1 {
		var cum float32
		for k := 0; k < keep; k++ {
			cum += dst[idx[k]]
			if cum >= p.TopP {
				keep = k + 1
				break
			}
		}
	}
	var kept float64
	for _, i := range idx[:keep] {
		kept += float64(dst[i])
	}
	for _, i := range idx[keep:] {
		dst[i] = 0
	}
	for _, i := range idx[:keep] {
		dst[i] = float32(float64(dst[i]) / kept)
	}
}

// Draw picks an index from a probability vector with the sampler's stream.
func (s *Sampler) Draw(probs []float32) int {
	u := s.rng.Float64()
	var cum float64
	last := 0
	for i, p := range probs {
		if p <= 0 {
			continue
		}
		cum += float64(p)
		last = i
		if u < cum {
			return i
		}
	}
	return last // rounding left u just above the total
}

// Sample picks the next token from logits. scratch, when len(logits) long,
// avoids an allocation.
func (s *Sampler) Sample(logits, scratch []float32) int {
	if s.P.Greedy() {
		return Argmax(logits)
	}
	if len(scratch) < len(logits) {
		scratch = make([]float32, len(logits))
	}
	scratch = scratch[:len(logits)]
	s.Probs(logits, scratch)
	return s.Draw(scratch)
}
