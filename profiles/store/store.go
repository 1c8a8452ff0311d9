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
	// ErrReadOnly: the database cannot be written where it is.
	ErrReadOnly = errors.New("store: database cannot be written")
)

// Store is an open database.
type Store struct {
	Path     string
	db       *sql.DB
	holder   int64 // our row in holders
	readOnly bool
	chunk    int // size of a stored piece of drafter weights (0: drafterChunk; tests make it small)
	// Recovered lists the runs this open found left "running" by a process
	// that is gone, now marked "interrupted" with totals from their steps.
	Recovered []int64
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
//
// Opening for writing also checks an existing file's pages (PRAGMA
// quick_check) before anything is written to it, cleans up the holders rows
// of processes that are gone, and recovers their runs (see recoverRuns).
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	existed, err := checkFile(path)
	if err != nil {
		return nil, err
	}
	if !dirWritable(filepath.Dir(path)) {
		return nil, fmt.Errorf("%w: %s: its folder is read-only (read-only storage or no write permission); verbs that only read (runs, drafters list, show and export) can still read it", ErrReadOnly, path)
	}
	if existed {
		// look before writing anything: opening for writing switches the
		// journal to WAL, which would change a foreign file
		if err := precheck(ctx, path); err != nil {
			return nil, err
		}
		if !fileWritable(path) {
			return nil, fmt.Errorf("%w: %s: the file is read-only (no write permission); verbs that only read (runs, drafters list, show and export) can still read it", ErrReadOnly, path)
		}
	}
	db, err := sql.Open("sqlite3", dsn(path, "_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL"))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one connection: writes are serialised in-process
	s := &Store{Path: path, db: db}
	if err := s.init(ctx, existed); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// OpenReadOnly opens an existing database for verbs that only read (list,
// show, compare, export): nothing is written, not even a holders row, so a
// database on read-only storage or without write permission can be read.
// A database whose schema is older than this binary's is refused with a
// hint (a writing verb migrates it).
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	existed, err := checkFile(path)
	if err != nil {
		return nil, err
	}
	if !existed {
		return nil, fmt.Errorf("store: %s: no database there yet (it is created by the first verb that stores something)", path)
	}
	params := "mode=ro&_busy_timeout=3000&_foreign_keys=on"
	if !dirWritable(filepath.Dir(path)) {
		// read-only storage: SQLite cannot make the shared-memory file a
		// WAL database is read with; nothing can change the file there, so
		// it is read as immutable (a cleanly closed database has no WAL)
		params = "immutable=1&_foreign_keys=on"
	}
	db, err := sql.Open("sqlite3", dsn(path, params))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{Path: path, db: db, readOnly: true}
	version, err := s.header(ctx)
	if err == nil && version < len(migrations) {
		// written by an older Arborist: migrate it once (which writes),
		// then read it like any other
		db.Close()
		rw, err := Open(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("%w (the database has schema version %d and must be migrated to %d before this binary can read it)", err, version, len(migrations))
		}
		rw.Close()
		return OpenReadOnly(ctx, path)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// dsn is the driver's name for path: a "file:" URI whose path is absolute
// and escaped, so '?', '#' and '%' in a file name are part of the name (a
// plain "file:"+path opened "a" for "a#b.db" and "pA.db" for "p%41.db"),
// followed by the driver's and SQLite's parameters.
func dsn(path, params string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	if !strings.HasPrefix(esc, "/") {
		esc = "/" + esc // a Windows drive path: file:/C:/...
	}
	return "file:" + esc + "?" + params
}

// checkFile refuses an existing file that is not a SQLite database, before
// the driver gets a chance to treat it as one, and says whether a
// non-empty file is there. Only a regular file is accepted.
func checkFile(path string) (existed bool, err error) {
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%w: %s is not a regular file; it was left untouched", ErrForeign, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("store: %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := f.Read(head)
	if n == 0 {
		return false, nil // empty file: a new database
	}
	if n < 16 || string(head) != "SQLite format 3\x00" {
		return false, fmt.Errorf("%w: %s is not a SQLite database (corrupt or another kind of file); it was left untouched", ErrForeign, path)
	}
	return true, nil
}

// precheck reads an existing file's header through a read-only connection
// (nothing written, its journal mode left as it is): a foreign database,
// or one with a schema version no Arborist writes, is refused before the
// file is opened for writing.
func precheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite3", dsn(path, "mode=ro&_busy_timeout=10000"))
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	s := &Store{Path: path, db: db, readOnly: true}
	return retryLocked(ctx, func() error { _, err := s.header(ctx); return err })
}

// retryLocked runs f again while it finds the database locked without
// SQLite's busy wait (another process creating it, switching it to WAL),
// for up to 10 s.
func retryLocked(ctx context.Context, f func() error) error {
	err := f()
	for wait := time.Duration(0); errors.Is(err, ErrLocked) && wait < 10*time.Second; wait += 100 * time.Millisecond {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		err = f()
	}
	return err
}

// header reads and checks the application id and schema version.
func (s *Store) header(ctx context.Context) (int, error) {
	return readHeader(ctx, s, s.db)
}

type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func readHeader(ctx context.Context, s *Store, q queryer) (int, error) {
	appID, version, objs, err := readSchema(ctx, q)
	if err != nil {
		return 0, s.wrap("read header", err)
	}
	if appID != ApplicationID {
		if appID != 0 || len(objs) > 0 {
			return 0, fmt.Errorf("%w: %s is another application's SQLite database (application_id %#x, %d schema objects); it was left untouched", ErrForeign, s.Path, appID, len(objs))
		}
	}
	if version < 0 {
		return 0, fmt.Errorf("%w: %s has schema version %d, which no Arborist writes; it was left untouched", ErrForeign, s.Path, version)
	}
	if version > len(migrations) {
		return 0, fmt.Errorf("%w: %s has schema version %d, this binary knows up to %d; upgrade Arborist", ErrNewer, s.Path, version, len(migrations))
	}
	diff, err := schemaDiffers(version, objs)
	if err != nil {
		return 0, err
	}
	if diff != "" {
		return 0, fmt.Errorf("%w: %s carries Arborist's mark, but its schema is not the one Arborist writes at version %d (%s); it was left untouched (move it aside to start a new database, or restore a backup)", ErrForeign, s.Path, version, diff)
	}
	return version, nil
}

// migrate brings the schema to the current version inside one immediate
// transaction that re-reads the version once it holds the write lock: two
// processes opening a new database at once then migrate it once, the
// second finding the work done (they used to race into "table hardware
// already exists" or "duplicate column name").
func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.wrap("migrate", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.wrap("migrate", err)
	}
	done := false
	defer func() {
		if !done {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	version, err := readHeader(ctx, s, conn)
	if err != nil {
		return err
	}
	for v := version; v < len(migrations); v++ {
		if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
			return s.wrap(fmt.Sprintf("migrate to version %d", v+1), err)
		}
	}
	if version < len(migrations) {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", len(migrations), ApplicationID)); err != nil {
			return s.wrap("migrate", err)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return s.wrap("migrate", err)
	}
	done = true
	return nil
}

// quickCheck runs PRAGMA quick_check on a database about to be written, so
// pages overwritten from outside are reported before this process adds to
// the damage (instead of a later verb saying "corrupt").
func (s *Store) quickCheck(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "PRAGMA quick_check(8)")
	if err != nil {
		return s.wrap("check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return s.wrap("check", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return s.wrap("check", err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s is corrupt (quick_check: %s); it was left untouched (restore a backup, or move it aside to start a new one)", ErrForeign, s.Path, strings.Join(problems, "; "))
	}
	return nil
}

