//go:build unix

package profiles

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"arborist/profiles/config"
)

// TestFIFOModelRefused: a FIFO as a model path hung
// run --config and inspect forever; it is refused at once.
func TestFIFOModelRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sum := "0000000000000000000000000000000000000000000000000000000000000000"
	c := &config.Config{}
	fifo := filepath.Join(dir, "fifo.gguf")
	if syscall.Mkfifo(fifo, 0o600) == nil {
		c.Models.Target = config.Target{Path: fifo, SHA256: sum}
		done := make(chan error, 1)
		go func() { done <- checkConfigModels(ctx, "", c, false) }()
		select {
		case err := <-done:
			if err == nil {
				t.Error("a FIFO passed as a model")
			}
		case <-time.After(5 * time.Second):
			t.Error("a FIFO as a model path blocked")
		}
	}
}
