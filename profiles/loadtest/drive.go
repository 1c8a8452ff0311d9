// Package loadtest drives an OpenAI-compatible server with concurrent
// streaming clients and measures what each request saw: time to first
// token, time per output token and the round's aggregate tokens/s. It
// also starts the servers a load test compares (Arborist's serve and
// llama.cpp's llama-server) as children that end with the test, and
// holds a load test's options, plan and results (options.go), the values
// the core's workflow takes and returns and the faces name. It knows
// nothing of the database; the core stores what it measures.
package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is what one streamed request measured.
type Request struct {
	// Tokens are the tokens the server generated: the usage it reported
	// where it did (a chunk may carry several tokens, as a speculating
	// server's does), otherwise its chunks that carried text.
	Tokens int
	// TTFT is the time from sending the request to its first text.
	TTFT time.Duration
	// Total is the time from sending it to the end of its stream.
	Total time.Duration
}

// TPOT is the time per output token after the first (0 with fewer than
// two tokens).
func (r Request) TPOT() time.Duration {
	if r.Tokens < 2 {
		return 0
	}
	return (r.Total - r.TTFT) / time.Duration(r.Tokens-1)
}

// Round is one round of one server at one concurrency: every client's
// requests and the time from the first sent to the last finished.
type Round struct {
	Requests []Request
	Wall     time.Duration
}

// Tokens are the tokens of all the round's requests.
func (r Round) Tokens() int {
	n := 0
	for _, q := range r.Requests {
		n += q.Tokens
	}
	return n
}

// TPS is the round's aggregate tokens/s: all its tokens over its wall time.
func (r Round) TPS() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Tokens()) / r.Wall.Seconds()
}

// Drive is a round's load: Concurrency clients, each sending PerClient
// streamed requests one after another, prompts taken in turn.
type Drive struct {
	URL         string // the server's base (http://host:port), without /v1
	Chat        bool   // /v1/chat/completions (a user message) instead of /v1/completions
	Model       string // the model field of each request ("" leaves it out)
	Prompts     []string
	Concurrency int
	PerClient   int
	MaxTokens   int
	Client      *http.Client // nil: a client without a time limit (ctx bounds it)
	// Whole sends each request unstreamed ("stream": false): its
	// Request has the Total and the usage's Tokens, no TTFT. A server's
	// own cost of streaming shows against it.
	Whole bool
}

// Run drives one round. Any request that fails (a refusal, a broken
// stream, no token at all) fails the round, naming the request: a round
// that lost requests measures a different load.
func (d Drive) Run(ctx context.Context) (Round, error) {
	if d.Concurrency < 1 || d.PerClient < 1 || d.MaxTokens < 1 || len(d.Prompts) == 0 {
		return Round{}, fmt.Errorf("loadtest: a round needs clients, requests, tokens and prompts (%d, %d, %d, %d)", d.Concurrency, d.PerClient, d.MaxTokens, len(d.Prompts))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reqs := make([]Request, d.Concurrency*d.PerClient)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	for c := 0; c < d.Concurrency; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for j := 0; j < d.PerClient; j++ {
				i := c*d.PerClient + j
				r, err := d.one(ctx, d.Prompts[i%len(d.Prompts)])
				if err != nil {
					once.Do(func() { first = fmt.Errorf("client %d, request %d: %w", c+1, j+1, err); cancel() })
					return
				}
				reqs[i] = r
			}
		}(c)
	}
	wg.Wait()
	if first != nil {
		return Round{}, first
	}
	return Round{Requests: reqs, Wall: time.Since(start)}, nil
}

// maxEvent bounds one server-sent event line: a chunk is a few hundred
// bytes.
const maxEvent = 1 << 20

// one sends one streamed request and reads its events.
func (d Drive) one(ctx context.Context, prompt string) (Request, error) {
	body := map[string]any{"max_tokens": d.MaxTokens, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	if d.Whole {
		body = map[string]any{"max_tokens": d.MaxTokens, "stream": false}
	}
	path := "/v1/completions"
	if d.Chat {
		path = "/v1/chat/completions"
		body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		body["prompt"] = prompt
	}
	if d.Model != "" {
		body["model"] = d.Model
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(d.URL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return Request{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	// a connection of its own: a server that closes an idle kept-alive
	// connection as the next request is sent ("server closed idle
	// connection", EOF) would fail a request it never saw; every server
	// pays the same local connect
	req.Close = true
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Request{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return Request{}, fmt.Errorf("%s answered %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if d.Whole {
		return whole(resp.Body, path, sent)
	}
	var r Request
	chunks, usage, done := 0, -1, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEvent)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var ev struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return Request{}, fmt.Errorf("%s streamed an event that is not JSON: %q", path, cut(data, 200))
		}
		if ev.Error != nil {
			return Request{}, fmt.Errorf("%s streamed an error: %s", path, cut(data, 300))
		}
		for _, c := range ev.Choices {
			if c.Text != "" || c.Delta.Content != "" {
				if chunks == 0 {
					r.TTFT = time.Since(sent)
				}
				chunks++
			}
		}
		if ev.Usage != nil {
			usage = ev.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return Request{}, fmt.Errorf("%s: the stream broke: %w", path, err)
	}
	r.Total = time.Since(sent)
	switch {
	case !done:
		return Request{}, fmt.Errorf("%s: the stream ended without [DONE] after %d chunks", path, chunks)
	case chunks == 0:
		return Request{}, fmt.Errorf("%s: the stream carried no text", path)
	}
	r.Tokens = chunks
	if usage >= chunks { // a usage below the chunks that carried text is not the count
		r.Tokens = usage
	}
	return r, nil
}

// whole reads an unstreamed answer: its Total and its usage's tokens.
func whole(body io.Reader, path string, sent time.Time) (Request, error) {
	var ans struct {
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(body, maxEvent)).Decode(&ans); err != nil {
		return Request{}, fmt.Errorf("%s answered what is not JSON: %w", path, err)
	}
	if ans.Usage == nil || ans.Usage.CompletionTokens < 1 {
		return Request{}, fmt.Errorf("%s answered no usage of one token or more", path)
	}
	return Request{Tokens: ans.Usage.CompletionTokens, Total: time.Since(sent)}, nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
