package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"arborist/profiles/llamacpp"
)

// Server is one of the servers a load test compares, started afresh for
// each level (its sequences sized for the level) and stopped after it.
type Server struct {
	// Name is what the results and the stored runs call it
	// (arborist-plan, llama-server, ...).
	Name string
	// Start starts it for concurrency clients; the Running it returns
	// is stopped by the caller.
	Start func(ctx context.Context, concurrency int) (*Running, error)
}

// Running is a started server.
type Running struct {
	URL  string // its base, without /v1
	stop func()
	proc *llamacpp.Process // the child serving it (nil for a server at a URL)
}

// Stop ends the server (a server given by URL is left running).
func (r *Running) Stop() {
	if r.stop != nil {
		r.stop()
	}
}

// AtURL is a server already running at url, driven as it is at every
// level.
func AtURL(name, url string) Server {
	return Server{Name: name, Start: func(ctx context.Context, _ int) (*Running, error) {
		if err := ready(ctx, url, nil, ReadyLimit); err != nil {
			return nil, err
		}
		return &Running{URL: url}, nil
	}}
}

// ReadyLimit bounds how long a started server may take to answer
// /health with 200 (loading its models): past it the start fails.
const ReadyLimit = 5 * time.Minute

// Child is a server started as a child process for each level: prog
// with args(port, concurrency), listening on 127.0.0.1:port, ready once
// /health answers 200. A child that exits before it is ready fails the
// start with the tail of what it printed; cancelling ctx ends it with
// every process it started.
func Child(name, prog string, args func(port, concurrency int) []string) Server {
	return Server{Name: name, Start: func(ctx context.Context, concurrency int) (*Running, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p, err := llamacpp.Start(ctx, prog, args(port, concurrency))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		if err := ready(ctx, url, p, ReadyLimit); err != nil { // names the program and its pid
			p.Stop()
			return nil, err
		}
		return &Running{URL: url, stop: p.Stop, proc: p}, nil
	}}
}

// freePort is a port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("loadtest: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// readyPoll is how often ready asks /health.
const readyPoll = 100 * time.Millisecond

// ready waits until url/health answers 200, p (where given) exits, ctx
// ends or limit passes.
func ready(ctx context.Context, url string, p *llamacpp.Process, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var exited <-chan struct{}
	if p != nil {
		exited = p.Exited()
	}
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	last := ""
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it served (%v); it printed:\n%s", p, p.Err(), p.Output(2000))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				out := ""
				if p != nil {
					out = "; it printed:\n" + p.Output(2000)
				}
				return fmt.Errorf("%s/health did not answer 200 within %s (last: %s)%s", url, limit, last, out)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
