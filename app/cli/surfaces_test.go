package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"arborist/engine/model/modeltest"
	"arborist/profiles/store"
)

// checkSetup writes a config check-export can check (a draft model pair
// with a 512-token context) into dir and returns it with the folder of
// the llama.cpp stand-ins (testdata/llama-cpp).
func checkSetup(t *testing.T, dir string) (cfg, llama string) {
	t.Helper()
	cfg = filepath.Join(dir, "check.yaml")
	os.WriteFile(cfg, []byte(`models:
  target: {path: /m/target.gguf, device: cpu, max_seq_len: 512, threads: 2}
  draft: {kind: model, path: /m/draft.gguf, device: cpu, threads: 2}
speculation: {strategy: chain, gamma: 4}
sampling: {temperature: 0, top_p: 1, seed: 1}
`), 0o644)
	llama, _ = filepath.Abs(filepath.Join("..", "..", "testdata", "llama-cpp"))
	return cfg, llama
}

// TestOutputsOntoSideFilesRefused: -o A.db-journal (absent) through
// export, tune and --trace left a "hot journal" beside the database, and
// every later verb failed; a --db given through a symlink let --trace
// replace the live -wal; a hard link to the -wal was written through. Each
// is refused now, the database reads afterwards, and no side file is
// created.
func TestOutputsOntoSideFilesRefused(t *testing.T) {
	f := newNothingLost(t)
	model, _ := os.ReadFile(f.target)
	dblink := filepath.Join(f.dir, "link.db")
	if err := os.Symlink(f.db, dblink); err != nil {
		t.Skip(err)
	}
	pair := []string{"--target", f.target, "--draft-ngram", "2", "--db", f.db}
	viaLink := []string{"--target", f.target, "--draft-ngram", "2", "--db", dblink}
	cfg, llama := checkSetup(t, f.dir)
	prompts := filepath.Join(f.dir, "p.txt")
	os.WriteFile(prompts, []byte("Once\n"), 0o644)
	for _, c := range [][]string{
		{"check-export", "--tune", "-o", f.db + "-journal", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "1", "-n", "4", "--db", f.db},
		append([]string{"export", "-o", f.db + "-journal"}, pair...),
		append([]string{"export", "-o", f.db + "-shm"}, pair...),
		append([]string{"tune", "--alpha", "0.7", "--top", "1", "-o", f.db + "-journal"}, pair...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--trace", f.db + "-journal"}, pair...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--trace", f.db + "-wal"}, viaLink...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--trace", f.db + "-journal"}, viaLink...),
		append([]string{"export", "-o", f.db + "-wal"}, viaLink...),
	} {
		code, _, stderr := run(t, c...)
		if code == 0 || !strings.Contains(stderr, "refused") || !strings.Contains(stderr, "side file") {
			t.Errorf("%v: exit %d: %s", c, code, stderr)
		}
		for _, side := range []string{"-journal", "-shm", "-wal"} {
			if _, err := os.Lstat(f.db + side); err == nil {
				t.Errorf("%v left %s beside the database", c[:3], side)
			}
		}
		f.intact(t, model, strings.Join(c[:3], " "))
	}

	// a hard link to the live -wal (the database held open elsewhere)
	st, err := store.Open(context.Background(), f.db)
	if err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(f.dir, "wal-alias")
	if err := os.Link(f.db+"-wal", alias); err != nil {
		st.Close()
		t.Skip(err)
	}
	code, _, stderr := run(t, append([]string{"export", "-o", alias}, pair...)...)
	st.Close()
	if code == 0 || !strings.Contains(stderr, "refused") {
		t.Errorf("export onto a hard link to the -wal: exit %d: %s", code, stderr)
	}
	f.intact(t, model, "export -o wal-alias")
}

