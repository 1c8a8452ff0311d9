package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"arborist/profiles/loadtest/loadtesttest"
)

// TestMain runs the stand-in server when this binary is started as one
// (a child a test starts through Child).
func TestMain(m *testing.M) {
	if os.Getenv("ARBORIST_STANDIN") != "" {
		loadtesttest.Main(os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDriveCountsAndConcurrency: a round sends every client's requests,
// C of them at once (the stand-in holds the first until C are in flight),
// and counts the tokens the server reports in its usage, or where it
// reports none the chunks that carried text; completions and chat alike.
func TestDriveCountsAndConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name            string
		chat, usage     bool
		perChunk, wantT int
	}{
		{"completions with usage", false, true, 3, 9},
		{"chat with usage", true, true, 3, 9},
		{"completions, chunks counted", false, false, 1, 9},
		{"chat, chunks of three without usage", true, false, 3, 3}, // a chunk is all it can count
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &loadtesttest.Fake{Tokens: 9, PerChunk: tc.perChunk, Usage: tc.usage, Gate: 4}
			ts := httptest.NewServer(f.Handler())
			defer ts.Close()
			d := Drive{URL: ts.URL, Chat: tc.chat, Prompts: []string{"a", "b", "c"}, Concurrency: 4, PerClient: 3, MaxTokens: 16}
			r, err := d.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Requests) != 12 || f.Requests() != 12 {
				t.Fatalf("%d requests measured, %d served; want 12", len(r.Requests), f.Requests())
			}
			if f.MaxInFlight() != 4 {
				t.Errorf("at most %d requests in flight, want the 4 clients", f.MaxInFlight())
			}
			for i, q := range r.Requests {
				if q.Tokens != tc.wantT || q.TTFT <= 0 || q.Total < q.TTFT {
					t.Errorf("request %d: %+v, want %d tokens, a first token within the request", i, q, tc.wantT)
				}
			}
			if r.Tokens() != 12*tc.wantT || r.TPS() <= 0 || r.Wall <= 0 {
				t.Errorf("round: %d tokens, %.1f tokens/s, wall %v", r.Tokens(), r.TPS(), r.Wall)
			}
		})
	}
}

// TestDriveMaxTokens: the requests ask for MaxTokens, and the stand-in
// streams no more (the negative control of the counts above).
func TestDriveMaxTokens(t *testing.T) {
	f := &loadtesttest.Fake{Tokens: 50, Usage: true}
	ts := httptest.NewServer(f.Handler())
	defer ts.Close()
	r, err := Drive{URL: ts.URL, Prompts: []string{"a"}, Concurrency: 2, PerClient: 1, MaxTokens: 7}.Run(context.Background())
	if err != nil || r.Tokens() != 14 {
		t.Fatalf("%d tokens (%v), want 2 x 7", r.Tokens(), err)
	}
}

// TestDriveWhole: unstreamed requests read the usage's tokens and the
// whole answer's time, with no first token of their own; chat alike.
func TestDriveWhole(t *testing.T) {
	f := &loadtesttest.Fake{Tokens: 50}
	ts := httptest.NewServer(f.Handler())
	defer ts.Close()
	for _, chat := range []bool{false, true} {
		r, err := Drive{URL: ts.URL, Chat: chat, Prompts: []string{"a"}, Concurrency: 1, PerClient: 2, MaxTokens: 7, Whole: true}.Run(context.Background())
		if err != nil || r.Tokens() != 14 || r.Requests[0].TTFT != 0 || r.Requests[0].Total <= 0 {
			t.Fatalf("chat %v: %+v (%v), want two requests of 7 tokens, whole", chat, r.Requests, err)
		}
	}
}

// TestDriveFailures: a refusal, a stream without [DONE] and a server that
// is not there fail the round, naming what failed.
func TestDriveFailures(t *testing.T) {
	for _, tc := range []struct {
		fake *loadtesttest.Fake
		want string
	}{
		{&loadtesttest.Fake{Status: http.StatusServiceUnavailable}, "503"},
		{&loadtesttest.Fake{NoDone: true}, "without [DONE]"},
	} {
		ts := httptest.NewServer(tc.fake.Handler())
		_, err := Drive{URL: ts.URL, Prompts: []string{"a"}, Concurrency: 2, PerClient: 2, MaxTokens: 4}.Run(context.Background())
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "client ") {
			t.Errorf("err = %v, want one naming the client and %q", err, tc.want)
		}
	}
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	if _, err := (Drive{URL: url, Prompts: []string{"a"}, Concurrency: 1, PerClient: 1, MaxTokens: 4}).Run(context.Background()); err == nil {
		t.Error("a server that is not there measured")
	}
	if _, err := (Drive{URL: url, Concurrency: 1, PerClient: 1, MaxTokens: 4}).Run(context.Background()); err == nil {
		t.Error("a round without prompts ran")
	}
}

