package sample

import (
	"math"
	"testing"
)

func TestGreedy(t *testing.T) {
	s := New(Params{})
	logits := []float32{0.1, 3, -1, 3}
	if got := s.Sample(logits, nil); got != 1 {
		t.Errorf("greedy = %d, want 1 (first of the tied maxima)", got)
	}
	p := make([]float32, 4)
	s.Probs(logits, p)
	if p[1] != 1 || p[0]+p[2]+p[3] != 0 {
		t.Errorf("greedy probs = %v", p)
	}
}

func TestProbsFilters(t *testing.T) {
	logits := []float32{2, 1, 0, -1, -2}
	cases := []struct {
		name   string
		p      Params
		nonzer int
	}{
		{"plain", Params{Temp: 1}, 5},
		{"top-k 2", Params{Temp: 1, TopK: 2}, 2},
		{"top-p 0.5", Params{Temp: 1, TopP: 0.5}, 1},
		{"top-p 0.8", Params{Temp: 1, TopP: 0.8}, 2},
		{"min-p 0.3", Params{Temp: 1, MinP: 0.3}, 2},
	}
	for _, c := range cases {
		s := New(c.p)
		p := make([]float32, len(logits))
		s.Probs(logits, p)
		n, sum := 0, 0.0
		for _, v := range p {
			if v > 0 {
				n++
			}
			sum += float64(v)
		}
		if n != c.nonzer || math.Abs(sum-1) > 1e-5 {
			t.Errorf("%s: %d tokens kept, sum %v (probs %v); want %d", c.name, n, sum, p, c.nonzer)
		}
	}
}

// TestSampleDistribution draws many samples and checks the frequencies
// against the softmax with a chi-square test (critical value for 4 degrees
// of freedom at p = 0.001 is 18.47).
func TestSampleDistribution(t *testing.T) {
	logits := []float32{1, 0.5, 0, -0.5, -1}
	s := New(Params{Temp: 0.7, Seed: 9})
	p := make([]float32, len(logits))
	s.Probs(logits, p)
	const n = 100000
	counts := make([]int, len(logits))
	for i := 0; i < n; i++ {
		counts[s.Sample(logits, nil)]++
	}
	chi := 0.0
	for i, c := range counts {
		e := float64(p[i]) * n
		chi += (float64(c) - e) * (float64(c) - e) / e
	}
	if chi > 18.47 {
		t.Errorf("chi-square %.2f over 4 dof: counts %v, probs %v", chi, counts, p)
	}
}

func TestSeeded(t *testing.T) {
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	draw := func(seed uint64) []int {
		s := New(Params{Temp: 1, Seed: seed})
		var out []int
		for i := 0; i < 20; i++ {
			out = append(out, s.Sample(logits, nil))
		}
		return out
	}
	a, b, c := draw(1), draw(1), draw(2)
	same := func(x, y []int) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("same seed gave different draws")
	}
	if same(a, c) {
		t.Error("different seeds gave the same 20 draws")
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{{Temp: -1}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := (Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}).Validate(); err != nil {
		t.Error(err)
	}
}
