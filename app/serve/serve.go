// Package serve is Arborist's server face: it answers OpenAI-compatible
// HTTP requests (docs/EXPORT.md, "Serving") by handing each to the core's
// serving object (profiles.Server), which decodes a config.yaml's plan on
// Arborist's own engine. What is HTTP lives here: the routes, the JSON
// shapes of OpenAI's API, server-sent events, status codes, the request
// body's bounds, the listener and its graceful shutdown. What is decoding
// lives in the core: the prompt, the sampling, the budget and the context,
// stop sequences, which request decodes when, and the figures. `arborist
// serve` (app/cli) and the GUI's Export screen both serve through here.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"arborist/profiles"
	"arborist/profiles/config"
)

// Options are the core's serving options and the HTTP face's own.
type Options struct {
	profiles.ServeOptions
	// MaxBody is the largest request body in bytes (default 1 MiB).
	MaxBody int64
	// MaxBodies bounds the bytes of the request bodies being read at
	// once, over all requests (default 32 MiB): a request that would
	// pass it is answered 503 with Retry-After before its body is read.
	MaxBodies int64
	// Grace is how long a request decoding when shutdown begins may run
	// on before it is cancelled (default 30 s).
	Grace time.Duration
	// OnRequest, when set, receives a line for each request answered.
	OnRequest func(line string)
}

func (o *Options) defaults() {
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.MaxBodies <= 0 {
		o.MaxBodies = max(32<<20, o.MaxBody)
	}
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
}

// Server is a config.yaml served over HTTP: the core's server behind the
// OpenAI-compatible API (Handler).
type Server struct {
	core    *profiles.Server
	opt     Options
	model   string        // the id clients name the served model by
	plan    string        // the plan, as the core names it
	started time.Time     // when the core's server opened
	closing chan struct{} // closed when shutdown begins
	closed  atomic.Bool
	refused atomic.Int64 // requests answered before they reached the core

	bodyMu sync.Mutex
	bodies int64 // bytes of the request bodies being read (holdBody)
}

// Open opens the config's pair for serving through b (whose database
// checks and caches the model files' hashes).
func Open(ctx context.Context, b *profiles.Bench, c *config.Config, opt Options) (*Server, error) {
	opt.defaults()
	core, err := b.OpenServer(ctx, c, opt.ServeOptions)
	if err != nil {
		return nil, err
	}
	st := core.Stats()
	return &Server{core: core, opt: opt, model: st.Model, plan: st.Plan, started: st.Started, closing: make(chan struct{})}, nil
}

// Model is the id clients name the served model by (the target's file
// name without .gguf).
func (s *Server) Model() string { return s.model }

// Chat says whether chat completions are served, or why not.
func (s *Server) Chat() error { return s.core.Chat() }

// Policy names the policy sizing the running requests' drafts, and why
// where it is not the one asked for.
func (s *Server) Policy() string { return s.core.Policy() }

// Close releases the pair.
func (s *Server) Close() { s.core.Close() }

// Stats are the server's figures now: the core's, with the requests this
// face refused before they reached it.
func (s *Server) Stats() profiles.ServeStats {
	st := s.core.Stats()
	n := int(s.refused.Load())
	st.Requests += n
	st.Failed += n
	s.bodyMu.Lock()
	st.BodyBytes = s.bodies
	s.bodyMu.Unlock()
	return st
}

// holdBody takes the bytes a request's body may take (its Content-Length,
// or MaxBody when it gives none) from the bound on the bodies read at once
// (Options.MaxBodies), or refuses the request as busy; release gives them
// back once the body is decoded.
func (s *Server) holdBody(r *http.Request) (release func(), err error) {
	n := s.opt.MaxBody
	if r.ContentLength >= 0 && r.ContentLength < n {
		n = r.ContentLength
	}
	s.bodyMu.Lock()
	defer s.bodyMu.Unlock()
	if s.bodies+n > s.opt.MaxBodies {
		return nil, withCode(http.StatusServiceUnavailable, "server_error", "server_busy",
			fmt.Sprintf("the server is busy: the request bodies being read hold %d of %d bytes, and this one may take %d", s.bodies, s.opt.MaxBodies, n))
	}
	s.bodies += n
	return func() {
		s.bodyMu.Lock()
		s.bodies -= n
		s.bodyMu.Unlock()
	}, nil
}

// Serve answers requests on ln until ctx is done, then shuts down: new
// connections are refused, requests still waiting for room in the batch
// are answered 503, the requests decoding are given Options.Grace to finish
// (and is cancelled after it), and Serve returns nil once every handler
// has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	decodeCtx, cancelDecode := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDecode()
	hs := &http.Server{Handler: s.Handler(), BaseContext: func(net.Listener) context.Context { return decodeCtx },
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if s.closed.CompareAndSwap(false, true) {
		close(s.closing)
	}
	s.core.Drain()
	grace := time.AfterFunc(s.opt.Grace, cancelDecode)
	defer grace.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), s.opt.Grace+30*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ServeAddr listens on addr (host:port; port 0 picks a free one), calls
// ready with the base URL once it accepts connections, and serves until
// ctx is done (Serve).
func (s *Server) ServeAddr(ctx context.Context, addr string, ready func(url string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready("http://" + ln.Addr().String())
	}
	return s.Serve(ctx, ln)
}

// Background is a server running in the background (the Export
// screen's).
type Background struct {
	URL    string
	srv    *Server
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start opens a server for the config and serves it on addr in the
// background until Stop.
func Start(ctx context.Context, b *profiles.Bench, c *config.Config, addr string, opt Options) (*Background, error) {
	srv, err := Open(ctx, b, c, opt)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	bg := &Background{URL: "http://" + ln.Addr().String(), srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(bg.done)
		defer srv.Close()
		bg.err = srv.Serve(sctx, ln)
	}()
	return bg, nil
}

// Server is the server behind the listener.
func (bg *Background) Server() *Server { return bg.srv }

// Stop shuts the server down (Serve) and waits until it has.
func (bg *Background) Stop() error {
	bg.cancel()
	<-bg.done
	return bg.err
}

// Done is closed once the server has stopped.
func (bg *Background) Done() <-chan struct{} { return bg.done }
