package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/signature"
)

// Option configures a Reconciler.
type Option func(*options) error

type options struct {
	logger         *slog.Logger
	dryRun         bool
	rolloutTimeout time.Duration
	requestTimeout time.Duration
	pollInterval   time.Duration
	maxSkips       int
	maxAttempts    int
	now            func() time.Time
	instance       string
	pullSecrets    *PullSecrets
	spread         time.Duration
	sleep          func(context.Context, time.Duration) error
	signatures     *signature.Checker
}

func makeOptions(opts ...Option) (options, error) {
	o := options{
		logger:         slog.New(slog.DiscardHandler),
		rolloutTimeout: 10 * time.Minute,
		requestTimeout: 30 * time.Second,
		pollInterval:   2 * time.Second,
		maxSkips:       4,
		maxAttempts:    3,
		now:            time.Now,
		instance:       "chartpin-reconcile",
		sleep:          sleep,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithLogger logs every request and decision (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithDryRun decides without writing anything to the cluster.
func WithDryRun(on bool) Option { return func(o *options) error { o.dryRun = on; return nil } }

// WithRolloutTimeout bounds the wait for each re-imaged workload (default 10m).
func WithRolloutTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("rollout timeout %s: want more than zero", d)
		}
		o.rolloutTimeout = d
		return nil
	}
}

// WithRequestTimeout bounds every API request (default 30s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("request timeout %s: want more than zero", d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithPollInterval is how often a rollout wait reads the workload (default 2s).
func WithPollInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("poll interval %s: want more than zero", d)
		}
		o.pollInterval = d
		return nil
	}
}

// WithMaxSkips fails the tick once a workload has been skipped (mid-rollout or
// not Ready) on more than n ticks in a row (default 4).
func WithMaxSkips(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("max skips %d: want 0 or more", n)
		}
		o.maxSkips = n
		return nil
	}
}

// WithMaxAttempts locks a workload out after n re-images without a completed
// rollout (default 3).
func WithMaxAttempts(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("max attempts %d: want at least 1", n)
		}
		o.maxAttempts = n
		return nil
	}
}

// WithClock sets the clock used for Event timestamps (tests).
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now != nil {
			o.now = now
		}
		return nil
	}
}

// WithInstance names this reconcile in Events (e.g. the pod name).
func WithInstance(name string) Option {
	return func(o *options) error {
		if name != "" {
			o.instance = name
		}
		return nil
	}
}

// WithPullSecrets fills kc, at the start of each tick, from the Secrets the
// targets file names; kc must also be the resolver's keychain.
func WithPullSecrets(kc *PullSecrets) Option {
	return func(o *options) error { o.pullSecrets = kc; return nil }
}

// WithSpread waits d before the tick's first request (see SpreadDelay), so
// that a fleet's ticks spread over the schedule period.
func WithSpread(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("spread delay %s: want 0 or more", d)
		}
		o.spread = d
		return nil
	}
}

// WithSignatures checks each target's verify: policy through c before a
// re-image; without it a target with verify: is refused.
func WithSignatures(c *signature.Checker) Option {
	return func(o *options) error { o.signatures = c; return nil }
}

// withSleep replaces the spread wait (tests, the fleet simulation).
func withSleep(fn func(context.Context, time.Duration) error) Option {
	return func(o *options) error { o.sleep = fn; return nil }
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
