package app

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"arborist/profiles"
)

// samplingForm is the sampling controls, one row per sampling field
// (profiles.SamplingFields): the field's label, an entry that starts at the
// field's default, and the field's help with its bounds under it. The rows
// come from the fields, so a screen offers every sampling parameter the CLI
// and config.yaml take, bounded as they bound it, and a new field needs no
// edit here.
type samplingForm struct {
	fields  []profiles.SamplingField
	entries map[string]*widget.Entry // by field name
	form    *widget.Form
}

// newSamplingForm builds the controls; changed (nil: none) is called when
// the user edits a value.
func newSamplingForm(changed func()) *samplingForm {
	s := &samplingForm{fields: profiles.SamplingFields(), entries: map[string]*widget.Entry{}, form: widget.NewForm()}
	for _, f := range s.fields {
		e := widget.NewEntry()
		e.SetText(f.Default)
		e.Validator = func(v string) error { // the field's own check, shown beside the entry
			var p profiles.SampleParams
			return p.Set(f.Name, v)
		}
		e.OnChanged = func(string) {
			if changed != nil {
				changed()
			}
		}
		s.entries[f.Name] = e
		s.form.AppendItem(&widget.FormItem{Text: f.Label, Widget: fitChars(e, 8), HintText: f.Usage()})
	}
	return s
}

// row lays the controls out in one row, a short label before each entry,
// for a screen without room for the form's help lines; the help button
// at its end shows each field's help with its bounds.
func (s *samplingForm) row(win fyne.Window) []fyne.CanvasObject {
	var out []fyne.CanvasObject
	for _, f := range s.fields {
		out = append(out, widget.NewLabel(f.Label), fitChars(s.entries[f.Name], 5))
	}
	help := widget.NewButtonWithIcon("", theme.HelpIcon(), func() {
		if win != nil {
			dialog.ShowInformation("Sampling", s.help(), win)
		}
	})
	help.Importance = widget.LowImportance
	return append(out, help)
}

// help is each field's help with its bounds, a line a field.
func (s *samplingForm) help() string {
	var lines []string
	for _, f := range s.fields {
		lines = append(lines, f.Label+": "+f.Usage()+".")
	}
	return strings.Join(lines, "\n")
}

// object is what a screen lays out.
func (s *samplingForm) object() fyne.CanvasObject { return s.form }

// params reads the controls, each value checked by its field; an error
// names the field and its bounds.
func (s *samplingForm) params() (profiles.SampleParams, error) {
	p := profiles.DefaultSampling()
	for _, f := range s.fields {
		if err := p.Set(f.Name, s.entries[f.Name].Text); err != nil {
			return p, fmt.Errorf("%s: %w", f.Label, err)
		}
	}
	return p, nil
}

// setParams shows p, each value as the field writes it (a config.yaml's
// sampling, a stored run's).
func (s *samplingForm) setParams(p profiles.SampleParams) {
	for _, f := range s.fields {
		s.entries[f.Name].SetText(p.Get(f.Name))
	}
}

// checkTemp checks a temperature typed in against the temperature field's
// bounds, the same as the CLI's, config.yaml's and the server's.
func checkTemp(text string) error {
	p := profiles.DefaultSampling()
	return p.Set(profiles.TemperatureField, text)
}

// setEnabled enables or disables every control (while a run decodes).
func (s *samplingForm) setEnabled(on bool) {
	for _, e := range s.entries {
		if on {
			e.Enable()
		} else {
			e.Disable()
		}
	}
}
