// Package store keeps Arborist's measurements in one SQLite file: hardware
// fingerprints, models, latency curves and their points, calibrations,
// predictors, trained drafters, plans, runs with their per-step traces, and
// exports. The schema is versioned (PRAGMA user_version) and migrated
// forward; the file is marked as Arborist's (PRAGMA application_id) so a
// foreign database is never written to. WAL journaling lets the GUI read
// while a run writes; foreign keys are on.
//
// Schema: see schema.go.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// ApplicationID marks a SQLite file as an Arborist database ("ARBR").
const ApplicationID = 0x41524252

// Errors callers can test with errors.Is.
var (
	ErrForeign = errors.New("store: not an Arborist database")
	ErrNewer   = errors.New("store: database written by a newer Arborist")
	ErrLocked  = errors.New("store: database is locked")
)

// Store is an open database.
type Store struct {
	Path   string
	db     *sql.DB
	holder int64 // our row in holders
}

// DefaultPath is arborist.db in the user's config directory.
func DefaultPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "arborist", "arborist.db")
}

// Open opens (creating if needed) the database at path and migrates it to
// the current schema. A file that is not SQLite, or a SQLite database that
// is not Arborist's, is reported and left untouched; so is one whose schema
// is newer than this binary knows.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_busy_timeout=3000&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one connection: writes are serialised in-process
	s := &Store{Path: path, db: db}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// checkFile refuses an existing file that is not a SQLite database, before
// the driver gets a chance to treat it as one.
func checkFile(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := f.Read(head)
	if n == 0 {
		return nil // empty file: a new database
	}
	if n < 16 || string(head) != "SQLite format 3\x00" {
		return fmt.Errorf("%w: %s is not a SQLite database (corrupt or another kind of file); it was left untouched", ErrForeign, path)
	}
	return nil
}

func (s *Store) init(ctx context.Context) error {
	var appID, version int
	if err := s.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return s.wrap("read header", err)
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.wrap("read header", err)
	}
	if appID != ApplicationID {
		var tables int
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
			return s.wrap("read schema", err)
		}
		if appID != 0 || tables > 0 {
			return fmt.Errorf("%w: %s is another application's SQLite database (application_id %#x, %d schema objects); it was left untouched", ErrForeign, s.Path, appID, tables)
		}
	}
	if version > len(migrations) {
		return fmt.Errorf("%w: %s has schema version %d, this binary knows up to %d; upgrade Arborist", ErrNewer, s.Path, version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return s.wrap("migrate", err)
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			tx.Rollback()
			return s.wrap(fmt.Sprintf("migrate to version %d", v+1), err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", v+1, ApplicationID)); err != nil {
			tx.Rollback()
			return s.wrap("migrate", err)
		}
		if err := tx.Commit(); err != nil {
			return s.wrap("migrate", err)
		}
	}
	// record who holds the database, so a locked one can say who it is
	host, _ := os.Hostname()
	res, err := s.db.ExecContext(ctx, "INSERT INTO holders(pid, host, command, since) VALUES (?, ?, ?, ?)",
		os.Getpid(), host, strings.Join(os.Args, " "), time.Now().UTC().Format(time.RFC3339))
	if err != nil {
		return s.wrap("register", err)
	}
	s.holder, _ = res.LastInsertId()
	return nil
}

// wrap adds the path and, for a locked database, who holds it.
func (s *Store) wrap(op string, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return fmt.Errorf("%w: %s (%s): %s; %s", ErrLocked, s.Path, op, err, s.holders())
	}
	if errors.As(err, &se) && (se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrCorrupt) {
		return fmt.Errorf("%w: %s is corrupt (%v); it was left untouched", ErrForeign, s.Path, err)
	}
	return fmt.Errorf("store: %s: %s: %w", s.Path, op, err)
}

// holders describes the other processes that have the database open, read
// without waiting (WAL lets readers through a writer's lock).
func (s *Store) holders() string {
	db, err := sql.Open("sqlite3", "file:"+s.Path+"?mode=ro&_busy_timeout=200")
	if err != nil {
		return "holder unknown"
	}
	defer db.Close()
	rows, err := db.Query("SELECT pid, host, command, since FROM holders WHERE pid != ? ORDER BY id", os.Getpid())
	if err != nil {
		return "holder unknown"
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var pid int
		var host, cmd, since string
		if rows.Scan(&pid, &host, &cmd, &since) == nil {
			parts = append(parts, fmt.Sprintf("pid %d on %s (%s) since %s", pid, host, cmd, since))
		}
	}
	if len(parts) == 0 {
		return "held by another process"
	}
	return "held by " + strings.Join(parts, "; ")
}

// Close releases the database.
func (s *Store) Close() error {
	if s.holder != 0 {
		s.db.Exec("DELETE FROM holders WHERE id = ?", s.holder)
	}
	return s.db.Close()
}

// DB exposes the handle to the packages of profiles (tests and queries).
func (s *Store) DB() *sql.DB { return s.db }
