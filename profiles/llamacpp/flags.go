package llamacpp

import (
	"context"
	"strings"
	"time"
)

// Flags are the options a llama.cpp program's --help names: its releases
// add and rename options, and a program that meets one it does not know
// exits before it serves.
type Flags map[string]bool

// HelpFlags reads the options prog's --help lists (each word of a line's
// option column that starts with "-"), within limit.
func HelpFlags(ctx context.Context, prog string, limit time.Duration) (Flags, error) {
	out, err := runProgram(ctx, prog, []string{"--help"}, limit)
	if err != nil {
		return nil, err
	}
	f := Flags{}
	for _, line := range strings.Split(out.String(), "\n") {
		for _, w := range strings.Fields(line) {
			w = strings.TrimRight(w, ",")
			if !strings.HasPrefix(w, "-") {
				break // past the option column: the description
			}
			f[w] = true
		}
	}
	return f, nil
}

// Drop removes from args each optional option (and its value) the
// program does not know, and says which it removed; an option it needs
// stays, so the program's own error names it.
func (f Flags) Drop(args []string) (kept, dropped []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !f[a] && i+1 < len(args) && isOptional(a) {
			dropped = append(dropped, a+" "+args[i+1])
			i++
			continue
		}
		kept = append(kept, a)
	}
	return kept, dropped
}

// isOptional says a is an option an exported line carries that a program
// may go without, with its value: llama.cpp then uses its own default
// (the draft model's threads are the target's, its context the loaded
// model's).
func isOptional(a string) bool {
	switch a {
	case "-td", "-cd":
		return true
	}
	return false
}
