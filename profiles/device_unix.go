//go:build unix

package profiles

import "syscall"

// execProgram replaces this process with path (it returns only on failure).
func execProgram(path string, args, env []string) error { return syscall.Exec(path, args, env) }
