package app

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/app/present"
	"arborist/profiles"
	"arborist/profiles/jobs"
	"arborist/profiles/trainsize"
)

// Draft source choices on the Models screen, as the core's registry of
// draft source kinds labels them.
var (
	SourceModel  = sourceLabel("model")
	SourceNGram  = sourceLabel("ngram")
	SourceLayers = sourceLabel("layers")
	SourceHidden = sourceLabel("hidden")
)

// sourceLabel is the label of the named draft source kind.
func sourceLabel(name string) string {
	for _, k := range profiles.Choices().DraftSources {
		if k.Name == name {
			return k.Label
		}
	}
	panic("no draft source kind " + name)
}

// sourceKind is the draft source kind of a label ("" for none).
func sourceKind(label string) (profiles.DraftSourceKind, bool) {
	for _, k := range profiles.Choices().DraftSources {
		if k.Label == label {
			return k, true
		}
	}
	return profiles.DraftSourceKind{}, false
}

// ModelsScreen opens the target and the draft source and says whether they
// fit together.
type ModelsScreen struct {
	s      *Session
	Target *widget.Entry
	// Fields are the draft source kinds' fields by name, one widget per
	// field (Draft the file of a draft model or a hidden drafter).
	Fields map[string]*widget.Entry
	Draft  *widget.Entry
	Source *widget.Select
	// Device chooses the backend the pair runs on, from the registry;
	// DeviceNote says what it runs, or why it cannot run here.
	Device     *widget.Select
	DeviceNote *widget.Label
	// DraftDevice places the draft source on another backend (DuoDecoding's
	// split: the drafter on the CPU while the target verifies on a GPU).
	DraftDevice *widget.Select
	// DraftThreads are a concurrent drafter's threads (empty: half the
	// target's, or all of its own device's), shown for a source that can
	// draft beside the target.
	DraftThreads *widget.Entry
	backends     []profiles.BackendStatus // nil until checked
	// RecentTarget and RecentDraft list the recently used model files,
	// each filling the field it sits beside.
	RecentTarget, RecentDraft *widget.Button
	DB                        *widget.Entry
	Load                      *widget.Button
	DemoBtn                   *widget.Button
	Info                      *widget.Label
	Status                    *widget.Label
	Progress                  *widget.ProgressBar
	// Training a hidden-state drafter for the target.
	TrainPrompts  *widget.Entry
	TrainBtn      *widget.Button
	CancelTrain   *widget.Button
	TrainSettings profiles.DrafterSettings
	TrainSize     *trainSize // how much data, with its cost
	LossChart     *Chart     // training and held-out loss per epoch
	lossView      fyne.CanvasObject
	Stored        *widget.Select // finished hidden drafters in the database
	body          *fyne.Container
	form          *widget.Form
	formBox       *fyne.Container             // holds the form, built again for each source
	rows          map[string]*widget.FormItem // the form's rows by key, some shown only for some sources
	// remembered files that no longer exist, with a button to pick again
	TargetCheck, DraftCheck, TrainCheck *fileCheck
	cancelTrain                         context.CancelFunc
	shown                               *profiles.PairState // what the status describes (nil: something else)
	loading                             int                 // pairs being read and demo pairs being built (the guide's Models step runs)
}

