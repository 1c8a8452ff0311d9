package llamacpp

import (
	"strings"
	"testing"
)

// TestTailBufferBounded: output past the tail is counted, never held.
func TestTailBufferBounded(t *testing.T) {
	tb := &tailBuffer{max: 1000}
	line := strings.Repeat("x", 99) + "\n"
	for i := 0; i < 100000; i++ {
		tb.Write([]byte(line))
	}
	tb.Write([]byte("the end\n"))
	if len(tb.b) != 1000 || tb.dropped != 100000*100+8-1000 || !strings.HasSuffix(tb.String(), "the end\n") {
		t.Errorf("kept %d bytes, dropped %d", len(tb.b), tb.dropped)
	}
	tb.Write([]byte(strings.Repeat("y", 5000)))
	if len(tb.b) != 1000 || tb.String() != strings.Repeat("y", 1000) {
		t.Errorf("a large write: kept %d", len(tb.b))
	}
	if ex := tb.excerpt(10); !strings.HasPrefix(ex, "... (") || !strings.HasSuffix(ex, "yyyyyyyyyy") {
		t.Errorf("excerpt %q", ex)
	}
}
