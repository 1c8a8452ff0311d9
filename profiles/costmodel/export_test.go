package costmodel

// The replays as the engine-matching tests (replay_engine_test.go, in
// package costmodel_test so that they can calibrate a real pair) read
// them: the first recorded step's replay.

// ReplayedAccepted is the tokens p's EGT keeps, past the target's own, on
// the first of samples' probe trees.
func ReplayedAccepted(samples []DepthSample, p Plan) float64 {
	return replayGrowth(probesOf(samples), p.EGT, p.Branch).aal(p.WMax) - 1
}

// ReplayedUntil is the levels p's EGT drafts and the tokens it keeps on
// the first of samples' probe trees, stopping when the best path
// probability of a level falls below least; levels is -1 where the replay
// cannot follow the probe.
func ReplayedUntil(samples []DepthSample, p Plan, least float64) (levels, accepted int) {
	g, all := replayGrowthUntil(probesOf(samples), p.EGT, p.Branch, least)
	if all == nil {
		return -1, 0
	}
	return all[0], g.accepted(0, p.WMax)
}
