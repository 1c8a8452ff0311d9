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
	"sync"
	"testing"
	"time"

	"arborist/profiles/latency"
)

// TestConcurrentMigration: processes opening a new
// database at once raced on the migration ("table hardware already
// exists", "duplicate column name"; 5 of 6 trials failed with two
// processes). Here 6 child processes open one new file together, 4 times.
func TestConcurrentMigration(t *testing.T) {
	if p := os.Getenv("ARBORIST_STORE_OPEN"); p != "" {
		s, err := Open(context.Background(), p)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		s.Close()
		os.Exit(0)
	}
	for trial := 0; trial < 4; trial++ {
		path := filepath.Join(t.TempDir(), "race.db")
		var wg sync.WaitGroup
		errs := make(chan string, 6)
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentMigration$")
				cmd.Env = append(os.Environ(), "ARBORIST_STORE_OPEN="+path)
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Sprintf("%v: %s", err, out)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("trial %d: %s", trial, e)
		}
		s := open(t, path)
		var v int
		s.db.QueryRow("PRAGMA user_version").Scan(&v)
		if v != len(migrations) {
			t.Errorf("trial %d: version %d", trial, v)
		}
	}
}

// TestPathsAreNotURIs: "a#b.db" opened "a" and
// "p%41.db" opened "pA.db".
func TestPathsAreNotURIs(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a#b.db", "p%41.db", "q?mode=ro.db", "sp ace.db"} {
		p := filepath.Join(dir, name)
		s := open(t, p)
		if _, err := s.PutModel(context.Background(), &Model{Fingerprint: name}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: the database is not under its own name: %v", name, err)
		}
	}
	for _, wrong := range []string{"a", "pA.db", "q"} {
		if _, err := os.Stat(filepath.Join(dir, wrong)); err == nil {
			t.Errorf("a file %q was created", wrong)
		}
	}
}

// TestReadOnly: opening always wrote a holders row, so a
// read-only database could not even be listed.
func TestReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: file permissions do not bind, the read-only open is still checked for not writing")
	}
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "ro.db")
	s := open(t, p)
	r := &Run{Target: "t", Strategy: "ar", Settings: map[string]int{}}
	if _, err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	s.FinishRun(ctx, &Run{ID: r.ID, Status: "done"})
	s.Close()
	before, _ := os.ReadFile(p)
	os.Chmod(p, 0o444)
	ro, err := OpenReadOnly(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ro.Runs(ctx, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("listing a read-only database: %v %v", runs, err)
	}
	if _, err := ro.PutModel(ctx, &Model{Fingerprint: "x"}); err == nil {
		t.Error("a read-only store accepted a write")
	}
	ro.Close()
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Error("the read-only open changed the file")
	}
	if _, err := OpenReadOnly(ctx, filepath.Join(dir, "none.db")); err == nil {
		t.Error("read-only open of a missing database succeeded")
	}
}

// TestQuickCheckBeforeWriting: overwritten pages went
// unnoticed until a later verb said "corrupt ... left untouched". Opening
// for writing now runs quick_check first and refuses a damaged file.
func TestQuickCheckBeforeWriting(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "c.db")
	s := open(t, p)
	for i := 0; i < 200; i++ {
		if _, err := s.PutModel(ctx, &Model{Fingerprint: fmt.Sprintf("model-%04d-%s", i, strings.Repeat("x", 100))}); err != nil {
			t.Fatal(err)
		}
	}
	s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	s.Close()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// overwrite the middle of every page after the first two with garbage
	const page = 4096
	for off := 2 * page; off+page <= len(data); off += page {
		for i := off + 100; i < off+300; i++ {
			data[i] = 0xA5
		}
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, p)
	if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("damaged database opened for writing: %v", err)
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(after, data) {
		t.Error("the damaged file was written to")
	}
}

// TestStaleHolders: holders rows of dead processes made
// "database is locked" name ten dead PIDs instead of the real holder.
func TestStaleHolders(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "h.db")
	s := open(t, p)
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	deadPID := dead.ProcessState.Pid()
	s.db.Exec("INSERT INTO holders(pid, host, command, since) VALUES (?, ?, 'arborist run (dead)', 'then')", deadPID, host)
	s.db.Exec("INSERT INTO holders(pid, host, command, since) VALUES (4242, 'elsewhere', 'arborist run (other host)', 'then')")
	s.Close()
	s2 := open(t, p)
	var n int
	s2.db.QueryRow("SELECT count(*) FROM holders WHERE pid = ?", deadPID).Scan(&n)
	if n != 0 {
		t.Errorf("dead process %d still listed as a holder", deadPID)
	}
	s2.db.QueryRow("SELECT count(*) FROM holders WHERE host = 'elsewhere'").Scan(&n)
	if n != 1 {
		t.Error("a holder on another host (which cannot be asked) was removed")
	}
	_ = ctx
}

