package hardware

import (
	"fmt"
	"runtime"
)

// ThreadFactor bounds threads per logical core: a few threads per core can
// help hide stalls, a million only exhaust memory (each worker has its own
// stack and scratch) and hang the machine.
const ThreadFactor = 4

// MaxThreads is the most threads a model may be run with on this machine.
func MaxThreads() int { return ThreadFactor * runtime.NumCPU() }

// CheckThreads refuses a thread count that is not positive or is beyond
// MaxThreads; name is the flag or field it came from.
func CheckThreads(name string, n int) error {
	if n < 1 || n > MaxThreads() {
		return fmt.Errorf("%s %d: want 1 to %d (%d times this machine's %d logical cores)", name, n, MaxThreads(), ThreadFactor, runtime.NumCPU())
	}
	return nil
}

// CheckRoom refuses a generation that cannot fit in the model's context:
// promptTokens plus n new tokens (n is checked alone first, so a huge n
// cannot overflow the sum).
func CheckRoom(promptTokens, n, ctxLen int) error {
	if n < 1 {
		return fmt.Errorf("-n %d must be positive", n)
	}
	if n > ctxLen || promptTokens > ctxLen-n {
		return fmt.Errorf("prompt (%d tokens) + %d new tokens exceed the model's context of %d", promptTokens, n, ctxLen)
	}
	return nil
}
