//go:build unix

package cuda

import "syscall"

// execProgram replaces this process with path (it returns only on failure).
func execProgram(path string, args, env []string) error { return syscall.Exec(path, args, env) }