// TestFinishFromSteps: SIGINT left a run "stopped" with
// totals 0; FinishFromSteps sets them from what was stored.
func TestFinishFromSteps(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "f.db"))
	r := &Run{Target: "t", Strategy: "chain", Settings: map[string]int{}}
	if _, err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	steps := []Step{{Index: 0, Drafted: 4, Accepted: 3, Emitted: 4, Verify: 3e6}, {Index: 1, Drafted: 4, Accepted: 1, Emitted: 2, Draft: 1e6}}
	if err := s.AppendSteps(ctx, r.ID, steps); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishFromSteps(ctx, r.ID, StatusStopped); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "stopped" || got.Tokens != 6 || got.Steps != 2 || got.Decode != 4e6 || got.AAL != 3 || got.Acceptance != 0.5 || got.TokensPerSecond != 1500 {
		t.Fatalf("totals from steps: %+v", got)
	}
	if err := s.FinishFromSteps(ctx, r.ID+1, StatusStopped); err == nil {
		t.Error("finishing a missing run succeeded")
	}
}

// TestDrafterChunks: drafters are stored in pieces, so
// weights past SQLite's 1e9-byte blob limit are saved; a check sees the row
// before any weights are read.
func TestDrafterChunks(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "d.db"))
	s.chunk = 1000
	w := make([]byte, 2500)
	for i := range w {
		w[i] = byte(i * 7)
	}
	id, err := s.SaveDrafter(ctx, &Drafter{TargetFingerprint: "fp", Status: "training", Settings: "{}", Losses: "[]"}, w)
	if err != nil {
		t.Fatal(err)
	}
	var pieces int
	s.db.QueryRow("SELECT count(*) FROM drafter_chunks WHERE drafter_id = ?", id).Scan(&pieces)
	if pieces != 3 {
		t.Errorf("%d pieces, want 3", pieces)
	}
	d, got, err := s.LoadDrafter(ctx, id)
	if err != nil || !bytes.Equal(got, w) || d.Bytes != 2500 {
		t.Fatalf("round trip: %d bytes (%d recorded), %v", len(got), d.Bytes, err)
	}
	w2 := w[:1200]
	if err := s.UpdateDrafter(ctx, id, "done", "[]", w2); err != nil {
		t.Fatal(err)
	}
	if _, got, err = s.LoadDrafter(ctx, id); err != nil || !bytes.Equal(got, w2) {
		t.Fatalf("after update: %d bytes, %v", len(got), err)
	}
	wrong := errors.New("for another target")
	if _, got, err := s.LoadDrafter(ctx, id, func(d Drafter) error {
		if d.TargetFingerprint != "other" {
			return wrong
		}
		return nil
	}); !errors.Is(err, wrong) || got != nil {
		t.Errorf("check before reading: %v, %d bytes read", err, len(got))
	}
	// a damaged store (a piece missing) is reported, not decoded
	s.db.Exec("DELETE FROM drafter_chunks WHERE drafter_id = ? AND idx = 1", id)
	if _, _, err := s.LoadDrafter(ctx, id); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("missing piece: %v", err)
	}
	if err := s.DeleteDrafter(ctx, id); err != nil {
		t.Fatal(err)
	}
	s.db.QueryRow("SELECT count(*) FROM drafter_chunks").Scan(&pieces)
	if pieces != 0 {
		t.Errorf("%d pieces left after delete", pieces)
	}
}

// TestDrafterOver1e9 stores and reloads 1.1e9 bytes of weights (SQLite
// refused them as one blob: "string or blob too big"). It needs ~3 GB of
// memory and disk, so it runs only with ARBORIST_BIG_TESTS=1.
func TestDrafterOver1e9(t *testing.T) {
	if os.Getenv("ARBORIST_BIG_TESTS") == "" {
		t.Skip("set ARBORIST_BIG_TESTS=1 to store 1.1e9 bytes")
	}
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "big.db"))
	w := make([]byte, 1_100_000_000)
	for i := 0; i < len(w); i += 4096 {
		w[i] = byte(i >> 12)
	}
	id, err := s.SaveDrafter(ctx, &Drafter{TargetFingerprint: "fp", Status: "done", Settings: "{}", Losses: "[]"}, w)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := s.LoadDrafter(ctx, id)
	if err != nil || !bytes.Equal(got, w) {
		t.Fatalf("1.1e9 bytes: %d back, %v", len(got), err)
	}
}

