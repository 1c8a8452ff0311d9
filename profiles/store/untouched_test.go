package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// foreignDB writes a SQLite database another program made: a table of its
// own, the rollback journal (not WAL), the given application id.
func foreignDB(t *testing.T, path string, appID int) {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(path, "_journal_mode=DELETE"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE notes(body TEXT)", "INSERT INTO notes VALUES ('keep me')", fmt.Sprintf("PRAGMA application_id = %d", appID)} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForeignDatabaseUntouched: a foreign SQLite file is refused, by
// writing opens and reading ones, and left byte for byte as it was (its
// journal mode too); a refusal used to switch it to WAL first.
func TestForeignDatabaseUntouched(t *testing.T) {
	ctx := context.Background()
	for _, appID := range []int{0, 0x12345678} {
		p := filepath.Join(t.TempDir(), "theirs.db")
		foreignDB(t, p, appID)
		before, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, p); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "left untouched") {
			t.Fatalf("application id %#x: Open: %v", appID, err)
		}
		if _, err := OpenReadOnly(ctx, p); !errors.Is(err, ErrForeign) {
			t.Fatalf("application id %#x: OpenReadOnly: %v", appID, err)
		}
		after, _ := os.ReadFile(p)
		if !bytes.Equal(before, after) {
			t.Errorf("application id %#x: the foreign file changed (journal mode byte %d -> %d)", appID, before[18], after[18])
		}
		for _, side := range []string{"-wal", "-shm", "-checked"} {
			if _, err := os.Stat(p + side); err == nil {
				t.Errorf("application id %#x: %s left beside it", appID, side)
			}
		}
	}
}

// TestSchemaVersionOutOfRange: a database whose user_version is negative
// (or beyond this binary's) is refused with a message, never a panic in
// the migration, by both opens.
func TestSchemaVersionOutOfRange(t *testing.T) {
	ctx := context.Background()
	for _, v := range []int{-1, -2147483648, len(migrations) + 1} {
		p := filepath.Join(t.TempDir(), "v.db")
		s := open(t, p)
		if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		for name, o := range map[string]func(context.Context, string) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
			_, err := o(ctx, p)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", v)) {
				t.Errorf("user_version %d: %s: %v", v, name, err)
			}
		}
	}
}

// TestCheckedSideFile: the stamp beside a database is written as a new
// file (a symlink planted under its name is replaced, the file it points
// to untouched), a FIFO there does not block an open, and a page damaged
// in a cleanly closed database whose size and modification time were
// restored is still caught by the check before writing.
func TestCheckedSideFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.db")
	victim := filepath.Join(dir, "victim.txt")
	os.WriteFile(victim, []byte("precious"), 0o644)
	s := open(t, p)
	os.Symlink(victim, checkedPath(p))
	s.Close()
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the stamp was written through a planted link: %q", b)
	}
	if st, err := os.Lstat(checkedPath(p)); err != nil || !st.Mode().IsRegular() {
		t.Errorf("the stamp file: %v %v", st, err)
	}

	os.Remove(checkedPath(p))
	if err := syscall.Mkfifo(checkedPath(p), 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := Open(ctx, p)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("open beside a FIFO: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("open blocked on a FIFO planted as the stamp")
	}
	os.Remove(checkedPath(p))

	// a clean close, then a page damaged behind the stamp's back
	s = open(t, p)
	for i := 0; i < 200; i++ {
		if _, err := s.PutModel(ctx, &Model{Fingerprint: fmt.Sprintf("model-%04d-%s", i, strings.Repeat("x", 100))}); err != nil {
			t.Fatal(err)
		}
	}
	s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	s.Close()
	if _, ok := readSide(checkedPath(p)); !ok {
		t.Fatal("no stamp after a clean close")
	}
	info, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	const page = 4096
	for off := 2 * page; off+page <= len(data); off += page {
		for i := off + 100; i < off+300; i++ {
			data[i] = 0xA5
		}
	}
	os.WriteFile(p, data, 0o644)
	os.Chtimes(p, info.ModTime(), info.ModTime())
	if _, err := Open(ctx, p); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a damaged page with size and mtime restored: %v", err)
	}
}

// readOnlyFolder makes dir read-only for this process: a read-only bind
// mount for root (which writes through permissions), the permissions for
// anyone else; false where neither can be had.
func readOnlyFolder(t *testing.T, dir string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return true
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Logf("no bind mount here: %v %s", err, out)
		return false
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Logf("no read-only remount here: %v %s", err, out)
		return false
	}
	return true
}

// TestReadOnlyStorage: a cleanly closed database on read-only storage
// (SQLite cannot make the shared-memory file a WAL database is read with
// there) is read as immutable, and a writing open says the folder is
// read-only instead of "unable to open database file: no such file or
// directory".
func TestReadOnlyStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.db")
	s := open(t, p)
	if _, err := s.CreateRun(ctx, &Run{Target: "t.gguf", Strategy: "chain"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !readOnlyFolder(t, dir) {
		t.Skip("no way to make a read-only folder here")
	}
	if dirWritable(dir) {
		t.Fatal("a read-only folder reads as writable")
	}
	r, err := OpenReadOnly(ctx, p)
	if err != nil {
		t.Fatalf("read-only open on read-only storage: %v", err)
	}
	if runs, err := r.Runs(ctx, 0); err != nil || len(runs) != 1 {
		t.Fatalf("reading runs there: %v %v", runs, err)
	}
	r.Close()
	if _, err := Open(ctx, p); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("writing open on read-only storage: %v", err)
	}
}

