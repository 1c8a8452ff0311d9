// Package loadtesttest is a stand-in OpenAI server for the tests of load
// testing: it streams a known number of tokens (or answers them whole,
// unstreamed), counts the requests it
// holds at once, and can hold the first requests until a given number
// are in flight, so a test sees its clients run concurrently without
// reading a clock. Main runs it as a stand-in program (Arborist's serve,
// llama.cpp's llama-server) in a test binary's child process.
package loadtesttest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Fake is the stand-in server.
type Fake struct {
	Tokens   int  // tokens each response streams (default 5)
	PerChunk int  // tokens a chunk carries (default 1), as a speculating server sends several
	Usage    bool // report usage in the last chunk, as stream_options asks
	// Gate holds each request until Gate are in flight, once; after the
	// gate opened requests pass (0: no gate). GateLimit bounds the wait
	// (a bound on hanging, not a timing).
	Gate      int
	GateLimit time.Duration
	// Status answers every completion with this status (0: 200 and a stream).
	Status int
	// NoDone ends the stream without [DONE].
	NoDone bool

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	requests    int
	gateOpen    chan struct{}
	once        sync.Once
}

// MaxInFlight is the most requests the fake held at once.
func (f *Fake) MaxInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxInFlight
}

// Requests counts the completions asked for.
func (f *Fake) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// Handler answers /health, /v1/completions and /v1/chat/completions.
func (f *Fake) Handler() http.Handler {
	f.once.Do(func() { f.gateOpen = make(chan struct{}) })
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"status": "ok"}`) })
	mux.HandleFunc("/v1/completions", f.complete)
	mux.HandleFunc("/v1/chat/completions", f.complete)
	return mux
}

func (f *Fake) complete(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prompt    string `json:"prompt"`
		Messages  []any  `json:"messages"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || (body.Prompt == "" && len(body.Messages) == 0) {
		http.Error(w, `{"error": {"message": "want a request with a prompt"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests++
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	if f.Gate > 0 && f.inFlight >= f.Gate {
		select {
		case <-f.gateOpen:
		default:
			close(f.gateOpen)
		}
	}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	if f.Gate > 0 {
		limit := f.GateLimit
		if limit == 0 {
			limit = 10 * time.Second
		}
		select {
		case <-f.gateOpen:
		case <-time.After(limit):
		case <-r.Context().Done():
			return
		}
	}
	if f.Status != 0 {
		http.Error(w, `{"error": {"message": "refused by the stand-in"}}`, f.Status)
		return
	}
	tokens, per := f.Tokens, max(1, f.PerChunk)
	if tokens == 0 {
		tokens = 5
	}
	tokens = min(tokens, max(1, body.MaxTokens))
	chat := len(body.Messages) > 0
	if !body.Stream { // the whole answer at once, with its usage
		text := strings.Repeat(" tok", tokens)
		var choice any = map[string]any{"index": 0, "text": text}
		if chat {
			choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{choice}, "usage": map[string]any{"completion_tokens": tokens}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for sent := 0; sent < tokens; sent += per {
		text := strings.Repeat(" tok", min(per, tokens-sent))
		var ev any = map[string]any{"choices": []any{map[string]any{"index": 0, "text": text}}}
		if chat {
			ev = map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}}}}
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	if f.Usage {
		fmt.Fprintf(w, "data: {\"choices\": [], \"usage\": {\"completion_tokens\": %d}}\n\n", tokens)
	}
	if !f.NoDone {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// Main runs the fake as a stand-in program: it listens on 127.0.0.1 at
// the port its --port argument names, appends its role ($ARBORIST_STANDIN),
// pid and arguments as one line to the file $ARBORIST_STANDIN_LOG (where
// set), and serves until killed; with --help alone it lists
// llama-server's options and exits.
// A test binary's TestMain calls it when $ARBORIST_STANDIN is set.
func Main(args []string) {
	if len(args) == 1 && args[0] == "--help" { // llama-server's options, as its --help lists them
		for _, o := range []string{"-m", "-c", "-t", "-md", "--draft-max", "--draft-min", "--draft-p-min", "-td", "-cd", "-np", "-ngl", "-ngld",
			"--temp", "--top-k", "--top-p", "--min-p", "--seed", "--host", "--port"} {
			fmt.Printf("%-8s N    an option\n", o)
		}
		return
	}
	port := ""
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
	}
	if log := os.Getenv("ARBORIST_STANDIN_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %d %s\n", os.Getenv("ARBORIST_STANDIN"), os.Getpid(), strings.Join(args, " "))
			f.Close()
		}
	}
	if os.Getenv("ARBORIST_STANDIN") == "fail" {
		fmt.Fprintln(os.Stderr, "stand-in: cannot load the model")
		os.Exit(3)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	f := &Fake{Tokens: 6, PerChunk: 2, Usage: true}
	http.Serve(l, f.Handler())
}