var _ = sql.ErrNoRows

// TestSaveCurveAfterOrphanedPoints: a curve deleted without foreign keys
// (the sqlite3 shell's default) leaves its points, and the next curve
// saved gets the same id: the save replaces them instead of failing.
func TestSaveCurveAfterOrphanedPoints(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "orphans.db")
	s := open(t, p)
	hid, err := s.PutHardware(ctx, &Hardware{Fingerprint: "hw", CPU: "x"})
	if err != nil {
		t.Fatal(err)
	}
	mid, err := s.PutModel(ctx, &Model{Fingerprint: "m", Path: "/m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	key := CurveKey{HardwareID: hid, ModelID: mid, Backend: "cpu", Threads: 2, Kind: "verify"}
	first := &Curve{Key: key, Points: []latency.Point{{W: 1, Median: time.Millisecond}, {W: 8, Median: 3 * time.Millisecond}}}
	if err := s.SaveCurve(ctx, first); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite3", dsn(p, "_busy_timeout=10000&_foreign_keys=off"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`DELETE FROM latency_curves WHERE id = ?`, first.ID); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	second := &Curve{Key: key, Points: []latency.Point{{W: 1, Median: 2 * time.Millisecond}}}
	if err := s.SaveCurve(ctx, second); err != nil {
		t.Fatalf("saving over orphaned points: %v", err)
	}
	got, err := s.FindCurve(ctx, key)
	if err != nil || got == nil || got.ID != second.ID || len(got.Points) != 1 || got.Points[0].Median != 2*time.Millisecond {
		t.Fatalf("curve read back %+v (%v), want only the second curve's point (ids %d, %d)", got, err, first.ID, second.ID)
	}
}

// schemaAt creates the database at p as Arborist's schema version v left
// it (migrations 0..v-1 and its user_version), for a test of what later
// migrations do to it.
func schemaAt(t *testing.T, p string, v int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(p, "_journal_mode=WAL"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < v; i++ {
		if _, err := db.Exec(migrations[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", v, ApplicationID)); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestReadOnlyMigratesOldSchema: a database of an older schema is migrated
// once by the read-only open, then read.
func TestReadOnlyMigratesOldSchema(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "old.db")
	db := schemaAt(t, p, 2)
	db.Exec(`INSERT INTO runs(target, strategy, settings, prompts, status, created) VALUES ('t', 'ar', '{}', '[]', 'running', 'then')`)
	db.Close()
	ro, err := OpenReadOnly(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	runs, err := ro.Runs(ctx, 0)
	// the version-2 run has no process recorded and nobody holds the
	// database, so the migrating open recovered it
	if err != nil || len(runs) != 1 || runs[0].Status != StatusInterrupted {
		t.Fatalf("runs of a migrated database: %+v %v", runs, err)
	}
}

// TestCheckedStamp: quick_check (which reads every page) is skipped only
// for a database exactly as Arborist's last Close left it.
func TestCheckedStamp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.db")
	s := open(t, p)
	if _, err := s.PutModel(context.Background(), &Model{Fingerprint: "m"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !unchangedSinceClose(p) {
		t.Fatal("a cleanly closed database counts as changed")
	}
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 4096))
	f.Close()
	if unchangedSinceClose(p) {
		t.Error("a database written by something else counts as unchanged")
	}
}

// TestMigrationForgetsOldProbeBandwidth: a machine's read bandwidth stored
// by the one-stream probe is forgotten by the migration to the four-stream
// one (so that the next verb measures it again), once: a rate stored after
// it stays.
func TestMigrationForgetsOldProbeBandwidth(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "old.db")
	db := schemaAt(t, p, 9) // the schema before the probe changed
	if _, err := db.Exec(`INSERT INTO hardware(fingerprint, cpu, cores, threads, simd, ram_bytes, gpus, bandwidth, os, created)
		VALUES ('hw', 'cpu', 2, 2, 'avx2', 1, '', 4e10, 'linux', 'then')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	h := Hardware{Fingerprint: "hw"}
	if _, err := s.PutHardware(ctx, &h); err != nil || h.Bandwidth != 0 {
		t.Fatalf("migrated: bandwidth %v (%v), want 0 (not measured)", h.Bandwidth, err)
	}
	h.Bandwidth = 5e10
	if _, err := s.PutHardware(ctx, &h); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, p)
	h = Hardware{Fingerprint: "hw"}
	if _, err := s.PutHardware(ctx, &h); err != nil || h.Bandwidth != 5e10 {
		t.Fatalf("reopened: bandwidth %v (%v), want the 5e10 measured after the migration", h.Bandwidth, err)
	}
}
