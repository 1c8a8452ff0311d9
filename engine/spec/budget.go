package spec

import (
	"fmt"

	"arborist/engine/tree"
)

// checkBudget bounds every size a strategy derives from its parameters
// before the run allocates for it: one step verifies at most tree.MaxNodes
// draft nodes, whatever the shape, so gamma, the EGT budget and branching,
// duo's sequences times gamma, and the static tree's size are all checked
// against it (and against the context when Ctx is set). Without this a
// width list like 1000,1000,1000 is built as a billion-node tree, and huge
// gamma values overflow into negative cache sizes.
func (c *Config) checkBudget() error {
	limit := tree.MaxNodes
	why := fmt.Sprintf("the most one verification pass takes is %d nodes", tree.MaxNodes)
	if c.Ctx > 0 && c.Ctx-1 < limit {
		limit = max(c.Ctx-1, 0)
		why = fmt.Sprintf("the context holds %d tokens", c.Ctx)
	}
	check := func(name string, v int) error {
		if v > limit {
			return fmt.Errorf("spec: %s %d is too large (%s)", name, v, why)
		}
		return nil
	}
	switch c.Strategy {
	case "chain":
		return check("gamma", c.Gamma)
	case "duo":
		if err := check("gamma", c.Gamma); err != nil {
			return err
		}
		return check("gamma times max sequences", c.Gamma*max(1, c.MaxSeqs))
	case "tree":
		return check("tree size", len(c.static.Parents))
	case "egt":
		if err := check("w-max", c.WMax); err != nil {
			return err
		}
		if err := check("branch", c.Branch); err != nil {
			return err
		}
		if err := check("egt depth", len(c.EGT)); err != nil {
			return err
		}
		for _, w := range c.EGT {
			if err := check("egt width", w); err != nil {
				return err
			}
		}
	}
	return nil
}
