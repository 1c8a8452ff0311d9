package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"arborist/profiles"
)

// runDemo writes the built-in demo pair, so a user without models (or a
// script) can try every verb on a pair where speculation pays.
func runDemo(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "demo", "-o DIR [--force]")
	out := fs.String("o", "", "output `folder` (created if missing)")
	force := fs.Bool("force", false, "replace files of the pair's names that are there already")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fail(fs, usagef("-o is required"))
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "writing the demo pair (a 35M-parameter target expanded from stories260K, and a noisy stories260K drafter) to %s\n", dir)
	target, draft, err := profiles.DemoPair(ctx, dir, *force, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "target: %s\ndraft: %s\n", target, draft)
	return nil
}
