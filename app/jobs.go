package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
	"arborist/profiles/jobs"
)

// Long jobs run through the session's job registry (jobs.Registry): each
// belongs to the pair it started on, reports its progress to the job bar
// under the tabs (with an estimate of the time left and a Cancel), and a
// second CPU-heavy job started while one runs is queued behind it (two
// measurements sharing the cores would spoil both): it starts when the
// first ends, the bar says what it waits for, and its own Cancel takes it
// out of the queue.

// Job kinds, as the job bar names them.
const (
	jobProfile   = "Profiling"
	jobDepth     = "Measuring speed at depth"
	jobCalibrate = "Calibrating"
	jobPredictor = "Training the depth predictor"
	jobTune      = "Tuning"
	jobValidate  = "Validating"
	jobTrain     = "Training the hidden drafter"
	jobRun       = "Running"
	jobCheck     = "Checking in llama.cpp"
	jobLlamaTune = "Tuning for llama.cpp"
)

// JobBar shows the running jobs under the screens: what runs, for which
// pair, how far it is with the time left, and a Cancel.
type JobBar struct {
	s        *Session
	Box      *fyne.Container
	Label    *widget.Label
	Progress *widget.ProgressBar
	Cancel   *widget.Button
	showing  int64 // the job Cancel cancels
	// Queued says which jobs wait for the running heavy one; Unqueue
	// takes the newest of them out of the queue.
	Queued   *widget.Label
	Unqueue  *widget.Button
	QueueRow *fyne.Container // Queued and Unqueue; hidden while none waits
	queued   int64           // the job Unqueue cancels
	// gated are the buttons that start heavy jobs, registered so a
	// screen's own state (a job of its running) is the only thing that
	// disables them: a second job queues.
	gated map[*widget.Button]bool
}

func newJobBar(s *Session) *JobBar {
	j := &JobBar{s: s, gated: map[*widget.Button]bool{}}
	j.Label = widget.NewLabel("")
	j.Label.Wrapping = fyne.TextWrapWord
	j.Progress = widget.NewProgressBar()
	j.Cancel = widget.NewButton("Cancel", func() { s.Jobs.Cancel(j.showing) })
	j.Queued = widget.NewLabel("")
	j.Queued.Wrapping = fyne.TextWrapWord
	j.Unqueue = widget.NewButton("Remove from queue", func() { s.Jobs.Cancel(j.queued) })
	j.QueueRow = container.NewBorder(nil, nil, nil, j.Unqueue, j.Queued)
	j.QueueRow.Hide()
	j.Box = container.NewVBox(
		container.NewBorder(nil, nil, nil, container.NewHBox(container.NewGridWrap(fyne.NewSize(160, j.Progress.MinSize().Height), j.Progress), j.Cancel), j.Label),
		j.QueueRow)
	j.Box.Hide()
	s.Jobs.Watch(func(jobs.View) { s.UI(j.update) })
	return j
}

// gate registers buttons that start a heavy job.
func (j *JobBar) gate(bs ...*widget.Button) {
	for _, b := range bs {
		j.gated[b] = false
	}
}

// update shows the running jobs and the queued ones. On the UI goroutine.
func (j *JobBar) update() {
	running := j.s.Jobs.Running()
	heavy, busy := j.s.Jobs.Heavy()
	queued := j.s.Jobs.Queued()
	queue := j.Queued.Text
	if len(queued) == 0 {
		j.queued = 0
		queue = ""
	} else {
		var lines []string
		for _, q := range queued {
			lines = append(lines, describeQueued(q, j.s.Spec))
		}
		j.queued = queued[len(queued)-1].ID
		queue = strings.Join(lines, "\n")
	}
	j.Queued.SetText(queue)
	if queue == "" {
		j.QueueRow.Hide()
	} else {
		j.QueueRow.Show()
	}
	if len(running) == 0 {
		j.Box.Hide()
		j.showing = 0
		return
	}
	v := running[len(running)-1]
	if busy {
		v = heavy
	}
	j.showing = v.ID
	text := describeJob(v, j.s.Spec)
	if busy && len(queued) == 0 {
		text += " A measurement started meanwhile waits for it in a queue."
	}
	if len(running) > 1 {
		text += fmt.Sprintf(" (%d jobs running)", len(running))
	}
	j.Label.SetText(text)
	if v.Fraction >= 0 {
		j.Progress.SetValue(v.Fraction)
	} else {
		j.Progress.SetValue(0)
	}
	j.Box.Show()
}

