//go:build unix

package llamacpp

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, and has its
// cancellation end the whole group: a program that forked children (or a
// shell script's pipeline) is ended with everything it started.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// endGroup ends what is left of the process group pid leads.
func endGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }
