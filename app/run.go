package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/app/present"
	"arborist/profiles"
	"arborist/profiles/jobs"
)

// RunScreen runs a full speculative decoding session through the workflow
// core: any plan with all its shape parameters (or the tuned plan),
// streaming text with accepted draft tokens marked, live tokens/s, AAL and
// acceptance, a per-step timeline, a Stop button; every run is stored with
// its predicted speedup.
type RunScreen struct {
	s      *Session
	Prompt *widget.Entry
	Suite  *widget.Entry // prompt suite file, one prompt per line
	// SuiteCheck says when the remembered suite is gone, with a button
	// to pick it again.
	SuiteCheck *fileCheck
	// Source chooses, explicitly, between the prompt and the suite file:
	// a filled-in file never silently overrides the prompt.
	Source   *widget.RadioGroup
	Strategy *widget.Select
	// Fields edit the plan's shape parameters, one editor a field the
	// strategies offer (built from their field metadata, by YAML name);
	// only the chosen strategy's are shown and enabled
	Fields     map[string]*planEditor
	fieldOrder []string
	// given is the plan SetPlan filled the editors from (the tuned plan,
	// with the fields the faces do not edit, such as a tuned predictor's
	// id), and givenShows what the editors showed of it: while they still
	// show that, Plan is given itself, not a plan rebuilt from text
	given      profiles.Plan
	givenShows map[string]string
	setting    bool // SetPlan is filling the editors
	UseTuned   *widget.Button
	PlanNote   *widget.Label
	Tokens     *widget.Entry
	// Sampling is every sampling parameter the run verb takes
	// (temperature, top-k, top-p, min-p, seed), one entry a sampling field
	Sampling   *samplingForm
	Start      *widget.Button
	Stop       *widget.Button
	Baseline   *widget.Check // also run plain decoding and store the measured speedup
	Text       *widget.RichText
	TextScroll *container.Scroll // follows the newest text unless scrolled up
	Stats      *widget.Label
	Timeline   *Chart
	shapes     *fyne.Container // the chosen strategy's editors, in rows
	stream     []piece         // the streamed text, laid out by flow
	flowWidth  float32         // the view width the text was laid out for
	predicted  float64         // the tuned plan's prediction, while the editor holds it
	price      string          // that prediction with its interval (present.Price)
	cancel     context.CancelFunc
	done       chan struct{}
}

// NewRunScreen builds the screen.
func NewRunScreen(s *Session) *RunScreen {
	r := &RunScreen{s: s}
	r.Prompt = widget.NewMultiLineEntry()
	r.Prompt.SetText("Once upon a time")
	r.Prompt.SetMinRowsVisible(2)
	r.Suite = widget.NewEntry()
	r.Suite.SetPlaceHolder("file, one prompt per line")
	r.Suite.SetText(s.Prompts())
	r.SuiteCheck = newFileCheck(r.Suite, "prompt suite", nil, s.Win)
	r.SuiteCheck.skip = func() bool { return r.Source.Selected != PromptSuite }
	r.Source = widget.NewRadioGroup([]string{PromptOne, PromptSuite}, func(string) { r.enableSource(); r.SuiteCheck.Check() })
	r.Source.Horizontal = true
	r.Source.Required = true
	r.Source.SetSelected(PromptOne)
	r.Fields = map[string]*planEditor{}
	choices := profiles.Choices()
	for _, f := range choices.PlanFields {
		r.Fields[f.Name] = newPlanEditor(f, r.edited)
		r.fieldOrder = append(r.fieldOrder, f.Name)
	}
	r.shapes = container.NewVBox()
	r.Strategy = widget.NewSelect(choices.Strategies, nil)
	r.Strategy.SetSelected(choices.DefaultStrategy)
	r.UseTuned = widget.NewButton("Use the tuned plan", r.useTuned)
	r.Strategy.OnChanged = func(string) { r.edited(); r.enable(); r.layoutFields() }
	r.PlanNote = widget.NewLabel("")
	r.PlanNote.Wrapping = fyne.TextWrapWord
	r.Tokens = widget.NewEntry()
	r.Tokens.SetText("128")
	r.Tokens.OnChanged = func(string) { r.notePlan() }
	r.Sampling = newSamplingForm(nil)
	r.Start = widget.NewButton("Run", r.run)
	r.Start.Importance = widget.HighImportance
	r.Stop = widget.NewButton("Stop", func() {
		if r.cancel != nil {
			r.cancel()
		}
	})
	r.Stop.Disable()
	r.Baseline = widget.NewCheck("compare with plain decoding", nil) // measured speedup; greedy output checked identical
	r.Text = widget.NewRichText()
	r.Text.Wrapping = fyne.TextWrapOff // flow() breaks the lines itself
	r.TextScroll = container.NewVScroll(&fyne.Container{Layout: flowLayout{r}, Objects: []fyne.CanvasObject{r.Text}})
	r.Stats = widget.NewLabel(runHint)
	r.Stats.Wrapping = fyne.TextWrapWord
	r.Timeline = newChart(600, 170)
	r.Timeline.Name, r.Timeline.Zoomable = "timeline", true
	s.OnChange(r.enable)
	s.OnPair(r.pairShown)
	r.enable()
	r.enableSource()
	return r
}