// TestSummarize: rounds' aggregate tokens/s give the median and the
// spread; request times the median and 90th percentile.
func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	req := func(ttft, total time.Duration, tokens int) Request {
		return Request{Tokens: tokens, TTFT: ttft, Total: total}
	}
	rounds := []Round{
		{Requests: []Request{req(10*ms, 100*ms, 10), req(20*ms, 110*ms, 10)}, Wall: time.Second},     // 20 tokens/s
		{Requests: []Request{req(30*ms, 120*ms, 10), req(40*ms, 130*ms, 10)}, Wall: time.Second / 2}, // 40
		{Requests: []Request{req(50*ms, 140*ms, 10), req(60*ms, 150*ms, 1)}, Wall: time.Second},      // 11
	}
	s := Summarize(rounds)
	if s.Rounds != 3 || s.Requests != 6 || s.Tokens != 51 || s.Wall != 2500*ms {
		t.Fatalf("counts: %+v", s)
	}
	if s.TPS != 20 || s.TPSP10 != 11+0.2*9 || s.TPSP90 != 20+0.8*20 {
		t.Errorf("tokens/s median %g, p10 %g, p90 %g", s.TPS, s.TPSP10, s.TPSP90)
	}
	if s.TTFT != 35*ms || s.TTFTP90 != 55*ms {
		t.Errorf("ttft median %v, p90 %v", s.TTFT, s.TTFTP90)
	}
	// a one-token request has no time per output token: 5 requests of 10 ms
	if s.TPOT != 10*ms || s.TPOTP90 != 10*ms {
		t.Errorf("tpot median %v, p90 %v", s.TPOT, s.TPOTP90)
	}
	if Quantile(nil, 0.5) != 0 || Quantile([]float64{3, 1, 2}, 0.5) != 2 || Quantile([]float64{1, 2}, 1) != 2 {
		t.Error("quantile")
	}
}

// standIn writes a program that runs this test binary as the stand-in
// server in role ("serve", or "fail": exits at once), logging its
// arguments to log.
func standIn(t *testing.T, role, log string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "server")
	script := fmt.Sprintf("#!/bin/sh\nARBORIST_STANDIN=%s ARBORIST_STANDIN_LOG=%q exec %q \"$@\"\n", role, log, exe)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChildStartsAndStops: a child server is started with its port and
// the level, driven, and gone once stopped; one that exits before it
// serves fails the start with what it printed.
func TestChildStartsAndStops(t *testing.T) {
	log := filepath.Join(t.TempDir(), "args")
	s := Child("stand-in", standIn(t, "serve", log), func(port, n int) []string {
		return []string{"--port", strconv.Itoa(port), "-np", strconv.Itoa(n)}
	})
	run, err := s.Start(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Drive{URL: run.URL, Prompts: []string{"a"}, Concurrency: 3, PerClient: 1, MaxTokens: 8}.Run(context.Background())
	run.Stop()
	if err != nil || r.Tokens() != 18 {
		t.Fatalf("driving the child: %d tokens, %v", r.Tokens(), err)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "-np 3") {
		t.Errorf("the child's arguments: %q", b)
	}
	if _, err := (Drive{URL: run.URL, Prompts: []string{"a"}, Concurrency: 1, PerClient: 1, MaxTokens: 8}).Run(context.Background()); err == nil {
		t.Error("the stopped child still serves")
	}
	bad := Child("failing", standIn(t, "fail", log), func(port, n int) []string { return []string{"--port", strconv.Itoa(port)} })
	if _, err := bad.Start(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "cannot load the model") {
		t.Errorf("a child that exits: %v", err)
	}
}

// TestChildEndsOnCancel: cancelling the test's context ends a started
// child and every process of its group.
func TestChildEndsOnCancel(t *testing.T) {
	log := filepath.Join(t.TempDir(), "args")
	ctx, cancel := context.WithCancel(context.Background())
	s := Child("stand-in", standIn(t, "serve", log), func(port, n int) []string { return []string{"--port", strconv.Itoa(port)} })
	run, err := s.Start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Stop()
	pid := childOf(t, run)
	cancel()
	if !gone(pid) {
		t.Fatalf("the child %d outlived the cancelled test", pid)
	}
	if _, err := s.Start(ctx, 1); !errors.Is(err, context.Canceled) && (err == nil || !strings.Contains(err.Error(), "canceled")) {
		t.Errorf("a start under a cancelled context: %v", err)
	}
}

// childOf is the pid of the process serving run (the stand-in script
// exec'd the test binary, so it is the started process).
func childOf(t *testing.T, run *Running) int {
	t.Helper()
	if run.proc == nil {
		t.Fatal("no process")
	}
	return run.proc.Pid()
}

// gone says whether pid ends (gone, or a zombie): up to 10 s for the
// signal to arrive, a bound on hanging, not a timing assertion.
func gone(pid int) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); err != nil {
			return true
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if s := string(b); strings.Contains(s[strings.LastIndexByte(s, ')')+1:], " Z ") {
			return true
		}
	}
	return false
}
