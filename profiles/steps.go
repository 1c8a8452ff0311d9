package profiles

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Steps is how far a pair has come through the workflow (profile,
// calibrate, tune, run, export), as its database records it; the GUI's
// first-run guide shows it.
type Steps struct {
	Profiled   bool  // a latency curve of the target on this machine is stored
	Calibrated bool  // a calibration of the pair is stored
	PlanID     int64 // the newest tuned plan of the pair (0: none)
	Runs       int   // stored runs of the pair (its plain decoding included)
	Exports    int   // exports of the pair's plans
}

// Steps reads the pair's progress; nothing is measured.
func (b *Bench) Steps(ctx context.Context, ps PairSpec) (Steps, error) {
	var s Steps
	st, err := b.db(ctx)
	if err != nil {
		return s, err
	}
	in, err := b.Inputs(ctx, ps, InputsOptions{}, nil)
	if err != nil {
		return s, err
	}
	s.Calibrated = in.CalID > 0
	if s.PlanID, _, err = b.latestPlan(ctx, in); err != nil {
		return s, err
	}
	// any stored curve of the target on this machine: a profile up to a
	// smaller W than the speedup model reads (Tune measures the rest)
	curves, _, err := st.CurveCount(ctx, in.Hardware.ID, in.TargetID)
	if err != nil {
		return s, err
	}
	s.Profiled = in.Profiled || curves > 0
	if s.Runs, err = st.RunCount(ctx, ps.Target, ps.SourceName()); err != nil {
		return s, err
	}
	s.Exports, err = st.ExportCount(ctx, in.TargetID, in.Source)
	return s, err
}

// A long job (a profile, a calibration, a tune, a validation, a training,
// a check or tune in llama.cpp) belongs to the pair it started on: its
// progress, its result and its end are that pair's whatever pair the
// faces show meanwhile. Jobs is one app's registry of them: it refuses a
// second CPU-heavy job beside a running one (two measurements sharing the
// cores spoil both), keeps each pair's last result of each kind, and
// tells its watchers of every change.

// JobState is where a job stands.
type JobState int

// A job runs, then is done, failed or cancelled.
const (
	JobRunning JobState = iota
	JobDone
	JobFailed
	JobCancelled
)

// Job is one long job of a Jobs registry.
type Job struct {
	ID    int64
	Kind  string // "profile", "calibrate", "tune", "llama.cpp check", ...
	Pair  string // the pair it belongs to (PairKey)
	Heavy bool   // it measures on the CPU: no other heavy job runs beside it
	jobs  *Jobs
	ctx   context.Context
	stop  context.CancelFunc
	done  chan struct{}
	// under jobs.mu
	state    JobState
	frac     float64 // progress, 0..1 (-1: unknown)
	status   string
	started  time.Time
	result   any
	err      error
	progress time.Time // when frac was last set
}

// JobView is a job's state read at once.
type JobView struct {
	ID          int64
	Kind, Pair  string
	Heavy       bool
	State       JobState
	Fraction    float64 // -1 while unknown
	Status      string
	Elapsed     time.Duration
	Remaining   time.Duration // estimated from the progress so far; 0 while unknown
	Result      any
	Err         error
	Started     time.Time
	Cancellable bool
}

// Jobs is an app's registry of long jobs (one per app, never global).
type Jobs struct {
	mu      sync.Mutex
	next    int64
	running map[int64]*Job
	last    map[string]*Job // the newest job of each pair and kind
	watch   []func(JobView)
	now     func() time.Time
}

// NewJobs is an empty registry; now is its clock (nil: time.Now), which
// its estimates read.
func NewJobs(now func() time.Time) *Jobs {
	if now == nil {
		now = time.Now
	}
	return &Jobs{running: map[int64]*Job{}, last: map[string]*Job{}, now: now}
}

// PairKey names a pair as jobs belong to it: its target, its draft source
// and its devices.
func PairKey(ps PairSpec) string {
	return ps.Target + "|" + ps.SourceName() + "|" + ps.Backend + "|" + ps.DraftBackend
}

// BusyError is the refusal of a heavy job beside a running one.
type BusyError struct{ Running JobView }

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is running (it measures on the CPU; a second measurement beside it would spoil both): wait for it or cancel it", e.Running.Kind)
}

