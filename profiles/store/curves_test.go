package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"arborist/profiles/latency"
)

// TestCurvesOverContextMigration: a database of schema version 10 keeps
// its curves through the migration to curves over context and pass size,
// each as the one-sequence curve of the context it was measured at (a
// context never recorded as the short one, 128); the migrated schema is
// the one Arborist writes (a reading open after it accepts it), and a
// curve at another context or pass size is found by its own key without
// hiding the old one.
func TestCurvesOverContextMigration(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "v10.db")
	db := schemaAt(t, p, 10)
	for _, q := range []string{
		`INSERT INTO hardware(id, fingerprint, cpu, cores, threads, simd, ram_bytes, os, created) VALUES (1, 'hw', 'cpu', 2, 2, 'avx2', 1, 'linux', 'then')`,
		`INSERT INTO models(id, fingerprint, path, arch, shape, quant, params, weight_bytes, vocab_hash, created) VALUES (1, 'm', '/m.gguf', 'llama', 's', 'Q8_0', 1, 1, 'v', 'then')`,
		`INSERT INTO latency_curves(id, hardware_id, model_id, backend, threads, kind, context, created) VALUES (1, 1, 1, 'cpu', 2, 'verify', 128, '2025-01-01T00:00:00Z')`,
		`INSERT INTO latency_points(curve_id, w, median_ns, spread_ns, reps) VALUES (1, 1, 1000000, 10000, 5), (1, 8, 2000000, 20000, 5)`,
		`INSERT INTO latency_curves(id, hardware_id, model_id, backend, threads, kind, context, created) VALUES (2, 1, 1, 'cpu', 2, 'overhead', 0, '2025-01-01T00:00:00Z')`,
		`INSERT INTO latency_points(curve_id, w, median_ns, spread_ns, reps) VALUES (2, 8, 30000, 100, 5)`,
		`PRAGMA journal_mode=DELETE`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	key := CurveKey{HardwareID: 1, ModelID: 1, Backend: "cpu", Threads: 2, Kind: "verify", Context: 128}
	c, err := s.FindCurve(ctx, key)
	if err != nil || c == nil || c.ID != 1 || c.Key.Seqs != 1 || len(c.Points) != 2 || c.Points[1].Median != 2*time.Millisecond {
		t.Fatalf("the old curve after the migration: %+v (%v), want curve 1 at context 128, one sequence", c, err)
	}
	over := CurveKey{HardwareID: 1, ModelID: 1, Backend: "cpu", Threads: 2, Kind: "overhead", Context: 128}
	if c, err := s.FindCurve(ctx, over); err != nil || c == nil || c.ID != 2 {
		t.Fatalf("a curve stored without its context: %+v (%v), want it as the short context's", c, err)
	}
	// the same model at a long context and in passes of 4 sequences
	long := key
	long.Context = 4096
	four := key
	four.Seqs = 4
	for _, k := range []CurveKey{long, four} {
		if err := s.SaveCurve(ctx, &Curve{Key: k, Points: []latency.Point{{W: 4, Median: 3 * time.Millisecond}}}); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.FindCurve(ctx, key); err != nil || c == nil || c.ID != 1 {
		t.Fatalf("the short context's curve after longer ones were stored: %+v (%v)", c, err)
	}
	if c, err := s.FindCurve(ctx, long); err != nil || c == nil || c.Key.Context != 4096 || c.Points[0].Median != 3*time.Millisecond {
		t.Fatalf("the long context's curve: %+v (%v)", c, err)
	}
	fam, err := s.CurveFamily(ctx, key)
	if err != nil || len(fam) != 3 {
		t.Fatalf("family: %d curves (%v), want 3", len(fam), err)
	}
	if got := [3][2]int{{fam[0].Key.Seqs, fam[0].Key.Context}, {fam[1].Key.Seqs, fam[1].Key.Context}, {fam[2].Key.Seqs, fam[2].Key.Context}}; got != [3][2]int{{1, 128}, {1, 4096}, {4, 128}} {
		t.Fatalf("family by sequences, then context: %v", got)
	}
	s.Close()
	ro, err := OpenReadOnly(ctx, p)
	if err != nil {
		t.Fatalf("the migrated schema refused by a reading open: %v", err)
	}
	ro.Close()
}

// TestOldCurveIndexRefused: the migrated schema is checked exactly: a
// database marked version 12 whose curve index is still version 11's is
// not Arborist's (the negative control of the test above).
func TestOldCurveIndexRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "odd.db")
	db := schemaAt(t, p, len(migrations))
	for _, q := range []string{
		"DROP INDEX latency_curves_key",
		"CREATE INDEX latency_curves_key ON latency_curves(hardware_id, model_id, backend, threads, kind)",
		"PRAGMA journal_mode=DELETE",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	before, _ := os.ReadFile(p)
	_, err := Open(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "latency_curves_key") {
		t.Fatalf("open: %v, want the index named", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Error("the refused database was changed")
	}
}
