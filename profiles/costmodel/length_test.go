package costmodel

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLengthNote: a run more than LengthFactor times longer or shorter than
// its calibration's generations is told the length the prediction was made
// for; within the factor, or with the length not known, nothing is said;
// the length is kept with the stored calibration.
func TestLengthNote(t *testing.T) {
	a := &Acceptance{MaxTokens: 64}
	for _, c := range []struct {
		tokens int
		says   bool
	}{{64, false}, {128, false}, {32, false}, {129, true}, {1024, true}, {31, true}, {0, false}} {
		note := a.LengthNote(c.tokens)
		if says := strings.Contains(note, "generations of 64 tokens"); says != c.says {
			t.Errorf("%d tokens: %q", c.tokens, note)
		}
	}
	if note := (&Acceptance{}).LengthNote(1024); note != "" {
		t.Errorf("a calibration of unknown length: %q", note)
	}
	if note := (*Acceptance)(nil).LengthNote(1024); note != "" {
		t.Errorf("no calibration: %q", note)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back Acceptance
	if err := json.Unmarshal(raw, &back); err != nil || back.MaxTokens != 64 {
		t.Errorf("stored and read back: %d (%v)", back.MaxTokens, err)
	}
}
