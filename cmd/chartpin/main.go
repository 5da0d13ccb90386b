// Command chartpin pins every image a Helm chart runs to its index digest.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/internal/failure"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil {
		msg := err.Error()
		if os.Getenv("GITHUB_ACTIONS") == "true" {
			// An error can quote repository values: keep them from starting workflow commands.
			msg = ghactions.EscapeData(msg)
		}
		fmt.Fprintln(os.Stderr, "chartpin:", msg)
	}
	os.Exit(failure.Code(err))
}
