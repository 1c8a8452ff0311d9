package profiles

import (
	"fmt"
	"strconv"
	"strings"
)

// DraftSourceKind is a kind of draft source as the faces offer it: its
// name, its label, the fields it reads (each a row of the GUI's form) and
// whether it can run on a draft device of its own. The GUI builds its
// draft-source form from Catalog.DraftSources, so each kind shows exactly its
// rows and a kind added here is offered there.
type DraftSourceKind struct {
	Name  string // "model", "ngram", "layers", "hidden"
	Label string // the choice the GUI offers
	// Fields are the values the kind reads, in their order on the form.
	Fields []sourceField
	// Movable: the source can run on another device than the target's
	// (n-gram lookup needs no device).
	Movable bool
	set     func(ps *PairSpec, v map[string]string) error
	get     func(ps PairSpec) map[string]string
}

// sourceField is one value a draft source kind reads.
type sourceField struct {
	Name, Label, Help string
	Default           string
	// File: a model file (a .gguf), picked with Open...; Stored: a stored
	// hidden drafter's id is accepted too; Count: a positive whole number.
	File, Stored, Count bool
}

// draftSources are the registered draft source kinds, in the order the
// faces list them; the first is the default.
func draftSources() []DraftSourceKind {
	count := func(v, name string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s: %q is not a positive number", name, v)
		}
		return n, nil
	}
	return []DraftSourceKind{
		{Name: "model", Label: "Draft model file", Movable: true,
			Fields: []sourceField{{Name: "draft", Label: "Draft model", File: true, Help: "draft .gguf with the same vocabulary"}},
			// no file: the target alone (profiled, run as plain decoding)
			set: func(ps *PairSpec, v map[string]string) error {
				ps.Draft = strings.TrimSpace(v["draft"])
				return nil
			},
			get: func(ps PairSpec) map[string]string { return map[string]string{"draft": ps.Draft} }},
		{Name: "ngram", Label: "N-gram prompt lookup",
			Fields: []sourceField{{Name: "ngram", Label: "N-gram length", Count: true, Default: "3", Help: "draft by prompt lookup with suffixes up to N tokens"}},
			set: func(ps *PairSpec, v map[string]string) (err error) {
				ps.NGram, err = count(v["ngram"], "n-gram length")
				return err
			},
			get: func(ps PairSpec) map[string]string { return map[string]string{"ngram": strconv.Itoa(ps.NGram)} }},
		{Name: "layers", Label: "Layer-skip self-draft", Movable: true,
			Fields: []sourceField{{Name: "layers", Label: "Layers (self-draft)", Count: true, Default: "2", Help: "self-draft with the target's first K layers"}},
			set: func(ps *PairSpec, v map[string]string) (err error) {
				ps.Layers, err = count(v["layers"], "layers")
				return err
			},
			get: func(ps PairSpec) map[string]string { return map[string]string{"layers": strconv.Itoa(ps.Layers)} }},
		{Name: "hidden", Label: "Hidden-state drafter", Movable: true,
			Fields: []sourceField{
				{Name: "draft", Label: "Hidden drafter (id or file)", File: true, Stored: true, Help: "a stored drafter's id or a drafter .gguf"},
				{Name: "resample", Label: "Re-sample depth", Count: true, Default: "4", Help: "depth of the subtree re-sampled after a rejection"},
			},
			set: func(ps *PairSpec, v map[string]string) (err error) {
				if ps.DraftHidden = strings.TrimSpace(v["draft"]); ps.DraftHidden == "" {
					return fmt.Errorf("give a hidden-state drafter: its id in the database (arborist drafters list) or its .gguf file")
				}
				if r := strings.TrimSpace(v["resample"]); r != "" {
					ps.ResampleDepth, err = count(r, "re-sample depth")
				}
				return err
			},
			get: func(ps PairSpec) map[string]string {
				r := ""
				if ps.ResampleDepth > 0 {
					r = strconv.Itoa(ps.ResampleDepth)
				}
				return map[string]string{"draft": ps.DraftHidden, "resample": r}
			}},
	}
}

// DraftSourceOf is the kind of ps's draft source (the default kind when
// none is set).
func DraftSourceOf(ps PairSpec) DraftSourceKind {
	all := draftSources()
	switch {
	case ps.NGram > 0:
		return all[1]
	case ps.Layers > 0:
		return all[2]
	case ps.DraftHidden != "":
		return all[3]
	}
	return all[0]
}

// Set makes ps draft with this kind, from the form's values by field
// name: the other kinds' settings are cleared.
func (k DraftSourceKind) Set(ps *PairSpec, values map[string]string) error {
	ps.Draft, ps.NGram, ps.Layers, ps.DraftHidden, ps.ResampleDepth = "", 0, 0, "", 0
	if !k.Movable {
		ps.DraftBackend = ""
	}
	return k.set(ps, values)
}

// Values are ps's settings of this kind by field name (a field left unset
// holds its default).
func (k DraftSourceKind) Values(ps PairSpec) map[string]string {
	v := k.get(ps)
	for _, f := range k.Fields {
		if v[f.Name] == "" || v[f.Name] == "0" {
			v[f.Name] = f.Default
		}
	}
	return v
}
