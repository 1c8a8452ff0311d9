package app

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
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
	waitFor(t, "the request counted", func() bool { return strings.Contains(e.ServeStatus.Text, ": 1 request, 16 tokens") })
	test.Tap(e.Serve)
	waitFor(t, "stopped", func() bool { return wb.Session.idle() && strings.Contains(e.ServeStatus.Text, "Stopped") })
	if !strings.Contains(e.ServeStatus.Text, "Stopped after 1 request (1 completed, 16 tokens") || e.Serve.Text != "Serve" || e.Serve.Disabled() {
		t.Errorf("after stopping: %q, button %q", e.ServeStatus.Text, e.Serve.Text)
	}
	if _, err := http.Get(m[1] + "/health"); err == nil {
		t.Error("still answering after Stop")
	}
}

// TestExportChecksInLlamaCpp: the Export screen's Check runs the exported
// llama.cpp settings in llama.cpp (the stand-ins of testdata/llama-cpp)
// and shows the measured speedup beside Arborist's prediction.
func TestExportChecksInLlamaCpp(t *testing.T) {
	wb, dir := standinExport(t)
	e := wb.Export
	test.Tap(e.Check)
	waitFor(t, "the check", func() bool {
		return wb.Session.idle() && (strings.Contains(e.CheckStatus.Text, "speedup:") || strings.Contains(e.CheckStatus.Text, "Not checked"))
	})
	for _, want := range []string{"llama.cpp speedup: 1.02x (range 1.02-1.02) in llama.cpp 6000 (stand-in)", "Arborist predicts 1.97x for its own engine", "Stored as runs 1 and 2"} {
		if !strings.Contains(e.CheckStatus.Text, want) {
			t.Errorf("status lacks %q: %s", want, e.CheckStatus.Text)
		}
	}
	if e.Check.Disabled() || wb.Session.App.Preferences().String(prefLlamaCpp) != dir {
		t.Error("the button stays disabled or the folder is not remembered")
	}
}

// TestExportTunesForLlamaCpp: the Export screen's Tune measures llama.cpp's
// own draft lengths (the stand-ins, peaking at 3), shows the fastest
// beside the exported setting and Arborist's prediction, and puts it into
// the YAML and the llama.cpp line shown.
func TestExportTunesForLlamaCpp(t *testing.T) {
	t.Setenv("ARBORIST_STANDIN_PEAK", "3")
	wb, _ := standinExport(t)
	e := wb.Export
	test.Tap(e.Tune)
	waitFor(t, "the tune", func() bool {
		return wb.Session.idle() && (strings.Contains(e.CheckStatus.Text, "llama.cpp best:") || strings.Contains(e.CheckStatus.Text, "Not tuned"))
	})
	for _, want := range []string{"llama.cpp best: --draft-max 3 --draft-p-min 0, 1.09x", "the plain export's --draft-max 6: 1.02x", "Arborist predicts 1.97x for its own engine", "Save to keep it"} {
		if !strings.Contains(e.CheckStatus.Text, want) {
			t.Errorf("status lacks %q: %s", want, e.CheckStatus.Text)
		}
	}
	if !strings.Contains(e.YAML.Text, "draft_max: 3") || !strings.Contains(e.Equivalents.Text, "--draft-max 3") || e.Tune.Disabled() || e.Check.Disabled() {
		t.Errorf("YAML:\n%s\nsettings:\n%s", e.YAML.Text, e.Equivalents.Text)
	}
}

// standinExport is a workbench whose Export screen shows a chain plan with
// a draft model and names the stand-in llama.cpp of testdata/llama-cpp,
// whose folder it returns.
func standinExport(t *testing.T) (*Workbench, string) {
	t.Helper()
	wb := newBench(t)
	wb.Export.YAML.SetText(`models:
  target: {path: /m/target.gguf, device: cpu, threads: 2}
  draft: {kind: model, path: /m/draft.gguf, device: cpu}
speculation: {strategy: chain, gamma: 6}
sampling: {temperature: 0, top_p: 1, seed: 1}
predicted: {speedup: 1.97, aal: 3}
`)
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "llama-cpp"))
	if err != nil {
		t.Fatal(err)
	}
	wb.Export.LlamaDir.SetText(dir)
	return wb, dir
}

// TestExportNamesTheLlamaBuild: the Export screen names the llama.cpp
// build found in the folder given by its own --version, and before a
// folder is known, the release the flags are written for, never as the
// user's build.
func TestExportNamesTheLlamaBuild(t *testing.T) {
	wb := newBench(t)
	e := wb.Export
	if h := e.CheckStatus.Text; !strings.Contains(h, "flags are written for release "+profiles.LlamaCppFlagsRelease+" or later") || strings.Contains(h, "is version") {
		t.Errorf("no folder: %s", h)
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "llama-cpp"))
	if err != nil {
		t.Fatal(err)
	}
	fyne.DoAndWait(func() { e.LlamaDir.SetText(dir) })
	fyne.DoAndWait(func() { e.LlamaDir.OnSubmitted(dir) })
	waitFor(t, "the build's version", func() bool {
		return wb.Session.idle() && strings.Contains(e.CheckStatus.Text, "is version 6000 (stand-in)")
	})
	if h := e.CheckStatus.Text; !strings.Contains(h, "The llama.cpp in "+dir+" is version 6000 (stand-in) (the flags are written for release "+profiles.LlamaCppFlagsRelease+" or later)") {
		t.Errorf("with the stand-in build: %s", h)
	}
	// a folder without llama.cpp: back to the release the flags are for
	fyne.DoAndWait(func() { e.LlamaDir.SetText(t.TempDir()); e.LlamaDir.OnSubmitted("") })
	waitFor(t, "the empty folder", wb.Session.idle)
	if h := e.CheckStatus.Text; strings.Contains(h, "is version") {
		t.Errorf("an empty folder keeps the build: %s", h)
	}
}
