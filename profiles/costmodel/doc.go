// Package costmodel is Arborist's latency-aware speedup model and plan
// search (docs/SPEEDUP-MODEL.md): a plan's speedup over plain decoding is
// its expected tokens a step (from the pair's measured acceptance) times
// plain decoding's time a token, over the time of a step (drafting,
// verifying the tree's W tokens in one pass, bookkeeping), each read from
// the latency curves measured on this machine.
//
// Acceptance is what a calibration records of a pair; Costs are the
// curves; Predict prices one plan and Search every candidate plan the
// registered strategies offer. Plans whose tokens depend on more than the
// acceptance tables (EGT pruning, threshold depth policies, duo's
// sequences) are replayed on the calibration's recorded probe trees
// (replay.go, depthpolicy.go). What a strategy needs of the model beyond
// its tree (its own pricing, the search knobs its plans read) is in its
// own file, price_NAME.go, found by the strategy's name (pricing.go). The
// model measures nothing itself: package measure fills Acceptance and
// Costs.
package costmodel
