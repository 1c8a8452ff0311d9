// Package pairs opens what Arborist tunes: a target model and its draft
// source (a draft model, n-gram lookup, the target's own first layers, or
// a hidden-state drafter, stored or from a file) on the backends named,
// with the threads split between them when the drafter runs beside the
// target (Open). It also fingerprints model files, so stored curves and
// exported configs are tied to the files they were measured on.
package pairs
