package profiles

import (
	"context"
	"fmt"
	"strings"
	"time"

	"arborist/profiles/costmodel"
	"arborist/profiles/loadtest"
	"arborist/profiles/measure"
)

// pace follows how fast the machine runs through a load test: plain
// decoding's token on the target (measure.SpeedProbe), read right after
// the re-check the predictions are priced on, then before each level's
// round and after the last. A shared machine's pace moves within a test
// (on the bench pair one default test's levels ran 20% away from the
// re-check a minute before them), which the servers, interleaved, share,
// but a prediction priced once before the rounds does not: each level's
// prediction is brought to the pace read beside its rounds, so that what
// it misses by is the model's error, not the machine's drift.
type pace struct {
	probe *measure.SpeedProbe
	done  func()
	ref   time.Duration           // at the re-check
	refAt bool                    // ref is the re-check's own reading
	at    map[int][]time.Duration // a level's readings, before and after each of its rounds
	prev  int                     // the level of the round before the next reading (0: none yet)
	err   error                   // why the pace stopped being read
}

// newPace opens the target alone on the pair's backend and reads its
// pace once; nil where the predictions rest on no re-check, or the
// probe cannot run (a GPU target: its pace is not the shared CPU's, and
// its memory is the servers'), with why in the second value ("" when
// nothing is to be followed).
//
// Each level's readings are set against plain decoding's token at the
// re-check itself (recheck: its rounds' median, the moment the curves
// were rescaled to and the prices rest on), where the re-check read one;
// else against the median of refReadings read right after it. A
// shared machine moves within seconds: on the bench pair a re-check read
// 4.66 ms a token and the three readings after it 3.76, and against
// those the levels' readings (4.25-4.5) priced every level 13-20% slower
// still than the re-check's already slow curves, the predictions 20-30%
// below the measures; against the re-check's own reading, 3-9% faster.
func (b *Bench) newPace(ctx context.Context, ps PairSpec, recheck time.Duration) (*pace, string) {
	if ps.Backend != "" && ps.Backend != "cpu" {
		return nil, fmt.Sprintf("the machine's pace not followed: the target runs on %s", ps.Backend)
	}
	m, be, err := openModel(ps.Backend, ps.Threads, ps.Target, ps.NoMmap, ps.KV)
	if err != nil {
		return nil, fmt.Sprintf("the machine's pace not followed: %v", err)
	}
	probe, err := measure.NewSpeedProbe(ctx, m)
	if err != nil {
		closeModel(m, be)
		return nil, fmt.Sprintf("the machine's pace not followed: %v", err)
	}
	p := &pace{probe: probe, at: map[int][]time.Duration{}, done: func() { probe.Close(); closeModel(m, be) }}
	if recheck > 0 {
		p.ref, p.refAt = recheck, true
		return p, ""
	}
	// the reference every level's readings are set against: one reading
	// moves by 10% from the next on a shared machine (the bench target,
	// four probes of six readings each: 1.36-1.75 ms), and a ratio to one
	// had moved every level's prices together by as much
	ts := make([]float64, 0, refReadings)
	for range refReadings {
		t, err := probe.Token(ctx)
		if err != nil {
			p.close()
			return nil, fmt.Sprintf("the machine's pace not followed: %v", err)
		}
		ts = append(ts, float64(t))
	}
	p.ref = time.Duration(costmodel.Median(ts))
	return p, ""
}

// refReadings is how many readings the pace's reference is the median
// of.
const refReadings = 3

// before reads the pace before a round at level n: the reading closes
// the round before it and opens this one.
func (p *pace) before(ctx context.Context, n int) {
	if p == nil || p.err != nil {
		return
	}
	t, err := p.probe.Token(ctx)
	if err != nil {
		p.err = err
		return
	}
	if p.prev != 0 {
		p.at[p.prev] = append(p.at[p.prev], t)
	}
	p.at[n] = append(p.at[n], t)
	p.prev = n
}

// last reads the pace after the last round.
func (p *pace) last(ctx context.Context) {
	if p == nil || p.err != nil || p.prev == 0 {
		return
	}
	if t, err := p.probe.Token(ctx); err != nil {
		p.err = err
	} else {
		p.at[p.prev] = append(p.at[p.prev], t)
	}
}

// ratio is level n's pace against the re-check's: the median of its
// readings over the first (1.1: plain decoding's token took 10% longer
// beside its rounds); 1 where none was read.
func (p *pace) ratio(n int) float64 {
	if p == nil || p.err != nil || len(p.at[n]) == 0 || p.ref <= 0 {
		return 1
	}
	ts := make([]float64, len(p.at[n]))
	for i, t := range p.at[n] {
		ts[i] = float64(t)
	}
	return costmodel.Median(ts) / float64(p.ref)
}

// apply brings each level's predictions to its pace (tokens/s divided by
// its ratio, the times multiplied) and says so, level by level.
func (p *pace) apply(levels []loadtest.Level) string {
	if p == nil {
		return ""
	}
	if p.err != nil {
		return fmt.Sprintf("the machine's pace not followed: %v", p.err)
	}
	var parts []string
	seen := map[int]bool{}
	for i := range levels {
		l := &levels[i]
		r := p.ratio(l.Concurrency)
		if l.Predicted > 0 {
			l.Pace = r
			l.Predicted /= r
			l.PredictedTTFT = time.Duration(float64(l.PredictedTTFT) * r)
			l.PredictedTPOT = time.Duration(float64(l.PredictedTPOT) * r)
		}
		if !seen[l.Concurrency] {
			seen[l.Concurrency] = true
			parts = append(parts, fmt.Sprintf("x%.2f at %d", r, l.Concurrency))
		}
	}
	against := fmt.Sprintf("%.2f ms right after the re-check (the median of %d readings)", float64(p.ref)/1e6, refReadings)
	if p.refAt {
		against = fmt.Sprintf("the re-check's own %.2f ms", float64(p.ref)/1e6)
	}
	return fmt.Sprintf("priced at the machine's pace beside each level: plain decoding's token on the target, read between the rounds, against %s: %s",
		against, strings.Join(parts, ", "))
}

func (p *pace) close() {
	if p != nil && p.done != nil {
		p.done()
		p.done = nil
	}
}
