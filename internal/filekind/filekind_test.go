package filekind

import (
	"io/fs"
	"os"
	"testing"
)

// TestOf: each kind by its mode bits, and a real folder by its Lstat.
func TestOf(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		fs.ModeDir: "directory", fs.ModeNamedPipe: "FIFO", fs.ModeSocket: "socket",
		fs.ModeDevice: "device", fs.ModeDevice | fs.ModeCharDevice: "device", fs.ModeIrregular: "special file",
	} {
		if got := Of(m); got != want {
			t.Errorf("Of(%v) = %q, want %q", m, got, want)
		}
	}
	st, err := os.Lstat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := Of(st.Mode()); got != "directory" {
		t.Errorf("a folder is a %q", got)
	}
}
