package outfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFileNotThroughSymlink: export -o and drafters
// export -o followed a symlink planted at the output path and overwrote its
// target. WriteFile replaces the link with the new file instead.
func TestWriteFileNotThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious"), 0o644)
	out := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(victim, out); err != nil {
		t.Skip(err)
	}
	if err := WriteFile(out, []byte("plan")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the symlink's target was overwritten: %q", b)
	}
	st, err := os.Lstat(out)
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("output is not a regular file: %v %v", st, err)
	}
	if b, _ := os.ReadFile(out); string(b) != "plan" {
		t.Errorf("output holds %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".arborist-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
