//go:build !unix

package hardware

// FreeDisk cannot be read here.
func FreeDisk(string) (uint64, bool) { return 0, false }
