package profiles

import (
	"context"
	"encoding/json"
	"fmt"

	"arborist/engine/gguf"
	"arborist/engine/hidden"
	"arborist/profiles/outfile"
	"arborist/profiles/store"
)

// The stored records as the faces list, show and change them: runs with
// their steps, and trained hidden-state drafters.

// OpenReadOnly returns the core over an existing database for workflows
// that only read (listing and showing runs and drafters, exporting a
// drafter): nothing is written, not even a holders row, so a database on
// read-only storage or without write permission can be read. The
// database is opened at once, so a missing or foreign file is reported
// here.
func OpenReadOnly(ctx context.Context, path string) (*Bench, error) {
	st, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		return nil, err
	}
	return &Bench{path: path, st: st}, nil
}

// Runs lists up to limit stored runs, newest first.
func (b *Bench) Runs(ctx context.Context, limit int) ([]Run, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	return st.Runs(ctx, limit)
}

// StoredRun is the stored run id ("no run N" where there is none).
func (b *Bench) StoredRun(ctx context.Context, id int64) (*Run, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	return st.Run(ctx, id)
}

// RunSteps is the stored run id's per-step trace.
func (b *Bench) RunSteps(ctx context.Context, id int64) ([]StoredStep, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	return st.RunSteps(ctx, id)
}

// Drafters lists the stored hidden-state drafters, finished or training.
func (b *Bench) Drafters(ctx context.Context) ([]store.Drafter, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	return st.Drafters(ctx)
}

// DrafterInfo is a stored drafter: its record, its network, and for one
// still training how many epochs are done.
type DrafterInfo struct {
	Row        store.Drafter
	Model      *hidden.Drafter
	Unfinished bool
	EpochsDone int
}

// DrafterInfo reads the stored drafter id.
func (b *Bench) DrafterInfo(ctx context.Context, id int64) (*DrafterInfo, error) {
	st, err := b.db(ctx)
	if err != nil {
		return nil, err
	}
	row, blob, err := st.LoadDrafter(ctx, id)
	if err != nil {
		return nil, err
	}
	d, state, err := hidden.Decode(fmt.Sprintf("drafter %d", id), blob)
	if err != nil {
		return nil, err
	}
	info := &DrafterInfo{Row: row, Model: d}
	if state != nil {
		info.Unfinished, info.EpochsDone = true, state.Epoch
	}
	return info, nil
}

// ExportDrafter writes the finished stored drafter id to path as a drafter
// GGUF file (safely: outfile.WriteFile) and returns its size.
func (b *Bench) ExportDrafter(ctx context.Context, id int64, path string) (int, error) {
	st, err := b.db(ctx)
	if err != nil {
		return 0, err
	}
	row, blob, err := st.LoadDrafter(ctx, id)
	if err != nil {
		return 0, err
	}
	if row.Status != "done" {
		return 0, fmt.Errorf("drafter %d is still training; finish it with 'arborist train drafter --resume %d' first", id, id)
	}
	if _, _, err := hidden.Decode(fmt.Sprintf("drafter %d", id), blob); err != nil {
		return 0, err
	}
	if err := outfile.WriteFile(path, blob, b.path); err != nil { // never onto the database, never through a symlink
		return 0, fmt.Errorf("export: %w", err)
	}
	return len(blob), nil
}

// ImportDrafter stores the finished drafter file at path and returns its
// id and the target it was trained for.
func (b *Bench) ImportDrafter(ctx context.Context, path string) (int64, string, error) {
	st, err := b.db(ctx)
	if err != nil {
		return 0, "", err
	}
	blob, err := gguf.ReadDeclared(path) // its header read first, accounting for its size
	if err != nil {
		return 0, "", fmt.Errorf("import: %w", err)
	}
	d, state, err := hidden.Decode(path, blob)
	if err != nil {
		return 0, "", err
	}
	if state != nil {
		return 0, "", fmt.Errorf("import: %s is a training checkpoint, not a finished drafter", path)
	}
	settings, _ := json.Marshal(d.Settings)
	losses, _ := json.Marshal(d.Losses)
	id, err := st.SaveDrafter(ctx, &store.Drafter{TargetFingerprint: d.Fingerprint, TargetPath: d.Target, Status: "done",
		Settings: string(settings), Losses: string(losses)}, blob)
	return id, d.Target, err
}

// DeleteDrafter removes the stored drafter id.
func (b *Bench) DeleteDrafter(ctx context.Context, id int64) error {
	st, err := b.db(ctx)
	if err != nil {
		return err
	}
	return st.DeleteDrafter(ctx, id)
}
