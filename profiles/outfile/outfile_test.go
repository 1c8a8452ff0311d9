package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestOutputsNeverDestroyInputs: an output naming an input (itself, by
// another name, or a database's side file), a FIFO, a device node, a
// folder or nothing is refused with the input left as it was; a 0600 file
// stays 0600 when replaced.
func TestOutputsNeverDestroyInputs(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	os.WriteFile(db, []byte("database"), 0o644)
	os.WriteFile(db+"-wal", []byte("wal"), 0o644)
	model := filepath.Join(dir, "m.gguf")
	os.WriteFile(model, []byte("model"), 0o644)
	hard := filepath.Join(dir, "also-m.gguf")
	if err := os.Link(model, hard); err != nil {
		t.Skip(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct{ out, want string }{
		{db, "an input of this command"},
		{db + "-wal", "a side file of"},
		{hard, "the same file as the input"},
		{fifo, "not a regular file"},
		{"/dev/null", "not a regular file"},
		{dir, "not a regular file"},
		{"", "no output file named"},
		{filepath.Join(dir, "no", "such", "folder", "x"), "its folder"},
	} {
		err := WriteFile(c.out, []byte("yaml"), db, model)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteFile(%q): %v; want %q", c.out, err, c.want)
		}
	}
	for p, want := range map[string]string{db: "database", db + "-wal": "wal", model: "model"} {
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s now holds %q", p, b)
		}
	}
	secret := filepath.Join(dir, "secret.yaml")
	os.WriteFile(secret, []byte("old"), 0o600)
	if err := WriteFile(secret, []byte("new"), db); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(secret); st.Mode().Perm() != 0o600 {
		t.Errorf("a 0600 file became %v", st.Mode().Perm())
	}
}

// TestCreateCommitsOrLeaves: a streamed output replaces the file only when
// committed; aborted, the old file stays and no temporary file is left.
func TestCreateCommitsOrLeaves(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "trace.jsonl")
	os.WriteFile(out, []byte("old trace"), 0o644)
	f, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	if b, _ := os.ReadFile(out); string(b) != "old trace" {
		t.Errorf("the file changed before commit: %q", b)
	}
	f.Abort()
	if b, _ := os.ReadFile(out); string(b) != "old trace" {
		t.Errorf("an aborted write changed the file: %q", b)
	}
	f, _ = Create(out)
	f.WriteString("new trace")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); string(b) != "new trace" {
		t.Errorf("committed file holds %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".arborist-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
