package store

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadRunRoundTrip: a load test's figures at one concurrency are
// stored with its run and read back; a run of one request at a time has
// none (a negative control), and `runs --json` lists them.
func TestLoadRunRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "l.db"))
	l := &Load{Server: "arborist-adaptive", Concurrency: 8, TTFT: 40 * time.Millisecond, TTFTP90: 90 * time.Millisecond,
		TPOT: 12 * time.Millisecond, TPOTP90: 20 * time.Millisecond, TPSP10: 80, TPSP90: 110, Rounds: 3, Requests: 48}
	load := &Run{Target: "t.gguf", Drafter: "draft:d.gguf", Strategy: "chain", Settings: map[string]int{}, Load: &Load{Server: l.Server, Concurrency: 8}}
	if _, err := s.CreateRun(ctx, load); err != nil {
		t.Fatal(err)
	}
	load.Status, load.Tokens, load.TokensPerSecond, load.Load = "done", 1536, 100, l
	if err := s.FinishRun(ctx, load); err != nil {
		t.Fatal(err)
	}
	solo := &Run{Target: "t.gguf", Strategy: "ar", Settings: map[string]int{}}
	if _, err := s.CreateRun(ctx, solo); err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(ctx, load.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Load == nil || *got.Load != *l || got.TokensPerSecond != 100 {
		t.Fatalf("load run read back: %+v load %+v, want %+v", got, got.Load, l)
	}
	if g, err := s.Run(ctx, solo.ID); err != nil || g.Load != nil {
		t.Fatalf("a run of one request at a time read back with a load: %+v %v", g, err)
	}
	runs, err := s.Runs(ctx, 0)
	if err != nil || len(runs) != 2 || runs[1].Load == nil || runs[0].Load != nil {
		t.Fatalf("Runs: %+v %v", runs, err)
	}
	b, _ := json.Marshal(runs[1])
	if !strings.Contains(string(b), `"load":{"server":"arborist-adaptive","concurrency":8,"ttft_ms":40,"ttft_p90_ms":90`) {
		t.Errorf("runs --json: %s", b)
	}
	if b, _ := json.Marshal(runs[0]); strings.Contains(string(b), `"load"`) {
		t.Errorf("a run of one request at a time lists a load: %s", b)
	}
}

// TestLoadColumnsMigrated: a database of schema version 10 gains the load
// columns, its runs read back without a load.
func TestLoadColumnsMigrated(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "v10.db")
	db := schemaAt(t, p, 10)
	if _, err := db.Exec(`INSERT INTO runs(target, strategy, settings, prompts, status, created) VALUES ('t', 'ar', '{}', '[]', 'done', 'then')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, p)
	runs, err := s.Runs(ctx, 0)
	if err != nil || len(runs) != 1 || runs[0].Load != nil || runs[0].Status != "done" {
		t.Fatalf("runs of a migrated database: %+v %v", runs, err)
	}
	r := &Run{Target: "t", Strategy: "ar", Settings: map[string]int{}, Load: &Load{Server: "llama-server-plain", Concurrency: 4}}
	if _, err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Run(ctx, r.ID); err != nil || got.Load == nil || got.Load.Concurrency != 4 {
		t.Fatalf("a load run in the migrated database: %+v %v", got, err)
	}
}