// TestReadersSeeDeadRuns: a run whose process was killed reads as
// interrupted, with its totals from the steps it stored, through a
// read-only open too (which cannot recover it); a live run stays running.
func TestReadersSeeDeadRuns(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "a.db")
	s := open(t, p)
	dead, err := s.CreateRun(ctx, &Run{Target: "t.gguf", Strategy: "chain"})
	if err != nil {
		t.Fatal(err)
	}
	live, _ := s.CreateRun(ctx, &Run{Target: "t.gguf", Strategy: "chain"})
	steps := []Step{{Index: 0, Drafted: 4, Accepted: 3, Emitted: 4, Verify: time.Millisecond}, {Index: 1, Drafted: 4, Accepted: 1, Emitted: 2, Verify: time.Millisecond}}
	if err := s.AppendSteps(ctx, dead, steps); err != nil {
		t.Fatal(err)
	}
	// a process that has exited stands for the killed one
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no process to borrow a dead pid from")
	}
	if _, err := s.db.Exec("UPDATE runs SET pid = ? WHERE id = ?", cmd.Process.Pid, dead); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := OpenReadOnly(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	runs, err := ro.Runs(ctx, 0)
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs %v %v", runs, err)
	}
	for _, r := range runs {
		switch r.ID {
		case dead:
			if r.Status != StatusInterrupted || r.Tokens != 6 || r.Steps != 2 || r.Acceptance != 0.5 {
				t.Errorf("the killed run reads %+v", r)
			}
		case live:
			if r.Status != "running" {
				t.Errorf("the live run reads %s", r.Status)
			}
		}
	}
	if r, err := ro.Run(ctx, dead); err != nil || r.Status != StatusInterrupted {
		t.Errorf("Run(%d): %+v %v", dead, r, err)
	}
}

// TestArboristMarkWithForeignSchemaUntouched: a database with Arborist's
// application id but tables of its own or missing was migrated, even by a
// reading open (it gained 18 tables, WAL mode and a side file), and a
// trigger planted on runs fired on Arborist's writes (the stored drafters
// deleted); a missing table surfaced as "no such table: holders". Each
// is refused now by both opens, naming the difference, and the file is
// left byte for byte as it was, with no side file beside it; an exact
// older schema is still migrated (the negative control).
func TestArboristMarkWithForeignSchemaUntouched(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		version int
		tamper  []string
		want    string
	}{
		{"foreign tables at version 0", 0, []string{"CREATE TABLE notes(body TEXT)", "INSERT INTO notes VALUES ('keep me')"}, "table notes is not Arborist's"},
		{"a missing table", len(migrations), []string{"DROP TABLE holders"}, "table holders is missing"},
		{"a trigger on runs", len(migrations), []string{"CREATE TRIGGER wipe AFTER INSERT ON runs BEGIN DELETE FROM drafters; END"}, "trigger wipe (on runs) is not Arborist's"},
		{"a view", len(migrations), []string{"CREATE VIEW v AS SELECT * FROM runs"}, "view v (on v) is not Arborist's"},
		{"a column of its own", len(migrations), []string{"ALTER TABLE runs ADD COLUMN mine TEXT"}, "table runs differs"},
		{"an older schema changed", 2, []string{"ALTER TABLE plans ADD COLUMN mine TEXT"}, "table plans differs"},
	}
	for _, c := range cases {
		p := filepath.Join(t.TempDir(), "a.db")
		db := schemaAt(t, p, c.version)
		if c.version == len(migrations) {
			db.Exec(`INSERT INTO drafters(target_fingerprint, weights, settings, losses, created) VALUES ('f', x'00', '{}', '[]', 'then')`)
		}
		for _, q := range append(c.tamper, "PRAGMA journal_mode=DELETE") {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %s: %v", c.name, q, err)
			}
		}
		if c.version == 0 {
			db.Exec(fmt.Sprintf("PRAGMA application_id = %d", ApplicationID))
		}
		db.Close()
		before, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for name, o := range map[string]func(context.Context, string) (*Store, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
			s, err := o(ctx, p)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "left untouched") {
				t.Errorf("%s: %s: %v; want %q", c.name, name, err, c.want)
			}
		}
		if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
			t.Errorf("%s: the file changed", c.name)
		}
		for _, side := range []string{"-wal", "-shm", "-journal", "-checked"} {
			if _, err := os.Stat(p + side); err == nil {
				t.Errorf("%s: %s left beside it", c.name, side)
			}
		}
	}
	// the negative control: an exact older schema opens and is migrated
	p := filepath.Join(t.TempDir(), "old.db")
	schemaAt(t, p, 4).Close()
	s, err := Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestReadOnlyFileNamed: a database file without write permission gave
// "register: attempt to write a readonly database"; it is ErrReadOnly,
// naming the file and saying reading verbs still read it.
func TestReadOnlyFileNamed(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "a.db")
	open(t, p).Close()
	// a write through a read-only connection is what such a file gives
	db, err := sql.Open("sqlite3", dsn(p, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, werr := db.Exec("INSERT INTO holders(pid, host, command, since) VALUES (1, 'h', 'c', 's')")
	s := &Store{Path: p, db: db}
	if err := s.wrap("register", werr); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "only read") {
		t.Errorf("a write refused as read-only: %v", err)
	}
	if os.Geteuid() == 0 {
		return // root writes a 0444 file: the open itself cannot be refused here
	}
	os.Chmod(p, 0o444)
	defer os.Chmod(p, 0o644)
	if _, err := Open(ctx, p); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Open of a 0444 database: %v", err)
	}
	ro, err := OpenReadOnly(ctx, p)
	if err != nil {
		t.Fatalf("OpenReadOnly of a 0444 database: %v", err)
	}
	ro.Close()
}
