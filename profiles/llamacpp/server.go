package llamacpp

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
)

// serverPrograms is llama.cpp's OpenAI-compatible server.
var serverPrograms = []string{"llama-server"}

// ServerProgram finds llama-server in dir (or on PATH when dir is ""):
// ErrNotFound where it is missing.
func ServerProgram(dir string) (string, error) { return findProgram(dir, serverPrograms) }

// Process is a long-lived program started by Start (a server a load test
// drives): in a process group of its own, the tail of its output kept.
type Process struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    *tailBuffer
	exited chan struct{}
	err    error // why it exited, once exited is closed
	stop   sync.Once
}

// lockedTail serialises the program's two output streams into one tail.
type lockedTail struct{ p *Process }

func (l lockedTail) Write(b []byte) (int, error) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.p.out.Write(b)
}

// Start runs prog with args as a long-lived process (a server) in a
// process group of its own: cancelling ctx, or Stop, ends it with every
// process it started, so a cancelled load test leaves no server behind.
// What it prints is kept as a bounded tail (Output) for the error a
// failed start reports.
func Start(ctx context.Context, prog string, args []string) (*Process, error) {
	p := &Process{name: filepath.Base(prog), out: &tailBuffer{max: outputTail}, exited: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, prog, args...)
	p.cmd.Stdout, p.cmd.Stderr = lockedTail{p}, lockedTail{p}
	ownGroup(p.cmd)
	p.cmd.WaitDelay = waitDelay
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		endGroup(p.cmd.Process.Pid) // a child left behind
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id (its group's).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is why the process exited (nil before it has, or where it exited 0).
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Output is the last n bytes the process printed, marked where more was.
func (p *Process) Output(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.excerpt(n)
}

// Stop ends the process and its group and waits for it to exit.
func (p *Process) Stop() {
	p.stop.Do(func() { endGroup(p.cmd.Process.Pid); p.cmd.Process.Kill() })
	<-p.exited
}

// String names the process for messages.
func (p *Process) String() string { return p.name + " (pid " + strconv.Itoa(p.Pid()) + ")" }
