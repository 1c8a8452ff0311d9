package profiles

import (
	"testing"
	"time"

	"arborist/profiles/costmodel"
)

// TestErrorSplit: a prediction's parts against its runs', each read as how
// much it made the prediction high (+) or low (-), and nothing where a
// side ran no steps.
func TestErrorSplit(t *testing.T) {
	ms := time.Millisecond
	pr := costmodel.Prediction{Speedup: 2, AAL: 4, Step: 8 * ms}
	e := errorSplit(pr, Totals{Tokens: 400, Steps: 100, Decode: time.Second}, Totals{Tokens: 200, Steps: 200, Decode: time.Second})
	want := ErrorSplit{AALPredicted: 4, AALMeasured: 4, StepPredicted: 8 * ms, StepMeasured: 10 * ms, BasePredicted: 4 * ms, BaseMeasured: 5 * ms}
	if e != want {
		t.Fatalf("split %+v, want %+v", e, want)
	}
	// a step 25% longer than priced made the prediction high; plain
	// decoding's token priced 20% short made it low
	if got, w := e.String(), "tokens a step 4.00 against 4.00 (+0%), a step 8ms against 10ms (+25%), plain decoding's token 4ms against 5ms (-20%)"; got != w {
		t.Errorf("split reads %q, want %q", got, w)
	}
	if e := errorSplit(pr, Totals{}, Totals{Tokens: 1, Steps: 1, Decode: ms}); e != (ErrorSplit{}) || e.String() != "" {
		t.Errorf("no steps: %+v %q", e, e.String())
	}
}
