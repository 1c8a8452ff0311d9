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
	// is marked stopped with its totals
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The verb runs on a goroutine of its own: Fyne's desktop driver (and
	// its systray) lock main.main to the main thread in init functions,
	// which the GUI needs and a headless verb does not. A locked goroutine
	// that waits or yields hands its processor to another thread and back,
	// two thread switches each time, and the CPU backend's pool yields
	// while its workers finish, several times a layer.
	code := make(chan int)
	go func() { code <- cli.Main(ctx, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]) }()
	os.Exit(<-code)
}