// runHint is the stats line before a run.
const runHint = "Green: draft tokens the target accepted. Plain: the target's own (bonus) tokens."

// pairShown clears the previous pair's run (its text, figures, timeline
// and zoom, and the plan given from its tune, whose predictor id means
// nothing for another pair), and shows the new pair's newest stored run.
func (r *RunScreen) pairShown(st *profiles.PairState, err error) {
	if st == nil {
		if err == nil {
			r.forgetPlan()
			r.clearText()
			r.Stats.SetText(runHint)
			r.Timeline.Clear()
		}
		return
	}
	if r.cancel != nil || r.Stats.Text != runHint {
		return // a run since the pair was chosen shows its own
	}
	if len(st.Runs) == 0 {
		if st.Steps.Runs > 0 {
			r.Stats.SetText(fmt.Sprintf("No run of this pair yet; Compare lists the %d stored runs of its target with other draft sources.", st.Steps.Runs))
		}
		return
	}
	r.Stats.SetText(describeStoredRun(st.Runs[0]))
	r.Timeline.SetSpec(storedTimeline(st.LastSteps))
}

// describeStoredRun says what a stored run ran and measured.
func describeStoredRun(run profiles.Run) string {
	plan, _ := run.RanPlan()
	with := ""
	if run.Drafter != "" && plan.NeedsSource() {
		with = " with " + run.Drafter
	}
	s := fmt.Sprintf("Newest stored run of this pair: run %d (%s, %s), %s%s: %d tokens, %.1f tokens/s, AAL %.2f, acceptance %.1f%%.",
		run.ID, run.Status, run.Created.Local().Format("2006-01-02 15:04"), plan, with, run.Tokens, run.TokensPerSecond, run.AAL, 100*run.Acceptance)
	if run.PredictedSpeedup > 0 && plan.NeedsSource() {
		s += fmt.Sprintf(" Predicted speedup %.2fx.", run.PredictedSpeedup)
	}
	if run.MeasuredSpeedup > 0 && plan.NeedsSource() {
		s += fmt.Sprintf(" Measured speedup over plain decoding: %.2fx.", run.MeasuredSpeedup)
	}
	return s + " Its text is not stored; Run shows a new one."
}

// storedTimeline charts a stored run's steps as timeline charts a live one.
func storedTimeline(steps []profiles.StoredStep) ChartSpec {
	live := make([]profiles.Step, len(steps))
	for i, s := range steps {
		live[i].Draft, live[i].Verify, live[i].Overhead, live[i].Overlap = s.Draft, s.Verify, s.Overhead, s.Overlap
	}
	return timeline(live)
}

// Title is the tab name.
func (r *RunScreen) Title() string { return "Run" }