// NewModelsScreen builds the screen from the session's selection.
func NewModelsScreen(s *Session) *ModelsScreen {
	m := &ModelsScreen{s: s}
	m.Target = widget.NewEntry()
	m.Target.SetPlaceHolder("target .gguf (drop files on the window, or Open...)")
	m.Target.SetText(s.Spec.Target)
	// one entry per field of the draft source kinds, each set from the
	// session's pair where its kind is the pair's, else to its default
	m.Fields = map[string]*widget.Entry{}
	var labels []string
	kind := profiles.DraftSourceOf(s.Spec)
	for _, k := range profiles.Choices().DraftSources {
		labels = append(labels, k.Label)
		values := k.Values(profiles.PairSpec{})
		if k.Name == kind.Name {
			values = k.Values(s.Spec)
		}
		for _, f := range k.Fields {
			e, ok := m.Fields[f.Name]
			if !ok {
				e = widget.NewEntry()
				m.Fields[f.Name] = e
			}
			if e.Text == "" || k.Name == kind.Name {
				e.SetText(values[f.Name])
			}
		}
	}
	m.Draft = m.Fields["draft"]
	m.Source = widget.NewSelect(labels, func(string) {})
	m.Source.SetSelected(kind.Label)
	m.DeviceNote = widget.NewLabel("")
	m.DeviceNote.Wrapping = fyne.TextWrapWord
	m.DeviceNote.SizeName = theme.SizeNameCaptionText
	choices := profiles.Choices()
	m.Device = widget.NewSelect(choices.Backends, func(string) { m.showDevice() })
	dev := s.Spec.Backend
	if dev == "" {
		dev = choices.DefaultBackend
	}
	m.Device.SetSelected(dev)
	m.DraftDevice = widget.NewSelect(append([]string{sameDevice}, choices.Backends...), nil)
	m.DraftDevice.SetSelected(sameDevice)
	m.DraftThreads = widget.NewEntry()
	m.DraftThreads.SetPlaceHolder(fmt.Sprintf("default: half of %d", choices.DefaultThreads))
	if s.Spec.DraftThreads > 0 {
		m.DraftThreads.SetText(strconv.Itoa(s.Spec.DraftThreads))
	}
	if d := s.Spec.DraftBackend; d != "" {
		m.DraftDevice.SetSelected(d)
	}
	m.RecentTarget = m.recentButton(m.Target)
	m.RecentDraft = m.recentButton(m.Draft)
	m.DB = widget.NewEntry()
	m.DB.SetText(s.DBPath)
	m.DB.OnSubmitted = func(p string) {
		if p = strings.TrimSpace(p); p != "" && p != s.DBPath {
			s.SetDBPath(p)
			m.Status.SetText("Database: " + p)
			s.Changed()
		}
	}
	m.Info = widget.NewLabel(describeFound(FindModels(s.DemoDir)))
	m.Info.Wrapping = fyne.TextWrapWord
	m.Info.TextStyle = fyne.TextStyle{Monospace: true}
	m.Status = widget.NewLabel("")
	m.Status.Wrapping = fyne.TextWrapWord
	m.Progress = widget.NewProgressBar()
	m.Progress.Hide()
	m.Load = widget.NewButton("Load and check", m.load)
	m.Load.Importance = widget.HighImportance
	m.DemoBtn = widget.NewButton("Build the demo pair", m.buildDemo)
	m.TrainPrompts = widget.NewEntry()
	m.TrainPrompts.SetPlaceHolder("prompt suite file the target continues to make training data")
	m.TrainPrompts.SetText(s.Prompts())
	gguf := []string{".gguf"}
	m.TargetCheck = newFileCheck(m.Target, "target model", gguf, s.Win)
	m.DraftCheck = newFileCheck(m.Draft, "draft model", gguf, s.Win)
	m.DraftCheck.skip = func() bool {
		src := m.Source.Selected
		return src == SourceNGram || src == SourceLayers || (src == SourceHidden && isID(m.Draft.Text))
	}
	m.DraftCheck.Check()
	m.TrainCheck = newFileCheck(m.TrainPrompts, "prompt suite", nil, s.Win)
	m.TrainSettings = profiles.Choices().DrafterSettings
	m.TrainSize = newTrainSize(func(size string) {
		if w, err := trainsize.Drafter(size); err == nil {
			w.ApplyTo(&m.TrainSettings)
		}
	}, func() string { return drafterCostLine(m.TrainSettings, m.TrainPrompts.Text) })
	checkPrompts := m.TrainPrompts.OnChanged // the file check's
	m.TrainPrompts.OnChanged = func(p string) {
		checkPrompts(p)
		m.TrainSize.Refresh()
	}
	m.TrainBtn = widget.NewButton("Train hidden drafter", m.train)
	m.CancelTrain = widget.NewButton("Cancel training", func() {
		if m.cancelTrain != nil {
			m.cancelTrain()
		}
	})
	m.CancelTrain.Hide()
	m.LossChart = newChart(520, 220)
	m.LossChart.Name = "training-loss"
	m.lossView = m.LossChart.View(s.Win)
	m.lossView.Hide()
	m.Stored = widget.NewSelect(nil, func(opt string) {
		var id int64
		if _, err := fmt.Sscanf(opt, "#%d", &id); err == nil {
			m.Source.SetSelected(SourceHidden)
			m.Draft.SetText(strconv.FormatInt(id, 10))
		}
	})
	m.Stored.PlaceHolder = "stored hidden drafters"
	// the database is read when hidden drafters are wanted, not at start-up
	m.Source.OnChanged = func(opt string) {
		m.DraftCheck.Check()
		m.showRows()
		m.placeHolders()
		if opt == SourceHidden {
			m.RefreshDrafters()
		}
	}
	if m.Source.Selected == SourceHidden {
		m.RefreshDrafters()
	}
	s.OnChange(m.RefreshDrafters)
	s.OnPair(m.pairShown)
	s.OnSteps(m.stepsRead)
	return m
}

