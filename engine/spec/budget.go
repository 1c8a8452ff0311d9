package spec

import (
	"fmt"

	"arborist/engine/tree"
)

// checkBudget bounds every size a strategy derives from its parameters
// before the run allocates for it: one step verifies at most tree.MaxNodes
// draft nodes, whatever the shape, so each strategy's budget hook checks
// the sizes it derives (gamma, the EGT budget and branching, duo's
// sequences times gamma, a static tree's size) against that limit (and
// against the context when Ctx is set). Without this a width list like
// 1000,1000,1000 is built as a billion-node tree, and huge gamma values
// overflow into negative cache sizes.
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
	if b := registry[c.Strategy].budget; b != nil {
		return b(c, check)
	}
	return nil
}
