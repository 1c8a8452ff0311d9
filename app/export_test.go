package app

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
)

// TestExportServes: the Export screen serves the config it shows on a
// port, shows the address and the requests served, and stops.
func TestExportServes(t *testing.T) {
	wb := newBench(t)
	e := wb.Export
	e.YAML.SetText(fmt.Sprintf(`models:
  target: {path: %q, device: cpu, threads: 2}
  draft: {kind: model, path: %q, device: cpu}
speculation: {strategy: chain, gamma: 3}
sampling: {temperature: 0, top_p: 1, seed: 1}
`, modeltest.Stories260K(t), modeltest.NoisyDraft(t)))
	e.Port.SetText("99999")
	test.Tap(e.Serve)
	if !strings.Contains(e.ServeStatus.Text, "want a number") || e.stopServe != nil {
		t.Fatalf("a bad port: %s", e.ServeStatus.Text)
	}
	e.Port.SetText("0")
	test.Tap(e.Serve)
	waitFor(t, "serving", func() bool {
		return strings.Contains(e.ServeStatus.Text, "Serving ") || strings.Contains(e.ServeStatus.Text, "Not serving:")
	})
	m := regexp.MustCompile(`at (http://\S+)/v1 with chain gamma=3`).FindStringSubmatch(e.ServeStatus.Text)
	if m == nil || e.Serve.Text != "Stop serving" {
		t.Fatalf("status %q, button %q", e.ServeStatus.Text, e.Serve.Text)
	}
	resp, err := http.Post(m[1]+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 16}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("completion: %d", resp.StatusCode)
	}
	waitFor(t, "the request counted", func() bool { return strings.Contains(e.ServeStatus.Text, ": 1 requests, 16 tokens") })
	test.Tap(e.Serve)
	waitFor(t, "stopped", func() bool { return wb.Session.idle() && strings.Contains(e.ServeStatus.Text, "Stopped") })
	if !strings.Contains(e.ServeStatus.Text, "Stopped after 1 requests (1 completed, 16 tokens") || e.Serve.Text != "Serve" || e.Serve.Disabled() {
		t.Errorf("after stopping: %q, button %q", e.ServeStatus.Text, e.Serve.Text)
	}
	if _, err := http.Get(m[1] + "/health"); err == nil {
		t.Error("still answering after Stop")
	}
}
