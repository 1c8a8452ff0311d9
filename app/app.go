// Package app is Arborist's desktop GUI, built with Fyne: one file per
// screen (Models, Profile, Speedup model, Run, Compare, Export), each a
// struct holding its widgets so tests can drive it. Every workflow runs in
// the workflow core (arborist/profiles), the same one the CLI verbs use;
// no engine logic, no SQL and no backend, GGUF, model or tokenizer imports
// live here (the module's TestLayers). Long work runs off the UI goroutine, can be
// cancelled, and reports back through Session.UI.
//
// A new screen is one file here: a struct with its widgets, a constructor
// taking the Session, Title and Content, and one row in the screens table.
package app

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"

	"arborist/assets"
	"arborist/profiles"
	"arborist/profiles/jobs"
)

// AppID is the application id, also in FyneApp.toml.
const AppID = "dev.arborist.workbench"

// Preference keys.
const (
	prefTarget       = "target"
	prefDraft        = "draft"
	prefHidden       = "draft_hidden"
	prefPrompts      = "prompts" // the last prompt suite file used
	prefBackend      = "backend"
	prefDraftBackend = "draft_backend"
	prefNGram        = "ngram"
	prefLayers       = "layers"
	prefDraftThreads = "draft_threads"
	prefRecent       = "recent"
	prefDB           = "db"
	prefWidth        = "window.width"
	prefHeight       = "window.height"
	maxRecent        = 8
	defaultWide      = 1100
	defaultTall      = 760
)

// Session is the state the screens share: the chosen models, the database,
// and the latest profile, calibration and plan.
type Session struct {
	App     fyne.App
	Win     fyne.Window
	DemoDir string
	DBPath  string
	Spec    profiles.PairSpec
	// Jobs are the long jobs of this window: each its pair's, one heavy
	// at a time (see jobs.go).
	Jobs *jobs.Registry

	mu       sync.Mutex
	bench    *profiles.Bench
	closed   bool            // after Close, background work finds no database
	work     sync.WaitGroup  // background work Close waits for (Go, Write)
	inflight atomic.Int32    // the same work, counted: idle reads it
	uiMu     sync.Mutex      // serialises UI, see there
	ctx      context.Context // Go's work runs under it; Close cancels it
	stop     context.CancelFunc
	Verify   *profiles.Profile // target T_verify(W)
	Draft    *profiles.Profile // drafter curve
	Overhead time.Duration     // measured per-step bookkeeping
	// Inputs are the pair's stored curves and calibration (nil before
	// LoadInputs); Acc is its calibration when there is one.
	Inputs *profiles.Inputs
	// Rechecked are a tune's inputs whose re-check disagreed with the
	// stored curve beyond its spread (nil: none): the Speedup screen,
	// where the tune ran, prices on them; every other screen keeps the
	// stored curve and the stored prediction of the tuned plan until the
	// user re-tunes or re-profiles (SetInputs forgets them).
	Rechecked *profiles.Inputs
	Acc       *profiles.Acceptance
	Best      *profiles.Prediction // the speedup screen's best plan
	// Tuned is the plan chosen from the last tune's ranking (nil: none).
	Tuned *profiles.Prediction
	// TunedAssumed says Tuned was priced with the sliders' assumed
	// acceptance (the pair had no stored calibration when it was tuned):
	// a screen showing its price says so.
	TunedAssumed bool
	// State is what the database held of the pair when it was chosen (or
	// the workbench started with it): nil until read (Restore).
	State *profiles.PairState
	// pair counts the pair changes: work started for one pair shows its
	// results only while that pair is still the chosen one (samePair).
	pair      int
	listeners []func()
	busy      []func()
	pairHooks []func(st *profiles.PairState, err error)
	stepHooks []func(profiles.Steps) // OnSteps
}

// OnSteps registers f, called on the UI goroutine with the chosen pair's
// progress each time the guide reads it from the database.
func (s *Session) OnSteps(f func(profiles.Steps)) { s.stepHooks = append(s.stepHooks, f) }

