package app

import (
	"os"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
)

// TestDemoPairButton drives the workbench like a user: tap "Build demo pair",
// wait for the status, and check both synthetic files exist and are listed.
func TestDemoPairButton(t *testing.T) {
	a := test.NewTempApp(t)
	w := a.NewWindow("Arborist")
	dir := t.TempDir()
	ws := NewWorkbench(w, dir)
	w.SetContent(ws.Content())
	test.Tap(ws.DemoBtn)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(ws.Status.Text, "ready") {
		if time.Now().After(deadline) || strings.Contains(ws.Status.Text, "failed") {
			t.Fatalf("status: %q", ws.Status.Text)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, f := range []string{"demo-target-synthetic.gguf", "demo-drafter-synthetic.gguf"} {
		if _, err := os.Stat(dir + "/" + f); err != nil {
			t.Error(err)
		}
		if !strings.Contains(ws.Models.Text, f) {
			t.Errorf("models list lacks %s: %q", f, ws.Models.Text)
		}
	}
	if ws.DemoBtn.Disabled() {
		t.Error("button still disabled after the build")
	}
}