// Content lays the screen out: only the shape rows of the chosen
// strategy are shown, so the streamed text keeps its room at 1024x640.
func (r *RunScreen) Content() fyne.CanvasObject {
	label := widget.NewLabel
	r.layoutFields()
	form := widget.NewForm(
		widget.NewFormItem("Run on", container.NewBorder(nil, nil, r.Source, nil, r.Suite)),
		widget.NewFormItem("Prompt", r.Prompt),
		widget.NewFormItem("Plan", container.NewBorder(nil, nil, container.NewHBox(r.Strategy, r.UseTuned), nil, r.PlanNote)),
	)
	head := func(text string) fyne.CanvasObject {
		return newMinWidth(widget.NewLabelWithStyle(text, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true}), 110)
	}
	decoding := container.NewHBox(head("Decoding"), label("tokens"), fitChars(r.Tokens, 6), r.Start, r.Stop, r.Baseline)
	sampling := container.NewHBox(append([]fyne.CanvasObject{head("Sampling")}, r.Sampling.row(r.s.Win)...)...)
	top := container.NewVBox(form, r.SuiteCheck.Box, r.shapes, sampling, decoding, r.Stats)
	r.enable()
	// the text and the timeline share the height: a large window grows both
	body := container.NewVSplit(newMinSize(r.TextScroll, fyne.NewSize(320, 120)), r.Timeline.View(r.s.Win))
	body.Offset = 0.45
	return container.NewBorder(top, metricHelp(metricAAL, metricAcceptance, metricTPS), nil, nil, body)
}

// layoutFields puts the chosen strategy's editors in rows of at most
// four fields, the first headed by the strategy's name.
func (r *RunScreen) layoutFields() {
	p := profiles.Plan{Strategy: r.Strategy.Selected}
	var rows []fyne.CanvasObject
	var row []fyne.CanvasObject
	n := 0
	flush := func() {
		if len(row) == 0 {
			return
		}
		head := ""
		if len(rows) == 0 {
			head = p.Strategy
		}
		l := widget.NewLabelWithStyle(head, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true})
		rows = append(rows, container.NewHBox(append([]fyne.CanvasObject{newMinWidth(l, 110)}, row...)...))
		row, n = nil, 0
	}
	for _, name := range r.fieldOrder {
		if !p.Reads(name) {
			continue
		}
		row = append(row, r.Fields[name].objects()...)
		if n++; n == 4 {
			flush()
		}
	}
	flush()
	r.shapes.Objects = rows
	r.shapes.Refresh()
}

// planEditor edits one plan field, made from its metadata: an entry for
// numbers and lists, a check for a switch, a choice for a word.
type planEditor struct {
	field  profiles.PlanField
	entry  *widget.Entry
	check  *widget.Check
	choice *widget.Select
}

func newPlanEditor(f profiles.PlanField, changed func()) *planEditor {
	e := &planEditor{field: f}
	switch {
	case f.Kind == profiles.BoolField:
		e.check = widget.NewCheck(f.Label, func(bool) { changed() })
	case len(f.Choices) > 0:
		e.choice = widget.NewSelect(f.Choices, func(string) { changed() })
	default:
		e.entry = widget.NewEntry()
		e.entry.SetPlaceHolder(f.Label)
		e.entry.OnChanged = func(string) { changed() }
	}
	e.set(f.Default)
	return e
}

// Widget is the editor's widget (to enable, disable or drive in tests).
func (e *planEditor) Widget() fyne.Disableable {
	switch {
	case e.check != nil:
		return e.check
	case e.choice != nil:
		return e.choice
	}
	return e.entry
}

// objects are what a row shows of the editor: its label and its widget.
func (e *planEditor) objects() []fyne.CanvasObject {
	switch {
	case e.check != nil:
		return []fyne.CanvasObject{e.check}
	case e.choice != nil:
		return []fyne.CanvasObject{widget.NewLabel(e.field.Label), e.choice}
	case e.field.Kind == profiles.IntListField:
		return []fyne.CanvasObject{widget.NewLabel(e.field.Label), newMinWidth(e.entry, max(96, entryWidth(e.entry, 9)))}
	}
	return []fyne.CanvasObject{widget.NewLabel(e.field.Label), fitChars(e.entry, 4)}
}

// value is the field's value as Plan.Get writes it.
func (e *planEditor) value() string {
	switch {
	case e.check != nil:
		return strconv.FormatBool(e.check.Checked)
	case e.choice != nil:
		return e.choice.Selected
	}
	return e.entry.Text
}

// set shows v, a value as Plan.Get writes it. A choice the editor does
// not offer (a plan's empty depth policy) shows the field's default, which
// means the same, rather than keeping the choice shown before.
func (e *planEditor) set(v string) {
	switch {
	case e.check != nil:
		e.check.SetChecked(v == "true")
	case e.choice != nil:
		if !slices.Contains(e.choice.Options, v) {
			v = e.field.Default
		}
		e.choice.SetSelected(v)
	default:
		e.entry.SetText(v)
	}
}

