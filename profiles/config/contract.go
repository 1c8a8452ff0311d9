package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"arborist/engine/spec"
)

// config.yaml is a contract: every field Arborist writes is read and
// checked on replay, or not written. The YAML decoder alone lets some
// values through that mean something else: a float into a whole-number
// field (gamma: 2.5 ran gamma 2). checkTypes walks the document against
// Config's fields and refuses those, naming the line and the field.

// checkTypes refuses a non-integer number where Config holds a whole
// number, with the node's line and its field path.
func checkTypes(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkTypes(c, t, path); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		if t.Kind() != reflect.Struct {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			f, ok := fieldByTag(t, key.Value)
			if !ok {
				continue // the decoder names unknown fields
			}
			if err := checkTypes(val, f.Type, join(path, key.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return nil
		}
		for _, c := range n.Content {
			if err := checkTypes(c, t.Elem(), path); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if n.Tag == "!!float" {
				return fmt.Errorf("line %d: %s: %s is not a whole number", n.Line, path, n.Value)
			}
		}
	}
	return nil
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// lineOf is the line of the field at path (dotted YAML names) in the
// document, 0 when it is not there.
func lineOf(n *yaml.Node, path string) int {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, key := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			return line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line, n, found = n.Content[i].Line, n.Content[i+1], true
				break
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// withLine prefixes err with the line of the first field path it names,
// when the document holds that field.
func withLine(doc *yaml.Node, err error) error {
	msg := err.Error()
	for _, prefix := range []string{"models.", "speculation.", "sampling.", "optimization.", "hardware.", "predicted."} {
		i := strings.Index(msg, prefix)
		if i < 0 {
			continue
		}
		end := i
		for end < len(msg) && (msg[end] == '.' || msg[end] == '_' || msg[end] >= 'a' && msg[end] <= 'z') {
			end++
		}
		path := strings.TrimRight(msg[i:end], ".")
		if line := lineOf(doc, path); line > 0 {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	return err
}

// checkOptimization holds DuoDecoding's optimization block to the plan
// it describes: the draft budget is "auto" for a plan that adapts it while
// running (duo) and the plan's own otherwise, the sequences those the plan
// drafts, no warm-up (Arborist runs none).
func (c *Config) checkOptimization() error {
	o, s := c.Optimization, c.Speculation
	if o.WarmupSteps != 0 {
		return fmt.Errorf("optimization.warmup_steps %d: Arborist runs no warm-up steps (remove the field)", o.WarmupSteps)
	}
	switch b := strings.TrimSpace(o.DraftBudget); {
	case b == "":
	case b == "auto":
		if !s.Adapts() {
			return fmt.Errorf("optimization.draft_budget auto: %s drafts a fixed budget (%s)", s.Strategy, draftBudget(s))
		}
	default:
		n, err := strconv.Atoi(b)
		if err != nil {
			return fmt.Errorf("optimization.draft_budget %q: want auto or a whole number", b)
		}
		if s.Adapts() {
			return fmt.Errorf("optimization.draft_budget %d: %s adapts its budget while running (write auto)", n, s.Strategy)
		}
		if want := draftBudget(s); fmt.Sprint(n) != want {
			return fmt.Errorf("optimization.draft_budget %d disagrees with the plan's %s (%s)", n, want, s)
		}
	}
	if m := o.MaxSequences; m != 0 && m != s.Sequences() {
		return fmt.Errorf("optimization.max_sequences %d disagrees with the plan's %d (%s)", m, s.Sequences(), s)
	}
	return nil
}

// draftBudget is the draft budget config.yaml writes for a plan: "auto"
// where the plan adapts it, else its drafter passes a step
// (Plan.DraftBudget).
func draftBudget(p spec.Plan) string {
	n, adapts := p.DraftBudget()
	if adapts {
		return "auto"
	}
	return strconv.Itoa(n)
}

// cpuList says whether s is a CPU list such as 0-3,6.
func cpuList(s string) bool {
	for _, part := range strings.Split(s, ",") {
		lo, hi, rng := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return false
		}
		if rng {
			if b, err := strconv.Atoi(hi); err != nil || b < a {
				return false
			}
		}
	}
	return true
}

// onlyItsFields refuses a draft field its kind does not read (a path given
// to n-gram drafting was ignored silently).
func (d Draft) onlyItsFields() error {
	reads := map[string][]string{
		"model":  {"path", "sha256", "quant", "device", "threads"},
		"hidden": {"path", "drafter_id", "sha256", "device", "threads"},
		"ngram":  {"ngram"},
		"layers": {"layers", "device", "threads"},
		"none":   {},
		"":       {},
	}[d.Kind]
	for _, f := range []struct {
		name string
		set  bool
	}{{"path", d.Path != ""}, {"drafter_id", d.DrafterID != 0}, {"sha256", d.SHA256 != ""}, {"ngram", d.NGram != 0},
		{"layers", d.Layers != 0}, {"device", d.Device != ""}, {"quant", d.Quant != ""}, {"threads", d.Threads != 0}} {
		if f.set && !slices.Contains(reads, f.name) {
			return fmt.Errorf("models.draft.%s: kind %q does not read it (remove it, or change the kind)", f.name, d.Kind)
		}
	}
	if d.SHA256 != "" && d.Path == "" {
		return fmt.Errorf("models.draft.sha256: the hash of a drafter file, and models.draft names none (a stored drafter_id is checked by the database)")
	}
	return nil
}
