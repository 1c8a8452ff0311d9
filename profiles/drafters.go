package profiles

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"arborist/engine/gguf"
	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/kernels"
	"arborist/profiles/hardware"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
	"arborist/profiles/trainsize"
)

// ReadPrompts reads a prompt suite: one prompt per non-blank line.
func ReadPrompts(path string) ([]string, error) {
	f, st, err := gguf.OpenRegular(path) // a FIFO or a device is refused, never read without end
	if err != nil {
		return nil, fmt.Errorf("prompts: %s: %w", path, err)
	}
	defer f.Close()
	if st.Size() > maxPromptBytes {
		return nil, fmt.Errorf("prompts %s: %d bytes, more than a prompt suite may hold (%d MiB)", path, st.Size(), maxPromptBytes>>20)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxPromptLine)
	line := 0
	for sc.Scan() {
		line++
		if l := strings.TrimSpace(sc.Text()); l != "" {
			if len(out) == maxPrompts {
				return nil, fmt.Errorf("prompts %s: more than %d prompts (line %d), the most a suite may hold", path, maxPrompts, line)
			}
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, promptLineError(path, line+1, err) // the line that broke it
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prompts %s: no prompts in the file", path)
	}
	return out, nil
}

// TrainSpec says what drafter to train, or which to resume.
type TrainSpec struct {
	Target   string // target GGUF (for a resume: overrides the stored path)
	Prompts  string // prompt suite file
	Threads  int
	Settings hidden.Settings
	Resume   int64 // a stored drafter whose training was interrupted
}

// TrainEvent is what TrainDrafter reports as it goes: the trainer's
// progress, and once, with Phase "start", the data and the stored id before
// the first epoch (Tokens, Hot, Cover, Params and Before are set then).
type TrainEvent struct {
	hidden.Progress
	ID                   int64 // the stored drafter (known once data is generated)
	Tokens               [2]int
	Hot                  int
	Cover                float64 // share of training-token occurrences the hot tokens cover
	Params, TargetParams int
	Before               *hidden.Epoch
	Cached               bool   // the data came from the store's cache
	Precision            string // what the training products run at (hidden.Settings.Products)
	// ETA is what remains of the whole training at the rates so far (the
	// first batch of data prices the epochs until one has run), and
	// Elapsed the time since it started; ETA 0: not known yet.
	ETA, Elapsed time.Duration
}

// trainDrafter trains a hidden-state drafter and keeps it in st: the row is
// written as soon as training starts and checkpointed after every epoch
// (status "training"), so an interrupted run can be resumed with Resume;
// it ends with status "done". It returns the drafter's id.
func trainDrafter(ctx context.Context, st *store.Store, spec TrainSpec, events func(TrainEvent)) (int64, *hidden.Drafter, error) {
	if events == nil {
		events = func(TrainEvent) {}
	}
	var d *hidden.Drafter
	var state *hidden.State
	id := spec.Resume
	set := spec.Settings
	if id < 0 {
		return 0, nil, fmt.Errorf("resume %d: a stored drafter's id is positive (arborist drafters list)", id)
	}
	if spec.Threads != 0 { // before anything is read or started: 1e9 threads hung
		if err := hardware.CheckThreads("threads", spec.Threads); err != nil {
			return 0, nil, err
		}
	}
	if id > 0 {
		row, w, err := st.LoadDrafter(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		if row.Status != "training" {
			return 0, nil, fmt.Errorf("drafter %d has finished training; nothing to resume", id)
		}
		d, state, err = hidden.Decode(fmt.Sprintf("drafter %d", id), w)
		if err != nil {
			return 0, nil, err
		}
		set = d.Settings
		if spec.Target == "" {
			spec.Target = row.TargetPath
		}
		if spec.Prompts == "" {
			spec.Prompts = set.Prompts
		}
	}
	if err := set.Validate(); err != nil {
		return 0, nil, err
	}
	texts, err := ReadPrompts(spec.Prompts)
	if err != nil {
		return 0, nil, err
	}
	if spec.Threads <= 0 {
		spec.Threads = kernels.DefaultThreads()
	}
	be, err := kernels.Open(kernels.DefaultBackend, spec.Threads)
	if err != nil {
		return 0, nil, err
	}
	defer be.Close()
	target, err := model.Load(spec.Target, be)
	if err != nil {
		return 0, nil, err
	}
	defer target.Close()
	desc, err := pairs.DescribeModel(target)
	if err != nil {
		return 0, nil, err
	}
	if d == nil {
		init := set.InitLayer
		if init == -2 {
			if init, err = hidden.MiddleLayer(target); err != nil {
				return 0, nil, err
			}
		}
		set.InitLayer = init
		if d, err = hidden.New(target, set.D, init, set.Seed); err != nil {
			return 0, nil, err
		}
		set.D = d.D
	} else if d.Fingerprint != "" && d.Fingerprint != desc.Fingerprint {
		return 0, nil, fmt.Errorf("drafter %d was trained for another target (%s, fingerprint %s); %s has fingerprint %s", id, d.Target, d.Fingerprint, spec.Target, desc.Fingerprint)
	}
	if abs, err := filepath.Abs(spec.Target); err == nil {
		spec.Target = abs
	}
	set.Prompts, set.PromptsCount = spec.Prompts, len(texts)
	d.Settings, d.Target, d.Fingerprint = set, spec.Target, desc.Fingerprint
	prompts := make([][]int, len(texts))
	longest := 0
	for i, t := range texts {
		prompts[i] = target.Tok.Encode(t, true, false)
		longest = max(longest, len(prompts[i]))
	}
	count := trainsize.Count(len(texts), set.Corpus, set.MaxPrompts)
	tokens := count * max(1, set.Samples) * (set.Tokens + longest)
	// the collector lets the heap grow to about twice the live bytes
	need := 2 * hidden.MemoryNeed(d.Shape, tokens, longest+set.Tokens, set.Depth, be.Threads())
	if ram := hardware.DetectHardware().RAM; ram > 0 && need > int64(ram)*3/4 {
		return 0, nil, fmt.Errorf("training this drafter needs about %.1f GiB but the machine has %.1f GiB: lower --samples or --tokens, or train for a smaller target",
			float64(need)/(1<<30), float64(ram)/(1<<30))
	}
	tr := &hidden.Trainer{Target: target, Prompts: prompts, Settings: set, Fingerprint: desc.Fingerprint,
		Cache: dataCache{st, desc.Fingerprint}}
	clock := trainsize.NewClock(set, time.Now)
	tr.Progress = func(p hidden.Progress) {
		ev := TrainEvent{Progress: p, ID: id}
		ev.ETA, ev.Elapsed = clock.Tick(p)
		events(ev)
	}
	if err := tr.Generate(ctx); err != nil {
		return 0, nil, err
	}
	ev := TrainEvent{Progress: hidden.Progress{Phase: "start"}}
	ev.Tokens[0], ev.Tokens[1] = tr.Tokens()
	ev.Cached = tr.Cached
	if d.Hot == nil {
		d.Hot, ev.Cover = tr.HotTokens(set.Hot)
	}
	ev.Hot = len(d.Hot)
	ev.Params, ev.TargetParams = d.Params(), int(target.File.Params())
	prec, err := set.Products()
	if err != nil {
		return 0, nil, err
	}
	ev.Precision = prec.String()
	if state == nil && len(d.Losses) == 0 {
		before, err := tr.Evaluate(ctx, d, set.Depth)
		if err != nil {
			return 0, nil, err
		}
		ev.Before = &before
	}
	save := func(status string, s *hidden.State) error {
		w, err := d.Bytes(s)
		if err != nil {
			return err
		}
		losses, _ := json.Marshal(d.Losses)
		if id == 0 {
			settings, _ := json.Marshal(d.Settings)
			id, err = st.SaveDrafter(context.WithoutCancel(ctx), &store.Drafter{TargetFingerprint: desc.Fingerprint, TargetPath: spec.Target,
				Status: status, Settings: string(settings), Losses: string(losses)}, w)
			return err
		}
		return st.UpdateDrafter(context.WithoutCancel(ctx), id, status, string(losses), w)
	}
	if id == 0 { // the row exists from the start, so even epoch 1 can be resumed
		if err := save("training", &hidden.State{M: make([]float32, len(d.P)), V: make([]float32, len(d.P))}); err != nil {
			return 0, nil, err
		}
	}
	ev.ID = id
	ev.ETA, ev.Elapsed = clock.Training(ev.Tokens[0])
	events(ev)
	tr.Checkpoint = func(_ *hidden.Drafter, s *hidden.State) error {
		if s == nil {
			return save("done", nil)
		}
		return save("training", s)
	}
	return id, d, tr.Train(ctx, d, state)
}

// dataCache keeps a drafter's generated training data in the store.
type dataCache struct {
	st          *store.Store
	fingerprint string
}

func (c dataCache) LoadData(ctx context.Context, key string) ([]byte, error) {
	return c.st.DrafterData(ctx, key)
}

func (c dataCache) SaveData(ctx context.Context, key string, data []byte) error {
	return c.st.SaveDrafterData(ctx, key, c.fingerprint, data)
}