// pairShown says what the database held of the pair just chosen (or the
// last pair, restored at start) and the next step to take.
func (m *ModelsScreen) pairShown(st *profiles.PairState, err error) {
	switch {
	case err != nil:
		m.Status.SetText("The pair's stored results could not be read: " + err.Error())
	case st != nil:
		m.shown = st
		m.Status.SetText(describeState(m.s.Spec, st))
		return
	}
	m.shown = nil
}

// stepsRead follows the guide's reads of the pair's progress: the status
// that said what is stored and the next step says it again as the steps
// are done (it stayed "nothing stored yet" after them).
func (m *ModelsScreen) stepsRead(steps profiles.Steps) {
	if m.shown == nil || m.shown.Steps == steps {
		return
	}
	st := *m.shown
	st.Steps = steps
	st.PlanID = steps.PlanID
	if st.PlanID != m.shown.PlanID {
		st.Plan = profiles.Prediction{} // named by its id only
	}
	m.shown = &st
	m.Status.SetText(describeState(m.s.Spec, &st))
}

// describeState says what is stored of a pair and what to do next.
func describeState(ps profiles.PairSpec, st *profiles.PairState) string {
	var have []string
	if st.Steps.Profiled {
		have = append(have, "a profile of this machine")
	}
	switch {
	case st.Inputs != nil && st.Inputs.CalID > 0:
		have = append(have, fmt.Sprintf("calibration %d", st.Inputs.CalID))
	case st.Steps.Calibrated:
		have = append(have, "a calibration")
	}
	switch {
	case st.PlanID > 0 && st.Plan.Plan.Strategy != "":
		have = append(have, fmt.Sprintf("plan %d (%s)", st.PlanID, st.Plan.Plan))
	case st.PlanID > 0:
		have = append(have, fmt.Sprintf("plan %d", st.PlanID))
	}
	if n := max(len(st.Runs), st.Steps.Runs); n > 0 {
		have = append(have, present.Count(n, "run"))
	}
	next := "Next: Profile this machine."
	switch {
	case !st.Steps.Profiled:
	case !st.Steps.Calibrated:
		next = "Next: Calibrate (Speedup model screen)."
	case st.Steps.PlanID == 0:
		next = "Next: Tune (Speedup model screen)."
	case st.Steps.Runs == 0:
		next = "Next: Run the tuned plan."
	case st.Steps.Exports == 0:
		next = "Next: Export the plan."
	default:
		next = "Every step is done; the screens show the stored results."
	}
	name := filepath.Base(ps.Target)
	if src := ps.SourceName(); src != "" {
		name += " with " + src
	}
	if len(have) == 0 {
		return "Loaded " + name + ": nothing stored yet. " + next
	}
	return "Loaded " + name + ". Stored for it: " + strings.Join(have, ", ") + ". " + next
}

// RefreshDrafters lists the finished hidden drafters of the database.
func (m *ModelsScreen) RefreshDrafters() {
	ctx := context.Background()
	b, err := m.s.Bench(ctx)
	if err != nil {
		m.Stored.PlaceHolder = "stored hidden drafters: database unavailable"
		m.Stored.Refresh()
		return
	}
	ds, err := b.Drafters(ctx)
	if err != nil {
		return
	}
	var opts []string
	for _, d := range ds {
		if d.Status != "done" {
			continue
		}
		held := ""
		if loss, ok := d.HeldOut(); ok {
			held = fmt.Sprintf(", held-out loss %.3f", loss)
		}
		opts = append(opts, fmt.Sprintf("#%d for %s%s", d.ID, filepath.Base(d.TargetPath), held))
	}
	m.Stored.Options = opts
	m.Stored.Refresh()
}