// describeJob says what a running job does, for which pair (when not the
// chosen one), how far it is and about how long it has left.
func describeJob(v jobs.View, chosen profiles.PairSpec) string {
	text := v.Kind
	if v.Pair != chosen.Key() {
		text += " (for " + pairOfKey(v.Pair) + ", not the pair shown)"
	}
	if v.Status != "" {
		text += ": " + v.Status
	}
	text += fmt.Sprintf(". %s so far", roundDuration(v.Elapsed))
	if v.Remaining > 0 {
		text += fmt.Sprintf(", about %s left", roundDuration(v.Remaining))
	} else {
		text += ", time left not known yet"
	}
	return text + "."
}

// describeQueued says what a queued job is, for which pair (when not the
// chosen one) and what it waits for.
func describeQueued(v jobs.View, chosen profiles.PairSpec) string {
	text := v.Kind
	if v.Pair != chosen.Key() {
		text += " (for " + pairOfKey(v.Pair) + ")"
	}
	return text + ": queued behind " + strings.ToLower(v.Behind[:1]) + v.Behind[1:] + "; it starts when that ends."
}

// pairOfKey names the pair of a job's key: its target and draft source.
func pairOfKey(key string) string {
	f := strings.SplitN(key, "|", 3)
	name := filepath.Base(f[0])
	if len(f) > 1 && f[1] != "" {
		name += " with " + f[1]
	}
	return name
}

// roundDuration writes d to the second, or to the minute above 10 minutes.
func roundDuration(d time.Duration) string {
	if d >= 10*time.Minute {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// startJob starts a long job of kind on the chosen pair: work runs off the
// UI goroutine under the job's context (Cancel on the job bar cancels
// it), reporting through the job; its result is kept as the pair's, and
// done runs on the UI goroutine with the ended job whatever pair is chosen
// then (done shows it only when its pair is: ownPair). A heavy job
// beside a running heavy one is queued (jobs.Registry.Queue): work runs
// when the jobs before it have ended, or never if it is cancelled
// waiting (done still runs, with the job cancelled). The same kind
// running or queued for the pair already is refused: the reason is
// returned (and shown), nothing starts.
func (s *Session) startJob(kind string, heavy bool, work func(ctx context.Context, job *jobs.Job) (any, error), done func(v jobs.View)) (*jobs.Job, error) {
	job, ctx, err := s.Jobs.Queue(s.Context(), kind, s.Spec.Key(), heavy)
	if err != nil {
		s.ShowError(err)
		return nil, err
	}
	s.Busy()
	s.Go(func(context.Context) {
		var res any
		var err error
		select {
		case <-job.Ready():
			res, err = work(ctx, job)
		case <-ctx.Done():
			err = ctx.Err() // cancelled in the queue: it never ran
		}
		job.Finish(res, err)
		s.UI(func() {
			s.Busy()
			if done != nil {
				done(job.View())
			}
		})
	})
	return job, nil
}

// ownPair says whether the job belongs to the chosen pair. On the UI
// goroutine.
func (s *Session) ownPair(v jobs.View) bool { return v.Pair == s.Spec.Key() }

// jobRunning says whether a job of kind runs (or waits in the queue) for
// the chosen pair.
func (s *Session) jobRunning(kind string) bool {
	v, ok := s.Jobs.Last(s.Spec.Key(), kind)
	return ok && (v.State == jobs.Running || v.State == jobs.Queued)
}
