package sample

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Field is one sampling parameter as every place that takes it offers it:
// Name is config.yaml's key in its sampling block and the OpenAI-style
// request's field; Flag is the command-line flag; Label heads the GUI's
// control; Min and Max bound it (inclusive; Max is +Inf where nothing
// bounds it above); Default is where a flag, a control and a config.yaml
// that names none start (written as Get writes it); Help says what the
// value does. Params.Validate checks these bounds, and the flags, the
// GUI's controls, config.yaml and the server read and check values
// through the same fields, so a bound is written once.
type Field struct {
	Name     string
	Flag     string
	Label    string
	Kind     Kind
	Min, Max float64
	Default  string
	Help     string
}

// Kind is how a field's value is written.
type Kind int

const (
	FloatValue Kind = iota // a number: "0.8"
	IntValue               // a whole number: "40"
	SeedValue              // a whole number from 0 to 2^64-1
)

// The bounds. A temperature above 2 spreads a language model's choice so
// far over unlikely tokens that the text stops being text, and OpenAI's
// API (which the server speaks) takes temperatures up to 2: so 2 is the
// bound everywhere, and a client's 2 is also a command line's. Top-p and
// min-p are shares of probability mass; top-k counts tokens, and a k at
// or above the vocabulary keeps them all.
const (
	MaxTemp = 2
)

// The fields' names, for the code that reads one by name.
const (
	Temperature = "temperature"
	TopK        = "top_k"
	TopP        = "top_p"
	MinP        = "min_p"
	Seed        = "seed"
)

// field is a Field with its accessors on Params.
type field struct {
	Field
	num func(Params) float64 // the value Validate bounds (not the seed's: every seed is one)
	set func(*Params, float64, uint64)
}

var fields = []field{
	{Field{Name: Temperature, Flag: "temp", Label: "temperature", Kind: FloatValue, Min: 0, Max: MaxTemp, Default: "0",
		Help: "temperature: 0 decodes greedily (the most likely token); higher values draw from a flatter distribution"},
		func(p Params) float64 { return float64(p.Temp) }, func(p *Params, f float64, _ uint64) { p.Temp = float32(f) }},
	{Field{Name: TopK, Flag: "top-k", Label: "top-k", Kind: IntValue, Min: 0, Max: math.Inf(1), Default: "0",
		Help: "draw only from the K most likely tokens (0: all)"},
		func(p Params) float64 { return float64(p.TopK) }, func(p *Params, f float64, _ uint64) { p.TopK = int(f) }},
	{Field{Name: TopP, Flag: "top-p", Label: "top-p", Kind: FloatValue, Min: 0, Max: 1, Default: "1",
		Help: "nucleus sampling: draw only from the most likely tokens that together hold this share of the probability (1 or 0: all)"},
		func(p Params) float64 { return float64(p.TopP) }, func(p *Params, f float64, _ uint64) { p.TopP = float32(f) }},
	{Field{Name: MinP, Flag: "min-p", Label: "min-p", Kind: FloatValue, Min: 0, Max: 1, Default: "0",
		Help: "drop tokens less likely than this share of the most likely token's probability (0: none)"},
		func(p Params) float64 { return float64(p.MinP) }, func(p *Params, f float64, _ uint64) { p.MinP = float32(f) }},
	{Field{Name: Seed, Flag: "seed", Label: "seed", Kind: SeedValue, Min: 0, Max: math.MaxUint64, Default: "1",
		Help: "random seed: the same seed and settings draw the same tokens"},
		func(Params) float64 { return 0 }, func(p *Params, _ float64, u uint64) { p.Seed = u }},
}

// Fields are the sampling parameters, in the order the faces show them.
func Fields() []Field {
	out := make([]Field, len(fields))
	for i, f := range fields {
		out[i] = f.Field
	}
	return out
}

// lookup finds the field by name.
func lookup(name string) (*field, error) {
	for i := range fields {
		if fields[i].Name == name {
			return &fields[i], nil
		}
	}
	return nil, fmt.Errorf("sample: no sampling field %q", name)
}

// Defaults are the fields' defaults: greedy, every token kept, seed 1.
func Defaults() Params {
	var p Params
	for _, f := range fields {
		if err := p.Set(f.Name, f.Default); err != nil {
			panic(err) // the table above is wrong
		}
	}
	return p
}

// Bounds says which values the field takes: "a number in [0, 2]", "a
// whole number >= 0".
func (f Field) Bounds() string {
	switch {
	case f.Kind == SeedValue:
		return "a whole number from 0 to 18446744073709551615"
	case f.Kind == IntValue && math.IsInf(f.Max, 1):
		return fmt.Sprintf("a whole number >= %g", f.Min)
	case f.Kind == IntValue:
		return fmt.Sprintf("a whole number in %g..%g", f.Min, f.Max)
	}
	return fmt.Sprintf("a number in [%g, %g]", f.Min, f.Max)
}

// Usage is the field's help with its bounds, as a flag's usage line.
func (f Field) Usage() string { return f.Help + "; " + f.Bounds() }

// Check says whether v is within the field's bounds (NaN is not).
func (f Field) Check(v float64) error {
	if !(v >= f.Min && v <= f.Max) || (f.Kind != FloatValue && v != math.Trunc(v)) {
		return fmt.Errorf("%s %v must be %s", f.Label, v, f.Bounds())
	}
	return nil
}

// Get is the field name of p written as Set reads it ("" for an unknown
// name).
func (p Params) Get(name string) string {
	f, err := lookup(name)
	switch {
	case err != nil:
		return ""
	case f.Kind == SeedValue:
		return strconv.FormatUint(p.Seed, 10)
	case f.Kind == IntValue:
		return strconv.FormatFloat(f.num(p), 'f', -1, 64)
	}
	// the shortest decimal that reads back as the same float32: 0.8,
	// not 0.800000011920929
	return strconv.FormatFloat(f.num(p), 'g', -1, 32)
}

// Validate reports values outside the fields' bounds (NaN and infinities
// included).
func (p Params) Validate() error {
	for _, f := range fields {
		if err := f.Check(f.num(p)); err != nil {
			return fmt.Errorf("sample: %w", err)
		}
	}
	return nil
}

// Set reads value into p's field name, refusing a value that is not of
// the field's kind or not within its bounds.
func (p *Params) Set(name, value string) error {
	f, err := lookup(name)
	if err != nil {
		return err
	}
	value = strings.TrimSpace(value)
	switch f.Kind {
	case SeedValue:
		u, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s %q must be %s", f.Label, value, f.Bounds())
		}
		f.set(p, 0, u)
		return nil
	case IntValue:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s %q must be %s", f.Label, value, f.Bounds())
		}
		if err := f.Check(float64(n)); err != nil {
			return err
		}
		f.set(p, float64(n), 0)
		return nil
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return fmt.Errorf("%s %q must be %s", f.Label, value, f.Bounds())
	}
	if err := f.Check(v); err != nil {
		return err
	}
	f.set(p, v, 0)
	return nil
}

// CheckTemp says whether t is a temperature the sampler takes: the bound
// of every sampled decoding, training data a target generates for a
// drafter included.
func CheckTemp(t float64) error {
	f, _ := lookup(Temperature)
	return f.Check(t)
}
