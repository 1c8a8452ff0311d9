package cli

import (
	"context"
	"fmt"

	"arborist/profiles"
)

// runBackends lists the registered compute backends and, for each, the
// kernels it runs here or why it cannot run on this machine.
func runBackends(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "backends", "[--json]")
	asJSON := jsonFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bs, dflt := profiles.Backends(), profiles.Choices().DefaultBackend
	if *asJSON {
		return writeJSON(env.Stdout, bs)
	}
	for _, b := range bs {
		def := ""
		if b.Name == dflt {
			def = " (default)"
		}
		if b.Err != "" {
			fmt.Fprintf(env.Stdout, "%-6s unavailable: %s%s\n", b.Name, b.Err, def)
			continue
		}
		fmt.Fprintf(env.Stdout, "%-6s available: kernels %s, %d threads by default%s\n", b.Name, b.Kernels, b.Threads, def)
	}
	return nil
}
