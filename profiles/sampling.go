package profiles

import "arborist/engine/sample"

// SamplingField is one sampling parameter as the faces offer it: its
// config.yaml and request name, its flag, its control's label, its
// bounds, its default and its help. The CLI's flags, the GUI's controls
// and the server read and check values through these fields, so a bound
// is written once.
type SamplingField = sample.Field

// TemperatureField is the temperature's field name (SampleParams.Set and
// Get), for a face that shows the temperature alone.
const TemperatureField = sample.Temperature
