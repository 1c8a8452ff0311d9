package profiles

import (
	"context"
	"fmt"
)

// DeleteRuns removes stored runs and their steps. A run still in progress
// is refused by id (its process would write into a deleted row); runs that
// died without finishing are marked interrupted when the database opens
// and may be deleted.
func (b *Bench) DeleteRuns(ctx context.Context, ids []int64) error {
	st, err := b.db(ctx)
	if err != nil {
		return err
	}
	if st.ReadOnly() {
		return fmt.Errorf("workbench: the database %s is open read-only; runs cannot be deleted", b.path)
	}
	if err := st.DeleteRuns(ctx, ids); err != nil {
		return fmt.Errorf("workbench: %w", err)
	}
	return nil
}
