// Command arborist is the speculative-decoding workbench. With no arguments
// it opens the desktop GUI; with a verb (inspect, tokenize, generate, synth,
// ...) it runs headless. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"arborist/app"
	"arborist/app/cli"
	_ "arborist/app/locale" // before Fyne reads the locale
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(app.Run())
	}
	// SIGINT and SIGTERM cancel the verb: a run stores its last batch and
	// is marked stopped with its totals (issue 17)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Main(ctx, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
