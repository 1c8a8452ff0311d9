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
// second CPU-heavy job is refused while one runs, its buttons disabled
// with the reason on the bar.

// Job kinds, as the job bar names them.
const (
	jobProfile   = "Profiling"
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
	// gated are the buttons that start heavy jobs: disabled while one
	// runs; disabled by the bar (and enabled again by it) when true
	gated map[*widget.Button]bool
}

func newJobBar(s *Session) *JobBar {
	j := &JobBar{s: s, gated: map[*widget.Button]bool{}}
	j.Label = widget.NewLabel("")
	j.Label.Wrapping = fyne.TextWrapWord
	j.Progress = widget.NewProgressBar()
	j.Cancel = widget.NewButton("Cancel", func() { s.Jobs.Cancel(j.showing) })
	j.Box = container.NewBorder(nil, nil, nil, container.NewHBox(container.NewGridWrap(fyne.NewSize(160, j.Progress.MinSize().Height), j.Progress), j.Cancel), j.Label)
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

// update shows the running jobs and gates the heavy buttons. On the UI
// goroutine.
func (j *JobBar) update() {
	running := j.s.Jobs.Running()
	heavy, busy := j.s.Jobs.Heavy()
	for b, byBar := range j.gated {
		switch {
		case busy && !b.Disabled():
			b.Disable()
			j.gated[b] = true
		case !busy && byBar:
			b.Enable()
			j.gated[b] = false
		}
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
	if busy {
		text += " Other measurements wait: their buttons are disabled until it ends or is cancelled."
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
// beside a running heavy one is refused: the reason is returned (and
// shown), nothing starts.
func (s *Session) startJob(kind string, heavy bool, work func(ctx context.Context, job *jobs.Job) (any, error), done func(v jobs.View)) (*jobs.Job, error) {
	job, ctx, err := s.Jobs.Start(s.Context(), kind, s.Spec.Key(), heavy)
	if err != nil {
		s.ShowError(err)
		return nil, err
	}
	s.Busy()
	s.Go(func(context.Context) {
		res, err := work(ctx, job)
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

// jobRunning says whether a job of kind runs for the chosen pair.
func (s *Session) jobRunning(kind string) bool {
	v, ok := s.Jobs.Last(s.Spec.Key(), kind)
	return ok && v.State == jobs.Running
}
