package profiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"arborist/engine/gguf"
	"arborist/profiles/store"
)

// ErrModelChanged reports a model file whose hash differs from the one a
// config.yaml recorded: the plan was tuned for another file.
var ErrModelChanged = errors.New("model file changed since the config was exported")

// openModelFile opens path only if it is a regular file, without blocking
// on a FIFO.
func openModelFile(path string) (*os.File, os.FileInfo, error) {
	f, st, err := gguf.OpenRegular(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, st, nil
}

// ModelSHA256 is the SHA-256 of a model file, hex. It reads the whole file
// once (seconds per gigabyte) and caches the result in st (when not nil),
// keyed by the absolute path, size and modification time, so later calls
// on an unchanged file cost one stat. ctx cancels a long hash.
func ModelSHA256(ctx context.Context, st *store.Store, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	f, info, err := openModelFile(abs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	size, mtime := info.Size(), info.ModTime().UnixNano()
	if st != nil {
		if h, err := st.FileHash(ctx, abs, size, mtime); err != nil || h != "" {
			return h, err
		}
	}
	h := sha256.New()
	buf := make([]byte, 4<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", fmt.Errorf("hashing %s: %w", path, rerr)
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if st != nil && !st.ReadOnly() {
		if err := st.PutFileHash(ctx, abs, size, mtime, sum); err != nil {
			return "", err
		}
	}
	return sum, nil
}

// quickFingerprint is the fingerprint Arborist stored before config files
// carried a real SHA-256 (and still uses to key models in the database): a
// SHA-256 of the size and the first and last MiB, 24 hex digits.
func quickFingerprint(f *os.File, size int64) string {
	hsh := sha256.New()
	fmt.Fprintf(hsh, "%d|", size)
	f.Seek(0, io.SeekStart)
	io.CopyN(hsh, f, 1<<20)
	if size > 2<<20 {
		f.Seek(-1<<20, io.SeekEnd)
		io.CopyN(hsh, f, 1<<20)
	}
	return hex.EncodeToString(hsh.Sum(nil)[:12])
}

// CheckConfigModels compares the model files a config names with the hashes
// it recorded (models.target.sha256, models.draft.sha256): a changed file is
// refused with ErrModelChanged unless allowChanged (--allow-changed-model).
// A 64-digit value is a SHA-256 of the file, computed once and cached in the
// database at db ("" for no cache); a 24-digit value is the older quick
// fingerprint. A config without hashes is not checked.
func CheckConfigModels(ctx context.Context, db string, c *Config, allowChanged bool) error {
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
			if got, err = ModelSHA256(ctx, st, path); err != nil {
				return err
			}
		case 24:
			f, info, err := openModelFile(path)
			if err != nil {
				return err
			}
			got = quickFingerprint(f, info.Size())
			f.Close()
		default:
			return fmt.Errorf("%s %q is neither a SHA-256 (64 hex digits) nor an Arborist fingerprint (24)", field, want)
		}
		if got == want {
			return nil
		}
		if allowChanged {
			return nil
		}
		return fmt.Errorf("%w: %s is %s, the config recorded %s (%s); re-export the plan for this file, or pass --allow-changed-model to replay it anyway", ErrModelChanged, path, got, want, field)
	}
	if err := check("models.target.sha256", c.Models.Target.Path, c.Models.Target.SHA256); err != nil {
		return err
	}
	if c.Models.Draft.Kind == "model" {
		return check("models.draft.sha256", c.Models.Draft.Path, c.Models.Draft.SHA256)
	}
	return nil
}
