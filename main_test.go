package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"arborist/engine/model/modeltest"
	"arborist/profiles/store"
)

// TestMain lets a test run this binary's main() as a child process.
func TestMain(m *testing.M) {
	if args := os.Getenv("ARBORIST_MAIN_ARGS"); args != "" {
		os.Args = append([]string{"arborist"}, strings.Split(args, "\x1f")...)
		main()
		return
	}
	os.Exit(m.Run())
}

// TestSIGTERMStopsRun: SIGTERM was not handled, so a run
// killed by it stayed "running" with totals 0. Now SIGTERM cancels the
// verb like SIGINT: the last batch is stored and the run is "stopped" with
// its totals.
func TestSIGTERMStopsRun(t *testing.T) {
	target := modeltest.Stories260K(t)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "p.txt")
	os.WriteFile(prompts, []byte(strings.Repeat("Once upon a time\n", 5000)), 0o644)
	db := filepath.Join(dir, "s.db")
	args := []string{"run", "--target", target, "--draft-ngram", "2", "--strategy", "chain", "--gamma", "2",
		"--prompts", prompts, "-n", "64", "--temp", "0", "--quiet", "--db", db}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ARBORIST_MAIN_ARGS="+strings.Join(args, "\x1f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// wait until steps are stored, then terminate
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no steps stored within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
		st, err := store.OpenReadOnly(ctx, db)
		if err != nil {
			continue
		}
		runs, _ := st.Runs(ctx, 0)
		n := 0
		if len(runs) == 1 {
			steps, _ := st.RunSteps(ctx, runs[0].ID)
			n = len(steps)
		}
		st.Close()
		if n > 0 {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if err == nil {
		t.Skip("the suite finished before SIGTERM")
	}
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(ctx, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	steps, _ := st.RunSteps(ctx, runs[0].ID)
	if r := runs[0]; r.Status != "stopped" || r.Steps == 0 || r.Steps != len(steps) || r.Tokens == 0 {
		t.Fatalf("after SIGTERM: status %s, %d steps and %d tokens recorded, %d steps stored", r.Status, r.Steps, r.Tokens, len(steps))
	}
}
