package app

import (
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"arborist/engine/model/modeltest"
	"arborist/profiles"
)

// TestDeviceChoice: the Models screen lists the registry's backends, says
// what the chosen one runs or why it cannot run here, refuses to load a
// pair on an unavailable one, and the pair runs on the chosen backend.
func TestDeviceChoice(t *testing.T) {
	wb := newBench(t)
	m := wb.Models
	// idle too: SetBackends sets backends first and redraws the note after
	waitFor(t, "the backends checked", func() bool { return wb.Session.idle() && m.backends != nil })
	if len(m.Device.Options) == 0 || m.Device.Selected != "cpu" {
		t.Fatalf("devices %q, chosen %q", m.Device.Options, m.Device.Selected)
	}
	if m.DeviceNote.Text == "" || strings.Contains(m.DeviceNote.Text, "Unavailable") {
		t.Errorf("cpu note %q", m.DeviceNote.Text)
	}
	// a backend the registry lists but this machine cannot run
	m.SetBackends(append(m.backends, profiles.BackendStatus{Name: "gpu-test", Err: "no device found"}))
	m.Device.SetSelected("gpu-test")
	if !strings.Contains(m.DeviceNote.Text, "Unavailable here: no device found") {
		t.Errorf("note %q", m.DeviceNote.Text)
	}
	m.Target.SetText(filepath.Join(t.TempDir(), "t.gguf"))
	test.Tap(m.Load)
	if !strings.Contains(m.Status.Text, "gpu-test backend cannot run here: no device found") || wb.Session.Spec.Target != "" {
		t.Errorf("status %q, target %q", m.Status.Text, wb.Session.Spec.Target)
	}
	// the drafter on an unavailable device is refused the same way
	m.Device.SetSelected("cpu")
	m.DraftDevice.SetSelected("gpu-test")
	test.Tap(m.Load)
	if !strings.Contains(m.Status.Text, "gpu-test backend cannot run here") {
		t.Errorf("draft device: status %q", m.Status.Text)
	}
	m.DraftDevice.SetSelected(sameDevice)

	dir := modeltest.ModelsDir(t)
	m.Device.SetSelected("cpu")
	m.Target.SetText(filepath.Join(dir, "stories260K.gguf"))
	m.Draft.SetText(modeltest.NoisyDraft(t))
	test.Tap(m.Load)
	waitFor(t, "loading", func() bool {
		return m.s.idle() && (strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded"))
	})
	if wb.Session.PairSpec().Backend != "cpu" || wb.Session.App.Preferences().String(prefBackend) != "cpu" || wb.Session.PairSpec().DraftBackend != "" {
		t.Errorf("pair backend %q, draft backend %q", wb.Session.PairSpec().Backend, wb.Session.PairSpec().DraftBackend)
	}
}
