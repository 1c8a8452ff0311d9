package hardware

import (
	"strings"
	"testing"
)

// TestCheckRoom: run -n 1e9 silently stopped at the
// context, and huge values overflowed into negative sizes in messages.
func TestCheckRoom(t *testing.T) {
	if err := CheckRoom(10, 100, 512); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]int{{10, 1_000_000_000, 512}, {500, 100, 512}, {1, 1<<63 - 1, 512}, {1 << 62, 1 << 62, 512}} {
		err := CheckRoom(c[0], c[1], c[2])
		if err == nil || strings.Contains(err.Error(), "-") {
			t.Errorf("CheckRoom%v = %v", c, err)
		}
	}
	if err := CheckThreads("--threads", 1000000); err == nil || !strings.Contains(err.Error(), "logical cores") {
		t.Errorf("a million threads: %v", err)
	}
	if err := CheckThreads("--threads", 1); err != nil {
		t.Error(err)
	}
}