func (s *Store) init(ctx context.Context, existed bool) error {
	// A database another process is creating (switching it to WAL) answers
	// "locked" at once, without SQLite's busy wait: retry for a while.
	var version int
	err := retryLocked(ctx, func() (err error) { version, err = s.header(ctx); return err })
	if err != nil {
		return err
	}
	if existed && !unchangedSinceClose(s.Path) {
		if err := s.quickCheck(ctx); err != nil {
			return err
		}
	}
	if version < len(migrations) {
		if err := s.migrate(ctx); err != nil {
			return err
		}
	}
	if err := s.cleanHolders(ctx); err != nil {
		return err
	}
	if err := s.recoverRuns(ctx); err != nil {
		return err
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
	if errors.As(err, &se) && se.Code == sqlite3.ErrReadonly {
		return fmt.Errorf("%w: %s (%s): the file, its folder or its side files are read-only; verbs that only read (runs, drafters list, show and export) can still read it", ErrReadOnly, s.Path, op)
	}
	if errors.As(err, &se) && (se.Code == sqlite3.ErrNotADB || se.Code == sqlite3.ErrCorrupt) {
		return fmt.Errorf("%w: %s is corrupt (%v); it was left untouched", ErrForeign, s.Path, err)
	}
	return fmt.Errorf("store: %s: %s: %w", s.Path, op, err)
}

// holders describes the other processes that have the database open, read
// without waiting (WAL lets readers through a writer's lock).
func (s *Store) holders() string {
	db, err := sql.Open("sqlite3", dsn(s.Path, "mode=ro&_busy_timeout=200"))
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
	err := s.db.Close()
	if err == nil && !s.readOnly {
		markClosed(s.Path)
	}
	return err
}

// DB exposes the handle to the packages of profiles (tests and queries).
func (s *Store) DB() *sql.DB { return s.db }