// Title is the tab name.
func (m *ModelsScreen) Title() string { return "Models" }

// Content lays the screen out.
func (m *ModelsScreen) Content() fyne.CanvasObject {
	open := func(e *widget.Entry) *widget.Button {
		return widget.NewButton("Open...", func() {
			d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
				if err == nil && r != nil {
					e.SetText(r.URI().Path())
					r.Close()
				}
			}, m.s.Win)
			d.SetFilter(storage.NewExtensionFileFilter([]string{".gguf"}))
			startIn(d, e.Text)
			d.Show()
		})
	}
	m.rows = map[string]*widget.FormItem{
		"target":        widget.NewFormItem("Target", container.NewBorder(nil, nil, nil, container.NewHBox(m.RecentTarget, open(m.Target)), m.Target)),
		"source":        widget.NewFormItem("Draft source", m.Source),
		"device":        widget.NewFormItem("Device", container.NewBorder(nil, nil, m.Device, nil, m.DeviceNote)),
		"draft device":  widget.NewFormItem("Draft device", m.DraftDevice),
		"draft threads": widget.NewFormItem("Draft threads", m.DraftThreads),
		"db":            widget.NewFormItem("Database (Enter to switch)", m.DB),
		"train":         widget.NewFormItem("Training prompts", container.NewBorder(nil, nil, nil, container.NewHBox(m.TrainBtn, m.CancelTrain), m.TrainPrompts)),
		"train size":    widget.NewFormItem("Training size", m.TrainSize.Row),
	}
	// the draft source kinds' fields, each its own widget: a file gets its
	// Open... and recent buttons, a stored drafter the list beside it
	// (one widget per field name: kinds that read the same field share it)
	widgets := map[string]fyne.CanvasObject{}
	for _, k := range profiles.Choices().DraftSources {
		for _, f := range k.Fields {
			w, ok := widgets[f.Name]
			if !ok {
				e := m.Fields[f.Name]
				w = e
				if f.File {
					recent := m.RecentDraft
					if e != m.Draft {
						recent = m.recentButton(e)
					}
					w = container.NewBorder(nil, nil, nil, container.NewHBox(recent, open(e)), e)
				}
				widgets[f.Name] = w
			}
			item := widget.NewFormItem(f.Label, w)
			item.HintText = f.Help
			m.rows[k.Name+"/"+f.Name] = item
		}
	}
	m.rows["stored"] = widget.NewFormItem("Stored drafters", m.Stored)
	m.formBox = container.NewStack()
	m.showRows()
	m.placeHolders()
	top := container.NewVBox(m.formBox, m.TargetCheck.Box, m.DraftCheck.Box, m.TrainCheck.Box, container.NewHBox(m.Load, m.DemoBtn), m.Progress, m.Status, widget.NewSeparator())
	m.body = container.NewBorder(top, m.lossView, nil, nil, container.NewVScroll(m.Info))
	return m.body
}

// showRows shows the form's rows the chosen draft source reads: the
// draft model file (or hidden drafter) for those sources, the n-gram
// length or the layer count for theirs, and a draft device for a source
// that runs on one.
//
// The form is built afresh for each kind (a form keeps the widgets of the
// rows it was first drawn with), from the registry's fields.
func (m *ModelsScreen) showRows() {
	if m.formBox == nil {
		return // not laid out yet
	}
	keys := []string{"target", "source", "device"}
	if k, ok := sourceKind(m.Source.Selected); ok {
		for _, f := range k.Fields {
			keys = append(keys, k.Name+"/"+f.Name)
		}
		if k.Movable {
			keys = append(keys, "draft device", "draft threads")
		}
		if k.Name == "hidden" {
			keys = append(keys, "stored")
		}
	}
	keys = append(keys, "db", "train", "train size")
	var items []*widget.FormItem
	for _, k := range keys {
		items = append(items, m.rows[k])
	}
	m.form = widget.NewForm(items...)
	m.formBox.Objects = []fyne.CanvasObject{m.form}
	m.formBox.Refresh()
}

// placeHolders shows the chosen kind's help in the fields it reads.
func (m *ModelsScreen) placeHolders() {
	if k, ok := sourceKind(m.Source.Selected); ok {
		for _, f := range k.Fields {
			m.Fields[f.Name].SetPlaceHolder(f.Help)
		}
	}
}

