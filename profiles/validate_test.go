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
	if e := errorSplit(pr, Totals{}, Totals{Tokens: 1, Steps: 1, Decode: ms}); e != (ErrorSplit{}) {
		t.Errorf("no steps: %+v", e)
	}
}
