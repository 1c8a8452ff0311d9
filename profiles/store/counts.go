package store

import (
	"context"
	"fmt"
)

// The counts and dates the workflow core reports (the GUI's guide, an
// export's provenance), and the deletion of runs.

// CurveCount counts the stored latency curves of model modelID on
// hardware hardwareID and gives the newest one's creation time (RFC 3339;
// "" for none).
func (s *Store) CurveCount(ctx context.Context, hardwareID, modelID int64) (n int, newest string, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT count(*), coalesce(max(created), '') FROM latency_curves WHERE hardware_id = ? AND model_id = ?",
		hardwareID, modelID).Scan(&n, &newest)
	return n, newest, err
}

// RunCount counts the stored runs of the pair: the target file target
// with drafter (as calibrations name it), and its plain decoding.
func (s *Store) RunCount(ctx context.Context, target, drafter string) (n int, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT count(*) FROM runs WHERE target = ? AND (drafter = ? OR strategy = 'ar')", target, drafter).Scan(&n)
	return n, err
}

// ExportCount counts the exports of plans tuned for model modelID with
// drafter (and of plans stored before plans named their drafter).
func (s *Store) ExportCount(ctx context.Context, modelID int64, drafter string) (n int, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT count(*) FROM exports JOIN plans ON exports.plan_id = plans.id WHERE plans.target_id = ? AND plans.drafter IN (?, '')", modelID, drafter).Scan(&n)
	return n, err
}

// PlanCreated is when plan id was stored (RFC 3339).
func (s *Store) PlanCreated(ctx context.Context, id int64) (created string, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT created FROM plans WHERE id = ?", id).Scan(&created)
	return created, err
}

// DeleteRuns removes runs and their steps (ON DELETE CASCADE) in one
// transaction; a run still running is refused by id, and nothing is
// deleted then.
func (s *Store) DeleteRuns(ctx context.Context, ids []int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete runs: %w", err)
	}
	defer tx.Rollback()
	for _, id := range ids {
		var status string
		if err := tx.QueryRowContext(ctx, "SELECT status FROM runs WHERE id = ?", id).Scan(&status); err != nil {
			return fmt.Errorf("run %d: %w", id, err)
		}
		if status == "running" {
			return fmt.Errorf("run %d is still running; stop it first", id)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM runs WHERE id = ?", id); err != nil {
			return fmt.Errorf("delete run %d: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete runs: %w", err)
	}
	return nil
}
