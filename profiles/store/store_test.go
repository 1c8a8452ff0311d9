package store

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"arborist/profiles/latency"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	s := open(t, path)
	hid, err := s.PutHardware(ctx, &Hardware{Fingerprint: "hw1", CPU: "x", Cores: 2, Threads: 2, SIMD: "avx2", RAM: 1 << 30, OS: "linux", Bandwidth: 2e10})
	if err != nil {
		t.Fatal(err)
	}
	// a later record without the bandwidth or the GPU inventory gets the
	// stored ones; a record with GPUs refreshes them
	later := &Hardware{Fingerprint: "hw1", CPU: "x"}
	if id, err := s.PutHardware(ctx, later); err != nil || id != hid || later.Bandwidth != 2e10 || later.GPUs != "" {
		t.Fatalf("later record: id %d (want %d), %+v, %v", id, hid, later, err)
	}
	if _, err := s.PutHardware(ctx, &Hardware{Fingerprint: "hw1", GPUs: "0: NVIDIA H200"}); err != nil {
		t.Fatal(err)
	}
	later = &Hardware{Fingerprint: "hw1"}
	if _, err := s.PutHardware(ctx, later); err != nil || later.GPUs != "0: NVIDIA H200" || later.Bandwidth != 2e10 {
		t.Fatalf("after the GPU inventory: %+v, %v", later, err)
	}
	// the SIMD description follows the build's words for its kernels; a
	// record without one keeps the stored one
	var simd string
	if _, err := s.PutHardware(ctx, &Hardware{Fingerprint: "hw1", SIMD: "avx2 avx512f (kernels c-avx512-vnni)"}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT simd FROM hardware WHERE fingerprint = 'hw1'").Scan(&simd); err != nil || simd != "avx2 avx512f (kernels c-avx512-vnni)" {
		t.Fatalf("stored SIMD description %q, %v", simd, err)
	}
	mid, err := s.PutModel(ctx, &Model{Fingerprint: "m1", Path: "/m.gguf", Arch: "llama", Shape: "64x5", Quant: "F32", VocabHash: "v"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.PutModel(ctx, &Model{Fingerprint: "m1", Path: "/moved.gguf"})
	if again != mid {
		t.Errorf("same fingerprint got id %d, want %d", again, mid)
	}
	key := CurveKey{HardwareID: hid, ModelID: mid, Backend: "cpu", Threads: 2, Kind: "verify", Context: 32}
	if c, err := s.FindCurve(ctx, key); err != nil || c != nil {
		t.Fatalf("empty store: curve %v, err %v", c, err)
	}
	c := &Curve{Key: key, Points: []latency.Point{{W: 1, Median: time.Millisecond, Spread: 10 * time.Microsecond, Reps: 5}, {W: 8, Median: 3 * time.Millisecond, Reps: 7}}}
	if err := s.SaveCurve(ctx, c); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, path) // reopen: migrations are idempotent
	got, err := s2.FindCurve(ctx, key)
	if err != nil || got == nil || len(got.Points) != 2 || got.Points[1].Median != 3*time.Millisecond {
		t.Fatalf("curve after reopen: %+v, %v", got, err)
	}
	r := &Run{Target: "t", Strategy: "chain", Settings: map[string]int{"gamma": 4}, Prompts: []string{"a"}}
	if _, err := s2.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s2.AppendSteps(ctx, r.ID, []Step{{Index: 0, Accepted: 3, Verify: time.Millisecond, Wait: time.Microsecond, Ahead: 3, AheadHit: true},
		{Index: 1, Accepted: 1}}); err != nil {
		t.Fatal(err)
	}
	r.Status, r.Tokens, r.AAL = "done", 6, 3
	if err := s2.FinishRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	runs, err := s2.Runs(ctx, 0)
	if err != nil || len(runs) != 1 || runs[0].Status != "done" || runs[0].Settings.(map[string]any)["gamma"] != 4.0 {
		t.Fatalf("runs: %+v %v", runs, err)
	}
	steps, err := s2.RunSteps(ctx, r.ID)
	if err != nil || len(steps) != 2 || steps[0].Accepted != 3 || steps[0].Verify != time.Millisecond ||
		steps[0].Wait != time.Microsecond || steps[0].Ahead != 3 || !steps[0].AheadHit || steps[1].Ahead != 0 || steps[1].AheadHit {
		t.Fatalf("steps: %+v %v", steps, err)
	}
}

func TestRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.db")
	os.WriteFile(text, []byte("these are my notes, not a database"), 0o644)
	if _, err := Open(context.Background(), text); !errors.Is(err, ErrForeign) {
		t.Errorf("text file: %v", err)
	}
	if b, _ := os.ReadFile(text); string(b) != "these are my notes, not a database" {
		t.Error("foreign file was modified")
	}
	other := filepath.Join(dir, "other.db")
	db, _ := sql.Open("sqlite3", other)
	db.Exec("CREATE TABLE mine(x)")
	db.Close()
	if _, err := Open(context.Background(), other); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), other) {
		t.Errorf("foreign sqlite: %v", err)
	}
	newer := filepath.Join(dir, "newer.db")
	s := open(t, newer)
	s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(migrations)+5))
	s.Close()
	if _, err := Open(context.Background(), newer); !errors.Is(err, ErrNewer) {
		t.Errorf("newer schema: %v", err)
	}
}

// TestLocked: while another connection holds the write lock, a write waits
// briefly, then fails with a message naming the holder.
func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s := open(t, path)
	other, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=100")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.Exec("INSERT INTO holders(pid, host, command, since) VALUES (4242, 'h', 'arborist profile', 'now')")
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	start := time.Now()
	_, err = s.PutModel(context.Background(), &Model{Fingerprint: "x"})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid 4242") {
		t.Errorf("locked write: %v", err)
	}
	if time.Since(start) < time.Second {
		t.Errorf("gave up after %v without waiting", time.Since(start))
	}
}

// TestKilledMidRunKeepsSteps runs a child process that writes a run's steps
// in batches and prints how many it has committed; the parent kills it
// mid-run, reopens the database and finds at least every reported step.
func TestKilledMidRunKeepsSteps(t *testing.T) {
	if os.Getenv("ARBORIST_STORE_CHILD") != "" {
		childWriter(os.Getenv("ARBORIST_STORE_CHILD"))
		return
	}
	path := filepath.Join(t.TempDir(), "k.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidRunKeepsSteps$")
	cmd.Env = append(os.Environ(), "ARBORIST_STORE_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	committed := 0
	for sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "committed ")); err == nil {
			committed = n
			if committed >= 40 {
				break
			}
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if committed < 40 {
		t.Fatalf("child reported only %d steps", committed)
	}
	s := open(t, path)
	runs, err := s.Runs(context.Background(), 0)
	// a killed run does not stay "running" with totals 0: the
	// next open finds its process gone and rebuilds its totals from the
	// stored steps
	if err != nil || len(runs) != 1 || runs[0].Status != StatusInterrupted || runs[0].Steps < committed || len(s.Recovered) != 1 {
		t.Fatalf("runs after kill: %+v %v (recovered %v)", runs, err, s.Recovered)
	}
	steps, err := s.RunSteps(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < committed {
		t.Errorf("%d steps survive, %d were committed", len(steps), committed)
	}
	tokens, accepted := 0, 0
	for _, st := range steps {
		tokens += st.Emitted
		accepted += st.Accepted
	}
	if runs[0].Steps != len(steps) || runs[0].Tokens != tokens || runs[0].Acceptance != float64(accepted)/float64(len(steps)*8) {
		t.Errorf("rebuilt totals: %d steps, %d tokens, acceptance %v; steps say %d, %d, %v", runs[0].Steps, runs[0].Tokens, runs[0].Acceptance,
			len(steps), tokens, float64(accepted)/float64(len(steps)*8))
	}
}

func childWriter(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	r := &Run{Target: "t", Strategy: "chain", Settings: map[string]int{}}
	s.CreateRun(ctx, r)
	for i := 0; ; i += 8 {
		batch := make([]Step, 8)
		for k := range batch {
			batch[k] = Step{Index: i + k, Drafted: 8, Accepted: k, Emitted: k + 1, Verify: time.Millisecond}
		}
		if err := s.AppendSteps(ctx, r.ID, batch); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Printf("committed %d\n", i+8)
		time.Sleep(2 * time.Millisecond)
	}
}

func TestDrafters(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "d.db"))
	id, err := s.SaveDrafter(ctx, &Drafter{TargetFingerprint: "fp", TargetPath: "/t.gguf", Status: "training", Settings: `{"d":8}`, Losses: "[]"}, []byte("ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateDrafter(ctx, id, "done", `[{"Epoch":1}]`, []byte("final weights")); err != nil {
		t.Fatal(err)
	}
	d, w, err := s.LoadDrafter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(w) != "final weights" || d.Status != "done" || d.Bytes != 13 || d.TargetPath != "/t.gguf" || d.Losses != `[{"Epoch":1}]` {
		t.Fatalf("drafter round trip: %+v %q", d, w)
	}
	list, err := s.Drafters(ctx)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("list: %v %+v", err, list)
	}
	if _, _, err := s.LoadDrafter(ctx, id+1); err == nil || !strings.Contains(err.Error(), "no drafter") {
		t.Errorf("missing drafter: %v", err)
	}
	if err := s.UpdateDrafter(ctx, id+1, "done", "[]", nil); err == nil {
		t.Error("updating a missing drafter succeeded")
	}
}

