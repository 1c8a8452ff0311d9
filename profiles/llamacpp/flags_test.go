package llamacpp

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestHelpFlagsDrop: the options a program's --help lists are read from
// its option column, and an optional option it lacks is dropped with its
// value while one it needs stays.
func TestHelpFlagsDrop(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "llama-server")
	help := `#!/bin/sh
cat <<'H'
-t,    --threads N                      number of threads
-cd,   --ctx-size-draft N               size of the prompt context for the draft model
--draft-max, --draft, --draft-n N       number of tokens to draft (-td is not here)
H
`
	if err := os.WriteFile(prog, []byte(help), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := HelpFlags(context.Background(), prog, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-t", "--threads", "-cd", "--ctx-size-draft", "--draft-max", "--draft", "--draft-n"} {
		if !f[want] {
			t.Errorf("%s not read from the help", want)
		}
	}
	if f["-td"] || f["N"] {
		t.Errorf("words of a description read as options: %v", f)
	}
	kept, dropped := f.Drop([]string{"-m", "t.gguf", "-td", "2", "-cd", "512", "--draft-max", "4", "-np", "8"})
	if want := []string{"-m", "t.gguf", "-cd", "512", "--draft-max", "4", "-np", "8"}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if want := []string{"-td 2"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
}
