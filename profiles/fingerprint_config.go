package profiles

import (
	"context"
	"errors"
	"fmt"

	"arborist/profiles/config"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// errModelChanged reports a model file whose hash differs from the one a
// config.yaml recorded: the plan was tuned for another file.
var errModelChanged = errors.New("model file changed since the config was exported")

// checkConfigModels compares the model files a config names with the hashes
// it recorded (models.target.sha256, models.draft.sha256 for a draft model
// or a hidden-state drafter file): a changed file is refused with
// errModelChanged unless allowChanged (--allow-changed-model).
// A 64-digit value is a SHA-256 of the file, computed once and cached in the
// database at db ("" for no cache); a 24-digit value is the older quick
// fingerprint. A config without hashes is not checked.
func checkConfigModels(ctx context.Context, db string, c *config.Config, allowChanged bool) error {
	var st *store.Store
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	check := func(field, path, want string) error {
		if want == "" || path == "" {
			return nil
		}
		var got string
		switch len(want) {
		case 64:
			if st == nil && db != "" {
				var err error
				if st, err = store.Open(ctx, db); err != nil {
					return err
				}
			}
			var err error
			if got, err = pairs.ModelSHA256(ctx, st, path); err != nil {
				return err
			}
		case 24:
			var err error
			if got, err = pairs.FileFingerprint(path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s %q is neither a SHA-256 (64 hex digits) nor an Arborist fingerprint (24)", field, want)
		}
		if got == want {
			return nil
		}
		if allowChanged {
			return nil
		}
		return fmt.Errorf("%w: %s is %s, the config recorded %s (%s); re-export the plan for this file, or pass --allow-changed-model to replay it anyway", errModelChanged, path, got, want, field)
	}
	if err := check("models.target.sha256", c.Models.Target.Path, c.Models.Target.SHA256); err != nil {
		return err
	}
	if k := c.Models.Draft.Kind; k == "model" || k == "hidden" {
		return check("models.draft.sha256", c.Models.Draft.Path, c.Models.Draft.SHA256)
	}
	return nil
}
