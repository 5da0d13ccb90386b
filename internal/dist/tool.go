package dist

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
)

// Main is main for the release tools (chartpin-dist, chartpin-image): run
// gets the arguments and a context cancelled on interrupt; an error is
// printed after name, and the exit status is 2 for a usage error
// (flag.ErrHelp), 1 otherwise.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// ReadCACerts reads the PEM bundle a release image installs.
func ReadCACerts(file string) ([]byte, error) {
	ca, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA bundle: %w (install ca-certificates or pass --ca-certificates FILE)", err)
	}
	return ca, nil
}
