package profiles

import (
	"bufio"
	"errors"
	"fmt"

	"arborist/engine/gguf"
)

// maxPromptLine is the longest prompt line ReadPrompts takes (1 MiB, some
// 250K tokens: more than any context Arborist runs).
const maxPromptLine = 1 << 20

// maxPromptBytes bounds a prompt suite file: tens of thousands of
// prompts, and the tokens a run holds of them (8 bytes a token, some 4
// bytes of text each) stay within a few hundred megabytes.
const maxPromptBytes = 64 << 20

// maxPrompts bounds the prompts of a suite: 250 MiB of one-character
// lines (131M prompts) ran out of memory in run, calibrate and
// check-export.
const maxPrompts = 1 << 18

// promptLineError names the file and line where reading prompts failed,
// and says what the limit is when the line was too long.
func promptLineError(path string, line int, err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("prompts %s line %d: longer than %d bytes, the most one prompt may be", path, line, maxPromptLine)
	}
	return fmt.Errorf("prompts %s line %d: %w", path, line, err)
}

// maxChatTemplateBytes bounds a chat template file: real templates are a
// few kilobytes, the largest some tens.
const maxChatTemplateBytes = 1 << 20

// ReadChatTemplate reads a Jinja chat template file: only a regular file
// (a FIFO with no writer or /dev/zero is refused at once, never waited
// on or read without end) of at most maxChatTemplateBytes, checked by its
// size before a byte is read (a sparse file of gigabytes is not read).
func ReadChatTemplate(path string) (string, error) {
	b, err := gguf.ReadRegular(path, maxChatTemplateBytes)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