// The two sources a run reads its prompts from.
const (
	PromptOne   = "the prompt"
	PromptSuite = "a prompt suite file"
)

// enableSource enables the editor of the chosen prompt source only.
func (r *RunScreen) enableSource() {
	if r.Source.Selected == PromptSuite {
		r.Prompt.Disable()
		r.Suite.Enable()
	} else {
		r.Prompt.Enable()
		r.Suite.Disable()
	}
}

// Prompts reads the chosen prompt source.
func (r *RunScreen) Prompts() ([]string, error) {
	if r.Source.Selected != PromptSuite {
		if strings.TrimSpace(r.Prompt.Text) == "" {
			return nil, fmt.Errorf("the prompt is empty")
		}
		return []string{r.Prompt.Text}, nil
	}
	path := strings.TrimSpace(r.Suite.Text)
	if path == "" {
		return nil, fmt.Errorf("choose a prompt suite file, or run on the prompt")
	}
	texts, err := profiles.ReadPrompts(path)
	if err == nil {
		r.s.SetPrompts(path)
	}
	return texts, err
}

// appendText adds text to the stream and lays it out again; the view
// follows the newest text unless the user has scrolled up.
func (r *RunScreen) appendText(text string, style widget.RichTextStyle) {
	r.appendPieces([]streamed{{piece: piece{text, style}}})
}

// clearText empties the stream.
func (r *RunScreen) clearText() {
	r.stream = nil
	r.flow()
}

// piece is a run of streamed text in one style.
type piece struct {
	text  string
	style widget.RichTextStyle
}

// streamed is a piece as a run reports it; a prompt starts a paragraph of
// its own.
type streamed struct {
	piece
	prompt bool
}

// appendPieces adds a batch of streamed pieces and re-wraps once.
func (r *RunScreen) appendPieces(ps []streamed) {
	follow := r.atBottom()
	for _, p := range ps {
		if p.prompt && len(r.stream) > 0 {
			p.text = "\n\n" + p.text
		}
		if n := len(r.stream); n > 0 && r.stream[n-1].style == p.style {
			r.stream[n-1].text += p.text
		} else {
			r.stream = append(r.stream, p.piece)
		}
	}
	r.flow()
	r.follow(follow)
}

// flow breaks the stream into lines that fit the view, at spaces only, and
// sets them as the rich text's segments, one row per line. Fyne's own
// word wrap breaks a segment that starts near the end of a row into one
// character per row, and coloured tokens make a segment per token, so the
// stream is wrapped here instead.
func (r *RunScreen) flow() {
	width := r.flowWidth
	if width <= 0 {
		width = r.TextScroll.Size().Width
	}
	width -= 2*theme.InnerPadding() + theme.ScrollBarSize()
	r.Text.Segments = flowSegments(r.stream, width, theme.TextSize())
	r.Text.Refresh()
}

// flowSegments lays pieces out in lines of at most width (a word wider
// than a line gets a line of its own); each line's segments are inline but
// its last, which ends the row.
func flowSegments(stream []piece, width, size float32) []widget.RichTextSegment {
	type frag struct {
		text  string
		style widget.RichTextStyle
	}
	var lines [][]frag
	var line []frag
	var lineW float32
	var word []frag // the word being read: fragments of one or more styles
	flushWord := func() {
		if len(word) == 0 {
			return
		}
		var w float32
		for _, f := range word {
			w += fyne.MeasureText(f.text, size, f.style.TextStyle).Width
		}
		if lineW+w > width && len(line) > 0 {
			lines = append(lines, line)
			line, lineW = nil, 0
			if t := strings.TrimLeft(word[0].text, " "); t != word[0].text { // no leading space on a new line
				word[0].text = t
				w -= fyne.MeasureText(" ", size, word[0].style.TextStyle).Width
			}
		}
		line = append(line, word...)
		lineW += w
		word = nil
	}
	for _, p := range stream {
		start := 0
		for i, c := range p.text {
			switch {
			case c == '\n':
				if i > start {
					word = append(word, frag{p.text[start:i], p.style})
				}
				flushWord()
				lines = append(lines, line)
				line, lineW = nil, 0
				start = i + 1
			case c == ' ' && i > start && p.text[i-1] != ' ':
				// a space after a word ends it; the space starts the next
				word = append(word, frag{p.text[start:i], p.style})
				flushWord()
				start = i
			case c == ' ' && i == start && len(word) > 0:
				flushWord()
			}
		}
		if start < len(p.text) {
			word = append(word, frag{p.text[start:], p.style})
		}
	}
	flushWord()
	if len(line) > 0 {
		lines = append(lines, line)
	}
	var segs []widget.RichTextSegment
	for _, l := range lines {
		var row []*widget.TextSegment
		for _, f := range l {
			if n := len(row); n > 0 && row[n-1].Style == f.style {
				row[n-1].Text += f.text
				continue
			}
			row = append(row, &widget.TextSegment{Text: f.text, Style: f.style})
		}
		if len(row) == 0 {
			row = append(row, &widget.TextSegment{Style: widget.RichTextStyleInline})
		}
		row[len(row)-1].Style.Inline = false // ends the row
		for _, t := range row {
			segs = append(segs, t)
		}
	}
	return segs
}

// flowLayout gives the text the view's width and lays the stream out
// again when that width changes.
type flowLayout struct{ r *RunScreen }

func (l flowLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.NewPos(0, 0))
		o.Resize(size)
	}
	// Laid out again here, on the goroutine that lays out (a goroutine of
	// its own raced the text's refresh in the test driver); flowWidth set
	// first makes the layout this triggers a no-op.
	if w := l.r.TextScroll.Size().Width; w > 0 && w != l.r.flowWidth {
		l.r.flowWidth = w
		l.r.flow()
	}
}

func (l flowLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var m fyne.Size
	for _, o := range objs {
		m = m.Max(o.MinSize())
	}
	return m
}

// atBottom tells whether the stream's view shows its end (within a line).
func (r *RunScreen) atBottom() bool {
	s := r.TextScroll
	return s.Offset.Y+s.Size().Height >= s.Content.MinSize().Height-2*theme.TextSize()
}

func (r *RunScreen) follow(on bool) {
	if on {
		r.TextScroll.ScrollToBottom()
	}
}

// enable turns on the editors of the fields the chosen strategy reads.
func (r *RunScreen) enable() {
	p := profiles.Plan{Strategy: r.Strategy.Selected}
	for name, e := range r.Fields {
		if p.Reads(name) {
			e.Widget().Enable()
		} else {
			e.Widget().Disable()
		}
	}
	if r.s.Tuned == nil {
		r.UseTuned.Disable()
	} else {
		r.UseTuned.Enable()
	}
}

// useTuned loads the plan chosen on the Speedup model screen's tune into
// the editor, with its prediction: until an editor changes, Run runs that
// plan value itself.
func (r *RunScreen) useTuned() {
	t := r.s.Tuned
	if t == nil {
		return
	}
	r.SetPlan(t.Plan)
	r.predicted, r.price = t.Speedup, present.Price(*t)
	if r.s.TunedAssumed && t.Plan.NeedsSource() {
		// before calibration the price is the sliders', as the
		// Speedup model and Export screens say
		r.price += ", assumed acceptance: no calibration"
	}
	r.notePlan()
}

// notePlan says which plan the editor holds when it is the tuned one, with
// its prediction and, when the token budget is far from the generation
// length the prediction was made for, that it was made for that length.
func (r *RunScreen) notePlan() {
	t := r.s.Tuned
	if t == nil || !r.unedited() || r.predicted == 0 {
		return
	}
	note := fmt.Sprintf("the tuned plan: %s, predicted %s", t.Plan, r.price)
	if n, err := strconv.Atoi(strings.TrimSpace(r.Tokens.Text)); err == nil {
		if c := r.lengthNote(t.Plan, n); c != "" {
			note += "; " + c
		}
	}
	r.PlanNote.SetText(note)
}

// lengthNote is the caveat of a run of n tokens a prompt with a
// calibration made at another generation length ("" when there is none).
func (r *RunScreen) lengthNote(plan profiles.Plan, n int) string {
	if in := r.s.Inputs; in.Calibrated() && plan.NeedsSource() {
		return in.Acc.LengthNote(n)
	}
	return ""
}

