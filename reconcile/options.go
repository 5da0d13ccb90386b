package reconcile

import (
	"context"
	"log/slog"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/signature"
)

// Options configure a Reconciler. Start from DefaultOptions: a zero
// RolloutTimeout, RequestTimeout, PollInterval or MaxAttempts is refused,
// since 0 is also what a command line passes on purpose.
type Options struct {
	// DryRun decides without writing anything to the cluster.
	DryRun bool
	// RolloutTimeout bounds the wait for each re-imaged workload.
	RolloutTimeout time.Duration
	// RequestTimeout bounds every API request.
	RequestTimeout time.Duration
	// PollInterval is how often a rollout wait reads the workload.
	PollInterval time.Duration
	// MaxSkips fails the tick once a workload has been skipped (mid-rollout
	// or not Ready) on more than this many ticks in a row.
	MaxSkips int
	// MaxAttempts locks a workload out after this many re-images without a
	// completed rollout.
	MaxAttempts int
	// Spread waits this long before the tick's first request (see
	// SpreadDelay), so that a fleet's ticks spread over the schedule period.
	Spread time.Duration
	// PullSecrets is filled, at the start of each tick, from the Secrets the
	// targets file names; it must also be the resolver's keychain.
	PullSecrets *PullSecrets
	// Signatures checks each target's verify: policy before a re-image;
	// without it a target with verify: is refused.
	Signatures *signature.Checker
	// Instance names this reconcile in Events, e.g. the pod name (default
	// chartpin-reconcile).
	Instance string
	// Now is the clock for Event timestamps (default time.Now).
	Now func() time.Time
	// Logger logs every request and decision (default: discard).
	Logger *slog.Logger

	// sleep replaces the spread wait (tests, the fleet simulation).
	sleep func(context.Context, time.Duration) error
}

// DefaultOptions are the options a command line starts from: 10m rollouts,
// 30s requests, a 2s poll, 4 skips and 3 attempts.
func DefaultOptions() Options {
	return Options{
		RolloutTimeout: 10 * time.Minute,
		RequestTimeout: 30 * time.Second,
		PollInterval:   2 * time.Second,
		MaxSkips:       4,
		MaxAttempts:    3,
	}
}

// Validate checks the options by themselves; errors name option fields.
func (o Options) Validate() error {
	var err error
	switch {
	case o.RolloutTimeout <= 0:
		err = failure.Optionf("{{RolloutTimeout}} %s: want more than zero", o.RolloutTimeout)
	case o.RequestTimeout <= 0:
		err = failure.Optionf("{{RequestTimeout}} %s: want more than zero", o.RequestTimeout)
	case o.PollInterval <= 0:
		err = failure.Optionf("{{PollInterval}} %s: want more than zero", o.PollInterval)
	case o.MaxSkips < 0:
		err = failure.Optionf("{{MaxSkips}} %d: want 0 or more", o.MaxSkips)
	case o.MaxAttempts < 1:
		err = failure.Optionf("{{MaxAttempts}} %d: want at least 1", o.MaxAttempts)
	case o.Spread < 0:
		err = failure.Optionf("{{Spread}} %s: want 0 or more", o.Spread)
	}
	if err != nil {
		return failure.Input(err)
	}
	return nil
}

// withDefaults fills what may be left empty.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Instance == "" {
		o.Instance = "chartpin-reconcile"
	}
	if o.sleep == nil {
		o.sleep = sleep
	}
	return o
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CheckBudget reports whether a tick's deadline leaves room for the rollout
// wait and the spread window (SpreadDelay's window), with slack for the reads
// and patches around them. A tick run past it is killed mid-rollout.
func CheckBudget(deadline, rolloutTimeout, jitter time.Duration) error {
	if deadline <= rolloutTimeout+jitter {
		return failure.Input(failure.Optionf("{{Deadline}} %s must exceed {{RolloutTimeout}} %s plus {{Jitter}} %s (leave slack for resolving, reading and patching)", deadline, rolloutTimeout, jitter))
	}
	return nil
}
