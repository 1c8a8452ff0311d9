//go:build !unix

package cuda

import (
	"os"
	"os/exec"
)

// execProgram runs path in this process's place: it waits for it and exits
// with its status (there is no exec(2) here).
func execProgram(path string, args, env []string) error {
	c := exec.Command(path, args[1:]...)
	c.Env, c.Stdin, c.Stdout, c.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	if err := c.Run(); err != nil {
		if e, ok := err.(*exec.ExitError); ok {
			os.Exit(e.ExitCode())
		}
		return err
	}
	os.Exit(0)
	return nil
}
