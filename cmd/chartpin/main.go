// Command chartpin pins every image a Helm chart runs to its index digest.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go exitAfterSignal(ctx, stop)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalGrace is how long a run may take to stop once SIGINT or SIGTERM
// cancels its context.
const signalGrace = 3 * time.Second

// exitAfterSignal ends a run that a signal did not stop within signalGrace
// (a step blocked where no context reaches), and gives the signals back
// their default action, so that a second one ends the process at once.
func exitAfterSignal(ctx context.Context, stop context.CancelFunc) {
	<-ctx.Done()
	cause := context.Cause(ctx)
	stop()
	time.Sleep(signalGrace)
	fmt.Fprintf(os.Stderr, "chartpin: interrupted (%v); a step did not stop within %s\n", cause, signalGrace)
	os.Exit(1)
}
