// Package latency holds the measured latency point that the measurement
// (profiles/measure) produces, the store (profiles/store) keeps and the
// speedup model (profiles/costmodel) reads. A leaf: it imports nothing of
// Arborist's, so the model and the store share the type without either
// importing the other.
package latency

import "time"

// Point is one measured latency: the median of Reps timed passes over W
// tokens, with the spread (median absolute deviation) of those passes.
type Point struct {
	W      int
	Median time.Duration
	Spread time.Duration
	Reps   int
}
