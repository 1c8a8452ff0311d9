package app

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"arborist/profiles"
)

// TestSamplingForm: the sampling controls are one row per sampling field,
// with its label and its bounds, starting at the defaults; a value typed
// in is read back, one shown is what the fields write, and a value out of
// a field's bounds is refused (the entry's validator and params alike).
func TestSamplingForm(t *testing.T) {
	test.NewTempApp(t)
	edits := 0
	s := newSamplingForm(func() { edits++ })
	w := test.NewWindow(s.object())
	defer w.Close()
	fields := profiles.SamplingFields()
	if len(s.form.Items) != len(fields) {
		t.Fatalf("%d rows for %d fields", len(s.form.Items), len(fields))
	}
	for i, f := range fields {
		if it := s.form.Items[i]; it.Text != f.Label || !strings.Contains(it.HintText, f.Bounds()) {
			t.Errorf("row %d: %q, hint %q; want field %s with %s", i, it.Text, it.HintText, f.Name, f.Bounds())
		}
	}
	if p, err := s.params(); err != nil || p != profiles.DefaultSampling() {
		t.Fatalf("untouched: %+v, %v; want the defaults", p, err)
	}

	typeIn := func(name, v string) {
		e := s.entries[name]
		e.SetText("")
		test.Type(e, v)
	}
	typeIn("temperature", "0.8")
	typeIn("top_k", "40")
	typeIn("top_p", "0.95")
	typeIn("seed", "7")
	if edits == 0 {
		t.Error("typing called no change")
	}
	want := profiles.SampleParams{Temp: 0.8, TopK: 40, TopP: 0.95, Seed: 7}
	if p, err := s.params(); err != nil || p != want {
		t.Fatalf("typed: %+v, %v; want %+v", p, err, want)
	}

	shown := profiles.SampleParams{Temp: 1.5, TopP: 0.9, MinP: 0.05, Seed: 3}
	s.setParams(shown)
	if got := s.entries["temperature"].Text; got != "1.5" {
		t.Errorf("temperature shows %q", got)
	}
	if p, err := s.params(); err != nil || p != shown {
		t.Fatalf("shown %+v, read back %+v, %v", shown, p, err)
	}

	typeIn("temperature", "2.5") // above the one bound, 2
	if err := s.entries["temperature"].Validate(); err == nil {
		t.Error("the entry takes temperature 2.5")
	}
	if _, err := s.params(); err == nil || !strings.Contains(err.Error(), "[0, 2]") {
		t.Errorf("temperature 2.5: %v", err)
	}
	typeIn("temperature", "2")
	if p, err := s.params(); err != nil || p.Temp != 2 {
		t.Errorf("temperature 2: %+v, %v", p, err)
	}
	if checkTemp("2") != nil || checkTemp("2.5") == nil || checkTemp("-1") == nil {
		t.Error("the run screen's temperature is bounded otherwise than the field")
	}
	s.setEnabled(false)
	for name, e := range s.entries {
		if !e.Disabled() {
			t.Errorf("%s still enabled", name)
		}
	}
}