// shownRows are the labels of the form's rows shown (for tests).
func (m *ModelsScreen) shownRows() []string {
	var out []string
	for _, it := range m.form.Items {
		out = append(out, it.Text)
	}
	return out
}

// recentButton offers the recently used model files for e: a pick fills
// e, the field the button sits beside, and nothing else.
func (m *ModelsScreen) recentButton(e *widget.Entry) *widget.Button {
	var b *widget.Button
	b = widget.NewButtonWithIcon("", theme.HistoryIcon(), func() {
		menu := m.recentMenu(e)
		if len(menu.Items) == 0 || m.s.Win == nil {
			return
		}
		c := m.s.Win.Canvas()
		pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(b)
		widget.ShowPopUpMenuAtPosition(menu, c, pos.AddXY(0, b.Size().Height))
	})
	b.Importance = widget.LowImportance
	return b
}

// recentMenu lists the recent model files, each filling e.
func (m *ModelsScreen) recentMenu(e *widget.Entry) *fyne.Menu {
	var items []*fyne.MenuItem
	for _, p := range m.s.Recent() {
		items = append(items, fyne.NewMenuItem(p, func() { e.SetText(p) }))
	}
	return fyne.NewMenu("recent files", items...)
}

// SetBackends takes the registry's backends as checked on this machine.
func (m *ModelsScreen) SetBackends(st []profiles.BackendStatus) {
	m.backends = st
	var names []string
	for _, b := range st {
		names = append(names, b.Name)
	}
	m.Device.Options = names
	m.Device.Refresh()
	m.DraftDevice.Options = append([]string{sameDevice}, names...)
	m.DraftDevice.Refresh()
	m.showDevice()
}

// sameDevice is the draft device choice that keeps the drafter on the
// target's device.
const sameDevice = "same as the target"

// unavailable is why the named backend cannot run ("" when it can, or
// before the check).
func (m *ModelsScreen) unavailable(name string) string {
	for _, b := range m.backends {
		if b.Name == name {
			return b.Err
		}
	}
	return ""
}

// showDevice says what the chosen backend runs, or why it cannot run.
func (m *ModelsScreen) showDevice() {
	name := m.Device.Selected
	for _, b := range m.backends {
		if b.Name != name {
			continue
		}
		if b.Err != "" {
			m.DeviceNote.Importance = widget.WarningImportance
			m.DeviceNote.SetText("Unavailable here: " + b.Err)
			return
		}
		m.DeviceNote.Importance = widget.MediumImportance
		if b.Kernels != "" {
			m.DeviceNote.SetText("runs here (kernels: " + b.Kernels + ")")
		} else {
			m.DeviceNote.SetText("runs here")
		}
		return
	}
	m.DeviceNote.Importance = widget.MediumImportance
	m.DeviceNote.SetText("")
}

// Dropped takes .gguf files dropped on the window: the first is the target,
// a second the drafter.
func (m *ModelsScreen) Dropped(uris []fyne.URI) {
	var files []string
	for _, u := range uris {
		if strings.HasSuffix(strings.ToLower(u.Path()), ".gguf") {
			files = append(files, u.Path())
		}
	}
	if len(files) > 0 {
		m.Target.SetText(files[0])
	}
	if len(files) > 1 {
		m.Source.SetSelected(SourceModel)
		m.Draft.SetText(files[1])
	}
}

func describeFound(paths []string) string {
	if len(paths) == 0 {
		return "No GGUF models found. Build the demo pair: a demo target expanded from the tiny stories260K model (it costs like a 35M-parameter model and writes real children's stories) and a noisy copy of stories260K as its drafter, so every screen can be tried and speculation visibly pays."
	}
	const most = 12 // a long list would push the screen's controls away
	more := ""
	if len(paths) > most {
		more = fmt.Sprintf("\n  ... and %d more (use Open...)", len(paths)-most)
		paths = paths[:most]
	}
	return "Models found:\n  " + strings.Join(paths, "\n  ") + more
}

