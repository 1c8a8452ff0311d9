package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A program Arborist runs but did not write (llama.cpp's binaries, for
// check-export) is not trusted to behave: runProgram keeps a bounded tail
// of what it prints (the rest counted, never held), ends it when its time
// limit passes or the verb is cancelled (SIGINT, SIGTERM, the GUI's
// Cancel) together with every process it started (its process group), and
// does not wait on a child left behind holding its output. Every failure
// names the program.

// outputTail is how much of a program's output runProgram keeps: the
// timing lines llama.cpp prints come last.
const outputTail = 256 << 10

// ErrEnded marks a program ended at its time limit (errors.Is).
var ErrEnded = errors.New("ended")

// waitDelay is how long runProgram waits, once the program has exited or
// been ended, for its output to close (a background child may hold it).
const waitDelay = 2 * time.Second

// tailBuffer keeps the last max bytes written to it and counts the rest.
type tailBuffer struct {
	max     int
	b       []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.dropped += int64(len(t.b) + len(p) - t.max)
		t.b = append(t.b[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.b) + len(p) - t.max; over > 0 {
		t.dropped += int64(over)
		t.b = append(t.b[:0], t.b[over:]...)
	}
	t.b = append(t.b, p...)
	return n, nil
}

// String is the kept tail.
func (t *tailBuffer) String() string { return string(t.b) }

// excerpt is the last n bytes kept, marked where more was printed.
func (t *tailBuffer) excerpt(n int) string {
	s := t.String()
	cut := t.dropped
	if len(s) > n {
		cut += int64(len(s) - n)
		s = s[len(s)-n:]
	}
	if cut > 0 {
		return fmt.Sprintf("... (%d bytes before)\n%s", cut, s)
	}
	return s
}

// runProgram runs prog with args for at most limit and returns the tail
// of what it printed (stdout and stderr together). A time-out and a
// failure are errors naming the program; a cancelled ctx returns
// ctx.Err().
func runProgram(ctx context.Context, prog string, args []string, limit time.Duration) (*tailBuffer, error) {
	name := filepath.Base(prog)
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, prog, args...)
	out := &tailBuffer{max: outputTail}
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd) // its children are ended with it
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	if cmd.Process != nil {
		endGroup(cmd.Process.Pid) // a child left behind, holding the output or not
	}
	switch {
	case ctx.Err() != nil:
		return out, ctx.Err()
	case cctx.Err() != nil:
		return out, fmt.Errorf("%s did not finish within %s (the limit for this call), so it and its children were %w; it printed %d bytes, the last:\n%s", name, limit, ErrEnded, out.dropped+int64(len(out.b)), out.excerpt(2000))
	case errors.Is(err, exec.ErrWaitDelay):
		return out, nil // it exited, and a child it left behind held its output
	case err != nil:
		return out, fmt.Errorf("%s: %w\n%s", name, err, out.excerpt(2000))
	}
	return out, nil
}

// printable is s cut to n bytes with control characters (line breaks, a
// terminal's escapes) replaced: what a program printed, made safe to
// store, write into a config and show.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}