// sentence starts s with a capital and ends it with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// SetPlan fills the editor from a plan: every field its strategy reads,
// zeros included. Until an editor changes, Plan returns p itself, fields
// the editor does not show (a tuned predictor's id) included.
func (r *RunScreen) SetPlan(p profiles.Plan) {
	r.setting = true
	r.Strategy.SetSelected(p.Strategy)
	// the editors show the plan as it runs: a default its strategy settles
	// (a duo plan's sequences left 0 run as 1) shows as what it means
	shown := p
	if c, err := p.Config(); err == nil {
		shown = c.Plan
	}
	for name, e := range r.Fields {
		if p.Reads(name) {
			e.set(shown.Get(name))
		}
	}
	r.setting = false
	r.given, r.givenShows = p, r.shows()
	r.predicted = 0
}

// shows is what the editors of the chosen strategy's fields show.
func (r *RunScreen) shows() map[string]string {
	p := profiles.Plan{Strategy: r.Strategy.Selected}
	out := map[string]string{}
	for name, e := range r.Fields {
		if p.Reads(name) {
			out[name] = e.value()
		}
	}
	return out
}

// unedited says whether the editors still show the plan SetPlan gave.
func (r *RunScreen) unedited() bool {
	return r.givenShows != nil && r.given.Strategy == r.Strategy.Selected && maps.Equal(r.shows(), r.givenShows)
}

// edited follows a change of the strategy or a field: a plan edited away
// from the one given is no longer that plan, nor predicted as it was.
func (r *RunScreen) edited() {
	if r.setting || r.givenShows == nil {
		return
	}
	if r.unedited() {
		return // edited back
	}
	r.predicted = 0
	r.PlanNote.SetText("")
}

// Plan reads the editor: the plan SetPlan gave while the editors show it
// unchanged, else the chosen strategy with the fields it reads (the core's
// ParsePlan, as the run verb's flags are read; the given plan's fields no
// editor shows are kept while its strategy is chosen).
func (r *RunScreen) Plan() (profiles.Plan, error) {
	if r.unedited() {
		return r.given, r.given.Validate()
	}
	values := map[string]string{}
	if r.given.Strategy == r.Strategy.Selected {
		values = r.given.Values() // what the editors do not show
	}
	for name, e := range r.Fields {
		values[name] = e.value()
	}
	return profiles.ParsePlan(r.Strategy.Selected, values)
}

// forgetPlan drops the plan SetPlan gave (it was another pair's: its
// predictor id means nothing here); the editors keep showing its shape.
func (r *RunScreen) forgetPlan() {
	r.given, r.givenShows, r.predicted = profiles.Plan{}, nil, 0
	r.PlanNote.SetText("")
}

// sampling reads the token budget and the sampling, every field checked
// against its bounds as the run verb checks its flags.
func (r *RunScreen) sampling() (int, profiles.SampleParams, error) {
	n, err := strconv.Atoi(strings.TrimSpace(r.Tokens.Text))
	if err != nil || n < 1 {
		return 0, profiles.SampleParams{}, fmt.Errorf("tokens %q must be a positive number", r.Tokens.Text)
	}
	p, err := r.Sampling.params()
	if err != nil {
		return 0, profiles.SampleParams{}, err
	}
	return n, p, nil
}

