package profiles

import (
	"context"
	"strings"
	"testing"

	"arborist/profiles/costmodel"
)

// TestProvenanceAssumed: inputs with no stored profile and an assumed
// acceptance are flagged and named as assumed; a calibration is named with
// its id.
func TestProvenanceAssumed(t *testing.T) {
	ctx := context.Background()
	b := openBench(t)
	text, assumed := b.provenance(ctx, &Inputs{Acc: costmodel.Uniform(0.8, 0.4, 8, 4), Assumed: true}, 0)
	if !assumed || strings.Count(text, "ASSUMED, NOT MEASURED") != 2 {
		t.Errorf("assumed inputs: %v %s", assumed, text)
	}
	text, assumed = b.provenance(ctx, &Inputs{Profiled: true, Acc: costmodel.Uniform(0.8, 0.4, 8, 4), CalID: 3}, 0)
	if assumed || !strings.Contains(text, "acceptance measured on calibration 3") || !strings.Contains(text, "stored latency profile") {
		t.Errorf("measured inputs: %v %s", assumed, text)
	}
}