// spec reads the selection from the widgets: the target and the chosen
// draft source kind's fields, set on the session's pair.
func (m *ModelsScreen) spec() (profiles.PairSpec, profiles.DraftSourceKind, error) {
	ps := m.s.Spec
	if ps.Target = strings.TrimSpace(m.Target.Text); ps.Target == "" {
		return ps, profiles.DraftSourceKind{}, fmt.Errorf("choose a target model first")
	}
	k, ok := sourceKind(m.Source.Selected)
	if !ok {
		return ps, k, fmt.Errorf("choose a draft source")
	}
	values := map[string]string{}
	for _, f := range k.Fields {
		values[f.Name] = m.Fields[f.Name].Text
	}
	ps.DraftThreads = 0
	if t := strings.TrimSpace(m.DraftThreads.Text); t != "" && k.Movable {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 {
			return ps, k, fmt.Errorf("draft threads %q: a positive number, or empty for the default", t)
		}
		ps.DraftThreads = n
	}
	return ps, k, k.Set(&ps, values)
}

func (m *ModelsScreen) load() {
	ps, kind, err := m.spec()
	if err != nil {
		m.s.ShowError(err)
		return
	}
	target, threads := ps.Target, ps.DraftThreads
	device, draftDevice := m.Device.Selected, m.DraftDevice.Selected
	if draftDevice == sameDevice || draftDevice == device || !kind.Movable { // n-gram lookup needs no device
		draftDevice = ""
	}
	for _, d := range []string{device, draftDevice} {
		if why := m.unavailable(d); d != "" && why != "" {
			m.Status.SetText("Not loaded: the " + d + " backend cannot run here: " + why)
			m.s.ShowError(fmt.Errorf("the %s backend cannot run here: %s", d, why))
			return
		}
	}
	m.Load.Disable()
	m.loading++
	m.s.Busy()
	m.Status.SetText("Reading " + target + " ...")
	hiddenRef := ps.DraftHidden
	db := m.s.DBPath
	m.s.Go(func(context.Context) {
		info, err := profiles.DescribePair(context.Background(), profiles.PairSpec{Target: target, Draft: ps.Draft, Layers: ps.Layers, DraftHidden: hiddenRef}, db)
		m.s.UI(func() {
			m.Load.Enable()
			m.loading--
			m.s.Busy()
			if err != nil {
				m.Status.SetText("Not loaded: " + err.Error())
				m.s.ShowError(err)
				return
			}
			m.Info.SetText(info)
			if hiddenRef == "" && m.lossView.Visible() {
				m.lossView.Hide() // the training chart belongs to a hidden drafter
				if m.body != nil {
					m.body.Refresh()
				}
			}
			m.Status.SetText("Loaded; reading what the database holds of this pair ...")
			ps.Backend, ps.DraftBackend, ps.DraftThreads = device, draftDevice, threads
			m.s.SetPair(ps) // clears the previous pair's results, shows this one's
		})
	})
}

func (m *ModelsScreen) buildDemo() {
	m.DemoBtn.Disable()
	m.loading++
	m.s.Busy()
	m.Progress.Show()
	m.Status.SetText("Writing the demo pair to " + m.s.DemoDir + " ...")
	m.s.Go(func(ctx context.Context) {
		t, d, err := DemoPair(ctx, m.s.DemoDir, func(f float64) {
			m.s.UI(func() { m.Progress.SetValue(f) })
		})
		m.s.UI(func() {
			m.DemoBtn.Enable()
			m.loading--
			m.s.Busy()
			m.Progress.Hide()
			if err != nil {
				m.Status.SetText("Demo pair failed: " + err.Error())
				return
			}
			m.Target.SetText(t)
			m.Draft.SetText(d)
			m.Source.SetSelected(SourceModel)
			m.Info.SetText(describeFound(FindModels(m.s.DemoDir)))
			// the status last: tests and users read it as "done"
			m.Status.SetText("Demo pair ready (a demo construction from stories260K, not a real model of that size). Press Load and check.")
		})
	})
}

