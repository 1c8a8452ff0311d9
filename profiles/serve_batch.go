package profiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"arborist/engine/spec"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/measure"
	"arborist/profiles/pairs"
	"arborist/profiles/serving"
)

// serveReq is one request in the server's batch. The batch calls token
// and admit on its own goroutine, between passes: they only note what
// happened and wake the request's own goroutine (follow), which turns the
// tokens into text, finds stop sequences and calls the client's
// callbacks, so a slow client delays only its own text. A pass's tokens
// wake it once, when the pass is over (Server.deliver): it reads them
// together and sends them to its client in one write.
type serveReq struct {
	s       *Server
	stops   []string
	cancel  context.CancelCauseFunc
	arrived time.Time
	seq     int64
	wake    chan struct{}
	inPass  bool // on Server.emitted: the pass now running gave it tokens (the batch's goroutine alone)

	mu       sync.Mutex
	admitted bool
	ids      []int     // tokens the batch emitted, not yet read by follow
	first    time.Time // when the first token was emitted
	last     time.Time // when the latest token was emitted
	count    int       // tokens emitted
}

func newServeReq(s *Server, stops []string, cancel context.CancelCauseFunc, arrived time.Time) *serveReq {
	return &serveReq{s: s, stops: stops, cancel: cancel, arrived: arrived, wake: make(chan struct{}, 1)}
}

func (rq *serveReq) signal() {
	select {
	case rq.wake <- struct{}{}:
	default:
	}
}

// admit is the batch telling the request it left the queue.
func (rq *serveReq) admit() {
	rq.s.mu.Lock()
	delete(rq.s.waiting, rq)
	rq.s.mu.Unlock()
	rq.mu.Lock()
	rq.admitted = true
	rq.mu.Unlock()
	rq.signal()
}

// token is the batch handing over an emitted token; the request's
// goroutine is woken once the pass is over (Server.deliver).
func (rq *serveReq) token(id int, _ bool) {
	now := time.Now()
	rq.mu.Lock()
	rq.ids = append(rq.ids, id)
	if rq.count == 0 {
		rq.first = now
	}
	rq.last = now
	rq.count++
	rq.mu.Unlock()
	if !rq.inPass {
		rq.inPass = true
		rq.s.emitted = append(rq.s.emitted, rq)
	}
}

// deliver wakes the requests the pass just over gave tokens (on the
// batch's goroutine, after the pass).
func (s *Server) deliver() {
	for _, rq := range s.emitted {
		rq.inPass = false
		rq.signal()
	}
	clear(s.emitted)
	s.emitted = s.emitted[:0]
}

// follow reads the request's tokens as the batch emits them until it has
// left the batch: it calls OnStart once the request is admitted, streams
// whole characters to OnText, holding back what may be the start of a
// stop sequence, and ends the request at the first stop sequence. A
// request whose ctx ends while it waits returns at once.
func (rq *serveReq) follow(ctx context.Context, h *spec.Handle, req serving.Request) (*Completion, error) {
	tok := rq.s.pair.Target.Tok
	out := &Completion{Seq: rq.seq}
	var text bytes.Buffer // emitted
	var pending []byte    // decoded, not yet emitted
	hold := 0             // bytes held back so a stop sequence split across tokens is still found
	for _, st := range rq.stops {
		hold = max(hold, len(st)-1)
	}
	unflushed := false // text handed to OnText since the last OnFlush
	emit := func(n int) {
		if n <= 0 {
			return
		}
		chunk := string(pending[:n])
		text.WriteString(chunk)
		pending = pending[n:]
		if req.OnText != nil {
			req.OnText(chunk)
			unflushed = true
		}
	}
	flush := func() {
		if unflushed && req.OnFlush != nil {
			req.OnFlush()
		}
		unflushed = false
	}
	started, stopped := false, false
	var ids []int
	read := func() {
		rq.mu.Lock()
		admitted := rq.admitted
		ids = append(ids[:0], rq.ids...)
		rq.ids = rq.ids[:0]
		rq.mu.Unlock()
		if admitted && !started {
			started = true
			if req.OnStart != nil {
				req.OnStart(rq.seq)
			}
		}
		for _, id := range ids {
			if stopped {
				return
			}
			out.Tokens++
			pending = append(pending, tok.Piece(id)...)
			if i := firstStop(pending, rq.stops); i >= 0 {
				pending = pending[:i]
				stopped = true
				emit(len(pending))
				rq.cancel(errStopText)
				return
			}
			emit(runeCut(pending, len(pending)-hold))
		}
	}
	gone := ctx.Done() // nil once admitted: a running request ends through the batch
	for done := false; !done; {
		select {
		case <-rq.wake:
		case <-h.Done():
			done = true
		case <-gone:
			rq.mu.Lock()
			admitted := rq.admitted
			rq.mu.Unlock()
			if !admitted {
				// it leaves while it waits: nothing of it runs, and the
				// batch drops it (freeing its source) before its next
				// admission, whenever that is
				return nil, ctx.Err()
			}
			gone = nil
		}
		read()
		flush()
	}
	res, err := h.Result()
	if stopped && errors.Is(err, context.Canceled) {
		err = nil
	}
	rq.mu.Lock()
	n, first, last := rq.count, rq.first, rq.last
	rq.mu.Unlock()
	if n > 0 {
		rq.s.latencies(first.Sub(rq.arrived), last.Sub(first)/time.Duration(max(n-1, 1)), n)
	}
	if err != nil {
		return nil, err
	}
	emit(len(pending))
	flush()
	out.Text = text.String()
	if res != nil {
		out.Totals.add(res)
	}
	// stop: a stop sequence or the end of text; length: the budget or
	// the context ran out
	out.Finish = "length"
	if stopped || (res != nil && len(res.Tokens) > 0 && tok.IsEOG(res.Tokens[len(res.Tokens)-1])) {
		out.Finish = "stop"
	}
	return out, nil
}

