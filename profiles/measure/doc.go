// Package measure times what the speedup model reasons with, on this
// machine: the target's verification latency curve T_verify(W) (one pass
// over W tokens), the drafter's curves and the per-step bookkeeping
// (ProfileModel stores each curve, keyed by hardware, model, backend and
// threads, and reuses it), the pair's acceptance per depth and sibling
// rank over a prompt suite (Calibrate), and the quick re-check of stored
// curves before a search (RecheckCosts), with the calibration's window of
// re-check moments (WindowSampler).
package measure
