package profiles

import (
	"bufio"
	"errors"
	"fmt"
)

// maxPromptLine is the longest prompt line ReadPrompts takes (1 MiB, some
// 250K tokens: more than any context Arborist runs).
const maxPromptLine = 1 << 20

// maxPromptBytes bounds a prompt suite file: thousands of prompts.
const maxPromptBytes = 256 << 20

// promptLineError names the file and line where reading prompts failed,
// and says what the limit is when the line was too long.
func promptLineError(path string, line int, err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("prompts %s line %d: longer than %d bytes, the most one prompt may be", path, line, maxPromptLine)
	}
	return fmt.Errorf("prompts %s line %d: %w", path, line, err)
}
