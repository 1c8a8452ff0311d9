package profiles

import (
	"fmt"

	"arborist/engine/model"
	"arborist/profiles/store"
)

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
