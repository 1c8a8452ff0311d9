//go:build !unix

package llamacpp

import "os/exec"

// ownGroup: without process groups the program alone is ended.
func ownGroup(*exec.Cmd) {}

func endGroup(int) {}
