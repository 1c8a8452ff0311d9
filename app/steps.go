package app

// The screens' parts in the guide (stepper): each says which steps it
// does and whether one runs for the chosen pair, from its own state.

// Steps are the Models screen's: choosing the pair.
func (m *ModelsScreen) Steps() []Step { return []Step{StepModels} }

// Running: a pair is being read or the demo pair built.
func (m *ModelsScreen) Running(Step) bool { return m.loading > 0 }

// Steps are the Profile screen's.
func (p *ProfileScreen) Steps() []Step { return []Step{StepProfile} }

// Running: its profile job runs for the chosen pair.
func (p *ProfileScreen) Running(Step) bool { return p.s.jobRunning(jobProfile) }

// Steps are the Speedup model screen's workflows: calibrate and tune.
func (sp *SpeedupScreen) Steps() []Step { return []Step{StepCalibrate, StepTune} }

// Running: the step's job runs for the chosen pair.
func (sp *SpeedupScreen) Running(st Step) bool {
	if st == StepCalibrate {
		return sp.s.jobRunning(jobCalibrate)
	}
	return sp.s.jobRunning(jobTune)
}

// Steps are the Run screen's.
func (r *RunScreen) Steps() []Step { return []Step{StepRun} }

// Running: its run job runs for the chosen pair.
func (r *RunScreen) Running(Step) bool { return r.s.jobRunning(jobRun) }

// Steps are the Export screen's: an export, which is quick.
func (e *ExportScreen) Steps() []Step { return []Step{StepExport} }

// Running: an export is written at once; never under way.
func (e *ExportScreen) Running(Step) bool { return false }