func (r *RunScreen) run() {
	plan, err := r.Plan()
	if err != nil {
		r.s.ShowError(err)
		return
	}
	n, params, err := r.sampling()
	if err != nil {
		r.s.ShowError(err)
		return
	}
	ps := r.s.PairSpec()
	if ps.Target == "" {
		r.s.ShowError(fmt.Errorf("choose and load models on the Models screen first"))
		return
	}
	if plan.NeedsSource() && ps.Sources() == 0 {
		r.s.ShowError(fmt.Errorf("strategy %s needs a draft source: choose one on the Models screen", plan.Strategy))
		return
	}
	prompts, err := r.Prompts()
	if err != nil {
		r.s.ShowError(err)
		return
	}
	predicted := 0.0 // the core predicts an edited plan
	if r.unedited() {
		predicted = r.predicted
	}
	opt := profiles.RunOptions{Plan: plan, Sample: params, MaxTokens: n, Prompts: prompts, Predicted: predicted,
		PredictedAssumed: predicted > 0 && r.s.TunedAssumed, Baseline: r.Baseline.Checked && plan.NeedsSource()}
	// a prediction holds at its calibration's temperature: a run at
	// another is told so beside it
	price := fmt.Sprintf("%.2fx", predicted)
	if predicted > 0 && r.price != "" {
		price = r.price
	}
	caveat := ""
	if in := r.s.Inputs; in.Calibrated() && plan.NeedsSource() && in.Acc.Sample.Temp != params.Temp {
		caveat = fmt.Sprintf(" The prediction assumes temperature %g (its calibration's); this run samples at %g, so its measured speedup may differ from it.", in.Acc.Sample.Temp, params.Temp)
	}
	if note := r.lengthNote(plan, n); note != "" {
		caveat += " " + sentence(note)
	}
	finished := make(chan struct{})
	r.done = finished
	r.Start.Disable()
	r.Stop.Enable()
	r.Sampling.setEnabled(false)
	r.clearText()
	r.Stats.SetText("Loading models ...")
	pair := r.s.pairNow()
	wired := make(chan struct{}) // the job's end waits until Stop is wired
	defer close(wired)
	job, err := r.s.startJob(jobRun, true, func(ctx context.Context, job *jobs.Job) (any, error) {
		defer close(finished)
		err := r.session(ctx, job, ps, opt, pair, price, caveat)
		<-wired
		return nil, err
	}, func(v jobs.View) {
		r.Start.Enable()
		r.Stop.Disable()
		r.Sampling.setEnabled(true)
		r.cancel = nil
		if !r.s.samePair(pair) {
			return // the run of the pair chosen before is stored; its figures are not this pair's
		}
		if v.State == jobs.Failed {
			r.Stats.SetText(r.Stats.Text + " Failed: " + v.Err.Error())
			r.s.ShowError(v.Err)
		}
	})
	if err != nil { // refused: another heavy job runs
		close(finished)
		r.Start.Enable()
		r.Stop.Disable()
		r.Sampling.setEnabled(true)
		r.Stats.SetText("Not started: " + err.Error())
		return
	}
	r.cancel = job.Cancel
}

// Wait blocks until the current run (if any) has finished.
func (r *RunScreen) Wait() {
	if r.done != nil {
		<-r.done
	}
}

