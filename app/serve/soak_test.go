package serve

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/engine/spec"
	"arborist/profiles"
)

// TestServerAnswersThroughHostileClients: while clients that send half a
// body and stop, clients whose bodies are far over the bound and
// streaming clients that never read their answer all hold the server,
// small requests are still answered, one after another, with text; the
// oversized ones get 413.
func TestServerAnswersThroughHostileClients(t *testing.T) {
	c := serveConfig(t, modeltest.Stories260K(t), modeltest.NoisyDraft(t), spec.Plan{Strategy: spec.ChainName, Gamma: 3}, 0)
	s := openServer(t, c, Options{ServeOptions: profiles.ServeOptions{MaxSeqs: 4, MaxQueue: 8}, MaxBody: 4096})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "http://")

	// half a body, then silence: each holds a connection and a handler
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 8 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"prompt\": \"%s", strings.Repeat("a", 100))
	}
	// streaming answers nobody reads
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		body := `{"prompt": "Once upon a time", "max_tokens": 64, "stream": true}`
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	// bodies far over the bound, all at once
	var wg sync.WaitGroup
	codes := make([]int, 8)
	big := `{"prompt": "` + strings.Repeat("b", 1<<20) + `"}`
	for i := range codes {
		wg.Go(func() {
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(big))
			if err != nil {
				codes[i] = -1 // the server may close a connection whose body it refused
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	for i := range 3 {
		code, v := post(t, ts.URL+"/v1/completions", `{"prompt": "The cat sat", "max_tokens": 8}`)
		if code != http.StatusOK || choice(v)["text"] == "" {
			t.Fatalf("small request %d among hostile clients: %d %v", i, code, v)
		}
	}
	wg.Wait()
	refused := 0
	for i, code := range codes {
		if code == http.StatusRequestEntityTooLarge {
			refused++
		} else if code != -1 {
			t.Errorf("oversized body %d: %d, want 413", i, code)
		}
	}
	if refused == 0 {
		t.Error("no oversized body was answered 413")
	}
	// the streaming clients that never read still got their answers' start
	for _, conn := range conns[8:] {
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Errorf("an unread stream: %q (%v)", line, err)
		}
	}
}
