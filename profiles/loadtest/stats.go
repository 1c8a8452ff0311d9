package loadtest

import (
	"slices"
	"time"
)

// Summary is one server at one concurrency over its rounds: aggregate
// tokens/s as the rounds' median with their spread (10th to 90th
// percentile), and time to first token and time per output token as the
// median and 90th percentile over every request of every round.
type Summary struct {
	TPS, TPSP10, TPSP90 float64
	TTFT, TTFTP90       time.Duration
	TPOT, TPOTP90       time.Duration
	Rounds, Requests    int
	Tokens              int
	Wall                time.Duration // the rounds' wall time together
}

// Summarize summarises rounds of one server at one concurrency.
func Summarize(rounds []Round) Summary {
	var s Summary
	var tps, ttft, tpot []float64
	for _, r := range rounds {
		s.Rounds++
		s.Wall += r.Wall
		s.Tokens += r.Tokens()
		tps = append(tps, r.TPS())
		for _, q := range r.Requests {
			s.Requests++
			ttft = append(ttft, float64(q.TTFT))
			if q.Tokens > 1 {
				tpot = append(tpot, float64(q.TPOT()))
			}
		}
	}
	s.TPS, s.TPSP10, s.TPSP90 = Quantile(tps, 0.5), Quantile(tps, 0.1), Quantile(tps, 0.9)
	s.TTFT, s.TTFTP90 = time.Duration(Quantile(ttft, 0.5)), time.Duration(Quantile(ttft, 0.9))
	s.TPOT, s.TPOTP90 = time.Duration(Quantile(tpot, 0.5)), time.Duration(Quantile(tpot, 0.9))
	return s
}

// Quantile is the q-quantile of xs (0 <= q <= 1), interpolated linearly
// between the sorted values; 0 for none.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}
