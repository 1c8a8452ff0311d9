package store

import (
	"context"
	"fmt"
	"os"
)

// Run statuses written by recovery.
const (
	// StatusInterrupted marks a run whose process died (kill -9, a crash,
	// a full disk) before finishing it; found and marked when the database
	// is next opened for writing.
	StatusInterrupted = "interrupted"
	// StatusStopped marks a run stopped on purpose (Stop, SIGINT, SIGTERM).
	StatusStopped = "stopped"
)

// processGone says whether a process recorded as (host, pid) has certainly
// exited: only processes of this host can be asked.
func processGone(host string, pid int) bool {
	me, _ := os.Hostname()
	return host == me && pid > 0 && pid != os.Getpid() && !processAlive(pid)
}

// cleanHolders deletes the holders rows of processes on this host that are
// gone (killed before Close could delete their row), so a later "database
// is locked" message names the real holder instead of dead PIDs.
func (s *Store) cleanHolders(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "SELECT id, pid, host FROM holders")
	if err != nil {
		return s.wrap("clean holders", err)
	}
	var dead []int64
	for rows.Next() {
		var id int64
		var pid int
		var host string
		if err := rows.Scan(&id, &pid, &host); err != nil {
			rows.Close()
			return s.wrap("clean holders", err)
		}
		if processGone(host, pid) {
			dead = append(dead, id)
		}
	}
	rows.Close()
	for _, id := range dead {
		if _, err := s.db.ExecContext(ctx, "DELETE FROM holders WHERE id = ?", id); err != nil {
			return s.wrap("clean holders", err)
		}
	}
	return nil
}

// recoverRuns finds runs left "running" whose process is gone and finishes
// them as "interrupted", with totals rebuilt from their stored steps. Runs
// stored before schema version 3 carry no process; they are recovered only
// when no other live process holds the database.
func (s *Store) recoverRuns(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "SELECT id, pid, host FROM runs WHERE status = 'running'")
	if err != nil {
		return s.wrap("recover runs", err)
	}
	type cand struct {
		id   int64
		pid  int
		host string
	}
	var cands []cand
	for rows.Next() {
		var c cand
		if err := rows.Scan(&c.id, &c.pid, &c.host); err != nil {
			rows.Close()
			return s.wrap("recover runs", err)
		}
		cands = append(cands, c)
	}
	rows.Close()
	if len(cands) == 0 {
		return nil
	}
	var others int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM holders WHERE pid != ?", os.Getpid()).Scan(&others); err != nil {
		return s.wrap("recover runs", err)
	}
	for _, c := range cands {
		if processGone(c.host, c.pid) || (c.pid == 0 && others == 0) {
			if err := s.FinishFromSteps(ctx, c.id, StatusInterrupted); err != nil {
				return err
			}
			s.Recovered = append(s.Recovered, c.id)
		}
	}
	return nil
}

// FinishFromSteps marks run id with status and sets its totals (tokens,
// steps, decode time, tokens/s, AAL, acceptance) from its stored steps, in
// one statement. It is how an interrupted run is recovered, and how a run
// stopped by a signal is finished from what reached the database.
func (s *Store) FinishFromSteps(ctx context.Context, id int64, status string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?,
		tokens = t.tokens, steps = t.steps, decode_ns = t.decode_ns,
		tokens_per_s = CASE WHEN t.decode_ns > 0 THEN t.tokens * 1e9 / t.decode_ns ELSE 0 END,
		aal = CASE WHEN t.steps > 0 THEN CAST(t.tokens AS REAL) / t.steps ELSE 0 END,
		acceptance = CASE WHEN t.drafted > 0 THEN CAST(t.accepted AS REAL) / t.drafted ELSE 0 END
		FROM (SELECT count(*) AS steps, coalesce(sum(emitted), 0) AS tokens, coalesce(sum(accepted), 0) AS accepted,
			coalesce(sum(drafted), 0) AS drafted, coalesce(sum(draft_ns + verify_ns + overhead_ns), 0) AS decode_ns
			FROM run_steps WHERE run_id = ?) AS t
		WHERE runs.id = ?`, status, id, id)
	if err != nil {
		return s.wrap(fmt.Sprintf("finish run %d", id), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: no run %d in %s", id, s.Path)
	}
	return nil
}