// NewSession reads the last selection from the preferences.
func NewSession(a fyne.App, w fyne.Window, demoDir string) *Session {
	p := a.Preferences()
	s := &Session{App: a, Win: w, DemoDir: demoDir, Jobs: jobs.New(nil)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.DBPath = p.StringWithFallback(prefDB, profiles.Choices().DefaultDB)
	s.Spec.Target = p.String(prefTarget)
	s.Spec.Draft = p.String(prefDraft)
	s.Spec.DraftHidden = p.String(prefHidden)
	s.Spec.Backend = p.String(prefBackend)
	s.Spec.DraftBackend = p.String(prefDraftBackend)
	s.Spec.NGram = p.Int(prefNGram)
	s.Spec.Layers = p.Int(prefLayers)
	s.Spec.DraftThreads = p.Int(prefDraftThreads)
	return s
}

// Bench opens the workflow core over the database on first use.
func (s *Session) Bench(ctx context.Context) (*profiles.Bench, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bench != nil {
		return s.bench, nil
	}
	if s.closed {
		return nil, fmt.Errorf("the workbench is closed")
	}
	b, err := profiles.Open(ctx, s.DBPath)
	if err != nil {
		return nil, err
	}
	s.bench = b
	return b, nil
}

// PairSpec is the chosen pair as the core opens it.
func (s *Session) PairSpec() profiles.PairSpec {
	ps := s.Spec
	ps.DB = s.DBPath
	return ps
}

// LoadInputs reads the pair's stored curves and newest calibration (nothing
// is measured) and notifies the screens, unless another pair than pair
// (pairNow when the work started) was chosen since. Call it off the UI
// goroutine.
func (s *Session) LoadInputs(ctx context.Context, pair int) error {
	ps := s.PairSpec()
	if ps.Target == "" {
		return nil
	}
	b, err := s.Bench(ctx)
	if err != nil {
		return err
	}
	in, err := b.Inputs(ctx, ps, profiles.InputsOptions{}, nil)
	if err != nil {
		return err
	}
	s.UI(func() {
		if s.samePair(pair) {
			s.SetInputs(in)
		}
	})
	return nil
}

// SetInputs makes in the session's inputs: its calibration (none where its
// acceptance is assumed), its bookkeeping cost where it is profiled; and
// tells the screens. On the UI goroutine.
func (s *Session) SetInputs(in *profiles.Inputs) {
	s.Inputs, s.Acc, s.Rechecked = in, nil, nil
	if !in.Assumed {
		s.Acc = in.Acc
	}
	if in.Profiled {
		s.Overhead = in.Costs.Overhead
	}
	s.Changed()
}

// Context is the session's context: work started from the screens
// derives its own from it, so Close cancels that too.
func (s *Session) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx
}

// Go runs f off the UI goroutine under the session's context: Close
// cancels it and waits for f to return, so closing the window (or a test's
// clean-up) never tears the app or the database down under work that is
// still reporting to the screens.
func (s *Session) Go(f func(ctx context.Context)) {
	ctx := s.Context()
	s.track(func() { f(ctx) })
}

// track runs f on a goroutine of its own that Close waits for and idle
// counts.
func (s *Session) track(f func()) {
	s.work.Add(1)
	s.inflight.Add(1)
	go func() {
		defer s.work.Done()
		defer s.inflight.Add(-1)
		f()
	}()
}

// idle says whether no background work is under way (for tests, which
// under Fyne's test driver must not touch a screen while work is still
// redrawing it: that driver runs the work's UI updates on the work's own
// goroutine).
func (s *Session) idle() bool { return s.inflight.Load() == 0 }

