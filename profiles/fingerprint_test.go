package profiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"arborist/profiles/config"
	"arborist/profiles/pairs"
	"arborist/profiles/store"
)

// TestConfigModelHash: the sha256 field of config.yaml
// was never checked (a swapped model ran silently) and was not a SHA-256.
func TestConfigModelHash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	content := []byte("pretend this is a model file")
	os.WriteFile(model, content, 0o644)
	db := filepath.Join(dir, "a.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := pairs.ModelSHA256(ctx, st, model)
	st.Close()
	want := sha256.Sum256(content)
	if err != nil || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("ModelSHA256 = %s, %v; want the file's SHA-256", sum, err)
	}
	c := &config.Config{}
	c.Models.Target = config.Target{Path: model, SHA256: sum}
	if err := checkConfigModels(ctx, db, c, false); err != nil {
		t.Fatalf("unchanged model: %v", err)
	}
	// an unchanged file (same size and mtime) is not read again: the
	// cached value is what comes back
	st, _ = store.Open(ctx, db)
	abs, _ := filepath.Abs(model)
	info0, _ := os.Stat(model)
	planted := "ab" + sum[2:]
	st.PutFileHash(ctx, abs, info0, planted)
	if got, _ := pairs.ModelSHA256(ctx, st, model); got != planted {
		t.Errorf("cached hash not used: %s", got)
	}
	st.PutFileHash(ctx, abs, info0, sum)
	st.Close()
	// a model of the same size rewritten in place with its modification
	// time restored is not the cached one
	same := []byte("pretend THIS is a model file")
	if len(same) != len(content) {
		t.Fatal("the rewrite must keep the size")
	}
	os.WriteFile(model, same, 0o644)
	os.Chtimes(model, info0.ModTime(), info0.ModTime())
	if err := checkConfigModels(ctx, db, c, false); !errors.Is(err, errModelChanged) {
		t.Fatalf("same-size rewrite with its mtime restored: %v", err)
	}
	os.WriteFile(model, []byte("another model, swapped in place"), 0o644)
	future := time.Now().Add(time.Hour)
	os.Chtimes(model, future, future)
	if err := checkConfigModels(ctx, db, c, false); !errors.Is(err, errModelChanged) {
		t.Fatalf("swapped model: %v", err)
	}
	if err := checkConfigModels(ctx, db, c, true); err != nil {
		t.Fatalf("--allow-changed-model: %v", err)
	}
	// legacy 24-digit fingerprints are still checked
	c.Models.Target.SHA256, _ = pairs.FileFingerprint(model)
	if err := checkConfigModels(ctx, "", c, false); err != nil {
		t.Fatalf("legacy fingerprint of the same file: %v", err)
	}
	c.Models.Target.SHA256 = "0123456789abcdef01234567"
	if err := checkConfigModels(ctx, "", c, false); !errors.Is(err, errModelChanged) {
		t.Fatalf("legacy fingerprint of another file: %v", err)
	}
}
