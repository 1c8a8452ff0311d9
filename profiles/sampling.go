package profiles

import "arborist/engine/sample"

// SamplingField is one sampling parameter as the faces offer it: its
// config.yaml and request name, its flag, its control's label, its
// bounds, its default and its help. The CLI's flags, the GUI's controls
// and the server read and check values through these fields, so a bound
// is written once.
type SamplingField = sample.Field

// SamplingFields are the sampling parameters in the order the faces show
// them: temperature, top-k, top-p, min-p, seed. A face builds one flag or
// control per field and reads a value into SampleParams with
// SampleParams.Set (which checks the field's bounds) and writes one with
// SampleParams.Get.
func SamplingFields() []SamplingField { return sample.Fields() }

// TemperatureField is the temperature's field name (SampleParams.Set and
// Get), for a face that shows the temperature alone.
const TemperatureField = sample.Temperature

// DefaultSampling is every field at its default: greedy decoding, every
// token kept, seed 1.
func DefaultSampling() SampleParams { return sample.Defaults() }
