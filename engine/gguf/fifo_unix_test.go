//go:build unix

package gguf

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFORefused: a FIFO given as a model is refused at once, instead of
// Open waiting forever for a writer.
func TestFIFORefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe.gguf")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Open(p); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("FIFO: err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open of a FIFO still blocked after 5 s")
	}
	if _, err := Open("/dev/null"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/null: err = %v", err)
	}
}