// A device's memory is kept per machine and backend, and a new
// measurement replaces the old one.
func TestDeviceMemory(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "a.db"))
	hid, err := s.PutHardware(ctx, &Hardware{Fingerprint: "hw1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.DeviceMemoryOf(ctx, hid, "cuda"); ok || err != nil {
		t.Fatalf("before any: ok %v, %v", ok, err)
	}
	m := DeviceMemory{Backend: "cuda", Description: "NVIDIA H200", Multiprocessors: 132, Copy: 4.3e12, HostToDevice: 2.5e10, DeviceToHost: 2e10, Peak: 4.8e12}
	for _, copyRate := range []float64{4.3e12, 4.1e12} {
		m.Copy = copyRate
		if err := s.PutDeviceMemory(ctx, hid, m); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.DeviceMemoryOf(ctx, hid, "cuda")
		if !ok || err != nil || got != m {
			t.Fatalf("stored %+v, read %+v (ok %v, %v)", m, got, ok, err)
		}
	}
	if _, ok, _ := s.DeviceMemoryOf(ctx, hid, "cpu"); ok {
		t.Fatal("another backend's memory read back")
	}
}

// A bench report is kept per machine, model, backend and KV cache type, a
// new one replaces the old, and one past the bound is refused.
func TestBenchReports(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "a.db"))
	hid, err := s.PutHardware(ctx, &Hardware{Fingerprint: "hw1"})
	if err != nil {
		t.Fatal(err)
	}
	mid, err := s.PutModel(ctx, &Model{Fingerprint: "m1", Path: "/m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	k := BenchKey{HardwareID: hid, ModelID: mid, Backend: "cpu", KV: "f16"}
	if _, ok, err := s.BenchReportOf(ctx, k); ok || err != nil {
		t.Fatalf("before any: ok %v, %v", ok, err)
	}
	for i, rep := range []string{`{"model":"a"}`, `{"model":"b"}`} {
		if err := s.PutBenchReport(ctx, BenchReport{Key: k, Threads: 2 + i, Report: rep}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.BenchReportOf(ctx, k)
		if !ok || err != nil || got.Report != rep || got.Threads != 2+i || got.Key != k || time.Since(got.Created) > time.Hour {
			t.Fatalf("stored %s, read %+v (ok %v, %v)", rep, got, ok, err)
		}
	}
	for _, other := range []BenchKey{{hid, mid, "cpu", ""}, {hid, mid, "cuda", "f16"}, {hid, mid + 1, "cpu", "f16"}} {
		if _, ok, _ := s.BenchReportOf(ctx, other); ok {
			t.Fatalf("%+v read back another key's report", other)
		}
	}
	if err := s.PutBenchReport(ctx, BenchReport{Key: k, Report: strings.Repeat("x", maxBenchReport+1)}); err == nil {
		t.Fatal("a report past the bound was stored")
	}
}
