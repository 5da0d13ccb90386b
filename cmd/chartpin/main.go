// Command chartpin pins every image a Helm chart runs to its index digest.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/chartpin/chartpin/internal/failure"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartpin:", err)
	}
	os.Exit(failure.Code(err))
}