// TestOutputsOntoPromptSuiteRefused: tune --validate -o P.txt and
// check-export --tune -o P.txt replaced the prompt suite they read, also
// spelled through a folder symlink, with a double slash or through
// /proc/self/cwd. Each is refused before any work, the suite unchanged.
func TestOutputsOntoPromptSuiteRefused(t *testing.T) {
	f := newNothingLost(t)
	real := filepath.Join(f.dir, "suite")
	os.Mkdir(real, 0o755)
	prompts := filepath.Join(real, "p.txt")
	const suite = "Once upon a time\nThe cat\n"
	os.WriteFile(prompts, []byte(suite), 0o644)
	link := filepath.Join(f.dir, "suite-link")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	spellings := []string{prompts, filepath.Join(link, "p.txt"), "/" + strings.ReplaceAll(prompts, "/suite/", "//suite/")}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, prompts); err == nil {
			if _, err := os.Stat("/proc/self/cwd/" + rel); err == nil {
				spellings = append(spellings, "/proc/self/cwd/"+rel)
			}
		}
	}
	cfg, llama := checkSetup(t, f.dir)
	for _, out := range spellings {
		for _, c := range [][]string{
			{"tune", "--target", f.target, "--draft-ngram", "2", "--db", f.db, "--alpha", "0.7", "--top", "1", "--validate", "--prompts", prompts, "-n", "4", "-o", out},
			{"check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--tune", "-o", out, "--rounds", "1", "-n", "4", "--no-store", "--db", f.db},
		} {
			code, _, stderr := run(t, c...)
			if code == 0 || !strings.Contains(stderr, "refused") {
				t.Errorf("%s -o %s: exit %d: %s", c[0], out, code, stderr)
			}
			if b, _ := os.ReadFile(prompts); string(b) != suite {
				t.Fatalf("%s -o %s replaced the prompt suite: %q", c[0], out, b)
			}
		}
	}
	// the negative control: the same tune writes a file beside the suite
	other := filepath.Join(real, "tuned.yaml")
	if code, _, stderr := run(t, "check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--tune", "-o", other, "--rounds", "1", "-n", "4", "--no-store", "--db", f.db); code != 0 {
		t.Errorf("check-export --tune -o beside the suite: exit %d: %s", code, stderr)
	}
}

// TestLinksAndModesAtOutputs: demo --force wrote through a symlink or a
// hard link planted at its NOTICE file; -o /dev/stdout and --trace
// /dev/stderr replaced the link with a regular file (as root); replacing a
// 2755 file left 0755 and synth --force and demo --force onto a 0600 file
// left 0644. Links are refused, modes kept.
func TestLinksAndModesAtOutputs(t *testing.T) {
	f := newNothingLost(t)
	victim := filepath.Join(f.dir, "victim.txt")
	os.WriteFile(victim, []byte("precious"), 0o644)
	for i, plant := range []func(string) error{func(p string) error { return os.Symlink(victim, p) }, func(p string) error { return os.Link(victim, p) }} {
		demo := filepath.Join(f.dir, "demo"+string(rune('a'+i)))
		os.Mkdir(demo, 0o755)
		if err := plant(filepath.Join(demo, "NOTICE-stories260K.txt")); err != nil {
			t.Skip(err)
		}
		code, _, stderr := run(t, "demo", "-o", demo, "--force")
		if code == 0 || !strings.Contains(stderr, "link") {
			t.Errorf("demo --force onto a planted link: exit %d: %s", code, stderr)
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious" {
			t.Fatalf("demo --force wrote through a link: %q", b)
		}
	}
	pair := []string{"--target", f.target, "--draft-ngram", "2", "--db", f.db}
	for _, c := range [][]string{
		append([]string{"export", "-o", "/dev/stdout"}, pair...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--no-store", "--trace", "/dev/stderr"}, pair...),
	} {
		if st, err := os.Lstat(c[2]); err != nil || st.Mode()&os.ModeSymlink == 0 {
			continue
		}
		code, _, stderr := run(t, c...)
		if st, _ := os.Lstat(c[2]); code == 0 || !strings.Contains(stderr, "symbolic link") || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%v: exit %d: %s", c[:3], code, stderr)
		}
	}

	// modes: a 2755 export and trace, a 0600 synthetic model and demo pair
	for _, mode := range []os.FileMode{0o755 | os.ModeSetgid, 0o600} {
		out := filepath.Join(f.dir, "kept.yaml")
		trace := filepath.Join(f.dir, "kept.jsonl")
		for _, p := range []string{out, trace} {
			os.Remove(p)
			os.WriteFile(p, nil, 0o600)
			os.Chmod(p, mode)
		}
		if code, _, stderr := run(t, append([]string{"export", "-o", out}, pair...)...); code != 0 {
			t.Fatal(stderr)
		}
		if code, _, stderr := run(t, append([]string{"run", "--prompt", "Once", "-n", "4", "--quiet", "--trace", trace}, pair...)...); code != 0 {
			t.Fatal(stderr)
		}
		for _, p := range []string{out, trace} {
			if st, _ := os.Stat(p); st.Mode()&(os.ModePerm|os.ModeSetgid) != mode {
				t.Errorf("%s written onto a %v file is %v", filepath.Base(p), mode, st.Mode())
			}
		}
	}
	synth := filepath.Join(f.dir, "synth.gguf")
	os.WriteFile(synth, nil, 0o600)
	if code, _, stderr := run(t, "synth", "--shape", "stories260k", "--type", "F32", "-o", synth, "--force"); code != 0 {
		t.Fatal(stderr)
	}
	demo := filepath.Join(f.dir, "demo0600")
	os.Mkdir(demo, 0o755)
	notice := filepath.Join(demo, "NOTICE-stories260K.txt")
	target := filepath.Join(demo, "demo-target.gguf")
	os.WriteFile(notice, nil, 0o600)
	os.WriteFile(target, nil, 0o600)
	if code, _, stderr := run(t, "demo", "-o", demo, "--force"); code != 0 {
		t.Fatal(stderr)
	}
	for _, p := range []string{synth, notice, target} {
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 || st.Size() == 0 {
			t.Errorf("%s replaced as %v (%d bytes), want 0600", filepath.Base(p), st.Mode(), st.Size())
		}
	}
}