// firstStop is where the first stop sequence begins in b, or -1.
func firstStop(b []byte, stops []string) int {
	at := -1
	for _, st := range stops {
		if i := bytes.Index(b, []byte(st)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// runeCut is the largest k <= n such that b[:k] does not end inside a
// UTF-8 character: streamed text is sent in whole characters.
func runeCut(b []byte, n int) int {
	if n <= 0 {
		return 0
	}
	k := min(n, len(b))
	for i := 0; i < utf8.UTFMax && k > 0 && k < len(b) && !utf8.RuneStart(b[k]); i++ {
		k--
	}
	if k == len(b) {
		// the last character may still be incomplete
		j := k - 1
		for i := 0; i < utf8.UTFMax-1 && j > 0 && !utf8.RuneStart(b[j]); i++ {
			j--
		}
		if j >= 0 && !utf8.FullRune(b[j:]) {
			k = j
		}
	}
	return k
}

// latencyQuantiles are the median and 90th percentile of a latency, in
// seconds, over N requests.
type latencyQuantiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	N   int     `json:"n"`
}

// window keeps the last windowSize values of a latency: the figures
// follow the server's present load, in bounded memory.
type window struct {
	vals []float64
	next int
}

const windowSize = 1024

func (w *window) add(v float64) {
	if len(w.vals) < windowSize {
		w.vals = append(w.vals, v)
		return
	}
	w.vals[w.next] = v
	w.next = (w.next + 1) % windowSize
}

func (w *window) quantiles() latencyQuantiles {
	if len(w.vals) == 0 {
		return latencyQuantiles{}
	}
	s := slices.Clone(w.vals)
	slices.Sort(s)
	at := func(q float64) float64 { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return latencyQuantiles{P50: at(0.5), P90: at(0.9), N: len(s)}
}

// policyChoice is the policy a server runs, described.
type policyChoice struct {
	name   string
	policy spec.Policy
}

// servePolicy resolves ServeOptions.Policy on this machine: adaptive
// prices drafts on the target's stored latency curve (arborist profile),
// with the pair's stored calibration as the prior acceptance where there
// is one. Where no curve is stored the server serves the plan at its full
// size, and its policy's description says why (the CLI prints it); a
// test's latency stands in for the curve.
func (b *Bench) servePolicy(ctx context.Context, ps PairSpec, pair *pairs.Pair, plan spec.Plan, opt *ServeOptions) (policyChoice, func(d, r int) float64, error) {
	if opt.Policy == "" {
		opt.Policy = config.PolicyAdaptive
	}
	switch {
	case opt.Policy == config.PolicyPlain || !plan.NeedsSource():
		return policyChoice{"plain (no drafts)", spec.Plain{}}, nil, nil
	case opt.Policy == config.PolicyPlan:
		return policyChoice{"plan (" + plan.String() + " at its full size)", spec.Fixed{}}, nil, nil
	}
	if opt.latency != nil {
		return policyChoice{"adaptive (on a given latency)", spec.Goodput{Latency: opt.latency, Learn: &spec.StepCosts{}, Margin: spec.ShrinkMargin}}, nil, nil
	}
	st, err := b.db(ctx)
	if err != nil {
		return policyChoice{}, nil, err
	}
	hw := hardware.DetectHardware()
	if _, err := st.PutHardware(ctx, &hw); err != nil {
		return policyChoice{}, nil, err
	}
	p, err := measure.ProfileModel(ctx, st, hw, pair.Target, pair.Backend, measure.ProfileOptions{Kind: "verify", Widths: []int{1}, StoredOnly: true})
	if errors.Is(err, measure.ErrNotProfiled) {
		return policyChoice{fmt.Sprintf("plan (%s at its full size): adaptive needs the target's latency curve, and none of %s is stored on this machine (arborist profile measures it)",
			plan, filepath.Base(ps.Target)), spec.Fixed{}}, nil, nil
	}
	if err != nil {
		return policyChoice{}, nil, err
	}
	pts := slices.Clone(p.Curve.Points)
	fam, err := measure.VerifyFamily(ctx, st, hw, pair.Target, pair.Backend)
	if err != nil {
		return policyChoice{}, nil, err
	}
	costs := costmodel.Costs{Verify: pts, Passes: measure.PassCurves(fam), PassFamily: measure.PassFamily(fam)}
	// a pass of several sequences on their pass size's curve where one is
	// stored, else on the one-sequence curve (the learned scale then
	// carries what the sequences add), each priced at the requests'
	// context on the curves over context where there are some
	latency := func(rows int) time.Duration { return costmodel.Interp(pts, rows) }
	passes := costmodel.NewContextPasses(costs, measure.ShortContext, measure.ContextCurves(fam))
	pass := func(seqs, rows, context int) time.Duration {
		if t, ok := passes.At(seqs, rows, context); ok {
			return t
		}
		return latency(rows)
	}
	name := fmt.Sprintf("adaptive (goodput on the stored latency curve of %d widths", len(pts))
	if len(costs.Passes) > 1 {
		name += fmt.Sprintf(" and of passes of up to %d sequences", slices.MaxFunc(costs.Passes, func(a, b costmodel.PassCurve) int { return a.Seqs - b.Seqs }).Seqs)
	}
	pol := policyChoice{name + ")", spec.Goodput{Latency: latency, Pass: pass, Learn: &spec.StepCosts{}, Margin: spec.ShrinkMargin}}
	var prior func(d, r int) float64
	if ps.Sources() > 0 {
		var acc costmodel.Acceptance
		if id, err := st.LatestCalibration(ctx, p.Model.ID, ps.SourceName(), &acc); err != nil {
			return policyChoice{}, nil, err
		} else if id > 0 {
			prior = acc.At
			pol.name += ", the pair's calibration as prior"
		}
	}
	return pol, prior, nil
}

// byteGate bounds the bytes held at once, over all requests, by prompts
// being rendered and tokenised: tokenising makes several times its text in
// ids, pieces and merges, and many large prompts arriving together must
// not add up past the machine's memory. A request takes its prompt's bytes
// before it renders or tokenises and gives them back after; one that does
// not fit what the others hold waits for them (or its context).
type byteGate struct {
	limit int64

	mu      sync.Mutex
	held    int64
	waiting int
	freed   chan struct{} // closed (and replaced) when bytes are given back
}

func newByteGate(limit int64) *byteGate {
	return &byteGate{limit: limit, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting while the others hold too many; n must
// be at most the limit.
func (g *byteGate) acquire(ctx context.Context, n int64) error {
	g.mu.Lock()
	counted := false
	for g.held+n > g.limit {
		if !counted {
			g.waiting++
			counted = true
		}
		freed := g.freed
		g.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			g.mu.Lock()
			g.waiting--
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
	if counted {
		g.waiting--
	}
	g.held += n
	g.mu.Unlock()
	return nil
}

// release gives n bytes back and wakes the requests waiting for them.
func (g *byteGate) release(n int64) {
	g.mu.Lock()
	g.held -= n
	close(g.freed)
	g.freed = make(chan struct{})
	g.mu.Unlock()
}

// state is the bytes held and the requests waiting now.
func (g *byteGate) state() (held int64, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.waiting
}