// UI runs f on the UI goroutine (fyne.Do), one such f at a time. The
// desktop driver runs them one after another anyway; Fyne's test driver
// runs each on the goroutine that asked, so two background jobs reporting
// at once (a tune's last update choosing a plan, and the store of that
// plan) refreshed the same widgets concurrently and crashed a test in
// Fyne's text layout. Call it from background goroutines only: f must not
// call UI itself.
func (s *Session) UI(f func()) {
	fyne.Do(func() {
		s.uiMu.Lock()
		defer s.uiMu.Unlock()
		f()
	})
}

// UIWait is UI that returns once f has run: for background work that
// reads the screens' state before it goes on. Call it from background
// goroutines only, as UI.
func (s *Session) UIWait(f func()) {
	fyne.DoAndWait(func() {
		s.uiMu.Lock()
		defer s.uiMu.Unlock()
		f()
	})
}

// Write runs a short database write off the UI goroutine; Close waits for
// it (without cancelling it), so a store of the chosen plan is never cut
// short or its database removed under it.
func (s *Session) Write(f func()) { s.track(f) }

// Close cancels the session's work, waits for it and for pending writes,
// and releases the database. Call it when the window is gone (the work's
// last UI updates may wait for the UI goroutine) or from a test.
func (s *Session) Close() {
	s.cancel()
	s.work.Wait()
	s.release()
}

// cancel cancels the context the session's work runs under.
func (s *Session) cancel() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	stop()
}

// release closes the database; work still running finds none and stops
// with an error.
func (s *Session) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.bench != nil {
		s.bench.Close()
		s.bench = nil
	}
}

// SetDBPath switches to another database file and remembers it; the
// screens then show what that database holds of the chosen pair.
// It runs on the UI goroutine, so it cancels the work under way without
// waiting for it (that work may be waiting for this goroutine).
func (s *Session) SetDBPath(path string) {
	s.cancel()
	s.release()
	s.mu.Lock()
	s.DBPath, s.closed = path, false
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.mu.Unlock()
	s.App.Preferences().SetString(prefDB, path)
	s.pairChanged()
	s.Changed()
	s.Restore()
}

// OnChange registers a screen's refresh, called on the UI goroutine after
// the selection or the shared results change.
func (s *Session) OnChange(f func()) { s.listeners = append(s.listeners, f) }