// Watch registers f, called (on the job's goroutine) with every change of
// every job.
func (j *Jobs) Watch(f func(JobView)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.watch = append(j.watch, f)
}

// Start registers a job of kind for pair under parent's context, unless
// heavy and a heavy job runs already (a *BusyError). The job's context is
// cancelled by Cancel; the caller ends the job with Finish.
func (j *Jobs) Start(parent context.Context, kind, pair string, heavy bool) (*Job, context.Context, error) {
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
	ctx, stop := context.WithCancel(parent)
	j.next++
	job := &Job{ID: j.next, Kind: kind, Pair: pair, Heavy: heavy, jobs: j, ctx: ctx, stop: stop, done: make(chan struct{}), frac: -1, started: j.now()}
	j.running[job.ID] = job
	j.last[pair+"\x00"+kind] = job
	j.mu.Unlock()
	j.notify(job)
	return job, ctx, nil
}

// Heavy is the running heavy job, if any.
func (j *Jobs) Heavy() (JobView, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.running {
		if r.Heavy {
			return r.viewLocked(), true
		}
	}
	return JobView{}, false
}

// Running are the running jobs, oldest first.
func (j *Jobs) Running() []JobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []JobView
	for id := int64(1); id <= j.next; id++ {
		if r, ok := j.running[id]; ok {
			out = append(out, r.viewLocked())
		}
	}
	return out
}

// Last is the newest job of kind on pair (running or ended).
func (j *Jobs) Last(pair, kind string) (JobView, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.last[pair+"\x00"+kind]
	if !ok {
		return JobView{}, false
	}
	return r.viewLocked(), true
}

// Cancel cancels the running job id (nothing if it has ended).
func (j *Jobs) Cancel(id int64) {
	j.mu.Lock()
	r, ok := j.running[id]
	j.mu.Unlock()
	if ok {
		r.stop()
	}
}

func (j *Jobs) notify(job *Job) {
	j.mu.Lock()
	v := job.viewLocked()
	watch := append([]func(JobView){}, j.watch...)
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
	if job.state != JobRunning {
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
	if job.state != JobRunning {
		j.mu.Unlock()
		return
	}
	job.result, job.err = result, err
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || job.ctx.Err() != nil):
		job.state = JobCancelled
	case err != nil:
		job.state = JobFailed
	default:
		job.state, job.frac = JobDone, 1
	}
	delete(j.running, job.ID)
	j.mu.Unlock()
	job.stop()
	close(job.done)
	j.notify(job)
}

// Cancel cancels the job; it ends when its work returns (Finish).
func (job *Job) Cancel() { job.stop() }

// Done is closed when the job has ended.
func (job *Job) Done() <-chan struct{} { return job.done }

// View reads the job's state.
func (job *Job) View() JobView {
	job.jobs.mu.Lock()
	defer job.jobs.mu.Unlock()
	return job.viewLocked()
}

func (job *Job) viewLocked() JobView {
	now := job.jobs.now()
	v := JobView{ID: job.ID, Kind: job.Kind, Pair: job.Pair, Heavy: job.Heavy, State: job.state, Fraction: job.frac, Status: job.status,
		Result: job.result, Err: job.err, Started: job.started, Elapsed: now.Sub(job.started), Cancellable: job.state == JobRunning}
	// the remaining time, as the progress so far paces it
	if job.state == JobRunning && job.frac > 0 && job.frac < 1 {
		took := job.progress.Sub(job.started)
		v.Remaining = time.Duration(float64(took)*(1-job.frac)/job.frac) - now.Sub(job.progress)
		v.Remaining = max(v.Remaining, 0)
	}
	return v
}
