// Package jobs is the registry of an app's long jobs (a profile, a
// calibration, a tune, a validation, a training, a check or tune in
// llama.cpp): each belongs to the pair it started on, so its progress,
// its result and its end are that pair's whatever pair the faces show
// meanwhile. The registry refuses a second CPU-heavy job beside a running
// one (two measurements sharing the cores spoil both), keeps each pair's
// last result of each kind, and tells its watchers of every change. It is
// a value of the faces' (one per app, never global); the work a job runs
// is the core's.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// State is where a job stands.
type State int

// A job runs, then is done, failed or cancelled; a queued job (Queue)
// waits for the heavy job before it, then runs, or is cancelled waiting.
const (
	Running State = iota
	Done
	Failed
	Cancelled
	Queued
)

// Job is one long job of a Registry.
type Job struct {
	ID    int64
	Kind  string // "profile", "calibrate", "tune", "llama.cpp check", ...
	Pair  string // the pair it belongs to (its pair spec's Key)
	Heavy bool   // it measures on the CPU: no other heavy job runs beside it
	jobs  *Registry
	ctx   context.Context
	stop  context.CancelFunc
	done  chan struct{}
	ready chan struct{} // closed when the job runs (at once unless queued)
	// under jobs.mu
	state    State
	frac     float64 // progress, 0..1 (-1: unknown)
	status   string
	started  time.Time
	result   any
	err      error
	progress time.Time // when frac was last set
}

// View is a job's state read at once.
type View struct {
	ID          int64
	Kind, Pair  string
	Heavy       bool
	State       State
	Fraction    float64 // -1 while unknown
	Status      string
	Elapsed     time.Duration
	Remaining   time.Duration // estimated from the progress so far; 0 while unknown
	Result      any
	Err         error
	Started     time.Time
	Cancellable bool
	// Behind is the kind of the job a queued job waits for (the running
	// heavy job, or the queued one before it); "" unless queued.
	Behind string
}

// Registry is an app's registry of long jobs (one per app, never global).
type Registry struct {
	mu      sync.Mutex
	next    int64
	running map[int64]*Job
	queue   []*Job          // heavy jobs waiting for the running one, in order
	last    map[string]*Job // the newest job of each pair and kind
	watch   []func(View)
	now     func() time.Time
}

// New is an empty registry; now is its clock (nil: time.Now), which
// its estimates read.
func New(now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{running: map[int64]*Job{}, last: map[string]*Job{}, now: now}
}

// BusyError is the refusal of a heavy job beside a running one.
type BusyError struct{ Running View }

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is running (it measures on the CPU; a second measurement beside it would spoil both): wait for it or cancel it", e.Running.Kind)
}

// Watch registers f, called (on the job's goroutine) with every change of
// every job.
func (j *Registry) Watch(f func(View)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.watch = append(j.watch, f)
}

// Start registers a job of kind for pair under parent's context, unless
// heavy and a heavy job runs already (a *BusyError). The job's context is
// cancelled by Cancel; the caller ends the job with Finish.
func (j *Registry) Start(parent context.Context, kind, pair string, heavy bool) (*Job, context.Context, error) {
	j.mu.Lock()
	if heavy {
		for _, r := range j.running {
			if r.Heavy {
				v := r.viewLocked()
				j.mu.Unlock()
				return nil, nil, &BusyError{Running: v}
			}
		}
	}
	job, ctx := j.newLocked(parent, kind, pair, heavy)
	j.running[job.ID] = job
	close(job.ready)
	j.mu.Unlock()
	j.notify(job)
	return job, ctx, nil
}

func (j *Registry) newLocked(parent context.Context, kind, pair string, heavy bool) (*Job, context.Context) {
	ctx, stop := context.WithCancel(parent)
	j.next++
	job := &Job{ID: j.next, Kind: kind, Pair: pair, Heavy: heavy, jobs: j, ctx: ctx, stop: stop, done: make(chan struct{}), ready: make(chan struct{}), frac: -1, started: j.now()}
	j.last[pair+"\x00"+kind] = job
	return job, ctx
}

// QueuedError is the refusal of a job whose kind already runs or waits
// for the same pair: a second one would measure the same thing again.
type QueuedError struct{ Existing View }

func (e *QueuedError) Error() string {
	if e.Existing.State == Queued {
		return fmt.Sprintf("%s is queued already", e.Existing.Kind)
	}
	return fmt.Sprintf("%s is running already", e.Existing.Kind)
}

// Queue registers a job of kind for pair like Start, except that a heavy
// job beside a running (or queued) heavy one is not refused but queued:
// it runs when the ones before it have ended, in the order they were
// queued. Its work waits for Ready (or its context, which Cancel ends,
// taking it out of the queue). A job of the same kind and pair that runs
// or waits already is refused (a *QueuedError).
func (j *Registry) Queue(parent context.Context, kind, pair string, heavy bool) (*Job, context.Context, error) {
	j.mu.Lock()
	if r, ok := j.last[pair+"\x00"+kind]; ok && (r.state == Running || r.state == Queued) {
		v := r.viewLocked()
		j.mu.Unlock()
		return nil, nil, &QueuedError{Existing: v}
	}
	wait := heavy && len(j.queue) > 0
	for _, r := range j.running {
		wait = wait || (heavy && r.Heavy)
	}
	job, ctx := j.newLocked(parent, kind, pair, heavy)
	if wait {
		job.state = Queued
		j.queue = append(j.queue, job)
		j.mu.Unlock()
		j.notify(job)
		context.AfterFunc(ctx, func() { j.dequeue(job) })
		return job, ctx, nil
	}
	j.running[job.ID] = job
	close(job.ready)
	j.mu.Unlock()
	j.notify(job)
	return job, ctx, nil
}