// absPath makes a non-empty path absolute (it stays as given if that fails).
func absPath(p string) string {
	if p == "" {
		return p
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// OnBusy registers a refresh called when long work starts or ends.
func (s *Session) OnBusy(f func()) { s.busy = append(s.busy, f) }

// Busy tells the OnBusy listeners that work started or ended. Call it on
// the UI goroutine.
func (s *Session) Busy() {
	for _, f := range s.busy {
		f()
	}
}

// Changed notifies the screens. Call it on the UI goroutine.
func (s *Session) Changed() {
	for _, f := range s.listeners {
		f()
	}
}

// SetModels chooses a target and a draft model file (SetPair).
func (s *Session) SetModels(target, draft string) {
	ps := s.Spec
	ps.Target, ps.Draft = target, draft
	if draft != "" {
		ps.NGram, ps.Layers, ps.DraftHidden = 0, 0, ""
	}
	s.SetPair(ps)
}

// SetPair makes ps the chosen pair: it remembers it (model files as
// absolute paths, so a later launch from another folder, a desktop entry,
// finds them), clears every result of the previous pair from the screens,
// and reads what the database holds of this one (Restore).
func (s *Session) SetPair(ps profiles.PairSpec) {
	ps.Target, ps.Draft = absPath(ps.Target), absPath(ps.Draft)
	s.Spec = ps
	p := s.App.Preferences()
	p.SetString(prefTarget, ps.Target)
	p.SetString(prefDraft, ps.Draft)
	p.SetString(prefHidden, ps.DraftHidden)
	p.SetInt(prefNGram, ps.NGram)
	p.SetInt(prefLayers, ps.Layers)
	p.SetInt(prefDraftThreads, ps.DraftThreads)
	p.SetString(prefBackend, ps.Backend)
	p.SetString(prefDraftBackend, ps.DraftBackend)
	for _, f := range []string{ps.Draft, ps.Target} {
		if f == "" {
			continue
		}
		recent := []string{f}
		for _, r := range p.StringList(prefRecent) {
			if r != f && len(recent) < maxRecent {
				recent = append(recent, r)
			}
		}
		p.SetStringList(prefRecent, recent)
	}
	s.pairChanged()
	s.Changed()
	s.Restore()
}

// OnPair registers a screen's part in a change of pair: f(nil, nil) as
// soon as another pair (or database) is chosen, to clear every result of
// the previous pair; then f(st, nil) with what the database holds of the
// new pair once it is read, or f(nil, err) when it cannot be. On the UI
// goroutine.
func (s *Session) OnPair(f func(st *profiles.PairState, err error)) {
	s.pairHooks = append(s.pairHooks, f)
}

// pairChanged forgets the previous pair's results and has the screens
// clear theirs. On the UI goroutine.
func (s *Session) pairChanged() {
	s.pair++
	s.Verify, s.Draft, s.Acc, s.Best, s.Tuned, s.Inputs, s.State, s.Overhead = nil, nil, nil, nil, nil, nil, nil, 0
	s.Rechecked, s.TunedAssumed = nil, false
	for _, f := range s.pairHooks {
		f(nil, nil)
	}
}

// pairNow is the chosen pair's number, for samePair. On the UI goroutine.
func (s *Session) pairNow() int { return s.pair }

// samePair says whether the pair numbered n (pairNow when work started)
// is still the chosen one: a result of work on a previous pair is not
// shown. On the UI goroutine.
func (s *Session) samePair(n int) bool { return s.pair == n }

// Restore reads what the database holds of the chosen pair (its stored
// profile, calibration, plan and ranking, and runs) off the UI goroutine
// and has every screen show it (OnPair), but for what work on the pair
// has shown since it was chosen, which is newer; nothing is measured. It
// runs when a pair is chosen and when the workbench starts with the last
// pair.
func (s *Session) Restore() {
	ps := s.PairSpec()
	if ps.Target == "" {
		return
	}
	n := s.pairNow()
	s.Go(func(ctx context.Context) {
		b, err := s.Bench(ctx)
		var st *profiles.PairState
		if err == nil {
			st, err = b.PairState(ctx, ps)
		}
		s.UI(func() {
			if !s.samePair(n) {
				return // another pair was chosen meanwhile
			}
			if err == nil {
				// what work since the pair was chosen (a profile, a tune)
				// set is newer than what was stored when the read began
				s.State = st
				if s.Verify == nil {
					s.Verify, s.Draft = st.Verify, st.Draft
				}
				if in := st.Inputs; in != nil && s.Inputs == nil {
					s.Inputs, s.Acc = in, nil
					if !in.Assumed {
						s.Acc = in.Acc
					}
					if in.Profiled {
						s.Overhead = in.Costs.Overhead
					}
				}
			}
			for _, f := range s.pairHooks {
				f(st, err)
			}
			s.Changed()
		})
	})
}

// Prompts is the last prompt suite file used ("" for none).
func (s *Session) Prompts() string { return s.App.Preferences().String(prefPrompts) }

// SetPrompts remembers a prompt suite file, as an absolute path.
func (s *Session) SetPrompts(path string) { s.App.Preferences().SetString(prefPrompts, absPath(path)) }

// Recent lists recently used model files.
func (s *Session) Recent() []string { return s.App.Preferences().StringList(prefRecent) }

// ShowError reports an error in a dialog with the engine's message.
func (s *Session) ShowError(err error) {
	if err != nil && s.Win != nil {
		showError(err, s.Win)
	}
}

// Screen is one tab of the workbench.
type Screen interface {
	Title() string
	Content() fyne.CanvasObject
}

// shown is an optional Screen capability: Shown runs when its tab is
// selected (reloading what other screens may have changed).
type shown interface{ Shown() }

// screens are the workbench's tabs, in order: a new screen is one file
// (its type, constructor, Title and Content) and one row here.
var screens = []func(wb *Workbench, s *Session) Screen{
	func(wb *Workbench, s *Session) Screen { wb.Models = NewModelsScreen(s); return wb.Models },
	func(wb *Workbench, s *Session) Screen { wb.Profile = NewProfileScreen(s); return wb.Profile },
	func(wb *Workbench, s *Session) Screen { wb.Speedup = NewSpeedupScreen(s); return wb.Speedup },
	func(wb *Workbench, s *Session) Screen { wb.Run = NewRunScreen(s); return wb.Run },
	func(wb *Workbench, s *Session) Screen { wb.Compare = NewCompareScreen(s); return wb.Compare },
	func(wb *Workbench, s *Session) Screen { wb.Export = NewExportScreen(s); return wb.Export },
}

// Workbench is the main window's content: a tab per screen.
type Workbench struct {
	Session *Session
	Models  *ModelsScreen
	Profile *ProfileScreen
	Speedup *SpeedupScreen
	Run     *RunScreen
	Compare *CompareScreen
	Export  *ExportScreen
	Tabs    *container.AppTabs
	Guide   *Guide
	JobBar  *JobBar
	screens []Screen // in the screens table's order: the tabs' order
	// Root is the window's content: the guide above the tabs, the job
	// bar below them.
	Root fyne.CanvasObject
}

// NewWorkbench builds every screen over one session.
func NewWorkbench(s *Session) *Workbench {
	wb := &Workbench{Session: s, JobBar: newJobBar(s)}
	var all []Screen
	for _, build := range screens {
		all = append(all, build(wb, s))
	}
	wb.screens = all
	var items []*container.TabItem
	for _, sc := range all {
		// each screen scrolls in a window smaller than it needs, so the
		// window's minimum size is the tabs', not the largest screen's
		items = append(items, container.NewTabItem(sc.Title(), container.NewScroll(sc.Content())))
	}
	wb.Tabs = container.NewAppTabs(items...)
	wb.Tabs.OnSelected = func(t *container.TabItem) {
		for _, sc := range all {
			if sh, ok := sc.(shown); ok && sc.Title() == t.Text {
				sh.Shown()
			}
		}
	}
	wb.Guide = newGuide(wb)
	wb.Speedup.OnReprofile = func() {
		if _, tab := wb.screenOf(StepProfile); tab >= 0 {
			wb.Tabs.SelectIndex(tab)
		}
		wb.Profile.Fresh.SetChecked(true) // the stored curves are what disagreed
		wb.Profile.start()
	}
	wb.Root = container.NewBorder(wb.Guide.Box, wb.JobBar.Box, nil, nil, wb.Tabs)
	wb.JobBar.gate(wb.Profile.Start, wb.Speedup.Calibrate, wb.Speedup.TrainPred, wb.Speedup.Tune, wb.Speedup.Validate,
		wb.Run.Start, wb.Models.TrainBtn, wb.Export.Check, wb.Export.Tune)
	s.Go(func(context.Context) { wb.Guide.reloadSoon() })
	s.Restore() // the last pair, with what the database holds of it
	// checking a backend (a GPU's, say) may take a moment; its screens'
	// update starts once they are built: the test driver runs a UI update
	// on the worker's goroutine, and one that refreshed the Models
	// screen while its Content was still being laid out here crashed in
	// Fyne's text cache (concurrent map write)
	s.Go(func(context.Context) {
		st := profiles.Backends()
		s.UI(func() {
			wb.Models.SetBackends(st)
			wb.Speedup.SetBackends(st)
		})
	})
	return wb
}

// Run opens the main window and blocks until it is closed; it returns the
// process exit status. With ARBORIST_SCREENSHOTS=DIR set it saves a PNG of
// every screen into DIR and exits (see scripts/screenshots.sh).
func Run() int {
	if err := checkDisplay(); err != nil {
		fmt.Fprintln(os.Stderr, "arborist:", err)
		return 1
	}
	log.SetOutput(quietFavorites(os.Stderr)) // see quietFavorites
	a := fyneapp.NewWithID(AppID)
	a.SetIcon(fyne.NewStaticResource("icon.png", assets.Icon))
	a.Settings().SetTheme(newAppTheme(nil))
	w := a.NewWindow("Arborist")
	s := NewSession(a, w, DemoDir())
	defer s.Close()
	wb := NewWorkbench(s)
	w.SetContent(wb.Root)
	p := a.Preferences()
	w.Resize(fyne.NewSize(float32(p.FloatWithFallback(prefWidth, defaultWide)), float32(p.FloatWithFallback(prefHeight, defaultTall))))
	w.SetOnDropped(func(_ fyne.Position, uris []fyne.URI) { wb.Models.Dropped(uris) })
	w.SetCloseIntercept(func() {
		sz := w.Canvas().Size()
		p.SetFloat(prefWidth, float64(sz.Width))
		p.SetFloat(prefHeight, float64(sz.Height))
		w.Close()
	})
	if dir := os.Getenv("ARBORIST_SCREENSHOTS"); dir != "" {
		go screenshots(wb, dir)
	}
	w.ShowAndRun()
	return 0
}

// checkDisplay reports a missing X11/Wayland display up front: without one
// the windowing library panics deep inside its start-up.
func checkDisplay() error {
	switch runtime.GOOS {
	case "linux", "freebsd", "openbsd", "netbsd":
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return fmt.Errorf("no display to open the workbench on (DISPLAY and WAYLAND_DISPLAY are unset); " +
				"run it on a desktop or under Xvfb (xvfb-run ./arborist), or use a headless verb: ./arborist help")
		}
	}
	return nil
}

// DemoDir is where the demo pair is written.
func DemoDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "arborist", "demo")
}

