package config

import (
	"fmt"
	"io"
	"math"

	"gopkg.in/yaml.v3"

	"arborist/engine/drafter"
	"arborist/engine/model"
	"arborist/engine/tree"
	"arborist/profiles/hardware"
)

// checkLimits bounds every size and checks every float a config.yaml gives
// before anything is built from it, naming the field: threads, the plan's
// sizes (as spec and tree bound them at run time), the context, and the
// sampling parameters (NaN passed the range checks, which compare false).
func (c *Config) checkLimits() error {
	t, d, s, sm := c.Models.Target, c.Models.Draft, c.Speculation, c.Sampling
	var pr Predicted
	if c.Predicted != nil {
		pr = *c.Predicted
	}
	if t.Threads > 0 {
		if err := hardware.CheckThreads("models.target.threads", t.Threads); err != nil {
			return err
		}
	}
	if d.Threads > 0 {
		if err := hardware.CheckThreads("models.draft.threads", d.Threads); err != nil {
			return err
		}
	}
	if t.MaxSeqLen > model.MaxContext {
		return fmt.Errorf("models.target.max_seq_len %d is more than %d", t.MaxSeqLen, model.MaxContext)
	}
	if d.Layers > model.MaxLayers || d.NGram > drafter.MaxNGram {
		return fmt.Errorf("models.draft: layers %d (at most %d) or ngram %d (at most %d) too large", d.Layers, model.MaxLayers, d.NGram, drafter.MaxNGram)
	}
	for _, v := range []struct {
		name string
		v    int
	}{{"speculation.gamma", s.Gamma}, {"speculation.branch", s.Branch}, {"speculation.w_max", s.WMax},
		{"speculation.egt_widths (depth)", len(s.EGT)}, {"optimization.max_sequences", c.Optimization.MaxSequences}} {
		if v.v > tree.MaxNodes {
			return fmt.Errorf("%s %d is more than %d (the most one verification pass takes)", v.name, v.v, tree.MaxNodes)
		}
	}
	for _, w := range s.EGT {
		if w > tree.MaxNodes {
			return fmt.Errorf("speculation.egt_widths: %d is more than %d", w, tree.MaxNodes)
		}
	}
	if len(s.Widths) > 0 {
		if _, err := tree.WidthsSize(s.Widths, tree.MaxNodes); err != nil {
			return fmt.Errorf("speculation.widths: %w", err)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"sampling.temperature", sm.Temperature}, {"sampling.top_p", sm.TopP}, {"sampling.min_p", sm.MinP}, {"speculation.depth_min", s.DepthMin},
		{"predicted.speedup", pr.Speedup}, {"predicted.aal", pr.AAL}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s is %v; it must be a finite number", f.name, f.v)
		}
	}
	if pr.Speedup < 0 || pr.AAL < 0 {
		return fmt.Errorf("predicted: speedup %g and aal %g must not be negative", pr.Speedup, pr.AAL)
	}
	return nil
}

// Bounds on a config.yaml's shape, checked on its parsed nodes before it
// is decoded: a config's mappings have a dozen keys or so, its longest
// list is a tree's parents (one a node), and the whole is a few hundred
// nodes.
const (
	maxKeys     = 64
	maxElements = 4 * tree.MaxNodes
	maxNodes    = 1 << 16
)

// boundDocument refuses a document with a mapping of more than maxKeys
// keys, a list of more than maxElements elements or more than maxNodes
// nodes, naming the line, in one pass over the nodes.
func boundDocument(doc *yaml.Node) error {
	nodes := 0
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		nodes++
		switch {
		case nodes > maxNodes:
			return fmt.Errorf("more than %d YAML nodes; an exported config has a few hundred", maxNodes)
		case n.Kind == yaml.MappingNode && len(n.Content) > 2*maxKeys:
			return fmt.Errorf("line %d: a mapping of %d keys; a config's mappings have at most %d", n.Line, len(n.Content)/2, maxKeys)
		case n.Kind == yaml.SequenceNode && len(n.Content) > maxElements:
			return fmt.Errorf("line %d: a list of %d elements; a config's lists have at most %d", n.Line, len(n.Content), maxElements)
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(doc)
}

// singleDocument refuses a config.yaml with more than one YAML document
// (a second one used to be ignored silently).
func singleDocument(dec *yaml.Decoder) error {
	var extra yaml.Node
	err := dec.Decode(&extra)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("a second YAML document follows the plan (line %d); a config.yaml holds one", extra.Line)
}