// train distils a hidden-state drafter from the target in the background:
// progress and per-epoch losses show as it goes; the drafter is stored
// (checkpointed every epoch) and selected as the draft source at the end.
func (m *ModelsScreen) train() {
	target, prompts := strings.TrimSpace(m.Target.Text), strings.TrimSpace(m.TrainPrompts.Text)
	if target == "" || prompts == "" {
		m.s.ShowError(fmt.Errorf("training a hidden-state drafter needs a target and a prompt suite file"))
		return
	}
	m.s.SetPrompts(prompts)
	m.TrainBtn.Disable()
	m.CancelTrain.Show()
	m.Progress.SetValue(0)
	m.Progress.Show()
	m.Status.SetText("Generating training data with the target ...")
	set := m.TrainSettings
	var id int64
	wired := make(chan struct{}) // the job's end waits until Cancel is wired
	defer close(wired)
	job, err := m.s.startJob(jobTrain, true, func(ctx context.Context, job *jobs.Job) (any, error) {
		defer func() { <-wired }()
		var log strings.Builder
		var train, held, epochs []float64
		b, err := m.s.Bench(ctx)
		if err == nil {
			id, _, err = b.TrainDrafter(ctx, profiles.TrainSpec{Target: target, Prompts: prompts, Settings: set}, func(e profiles.TrainEvent) {
				var line, status string
				frac := -1.0
				switch {
				case e.Phase == "start":
					line = fmt.Sprintf("Training hidden drafter %d for %s: %d training tokens, %d held out; %d parameters; products in %s.", e.ID, target, e.Tokens[0], e.Tokens[1], e.Params, e.Precision)
				case e.Phase == "data":
					status, frac = fmt.Sprintf("Generating training data: %d of %d tokens%s", e.Done, e.Total, left(e.ETA)), float64(e.Done)/float64(e.Total)
				case e.Phase == "train":
					status = fmt.Sprintf("Epoch %d of %d (depth %d): batch %d of %d, loss %.4f%s", e.Epoch+1, set.Epochs, e.Depth, e.Done, e.Total, e.Loss, left(e.ETA))
					frac = (float64(e.Epoch) + float64(e.Done)/float64(e.Total)) / float64(set.Epochs)
				case e.Record != nil:
					r := e.Record
					epochs, train, held = append(epochs, float64(r.Epoch)), append(train, r.Train), append(held, r.HeldOut)
					line = fmt.Sprintf("epoch %2d depth %d: train %.4f, held-out %.4f (MSE %.4f, KL %.4f), top-1 agreement %.1f%%", r.Epoch, r.Depth, r.Train, r.HeldOut, r.MSE, r.KL, 100*r.Agree)
				}
				if line != "" {
					log.WriteString(line + "\n")
				}
				if status != "" || frac >= 0 {
					job.Progress(frac, status)
				}
				text := log.String()
				var chart *ChartSpec
				if e.Record != nil {
					chart = &ChartSpec{Title: "Hidden drafter training", XLabel: "epoch", YLabel: "loss (weighted MSE + KL)", Width: 520, Height: 220,
						Series: []Series{{Name: "train", X: slices.Clone(epochs), Y: slices.Clone(train)}, {Name: "held out", X: slices.Clone(epochs), Y: slices.Clone(held)}}}
				}
				m.s.UI(func() {
					if chart != nil {
						m.LossChart.SetSpec(*chart)
						m.lossView.Show()
						if m.body != nil {
							m.body.Refresh() // re-layout: the chart was hidden
						}
					}
					if status != "" {
						m.Status.SetText(status)
					}
					if frac >= 0 {
						m.Progress.SetValue(frac)
					}
					if line != "" {
						m.Info.SetText(text)
					}
				})
			})
		}
		return id, err
	}, func(v jobs.View) {
		err := v.Err
		{
			defer m.TrainBtn.Enable() // last: it tells watchers training is over
			m.CancelTrain.Hide()
			m.Progress.Hide()
			m.cancelTrain = nil
			switch {
			case v.State == jobs.Cancelled && id > 0:
				m.Status.SetText(fmt.Sprintf("Training stopped; drafter %d keeps its last checkpoint (resume: arborist train drafter --resume %d).", id, id))
			case err != nil:
				m.Status.SetText("Training failed: " + err.Error())
				m.s.ShowError(err)
			default:
				m.RefreshDrafters()
				m.Source.SetSelected(SourceHidden)
				m.Draft.SetText(strconv.FormatInt(id, 10))
				m.Status.SetText(fmt.Sprintf("Trained hidden drafter %d. Press Load and check to use it.", id))
			}
		}
	})
	if err != nil { // refused: another heavy job runs
		m.TrainBtn.Enable()
		m.CancelTrain.Hide()
		m.Progress.Hide()
		m.Status.SetText("Not started: " + err.Error())
		return
	}
	m.cancelTrain = job.Cancel
}