// FindModels lists GGUF files in the places Arborist looks by default: the
// shared models folder beside the working directory, the user's usual model
// folders (see modelGlobs) and the demo folder.
func FindModels(demoDir string) []string {
	home, _ := os.UserHomeDir()
	return findModels(home, demoDir)
}

// modelGlobs are where people keep GGUF files, relative to their home
// folder: a models folder, llama.cpp's download cache (llama-cli -hf),
// LM Studio's folders (publisher/repository/file) and the Hugging Face hub
// cache (models--org--name/snapshots/rev/file).
var modelGlobs = []string{
	"models/*.gguf",
	"models/*/*.gguf",
	".cache/llama.cpp/*.gguf",
	".cache/lm-studio/models/*/*/*.gguf",
	".lmstudio/models/*/*/*.gguf",
	".cache/huggingface/hub/models--*/snapshots/*/*.gguf",
}

// findModels lists the GGUF files in the shared models folder beside the
// working directory, the user's usual model folders under home, and the
// demo folder, each once, as absolute paths.
func findModels(home, demoDir string) []string {
	globs := []string{
		filepath.Join("..", "shared", "models", "*.gguf"),
		filepath.Join("..", "shared", "models", "bench", "*.gguf"),
		filepath.Join(demoDir, "*.gguf"),
	}
	if home != "" {
		for _, g := range modelGlobs {
			globs = append(globs, filepath.Join(home, g))
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, g := range globs {
		matches, _ := filepath.Glob(g)
		for _, m := range matches {
			if abs, err := filepath.Abs(m); err == nil {
				m = abs
			}
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// DemoPair writes the demo target and drafter into dir and returns
// their paths (see profiles.DemoPair).
func DemoPair(ctx context.Context, dir string, progress func(float64)) (target, drafter string, err error) {
	return profiles.DemoPair(ctx, dir, true, progress) // its own cache folder
}
