package spec

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Field is one plan parameter a strategy reads, as the faces offer it:
// Name is the Plan field's YAML name (config.yaml and JSON use it; the
// command-line flag is the same with dashes); Label heads the GUI's
// editor; Default is where the flag and the editor start; Help says what
// the field does for this strategy; Choices are the words a text field
// takes. A Hidden field is set by tune or config.yaml, never offered by
// the faces. The field's kind follows from the Plan field's Go type.
//
// A strategy lists its fields in its registration; a field two strategies
// read has one default, label and set of choices (register checks), and
// each strategy's own help.
type Field struct {
	Name    string
	Label   string
	Default string
	Help    string
	Choices []string
	Hidden  bool
}

// FieldKind is how a field's value is written.
type FieldKind int

const (
	IntField     FieldKind = iota // a whole number: "4"
	IntListField                  // a comma-separated list: "3,2,1"
	BoolField                     // "true" or "false"
	FloatField                    // a number: "0.2"
	TextField                     // a word (one of Choices)
)

// planIndex maps YAML names to the Plan struct's field indices.
var planIndex = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeOf(Plan{})
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		m[name] = i
	}
	return m
}()

// kindOf is the kind of the Plan field named name.
func kindOf(name string) (FieldKind, error) {
	i, ok := planIndex[name]
	if !ok {
		return 0, fmt.Errorf("spec: no plan field %q", name)
	}
	switch reflect.TypeOf(Plan{}).Field(i).Type.Kind() {
	case reflect.Int, reflect.Int64:
		return IntField, nil
	case reflect.Slice:
		return IntListField, nil
	case reflect.Bool:
		return BoolField, nil
	case reflect.Float64:
		return FloatField, nil
	case reflect.String:
		return TextField, nil
	}
	return 0, fmt.Errorf("spec: plan field %q has no kind", name)
}

// Get is the plan's field name written as Set reads it ("" for an unknown
// field).
func (p Plan) Get(name string) string {
	i, ok := planIndex[name]
	if !ok {
		return ""
	}
	v := reflect.ValueOf(p).Field(i)
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Slice:
		return Ints(v.Interface().([]int))
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return v.String()
}

// Set reads value into the plan's field name.
func (p *Plan) Set(name, value string) error {
	i, ok := planIndex[name]
	if !ok {
		return fmt.Errorf("spec: no plan field %q", name)
	}
	v := reflect.ValueOf(p).Elem().Field(i)
	value = strings.TrimSpace(value)
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", value)
		}
		v.SetInt(n)
	case reflect.Slice:
		xs, err := ParseInts(value)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(xs))
	case reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%q is neither true nor false", value)
		}
		v.SetBool(b)
	case reflect.Float64:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", value)
		}
		v.SetFloat(f)
	case reflect.String:
		v.SetString(value)
	}
	return nil
}

// Values are the fields the plan's strategy reads, written as Get writes
// them: what ParsePlan rebuilds the plan from.
func (p Plan) Values() map[string]string {
	out := map[string]string{}
	if s, err := Lookup(p.Strategy); err == nil {
		for _, f := range s.Fields {
			out[f.Name] = p.Get(f.Name)
		}
	}
	return out
}

// FieldError is a plan field's value that could not be read.
type FieldError struct {
	Field string // the YAML name
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// ParsePlan builds a plan of the named strategy from field values written
// as Plan.Get writes them (by YAML name): the fields the strategy reads
// are read, the others ignored; a parent list given for a tree is its
// shape even where widths are given too. The plan is trimmed and
// validated.
func ParsePlan(strategy string, values map[string]string) (Plan, error) {
	p := Plan{Strategy: strategy}
	s, err := Lookup(strategy)
	if err != nil {
		return p, err
	}
	for _, f := range s.Fields {
		v, ok := values[f.Name]
		if !ok {
			continue
		}
		if err := p.Set(f.Name, v); err != nil {
			return p, &FieldError{Field: f.Name, Err: err}
		}
	}
	if len(p.Parents) > 0 {
		p.Widths = nil
	}
	p = p.Trim()
	return p, p.Validate()
}

// PlanField is a plan field as both faces offer it: its metadata, its
// kind, its command-line flag, the strategies that read it, and their
// help joined ("chain: draft length; duo: largest draft budget").
type PlanField struct {
	Field
	Kind       FieldKind
	Flag       string
	Strategies []string
}

// PlanFields lists every field a registered strategy offers (hidden ones
// left out), in strategy order and each strategy's own order.
func PlanFields() []PlanField {
	var out []PlanField
	at := map[string]int{}
	for _, name := range Strategies() {
		for _, f := range registry[name].Fields {
			if f.Hidden {
				continue
			}
			i, seen := at[f.Name]
			if !seen {
				kind, _ := kindOf(f.Name) // register checked it
				i = len(out)
				at[f.Name] = i
				out = append(out, PlanField{Field: f, Kind: kind, Flag: strings.ReplaceAll(f.Name, "_", "-")})
				out[i].Help = ""
			}
			out[i].Strategies = append(out[i].Strategies, name)
			if f.Help != "" {
				if out[i].Help != "" {
					out[i].Help += "; "
				}
				out[i].Help += name + ": " + f.Help
			}
		}
	}
	return out
}

// checkFields is register's check of a strategy's fields: each names a
// Plan field, and a field another strategy reads too has the same
// default, label and choices there.
func checkFields(s *Strategy) {
	for _, f := range s.Fields {
		if _, err := kindOf(f.Name); err != nil {
			panic(err)
		}
		for _, o := range registry {
			for _, g := range o.Fields {
				if g.Name == f.Name && (g.Default != f.Default || g.Label != f.Label || fmt.Sprint(g.Choices) != fmt.Sprint(f.Choices)) {
					panic(fmt.Sprintf("spec: strategies %s and %s offer field %s differently", o.Name, s.Name, f.Name))
				}
			}
		}
	}
}
