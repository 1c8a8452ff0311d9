package outfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLinksAtOutputsRefused: export -o and drafters export -o followed a
// symlink planted at the output path and overwrote its target, and demo
// --force wrote through a symlink or a hard link at its NOTICE file. An
// output that is a link of either kind is refused, both names left as
// they were, and nothing is left behind.
func TestLinksAtOutputsRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious"), 0o644)
	sym := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(victim, sym); err != nil {
		t.Skip(err)
	}
	hard := filepath.Join(dir, "NOTICE.txt")
	if err := os.Link(victim, hard); err != nil {
		t.Skip(err)
	}
	for out, want := range map[string]string{sym: "symbolic link", hard: "2 hard links"} {
		err := WriteFile(out, []byte("plan"))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("WriteFile(%s): %v; want %q", filepath.Base(out), err, want)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("the link's target was overwritten: %q", b)
	}
	if st, err := os.Lstat(sym); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", st, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".arborist-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// /dev/stdout is a link too: refused, never replaced by a regular file
	if st, err := os.Lstat("/dev/stdout"); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if err := Check("/dev/stdout"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Check(/dev/stdout): %v", err)
		}
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
		{filepath.Join(dir, "no", "such", "folder", "x"), "does not exist (create it first)"},
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

// TestSideFilesAndSpellingsRefused: an output onto a database's absent
// side file (-journal through export left a "hot journal" that made every
// later open fail), onto an input through a folder symlink, a double slash
// or /proc/self/cwd, onto a hard link to the live -wal, and onto the side
// file of a database named through a symlink is refused; nothing is
// created.
func TestSideFilesAndSpellingsRefused(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	db := filepath.Join(real, "a.db")
	os.WriteFile(db, []byte("database"), 0o644)
	os.WriteFile(db+"-wal", []byte("wal"), 0o644)
	prompts := filepath.Join(real, "p.txt")
	os.WriteFile(prompts, []byte("Once\n"), 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	dblink := filepath.Join(dir, "db-link.db")
	os.Symlink(db, dblink)
	walAlias := filepath.Join(dir, "wal-alias")
	if err := os.Link(db+"-wal", walAlias); err != nil {
		t.Skip(err)
	}
	cwd, _ := os.Getwd()
	defer os.Chdir(cwd)
	if err := os.Chdir(real); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		out    string
		inputs []string
		want   string
	}{
		{db + "-journal", []string{db}, "a side file of"},
		{db + "-shm", []string{db}, "a side file of"},
		{filepath.Join(link, "a.db-journal"), []string{db}, "a side file of"},
		{db + "-journal", []string{dblink}, "a side file of"},
		{db + "-wal", []string{dblink}, "a side file of"},
		{filepath.Join(link, "p.txt"), []string{prompts}, "the same file as the input"},
		{"/" + prompts, []string{prompts}, "the same file as the input"},
		{strings.Replace(prompts, "/real/", "//real//", 1), []string{prompts}, "the same file as the input"},
		{"/proc/self/cwd/p.txt", []string{prompts}, "the same file as the input"},
		{"p.txt", []string{prompts}, "the same file as the input"},
		{walAlias, []string{db}, "a side file of"},
	}
	for _, c := range cases {
		if strings.HasPrefix(c.out, "/proc/") {
			if _, err := os.Stat("/proc/self/cwd"); err != nil {
				continue
			}
		}
		err := WriteFile(c.out, []byte("x"), c.inputs...)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteFile(%s, inputs %v): %v; want %q", c.out, c.inputs, err, c.want)
		}
	}
	for p, want := range map[string]string{db: "database", db + "-wal": "wal", prompts: "Once\n"} {
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s now holds %q", p, b)
		}
	}
	for _, absent := range []string{db + "-journal", db + "-shm"} {
		if _, err := os.Lstat(absent); err == nil {
			t.Errorf("%s was created", absent)
		}
	}
	// a negative control: a file beside them is written
	if err := WriteFile(filepath.Join(link, "other.yaml"), []byte("x"), db, prompts); err != nil {
		t.Errorf("an unrelated output was refused: %v", err)
	}
}

// TestReplacedFileKeepsItsMode: replacing a 2755 file left 0755 and a 0600
// one 0644; the whole mode is kept now (setgid included), and a new file
// is 0644.
func TestReplacedFileKeepsItsMode(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o600, 0o755 | os.ModeSetgid, 0o640} {
		p := filepath.Join(dir, fmt.Sprintf("out-%o", mode))
		os.WriteFile(p, []byte("old"), 0o600)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode()&keptMode != mode {
			t.Skipf("this system does not keep mode %v on a file (%v)", mode, st.Mode())
		}
		if err := WriteFile(p, []byte("new")); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode()&keptMode != mode {
			t.Errorf("a %v file became %v", mode, st.Mode()&keptMode)
		}
		f, err := Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("streamed")
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(p); st.Mode()&keptMode != mode {
			t.Errorf("a streamed %v file became %v", mode, st.Mode()&keptMode)
		}
	}
	fresh := filepath.Join(dir, "fresh")
	if err := WriteFile(fresh, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode()&keptMode != 0o644 {
		t.Errorf("a new file is %v", st.Mode())
	}
}
