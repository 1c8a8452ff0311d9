package pairs

import (
	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/spec"
)

// Drafting is the drafter a re-check drafts with between its target
// passes, so each pass it times follows drafting as a step's verification
// does: a draft model (whose passes it also times, to re-check the
// drafter's curves), or a hidden-state source (the pair's own, fed the
// target's hidden states of the context). Neither: the passes follow one
// another.
type Drafting struct {
	Draft  *model.Model
	Hidden drafter.HiddenSource
}

// Kind names the drafting for a RecheckWindow ("" for none), which pools
// only with a re-check that drafts the same way.
func (d Drafting) Kind() string {
	switch {
	case d.Draft != nil:
		return "draft model"
	case d.Hidden != nil:
		return "hidden-state drafter"
	}
	return ""
}

// DraftingOf is the Drafting of an engine's source: a draft model of its
// own, or a hidden-state source; layer-skip and n-gram sources none.
func DraftingOf(eng *spec.Engine) Drafting {
	switch src := eng.Source.(type) {
	case *drafter.Model:
		if src.Layers == 0 && src.M != eng.Target {
			return Drafting{Draft: src.M}
		}
	case drafter.HiddenSource:
		return Drafting{Hidden: src}
	}
	return Drafting{}
}