// TestMissingOutputFolderNamed: a missing output folder gave a rename
// error of a temporary file; each writing verb now names the folder.
func TestMissingOutputFolderNamed(t *testing.T) {
	f := newNothingLost(t)
	missing := filepath.Join(f.dir, "no-such-folder")
	pair := []string{"--target", f.target, "--draft-ngram", "2", "--db", f.db}
	for _, c := range [][]string{
		append([]string{"export", "-o", filepath.Join(missing, "c.yaml")}, pair...),
		append([]string{"run", "--prompt", "Once", "-n", "4", "--trace", filepath.Join(missing, "t.jsonl")}, pair...),
		{"synth", "--shape", "stories260k", "-o", filepath.Join(missing, "s.gguf")},
	} {
		code, _, stderr := run(t, c...)
		if code == 0 || !strings.Contains(stderr, missing+" does not exist") || strings.Contains(stderr, ".arborist-") {
			t.Errorf("%v: exit %d: %s", c[:3], code, stderr)
		}
	}
}

// TestCheckExportLinesSafeToPaste: check-export printed its commands with
// the words joined by spaces, so a model path holding shell syntax ran
// commands when the line was pasted. The printed and JSON lines are
// quoted: pasted into sh, each runs its program with exactly the
// arguments check-export ran, and nothing else.
func TestCheckExportLinesSafeToPaste(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	hostile := "/m/a;touch P1|touch P2&touch P3 $(touch P4) `touch P5` <P6 >P7 *?[]{}!#~'\"\t\ntouch P8"
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`models:
  target: {path: %s, device: cpu, max_seq_len: 512, threads: 2}
  draft: {kind: model, path: %s, device: cpu, threads: 2}
speculation: {strategy: chain, gamma: 4}
sampling: {temperature: 0, top_p: 1, seed: 1}
`, strconv.Quote(hostile+".gguf"), strconv.Quote(hostile+"-draft.gguf"))), 0o644)
	prompts := filepath.Join(dir, "p.txt")
	os.WriteFile(prompts, []byte("Once\n"), 0o644)
	llama, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "llama-cpp"))
	code, out, stderr := run(t, "check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "1", "-n", "8", "--json", "--no-store", "--db", filepath.Join(dir, "c.db"))
	var v struct {
		Plain     []string `json:"plain_command"`
		Spec      []string `json:"speculative_command"`
		PlainLine string   `json:"plain_line"`
		SpecLine  string   `json:"speculative_line"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("exit %d: %s %s", code, out, stderr)
	}
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	for _, p := range []string{"llama-completion", "llama-speculative-simple"} {
		os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\nprintf '%s\\0' \"${0##*/}\" \"$@\" >\"$ARGV_LOG\"\n"), 0o755)
	}
	for _, c := range []struct {
		line string
		want []string
	}{{v.PlainLine, v.Plain}, {v.SpecLine, v.Spec}} {
		work := t.TempDir()
		log := filepath.Join(dir, "argv")
		cmd := exec.Command(sh, "-c", c.line)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "ARGV_LOG="+log)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sh: %v %s\n%s", err, out, c.line)
		}
		got, _ := os.ReadFile(log)
		if argv := strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00"); !slices.Equal(argv, c.want) || !slices.Contains(argv, hostile+".gguf") {
			t.Errorf("pasted, %q ran as\n%q, want\n%q", c.line, argv, c.want)
		}
		if made, _ := os.ReadDir(work); len(made) != 0 {
			t.Errorf("pasting %q made %v", c.line, made)
		}
	}
	code, out, stderr = run(t, "check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "--rounds", "1", "-n", "8", "--no-store", "--db", filepath.Join(dir, "c.db"))
	if code != 0 || !strings.Contains(out, "  plain:       "+v.PlainLine+"\n") || !strings.Contains(out, "  speculative: "+v.SpecLine+"\n") {
		t.Errorf("printed lines differ from the JSON's: exit %d\n%s%s", code, out, stderr)
	}
}

// TestServeRefusesEmptyHostAndUnboundedTemplates: serve --host "" listened
// on every interface without saying so; --chat-template /dev/zero grew
// without bound, a FIFO with no writer hung, and a sparse file of
// gigabytes was read whole. Each is refused at once, naming the flag.
func TestServeRefusesEmptyHostAndUnboundedTemplates(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("models: {target: {path: /m/t.gguf}, draft: {kind: none}}\nspeculation: {strategy: ar}\n"), 0o644)
	if code, _, stderr := run(t, "serve", "--config", cfg, "--host", ""); code != 2 || !strings.Contains(stderr, `--host ""`) || !strings.Contains(stderr, "0.0.0.0") {
		t.Errorf(`--host "": exit %d: %s`, code, stderr)
	}
	sparse := filepath.Join(dir, "sparse.jinja")
	if f, err := os.Create(sparse); err == nil {
		f.Truncate(4 << 30)
		f.Close()
	}
	fifo := filepath.Join(dir, "fifo.jinja")
	templates := map[string]string{"/dev/zero": "not a regular file", sparse: "at most 1048576"}
	if syscall.Mkfifo(fifo, 0o644) == nil {
		templates[fifo] = "not a regular file"
	}
	for tmpl, want := range templates {
		code, _, stderr := run(t, "serve", "--config", cfg, "--chat-template", tmpl, "--port", "0", "--db", filepath.Join(dir, "a.db"))
		if code == 0 || !strings.Contains(stderr, "--chat-template") || !strings.Contains(stderr, want) {
			t.Errorf("--chat-template %s: exit %d: %s", tmpl, code, stderr)
		}
	}
}

// TestArboristMarkedForeignDatabaseUntouched: runs (a reading verb)
// migrated a database with Arborist's application id and tables of its
// own, giving it 18 tables, WAL mode and a side file; one missing a table
// said "no such table: holders". Reading and writing verbs refuse both,
// naming the difference, and leave the file byte for byte as it was.
func TestArboristMarkedForeignDatabaseUntouched(t *testing.T) {
	f := newNothingLost(t)
	marked := filepath.Join(t.TempDir(), "marked.db")
	dropped := filepath.Join(t.TempDir(), "dropped.db")
	data, _ := os.ReadFile(f.db)
	os.WriteFile(dropped, data, 0o644)
	for p, qs := range map[string][]string{
		marked:  {"CREATE TABLE notes(body TEXT)", "INSERT INTO notes VALUES ('keep me')", fmt.Sprintf("PRAGMA application_id = %d", store.ApplicationID)},
		dropped: {"DROP TABLE holders", "PRAGMA journal_mode=DELETE"},
	} {
		db, err := sql.Open("sqlite3", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	for p, want := range map[string]string{marked: "table notes is not Arborist's", dropped: "table holders is missing"} {
		before, _ := os.ReadFile(p)
		for _, c := range [][]string{
			{"runs", "--db", p},
			{"drafters", "list", "--db", p},
			{"export", "--target", f.target, "--draft-ngram", "2", "--db", p, "-o", filepath.Join(f.dir, "x.yaml")},
		} {
			code, _, stderr := run(t, c...)
			if code == 0 || !strings.Contains(stderr, want) || strings.Contains(stderr, "no such table") {
				t.Errorf("%v: exit %d: %s", c, code, stderr)
			}
		}
		if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
			t.Errorf("%s changed", filepath.Base(p))
		}
		for _, side := range []string{"-wal", "-shm", "-journal", "-checked"} {
			if _, err := os.Stat(p + side); err == nil {
				t.Errorf("%s: %s left beside it", filepath.Base(p), side)
			}
		}
	}
}

// TestUnclearErrorsNamed: train drafter --threads 1000000000 hung;
// --resume -1 said "prompts: : open : no such file"; --tail 6 with gamma 4
// and --widths 1,,2 were accepted silently (cut to 5, read as 1,2);
// check-export -n 9223372036854775807 reached llama.cpp and came back as
// "no timing line"; a config of 150,000 keys took minutes and gave an
// 8 MB error. Each is refused at once naming the flag or field.
func TestUnclearErrorsNamed(t *testing.T) {
	dir := t.TempDir()
	target := modeltest.Stories260K(t)
	db := filepath.Join(dir, "a.db")
	prompts := filepath.Join(dir, "p.txt")
	os.WriteFile(prompts, []byte("Once upon a time\n"), 0o644)
	cfg, llama := checkSetup(t, dir)
	var big strings.Builder
	big.WriteString("models: {target: {path: /m/t.gguf}, draft: {kind: none}}\nspeculation: {strategy: ar}\nsampling:\n")
	for i := 0; big.Len() < 1<<20-64; i++ {
		fmt.Fprintf(&big, "  k%x: 1\n", i)
	}
	huge := filepath.Join(dir, "huge.yaml")
	os.WriteFile(huge, []byte(big.String()), 0o644)
	base := []string{"run", "--target", target, "--draft-ngram", "2", "--prompt", "Once", "-n", "4", "--no-store"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "drafter", "--target", target, "--prompts", prompts, "--threads", "1000000000", "--db", db}, "--threads 1000000000"},
		{[]string{"train", "drafter", "--resume", "-1", "--db", db}, "--resume -1"},
		{append(append([]string{}, base...), "--strategy", "chain", "--gamma", "4", "--tail", "6"), "--tail 6"},
		{append(append([]string{}, base...), "--strategy", "tree", "--widths", "1,,2"), "--widths"},
		{[]string{"bench", "--model", target, "--widths", "1,,2"}, "element 2 of the list is empty"},
		{[]string{"check-export", "--llama-cpp", llama, "--config", cfg, "--prompts", prompts, "-n", "9223372036854775807", "--no-store", "--db", db}, "max_seq_len 512"},
		{[]string{"run", "--config", huge, "--prompt", "x", "--no-store"}, "a mapping of"},
	} {
		code, _, stderr := run(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || len(stderr) > 20000 || strings.Contains(stderr, "no timing line") {
			t.Errorf("%v: exit %d: %.600s", c.args, code, stderr)
		}
	}
	// the negative controls: the largest tail a chain of 4 has, and a list
	// written out in full, are taken
	if code, _, stderr := run(t, append(append([]string{}, base...), "--strategy", "chain", "--gamma", "4", "--tail", "5", "--quiet")...); code != 0 {
		t.Errorf("--tail 5 with gamma 4: %s", stderr)
	}
	if code, _, stderr := run(t, append(append([]string{}, base...), "--strategy", "tree", "--widths", "1,2", "--quiet")...); code != 0 {
		t.Errorf("--widths 1,2: %s", stderr)
	}
}

// TestHugeFilesNotRead: a prompt suite of 250 MiB, a drafter that is a
// sparse file of gigabytes, and a GGUF declaring a 3 GiB string were read
// into memory (out of memory in run, import and inspect). Each is refused
// by its size or header, naming the file.
func TestHugeFilesNotRead(t *testing.T) {
	dir := t.TempDir()
	target := modeltest.Stories260K(t)
	sparse := func(name string, head []byte, size int64) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, head, 0o644)
		if err := os.Truncate(p, size); err != nil {
			t.Skip(err)
		}
		return p
	}
	var gguf bytes.Buffer // a GGUF v3 header with one string of 3 GiB declared
	gguf.WriteString("GGUF")
	for _, v := range []any{uint32(3), uint64(0), uint64(1), uint64(len("general.name"))} {
		binary.Write(&gguf, binary.LittleEndian, v)
	}
	gguf.WriteString("general.name")
	binary.Write(&gguf, binary.LittleEndian, uint32(8)) // a string
	binary.Write(&gguf, binary.LittleEndian, uint64(3<<30))
	suite := sparse("suite.txt", []byte("Once\n"), 250<<20)
	drafter := sparse("drafter.gguf", nil, 6<<30)
	str := sparse("string.gguf", gguf.Bytes(), 3<<30+1<<20)
	for _, c := range []struct {
		file string
		args []string
		want string
	}{
		{suite, []string{"run", "--target", target, "--draft-ngram", "2", "--prompts", suite, "--no-store"}, "more than a prompt suite may hold (64 MiB)"},
		{drafter, []string{"drafters", "import", drafter, "--db", filepath.Join(dir, "a.db")}, "not a GGUF file"},
		{str, []string{"inspect", str}, "a string of 3221225472 bytes"},
	} {
		code, _, stderr := run(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, c.file) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
	}
}
