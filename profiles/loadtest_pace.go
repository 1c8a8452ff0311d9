package profiles

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"arborist/engine/model"
	"arborist/profiles/costmodel"
	"arborist/profiles/loadtest"
	"arborist/profiles/measure"
)

// pace follows how fast the machine runs through a load test: each
// level's work read before and after each of its rounds, against the
// same work's reading at the re-check the predictions are priced on. A
// shared machine's pace moves within a test (on the bench pair one
// default test's levels ran 20% away from the re-check a minute before
// them), which the servers, interleaved, share, but a prediction priced
// once before the rounds does not: each level's prediction is brought to
// the pace read beside its rounds, so that what it misses by is the
// model's error, not the machine's drift.
//
// The work read is the level's own shape: at one request plain
// decoding's token on the target (measure.SpeedProbe), against the
// re-check's; at n requests a pass of n sequences of one row each after
// the short context (measure.PassNow), against the re-check's anchor of
// that pass size (RecheckPasses), where the re-check timed one. A
// neighbour that loads the memory slows a one-row pass, which streams
// the weights, more than a pass of eight, which spends much of its time
// computing: read with the one-row probe, a test's levels had run x0.80
// of the re-check's pace, and every price at eight, brought to it, came
// out 35-51% above its measure, where the same prices brought to no
// pace at all were 8-21% above.
type pace struct {
	m     *model.Model
	probe *measure.SpeedProbe
	done  func()
	ref   map[int]time.Duration   // a level's reading at the re-check (0: plain decoding's stands in)
	plain time.Duration           // plain decoding's token at the re-check
	refAt bool                    // plain is the re-check's own reading
	at    map[int][]time.Duration // a level's readings, before and after each of its rounds
	err   error                   // why the pace stopped being read
}

// newPace opens the target alone on the pair's backend and reads its
// pace once; nil where the predictions rest on no re-check, or the
// probe cannot run (a GPU target: its pace is not the shared CPU's, and
// its memory is the servers'), with why in the second value ("" when
// nothing is to be followed).
//
// Each level's readings are set against the same work at the re-check
// itself (rc: plain decoding's token, its rounds' median, the moment
// the curves were rescaled to and the prices rest on; and its anchors of
// passes of several sequences after the short context), where the
// re-check read one; else against the median of refReadings of plain
// decoding's token read right after it. A shared machine moves within
// seconds: on the bench pair a re-check read 4.66 ms a token and the
// three readings after it 3.76, and against those the levels' readings
// (4.25-4.5) priced every level 13-20% slower still than the re-check's
// already slow curves, the predictions 20-30% below the measures;
// against the re-check's own reading, 3-9% faster.
func (b *Bench) newPace(ctx context.Context, ps PairSpec, rc *measure.Recheck) (*pace, string) {
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
	p := &pace{m: m, probe: probe, ref: map[int]time.Duration{}, at: map[int][]time.Duration{}, done: func() { probe.Close(); closeModel(m, be) }}
	if rc != nil {
		for _, a := range rc.Passes {
			if a.Context == measure.ShortContext && a.Seqs >= 2 && a.Now > 0 {
				p.ref[a.Seqs] = a.Now
			}
		}
		if rc.Plain > 0 {
			p.plain, p.refAt = rc.Plain, true
			return p, ""
		}
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
	p.plain = time.Duration(costmodel.Median(ts))
	return p, ""
}

// refReadings is how many readings the pace's reference is the median
// of.
const refReadings = 3

// read reads level n's pace now, in its own work (a pass of n sequences
// where the re-check timed one, else plain decoding's token), and keeps
// it as n's.
func (p *pace) read(ctx context.Context, n int) {
	if p == nil || p.err != nil {
		return
	}
	var t time.Duration
	var err error
	if p.ref[n] > 0 {
		t, err = measure.PassNow(ctx, p.m, n, measure.ShortContext)
	} else {
		t, err = p.probe.Token(ctx)
	}
	if err != nil {
		p.err = err
		return
	}
	p.at[n] = append(p.at[n], t)
}

// reference is what level n's readings are set against.
func (p *pace) reference(n int) time.Duration {
	if r := p.ref[n]; r > 0 {
		return r
	}
	return p.plain
}

// ratio is level n's pace against the re-check's: the median of its
// readings over its reference (1.1: its work took 10% longer beside its
// rounds); 1 where none was read.
func (p *pace) ratio(n int) float64 {
	if p == nil || p.err != nil || len(p.at[n]) == 0 || p.reference(n) <= 0 {
		return 1
	}
	ts := make([]float64, len(p.at[n]))
	for i, t := range p.at[n] {
		ts[i] = float64(t)
	}
	return costmodel.Median(ts) / float64(p.reference(n))
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
	against := fmt.Sprintf("%.2f ms right after the re-check (the median of %d readings)", float64(p.plain)/1e6, refReadings)
	if p.refAt {
		against = fmt.Sprintf("the re-check's own %.2f ms", float64(p.plain)/1e6)
	}
	var passes []string
	for _, n := range slices.Sorted(maps.Keys(seen)) {
		if r := p.ref[n]; r > 0 {
			passes = append(passes, fmt.Sprintf("%d: %.2f ms", n, float64(r)/1e6))
		}
	}
	work := "plain decoding's token on the target, read before and after each round, against " + against
	if len(passes) > 0 {
		work = fmt.Sprintf("at n at once a pass of n sequences of one row each after %d tokens, against the re-check's (%s), else plain decoding's token, against %s; read before and after each round",
			measure.ShortContext, strings.Join(passes, ", "), against)
	}
	return fmt.Sprintf("priced at the machine's pace beside each level: %s: %s", work, strings.Join(parts, ", "))
}

func (p *pace) close() {
	if p != nil && p.done != nil {
		p.done()
		p.done = nil
	}
}