// Queued are the jobs waiting for a heavy one, first to run first.
func (j *Registry) Queued() []View {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]View, 0, len(j.queue))
	for _, q := range j.queue {
		out = append(out, q.viewLocked())
	}
	return out
}

// dequeue ends a queued job whose context was cancelled: out of the
// queue, cancelled, never run.
func (j *Registry) dequeue(job *Job) {
	j.mu.Lock()
	if job.state != Queued {
		j.mu.Unlock()
		return
	}
	for i, q := range j.queue {
		if q == job {
			j.queue = append(j.queue[:i:i], j.queue[i+1:]...)
			break
		}
	}
	job.state = Cancelled
	job.err = context.Canceled
	j.mu.Unlock()
	close(job.done)
	j.notify(job)
}

// startNextLocked runs the first queued job once no heavy job runs.
func (j *Registry) startNextLocked() *Job {
	if len(j.queue) == 0 {
		return nil
	}
	for _, r := range j.running {
		if r.Heavy {
			return nil
		}
	}
	next := j.queue[0]
	j.queue = j.queue[1:]
	next.state, next.started = Running, j.now()
	j.running[next.ID] = next
	close(next.ready)
	return next
}

// Heavy is the running heavy job, if any.
func (j *Registry) Heavy() (View, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.running {
		if r.Heavy {
			return r.viewLocked(), true
		}
	}
	return View{}, false
}

// Running are the running jobs, oldest first.
func (j *Registry) Running() []View {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []View
	for id := int64(1); id <= j.next; id++ {
		if r, ok := j.running[id]; ok {
			out = append(out, r.viewLocked())
		}
	}
	return out
}

// Last is the newest job of kind on pair (running or ended).
func (j *Registry) Last(pair, kind string) (View, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.last[pair+"\x00"+kind]
	if !ok {
		return View{}, false
	}
	return r.viewLocked(), true
}

// Cancel cancels the running job id, or takes the queued job id out of
// the queue (nothing if it has ended).
func (j *Registry) Cancel(id int64) {
	j.mu.Lock()
	r, ok := j.running[id]
	for _, q := range j.queue {
		if q.ID == id {
			r, ok = q, true
		}
	}
	j.mu.Unlock()
	if ok {
		r.stop()
	}
}

func (j *Registry) notify(job *Job) {
	j.mu.Lock()
	v := job.viewLocked()
	watch := append([]func(View){}, j.watch...)
	j.mu.Unlock()
	for _, f := range watch {
		f(v)
	}
}

// Progress reports the job's progress (frac in 0..1, or -1 when unknown)
// and what it is doing.
func (job *Job) Progress(frac float64, status string) {
	j := job.jobs
	j.mu.Lock()
	if job.state != Running {
		j.mu.Unlock()
		return
	}
	if frac >= 0 {
		job.frac, job.progress = min(frac, 1), j.now()
	}
	job.status = status
	j.mu.Unlock()
	j.notify(job)
}

// Finish ends the job with its result or its error: cancelled when its
// context was (whatever error the cancelled work returned), failed on another error, else done. The result is kept as
// its pair's (Last).
func (job *Job) Finish(result any, err error) {
	j := job.jobs
	j.mu.Lock()
	if job.state != Running {
		j.mu.Unlock()
		return
	}
	job.result, job.err = result, err
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || job.ctx.Err() != nil):
		job.state = Cancelled
	case err != nil:
		job.state = Failed
	default:
		job.state, job.frac = Done, 1
	}
	delete(j.running, job.ID)
	next := j.startNextLocked()
	j.mu.Unlock()
	job.stop()
	close(job.done)
	j.notify(job)
	if next != nil {
		j.notify(next)
	}
}

// Cancel cancels the job; it ends when its work returns (Finish).
func (job *Job) Cancel() { job.stop() }

// Ready is closed when the job runs: at once, or for a queued job when
// the jobs before it have ended (never, if it is cancelled waiting).
func (job *Job) Ready() <-chan struct{} { return job.ready }

// Done is closed when the job has ended.
func (job *Job) Done() <-chan struct{} { return job.done }

// View reads the job's state.
func (job *Job) View() View {
	job.jobs.mu.Lock()
	defer job.jobs.mu.Unlock()
	return job.viewLocked()
}

func (job *Job) viewLocked() View {
	now := job.jobs.now()
	v := View{ID: job.ID, Kind: job.Kind, Pair: job.Pair, Heavy: job.Heavy, State: job.state, Fraction: job.frac, Status: job.status,
		Result: job.result, Err: job.err, Started: job.started, Elapsed: now.Sub(job.started), Cancellable: job.state == Running || job.state == Queued}
	if job.state == Queued {
		for i, q := range job.jobs.queue {
			if q != job {
				continue
			}
			if i > 0 {
				v.Behind = job.jobs.queue[i-1].Kind
			} else {
				for _, r := range job.jobs.running {
					if r.Heavy {
						v.Behind = r.Kind
					}
				}
			}
		}
	}
	// the remaining time, as the progress so far paces it
	if job.state == Running && job.frac > 0 && job.frac < 1 {
		took := job.progress.Sub(job.started)
		v.Remaining = time.Duration(float64(took)*(1-job.frac)/job.frac) - now.Sub(job.progress)
		v.Remaining = max(v.Remaining, 0)
	}
	return v
}