// session runs the suite in the core, drawing tokens and steps as they come.
func (r *RunScreen) session(ctx context.Context, job *jobs.Job, ps profiles.PairSpec, opt profiles.RunOptions, pair int, price, caveat string) error {
	b, err := r.s.Bench(ctx)
	if err != nil {
		return err
	}
	var steps []profiles.Step
	tokens, accepted, drafted := 0, 0, 0
	var gen time.Duration // generation time only: the steps' own times, as stored
	lastDraw := time.Now()
	// streamed text goes to the screen in batches, at most every 100 ms:
	// re-wrapping the stream per token cost the UI goroutine a core's
	// share on a 2-core machine while the run was timed, and plain
	// decoding (not streamed) was not charged for it, so the measured
	// speedup came out low (1.22x where the CLI measures 2x)
	var (
		outMu     sync.Mutex
		pending   []streamed
		lastFlush = time.Now()
	)
	flush := func() { // with outMu held
		if len(pending) == 0 {
			return
		}
		batch := pending
		pending = nil
		lastFlush = time.Now()
		r.s.UI(func() {
			if r.s.samePair(pair) {
				r.appendPieces(batch)
			}
		})
	}
	prompts := len(opt.Prompts)
	opt.OnPrompt = func(i int, prompt string) {
		if prompts > 0 {
			job.Progress(float64(i)/float64(prompts), fmt.Sprintf("prompt %d of %d", i+1, prompts))
		}
		outMu.Lock()
		defer outMu.Unlock()
		pending = append(pending, streamed{piece{prompt, widget.RichTextStyle{Inline: true, TextStyle: fyne.TextStyle{Italic: true}}}, true})
		flush()
	}
	opt.OnToken = func(_ int, text string, draftTok bool) {
		style := widget.RichTextStyleInline
		if draftTok {
			style.ColorName = colorAccepted
		}
		outMu.Lock()
		defer outMu.Unlock()
		pending = append(pending, streamed{piece: piece{text, style}})
		if time.Since(lastFlush) > 100*time.Millisecond {
			flush()
		}
	}
	opt.OnStep = func(_ int, s profiles.Step) {
		steps = append(steps, s)
		tokens += s.Emitted
		accepted += s.Accepted
		drafted += s.Drafted
		gen += s.Draft + s.Verify + s.Overhead
		if time.Since(lastDraw) > 250*time.Millisecond {
			lastDraw = time.Now()
			stats := liveStats(tokens, len(steps), accepted, drafted, gen)
			tl := timeline(steps)
			r.s.UI(func() {
				if r.s.samePair(pair) {
					r.Stats.SetText(stats)
					r.Timeline.SetSpec(tl)
				}
			})
		}
	}
	opt.OnRound = func(round, rounds int) {
		msg := fmt.Sprintf("Timing the plan against plain decoding: round %d of %d ...", round, rounds)
		r.s.UI(func() {
			if r.s.samePair(pair) {
				r.Stats.SetText(msg)
			}
		})
	}
	res, runErr := b.Run(ctx, ps, opt)
	outMu.Lock()
	flush()
	outMu.Unlock()
	if res == nil {
		return runErr
	}
	t := &res.Totals
	// t.TPS() divides by decode time only (no loading, prefill or
	// baseline): the figure stored with the run and shown on Compare.
	stats := fmt.Sprintf("%d tokens, %.1f tokens/s over %s of generation, AAL %.2f, acceptance %.1f%% (%d steps).", t.Tokens, t.TPS(),
		t.Decode.Round(time.Millisecond), t.AAL(), 100*t.Acceptance(), t.Steps)
	if n := present.AheadNote(t); n != "" {
		stats += " " + strings.ToUpper(n[:1]) + n[1:] + "."
	}
	if res.RunID > 0 {
		stats += fmt.Sprintf(" Stored as run %d (%s).", res.RunID, res.Status)
	}
	switch {
	case res.Predicted > 0 && res.PredictedOn != "":
		stats += fmt.Sprintf(" Predicted speedup %.2fx (%s).", res.Predicted, res.PredictedOn)
	case res.Predicted > 0:
		stats += fmt.Sprintf(" Predicted speedup %s (the tuned plan's, as stored with it).", price)
	case res.PredictedOn != "":
		stats += " No prediction: " + res.PredictedOn + "."
	}
	if res.Predicted > 0 {
		stats += caveat
	}
	if res.Base != nil && !res.SelfBaseline {
		stats += " Measured speedup: " + present.MeasuredNote(res) + "."
		if res.Greedy && res.Identical {
			stats += " Output identical to plain decoding."
		}
	}
	if h := res.Hidden; h != nil {
		stats += fmt.Sprintf(" Hidden drafter: %d of %d steps re-sampled after a rejection (%.1f%% of decode time).", h.Resampled, h.Steps, 100*h.ResampleShare)
	}
	tl := timeline(steps)
	r.s.UI(func() {
		if r.s.samePair(pair) {
			r.Stats.SetText(stats)
			r.Timeline.SetSpec(tl)
		}
		r.s.Changed()
	})
	return runErr
}

// liveStats summarises a run in progress; gen is the generation time so
// far (the steps' draft, verify and overhead times).
func liveStats(tokens, steps, accepted, drafted int, gen time.Duration) string {
	aal, acc, tps := 0.0, 0.0, 0.0
	if steps > 0 {
		aal = float64(tokens) / float64(steps)
	}
	if drafted > 0 {
		acc = 100 * float64(accepted) / float64(drafted)
	}
	if gen > 0 {
		tps = float64(tokens) / gen.Seconds()
	}
	return fmt.Sprintf("%d tokens, %.1f tokens/s, AAL %.2f, acceptance %.1f%% (%d steps).", tokens, tps, aal, acc, steps)
}

// timeline charts each step's draft, verify and overhead time, and the
// drafting that overlapped verification (duo, AOT).
func timeline(steps []profiles.Step) ChartSpec {
	names := []string{"draft", "verify", "overhead", "overlap (draft during verify)"}
	series := make([]Series, len(names))
	for i := range series {
		series[i].Name = names[i]
	}
	for i, s := range steps {
		for k, d := range []time.Duration{s.Draft, s.Verify, s.Overhead, s.Overlap} {
			series[k].X = append(series[k].X, float64(i+1))
			series[k].Y = append(series[k].Y, float64(d)/1e6)
		}
	}
	return ChartSpec{Title: "Per-step timeline", XLabel: "step", YLabel: "milliseconds", Series: series, Width: 760, Height: 260}
}
