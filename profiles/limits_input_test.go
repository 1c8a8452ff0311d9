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
