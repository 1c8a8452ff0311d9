// Package app is Arborist's desktop GUI, built with Fyne: one file per
// screen (Models, Profile, Speedup model, Run, Compare, Export), each a
// struct holding its widgets so tests can drive it. Screens call the same
// profiles and engine APIs as the CLI verbs; no engine logic and no SQL live
// here. Long work runs off the UI goroutine, can be cancelled, and reports
// back through fyne.Do.
package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"

	"arborist/assets"
	"arborist/engine/synth"
	"arborist/kernels/quant"
	"arborist/profiles"
	"arborist/profiles/store"
)

// AppID is the application id, also in FyneApp.toml.
const AppID = "dev.arborist.workbench"

// Preference keys.
const (
	prefTarget  = "target"
	prefDraft   = "draft"
	prefHidden  = "draft_hidden"
	prefRecent  = "recent"
	prefDB      = "db"
	prefWidth   = "window.width"
	prefHeight  = "window.height"
	maxRecent   = 8
	defaultWide = 1100
	defaultTall = 760
)

// Session is the state the screens share: the chosen models, the database,
// and the latest profile, calibration and plan.
type Session struct {
	App     fyne.App
	Win     fyne.Window
	DemoDir string
	DBPath  string
	Spec    profiles.PairSpec

	mu        sync.Mutex
	st        *store.Store
	Verify    *profiles.Profile // target T_verify(W)
	Draft     *profiles.Profile // drafter curve
	Overhead  time.Duration     // measured per-step bookkeeping
	Acc       *profiles.Acceptance
	Best      *profiles.Prediction
	listeners []func()
}

// NewSession reads the last selection from the preferences.
func NewSession(a fyne.App, w fyne.Window, demoDir string) *Session {
	p := a.Preferences()
	s := &Session{App: a, Win: w, DemoDir: demoDir}
	s.DBPath = p.StringWithFallback(prefDB, store.DefaultPath())
	s.Spec.Target = p.String(prefTarget)
	s.Spec.Draft = p.String(prefDraft)
	s.Spec.DraftHidden = p.String(prefHidden)
	return s
}

// Store opens the database on first use.
func (s *Session) Store(ctx context.Context) (*store.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st != nil {
		return s.st, nil
	}
	st, err := store.Open(ctx, s.DBPath)
	if err != nil {
		return nil, err
	}
	s.st = st
	return st, nil
}

// Close releases the database.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st != nil {
		s.st.Close()
		s.st = nil
	}
}

// SetDBPath switches to another database file and remembers it.
func (s *Session) SetDBPath(path string) {
	s.Close()
	s.mu.Lock()
	s.DBPath = path
	s.mu.Unlock()
	s.App.Preferences().SetString(prefDB, path)
}

// OnChange registers a screen's refresh, called on the UI goroutine after
// the selection or the shared results change.
func (s *Session) OnChange(f func()) { s.listeners = append(s.listeners, f) }

// Changed notifies the screens. Call it on the UI goroutine.
func (s *Session) Changed() {
	for _, f := range s.listeners {
		f()
	}
}

// SetModels records the selection and remembers the files.
func (s *Session) SetModels(target, draft string) {
	s.Spec.Target, s.Spec.Draft = target, draft
	p := s.App.Preferences()
	p.SetString(prefTarget, target)
	p.SetString(prefDraft, draft)
	for _, f := range []string{draft, target} {
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
	s.Verify, s.Draft, s.Acc, s.Best = nil, nil, nil, nil
	s.Changed()
}

// Recent lists recently used model files.
func (s *Session) Recent() []string { return s.App.Preferences().StringList(prefRecent) }

// ShowError reports an error in a dialog with the engine's message.
func (s *Session) ShowError(err error) {
	if err != nil && s.Win != nil {
		dialog.ShowError(err, s.Win)
	}
}

// Screen is one tab of the workbench.
type Screen interface {
	Title() string
	Content() fyne.CanvasObject
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
}

// NewWorkbench builds every screen over one session.
func NewWorkbench(s *Session) *Workbench {
	wb := &Workbench{Session: s}
	wb.Models = NewModelsScreen(s)
	wb.Profile = NewProfileScreen(s)
	wb.Speedup = NewSpeedupScreen(s)
	wb.Run = NewRunScreen(s)
	wb.Compare = NewCompareScreen(s)
	wb.Export = NewExportScreen(s)
	var items []*container.TabItem
	for _, sc := range []Screen{wb.Models, wb.Profile, wb.Speedup, wb.Run, wb.Compare, wb.Export} {
		items = append(items, container.NewTabItem(sc.Title(), sc.Content()))
	}
	wb.Tabs = container.NewAppTabs(items...)
	wb.Tabs.OnSelected = func(t *container.TabItem) {
		if t.Text == wb.Compare.Title() {
			wb.Compare.Refresh()
		}
	}
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
	a := fyneapp.NewWithID(AppID)
	a.SetIcon(fyne.NewStaticResource("icon.png", assets.Icon))
	w := a.NewWindow("Arborist")
	s := NewSession(a, w, DemoDir())
	defer s.Close()
	wb := NewWorkbench(s)
	w.SetContent(wb.Tabs)
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

// DemoDir is where the synthetic demo pair is written.
func DemoDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "arborist", "demo")
}

// FindModels lists GGUF files in the places Arborist looks by default: the
// shared models folder beside the working directory and the demo folder.
func FindModels(demoDir string) []string {
	var out []string
	for _, dir := range []string{filepath.Join("..", "shared", "models"), filepath.Join("..", "shared", "models", "bench"), demoDir} {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
		out = append(out, matches...)
	}
	return out
}

// DemoPair writes the synthetic demo target and drafter into dir and returns
// their paths; existing files are reused. The drafter shares the target's
// embedding seed so the pair has a vocabulary in common.
func DemoPair(ctx context.Context, dir string, progress func(float64)) (target, drafter string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("demo pair: %w", err)
	}
	target = filepath.Join(dir, "demo-target-synthetic.gguf")
	drafter = filepath.Join(dir, "demo-drafter-synthetic.gguf")
	specs := []struct {
		path, shape string
	}{
		{target, "custom:dim=256,layers=8,heads=8,kv=4,ffn=704,vocab=512"},
		{drafter, "custom:dim=64,layers=2,heads=8,kv=4,ffn=192,vocab=512"},
	}
	for i, s := range specs {
		if _, err := os.Stat(s.path); err == nil {
			continue
		}
		sh, err := synth.ParseShape(s.shape)
		if err != nil {
			return "", "", err
		}
		base := float64(i) / float64(len(specs))
		err = synth.WriteFile(ctx, s.path, sh, synth.Options{Type: quant.Q8_0, Seed: uint64(i + 1), Progress: func(done, total uint64) {
			if progress != nil {
				progress(base + float64(done)/float64(total)/float64(len(specs)))
			}
		}})
		if err != nil {
			return "", "", err
		}
	}
	return target, drafter, nil
}
