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
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("workbench: delete runs: %w", err)
	}
	defer tx.Rollback()
	for _, id := range ids {
		var status string
		if err := tx.QueryRowContext(ctx, "SELECT status FROM runs WHERE id = ?", id).Scan(&status); err != nil {
			return fmt.Errorf("workbench: run %d: %w", id, err)
		}
		if status == "running" {
			return fmt.Errorf("workbench: run %d is still running; stop it first", id)
		}
		// run_steps go with it (ON DELETE CASCADE, foreign keys on)
		if _, err := tx.ExecContext(ctx, "DELETE FROM runs WHERE id = ?", id); err != nil {
			return fmt.Errorf("workbench: delete run %d: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("workbench: delete runs: %w", err)
	}
	return nil
}
