package sample

import (
	"math"
	"reflect"
	"strings"
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
	for _, p := range []Params{{Temp: -1}, {Temp: 2.5}, {Temp: float32(math.NaN())}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := (Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestFields: every Params field is declared once (name, flag, label,
// bounds, default); Set reads what Get writes and refuses what Validate
// refuses, at the same bounds; the defaults are greedy with every token
// kept and seed 1.
func TestFields(t *testing.T) {
	if n := reflect.TypeOf(Params{}).NumField(); len(Fields()) != n {
		t.Fatalf("%d sampling fields declared for the %d fields of Params", len(Fields()), n)
	}
	seen := map[string]bool{}
	for _, f := range Fields() {
		for _, s := range []string{f.Name, "--" + f.Flag, "label " + f.Label} {
			if seen[s] || strings.HasSuffix(s, " ") || s == "--" {
				t.Errorf("%q declared twice or empty", s)
			}
			seen[s] = true
		}
		if f.Help == "" || !(f.Min <= f.Max) {
			t.Errorf("%s: help %q, bounds [%v, %v]", f.Name, f.Help, f.Min, f.Max)
		}
	}
	if d := Defaults(); d != (Params{TopP: 1, Seed: 1}) || d.Validate() != nil {
		t.Errorf("defaults %+v", d)
	}
	p := Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1 << 63}
	var q Params
	for _, f := range Fields() {
		if err := q.Set(f.Name, p.Get(f.Name)); err != nil {
			t.Fatal(err)
		}
	}
	if q != p || p.Get(Temperature) != "0.8" {
		t.Errorf("read back %+v from %+v (temperature written %q)", q, p, p.Get(Temperature))
	}
	for name, bad := range map[string][]string{
		Temperature: {"-0.1", "2.01", "NaN", "Inf", "x"},
		TopK:        {"-1", "1.5", ""},
		TopP:        {"-0.1", "1.01"},
		MinP:        {"-0.1", "1.5"},
		Seed:        {"-1", "18446744073709551616"},
	} {
		for _, v := range bad {
			var p Params
			if err := p.Set(name, v); err == nil {
				t.Errorf("%s %q accepted", name, v)
			}
		}
	}
	for name, edge := range map[string]string{Temperature: "2", TopK: "0", TopP: "1", MinP: "1", Seed: "18446744073709551615"} {
		var p Params
		if err := p.Set(name, edge); err != nil {
			t.Errorf("%s %s: %v", name, edge, err)
		}
		if p.Validate() != nil {
			t.Errorf("%s %s: set but invalid", name, edge)
		}
	}
	if CheckTemp(2) != nil || CheckTemp(2.5) == nil {
		t.Error("CheckTemp does not bound at 2")
	}
}
