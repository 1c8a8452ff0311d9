package pairs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"arborist/engine/hidden"
	"arborist/engine/model"
	"arborist/profiles/store"
)

// OpenDrafter resolves --draft-hidden: a stored drafter's id (looked up in
// db) or a drafter GGUF file. It refuses a drafter trained for another
// target and one whose training is unfinished.
func OpenDrafter(ctx context.Context, ref, db string, target *model.Model) (*hidden.Drafter, error) {
	var d *hidden.Drafter
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		if _, statErr := os.Stat(ref); statErr == nil {
			return nil, fmt.Errorf("%q is both a drafter id and a file name; write ./%s for the file", ref, ref)
		}
		if db == "" {
			db = store.DefaultPath()
		}
		st, err := store.Open(ctx, db)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		row, w, err := st.LoadDrafter(ctx, id, drafterFor(target, id)) // checked before the weights are read
		if err != nil {
			return nil, err
		}
		if row.Status != "done" {
			return nil, fmt.Errorf("drafter %d is still training (status %s): resume it with `arborist train drafter --resume %d`", id, row.Status, id)
		}
		if d, _, err = hidden.Decode(fmt.Sprintf("drafter %d", id), w); err != nil {
			return nil, err
		}
	} else {
		var st *hidden.State
		if d, st, err = hidden.Load(ref); err != nil {
			return nil, err
		}
		if st != nil {
			return nil, fmt.Errorf("%s is a training checkpoint, not a finished drafter", ref)
		}
	}
	if err := d.Fits(&target.Config); err != nil {
		return nil, fmt.Errorf("%s for %s: %w", ref, target.Path, err)
	}
	desc, err := DescribeModel(target)
	if err != nil {
		return nil, err
	}
	if d.Fingerprint != "" && d.Fingerprint != desc.Fingerprint {
		return nil, fmt.Errorf("%w: %s was trained for %s (fingerprint %s), not %s (fingerprint %s)", ErrOtherTarget, ref, d.Target, d.Fingerprint, target.Path, desc.Fingerprint)
	}
	return d, nil
}

// ErrOtherTarget reports a drafter trained for a different target model.
var ErrOtherTarget = errors.New("drafter trained for another target")

// drafterFor checks a stored drafter's row against the target before its
// weights are read: a drafter trained for another model, or one still
// training, is refused without reading (and decoding) gigabytes.
func drafterFor(target *model.Model, id int64) func(store.Drafter) error {
	return func(row store.Drafter) error {
		if row.Status != "done" {
			return fmt.Errorf("drafter %d is still training (status %s): resume it with `arborist train drafter --resume %d`", id, row.Status, id)
		}
		if row.TargetFingerprint == "" {
			return nil
		}
		desc, err := DescribeModel(target)
		if err != nil {
			return err
		}
		if row.TargetFingerprint != desc.Fingerprint {
			return fmt.Errorf("%w: drafter %d was trained for %s (fingerprint %s), not %s (fingerprint %s)", ErrOtherTarget, id, row.TargetPath, row.TargetFingerprint, target.Path, desc.Fingerprint)
		}
		return nil
	}
}
