package profiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLongPromptLine: a prompt line over the scanner's
// limit gave "bufio.Scanner: token too long" without the file or line.
func TestLongPromptLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.txt")
	os.WriteFile(p, []byte("short\n\n"+strings.Repeat("x", maxPromptLine+10)+"\nlast\n"), 0o644)
	_, err := ReadPrompts(p)
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), p) {
		t.Fatalf("long line: %v", err)
	}
	os.WriteFile(p, []byte("a\n"+strings.Repeat("y", 200<<10)+"\n"), 0o644)
	if ps, err := ReadPrompts(p); err != nil || len(ps) != 2 {
		t.Fatalf("a 200 KiB line: %d prompts, %v", len(ps), err)
	}
}

// TestPromptSuiteBounded: 250 MiB of one-character lines (131M prompts)
// ran run, calibrate and check-export out of memory. A suite of more
// prompts than maxPrompts, or more bytes than maxPromptBytes, is refused
// naming the file and the cap, before the prompts are held.
func TestPromptSuiteBounded(t *testing.T) {
	dir := t.TempDir()
	many := filepath.Join(dir, "many.txt")
	os.WriteFile(many, []byte(strings.Repeat("a\n", maxPrompts+1)), 0o644)
	if _, err := ReadPrompts(many); err == nil || !strings.Contains(err.Error(), many) || !strings.Contains(err.Error(), "more than 262144 prompts") {
		t.Errorf("%d prompts: %v", maxPrompts+1, err)
	}
	exact := filepath.Join(dir, "exact.txt")
	os.WriteFile(exact, []byte(strings.Repeat("a\n", maxPrompts)), 0o644)
	if ps, err := ReadPrompts(exact); err != nil || len(ps) != maxPrompts {
		t.Errorf("%d prompts: %d read, %v", maxPrompts, len(ps), err)
	}
	big := filepath.Join(dir, "big.txt")
	f, _ := os.Create(big)
	f.Truncate(250 << 20) // sparse: nothing is written, and nothing may be read
	f.Close()
	if _, err := ReadPrompts(big); err == nil || !strings.Contains(err.Error(), big) || !strings.Contains(err.Error(), "64 MiB") {
		t.Errorf("a 250 MiB suite: %v", err)
	}
}
