// Package upgrade runs one auto-upgrade tick for an installed Helm release:
// un-wedge it, find the newest chart version in its repository, and upgrade
// with reset-then-reuse-values, rolling back on failure.
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/authn"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/chartpin/chartpin/internal/failure"
	"github.com/chartpin/chartpin/internal/redact"
)

// Decisions reported in Result.Decision.
const (
	// DecisionUpgraded: a newer chart version was installed.
	DecisionUpgraded = "upgraded"
	// DecisionWouldUpgrade: a newer chart version exists; --dry-run changed nothing.
	DecisionWouldUpgrade = "would-upgrade"
	// DecisionRecalled: the deployed version is deprecated; a lower one was installed.
	DecisionRecalled = "recalled"
	// DecisionWouldRecall: the deployed version is deprecated; --dry-run changed nothing.
	DecisionWouldRecall = "would-recall"
	// DecisionWaiting: newer versions exist but none has soaked --min-age yet.
	DecisionWaiting = "waiting"
	// DecisionUpToDate: no version above the deployed one may be taken
	// (there is none, or each is deprecated).
	DecisionUpToDate = "up-to-date"
	// DecisionAhead: the deployed chart is newer than anything in the repository.
	DecisionAhead = "ahead"
	// DecisionUninstalling: the release is being uninstalled (or is gone); nothing was touched.
	DecisionUninstalling = "uninstalling"
	// DecisionRolledBack: the upgrade failed and the release was rolled back.
	DecisionRolledBack = "rolled-back"
	// DecisionFailed: the upgrade failed and was not rolled back: either it
	// failed before changing anything, or the rollback failed too.
	DecisionFailed = "failed"
)

// DefaultTimeout is Helm's own upgrade timeout default.
const DefaultTimeout = 5 * time.Minute

// DefaultRequestTimeout bounds each repository request.
const DefaultRequestTimeout = 30 * time.Second

// deadlineSlack is headroom for the Kubernetes API calls around the waits
// (history reads, release records), so a deadline never equals the work.
const deadlineSlack = 30 * time.Second

// Options describe one upgrade tick.
type Options struct {
	Release   string // release name
	Namespace string // namespace the release lives in (checked against the stored release)
	Chart     string // chart name in the repository

	RepoURL string // an index.yaml repository (http/https); exactly one of RepoURL and OCI
	OCI     string // oci://HOST/PATH; the chart is HOST/PATH/<Chart>

	Timeout         time.Duration    // Helm's wait for rollback and upgrade; default DefaultTimeout
	RequestTimeout  time.Duration    // per repository request; default DefaultRequestTimeout
	AllowPrerelease bool             // consider semver prereleases (1.9.63-rc.1) as candidates
	MinAge          time.Duration    // take only versions published at least this long ago (a soak)
	Now             func() time.Time // the clock ages are measured by; default time.Now
	DryRun          bool             // decide and render, change nothing
	PlainHTTP       bool             // talk plain HTTP to the OCI registry (loopback test registries)
	MaxHistory      int              // revisions kept; default 10 like `helm upgrade`

	HTTPClient *http.Client // for repository requests; default a fresh client
	// Keychain holds the repository credentials: basic auth for the index
	// host (HTTPS only), registry auth for OCI. Default authn.DefaultKeychain
	// (DOCKER_CONFIG, where the chart mounts registryAuth.secret).
	Keychain authn.Keychain
	Logger   *slog.Logger // discard by default
}

// Result is what one tick found and did.
type Result struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	Current   string `json:"current"`          // chart version deployed before the tick
	Latest    string `json:"latest"`           // newest version in the repository ("" when not fetched)
	Target    string `json:"target,omitempty"` // the version moved to (or that a dry run would move to)
	Decision  string `json:"decision"`         // one of the Decision constants
	Reason    string `json:"reason,omitempty"` // why, in words: "0.4.2 waits 17h more"

	// Now is the clock reading ages were measured at, MinAge the soak asked for.
	Now    time.Time `json:"now"`
	MinAge string    `json:"min_age,omitempty"`
	// Candidates are the versions looked at, newest first after the deployed one.
	Candidates []Candidate `json:"candidates,omitempty"`

	Recovered string `json:"recovered,omitempty"` // non-empty when a wedged release was rolled back first
	Revision  int    `json:"revision"`            // release revision after the tick

	// Shadowed are the pins (dotted paths) set in the release's user-supplied
	// values, whatever they hold: upgrades re-apply them, so the chart's pins
	// at those paths never reach this release.
	Shadowed []string `json:"shadowed,omitempty"`
}

// MinDeadline is the shortest command deadline that never undercuts the
// Helm timeout: a rollback of a wedged release, the upgrade, and the atomic
// rollback after a failed upgrade each may wait Timeout, plus two repository
// requests and slack (docs/design.md#deadlines-with-slack).
func MinDeadline(opts Options) time.Duration {
	opts = withDefaults(opts)
	return 3*opts.Timeout + 2*opts.RequestTimeout + deadlineSlack
}

// CommandDeadline is the deadline for a command that runs one tick: the
// requested one, or MinDeadline(opts) when that would undercut the upgrade;
// extended says which, so the caller can tell the user.
func CommandDeadline(requested time.Duration, opts Options) (deadline time.Duration, extended bool) {
	if need := MinDeadline(opts); requested < need {
		return need, true
	}
	return requested, false
}

func withDefaults(opts Options) Options {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxHistory == 0 {
		opts.MaxHistory = 10
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if opts.Keychain == nil {
		opts.Keychain = authn.DefaultKeychain
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts
}

// Validate reports missing or conflicting options as an input error (exit 2).
func (opts Options) Validate() error {
	var problems []string // formats naming option fields, for failure.Optionf
	var args []any
	problem := func(format string, a ...any) { problems, args = append(problems, format), append(args, a...) }
	if opts.Release == "" {
		problem("{{Release}} is required")
	}
	if opts.Chart == "" {
		problem("{{Chart}} is required")
	}
	switch {
	case opts.RepoURL == "" && opts.OCI == "":
		problem("one of {{RepoURL}} URL or {{OCI}} oci://HOST/PATH is required")
	case opts.RepoURL != "" && opts.OCI != "":
		problem("{{RepoURL}} and {{OCI}} are exclusive: pick the one the chart is published to")
	case opts.RepoURL != "" && !strings.HasPrefix(opts.RepoURL, "http://") && !strings.HasPrefix(opts.RepoURL, "https://"):
		problem("{{RepoURL}} %q: want an http(s) URL of a directory holding index.yaml", redact.URL(opts.RepoURL))
	case opts.OCI != "" && !strings.HasPrefix(opts.OCI, "oci://"):
		problem("{{OCI}} %q: want oci://HOST/PATH", opts.OCI)
	}
	if opts.MinAge < 0 {
		problem("{{MinAge}} %s: want a duration of zero or more, e.g. 24h", opts.MinAge)
	}
	if len(problems) > 0 {
		return failure.Input(failure.Optionf("upgrade: "+strings.Join(problems, "; "), args...))
	}
	return nil
}

// Run performs one auto-upgrade tick of opts.Release through cfg. It sets
// cfg.Log when it is nil. ctx bounds the repository requests and the upgrade;
// a ctx deadline shorter than MinDeadline is refused before anything runs.
func Run(ctx context.Context, cfg *action.Configuration, opts Options) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	opts = withDefaults(opts)
	log := opts.Logger.With("release", opts.Release, "namespace", opts.Namespace)
	res := Result{Release: opts.Release, Namespace: opts.Namespace, Now: opts.Now().UTC()}
	if opts.MinAge > 0 {
		res.MinAge = human(opts.MinAge)
	}
	if err := checkDeadline(ctx, opts); err != nil {
		return res, err
	}
	if cfg.Log == nil {
		cfg.Log = func(format string, v ...any) { log.Debug("helm: " + fmt.Sprintf(format, v...)) }
	}

	// Read the release's history: the newest revision decides what to do.
	history, err := readHistory(cfg, opts)
	if err != nil {
		return res, err
	}
	last := history[len(history)-1]
	res.Revision = last.Version

	switch st := last.Info.Status; {
	case st == release.StatusUninstalling || st == release.StatusUninstalled:
		res.Current = chartVersion(last)
		res.Decision = DecisionUninstalling
		log.Info("decision: skip, the release is being uninstalled", "status", st, "revision", last.Version, "decision", res.Decision)
		return res, nil
	case st.IsPending():
		if last, err = recoverWedged(cfg, opts, log, history, &res); err != nil {
			return res, err
		}
	}

	current := last
	if current.Info.Status != release.StatusDeployed {
		if d := lastGood(history); d != nil && d.Info.Status == release.StatusDeployed {
			current = d
		}
	}
	res.Current = chartVersion(current)
	cur, err := semver.NewVersion(res.Current)
	if err != nil {
		return res, fmt.Errorf("upgrade %s: deployed chart version %q is not semver: %w", opts.Release, res.Current, err)
	}
	log.Info("current", "chart", chartName(current), "version", res.Current, "revision", current.Version, "status", current.Info.Status)

	src := source(opts)
	pl, err := decide(ctx, src, opts, res.Now, res.Current, cur)
	if err != nil {
		return res, err
	}
	res.Latest, res.Reason, res.Candidates = pl.latest.Original(), pl.reason, pl.candidates
	log.Info("latest", "source", src.String(), "version", res.Latest, "allowPrerelease", opts.AllowPrerelease, "minAge", opts.MinAge)

	res.Shadowed = shadowedPins(current.Config)
	warnShadowed(log, res.Shadowed)
	if pl.target == nil {
		res.Decision = pl.decision
		log.Info("decision: stay", "current", res.Current, "latest", res.Latest, "decision", res.Decision, "reason", res.Reason)
		return res, nil
	}
	res.Target = pl.target.Original()
	ch, err := src.fetch(ctx, opts, res.Target)
	if err != nil {
		return res, err
	}
	err = moveTo(ctx, cfg, opts, log, current, ch, pl.target.LessThan(cur), &res)
	return res, err
}

// checkDeadline refuses a ctx deadline that would cut the Helm wait short.
func checkDeadline(ctx context.Context, opts Options) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	// A second of tolerance covers the caller's setup between creating
	// the deadline from MinDeadline and calling Run.
	if left, need := time.Until(dl), MinDeadline(opts); left+time.Second < need {
		return failure.Input(failure.Optionf("upgrade %s: the command deadline (%s left) undercuts the %s the upgrade may need (3 × {{Timeout}} %s for rollback, upgrade and atomic rollback, plus requests): raise the command deadline to at least %s or lower {{Timeout}}",
			opts.Release, left.Round(time.Second), need, opts.Timeout, need))
	}
	return nil
}

// readHistory is the release's revisions, oldest first (never empty), after
// checking that the store keeps it in opts.Namespace.
func readHistory(cfg *action.Configuration, opts Options) ([]*release.Release, error) {
	history, err := cfg.Releases.History(opts.Release)
	if err != nil || len(history) == 0 {
		if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
			return nil, failure.Optionf("upgrade: release %q not found in namespace %q: install it first (helm install), or check {{Release}} and {{Namespace}}", opts.Release, opts.Namespace)
		}
		return nil, fmt.Errorf("upgrade %s: reading release history in namespace %q: %w; is the cluster reachable with this kubeconfig or in-cluster service account, and may it read secrets there?", opts.Release, opts.Namespace, err)
	}
	releaseutil.SortByRevision(history)
	if last := history[len(history)-1]; opts.Namespace != "" && last.Namespace != opts.Namespace {
		return nil, failure.Input(failure.Optionf("upgrade %s: the release store holds it in namespace %q, not %q: check {{Namespace}}", opts.Release, last.Namespace, opts.Namespace))
	}
	return history, nil
}

// recoverWedged rolls a release whose newest revision is pending back to
// its last good revision and returns that one: a killed upgrade leaves the
// release pending forever, and Helm refuses every later upgrade. A dry run
// only says it would.
func recoverWedged(cfg *action.Configuration, opts Options, log *slog.Logger, history []*release.Release, res *Result) (*release.Release, error) {
	last := history[len(history)-1]
	st := last.Info.Status
	good := lastGood(history)
	if good == nil {
		return nil, fmt.Errorf("upgrade %s: revision %d is %s and no earlier revision was ever deployed, so there is nothing to roll back to: uninstall and reinstall the release", opts.Release, last.Version, st)
	}
	if opts.DryRun {
		res.Recovered = fmt.Sprintf("revision %d is %s; would roll back to revision %d (chart %s)", last.Version, st, good.Version, chartVersion(good))
		log.Info("wedged release: would roll back (dry run)", "status", st, "revision", last.Version, "to", good.Version)
		return good, nil
	}
	res.Recovered = fmt.Sprintf("revision %d was %s; rolled back to revision %d (chart %s)", last.Version, st, good.Version, chartVersion(good))
	log.Info("wedged release: rolling back", "status", st, "revision", last.Version, "since", last.Info.LastDeployed.Time, "to", good.Version, "timeout", opts.Timeout)
	rb := action.NewRollback(cfg)
	rb.Version = good.Version
	rb.Wait = true
	rb.Timeout = opts.Timeout
	rb.MaxHistory = opts.MaxHistory
	if err := rb.Run(opts.Release); err != nil {
		return nil, fmt.Errorf("upgrade %s: rolling back %s revision %d to revision %d: %w; inspect with `helm history %s -n %s`", opts.Release, st, last.Version, good.Version, err, opts.Release, last.Namespace)
	}
	// Helm leaves the interrupted revision pending; say what became of it
	// so `helm history` does not read as an upgrade still in flight.
	last.Info.Status = release.StatusFailed
	last.Info.Description = fmt.Sprintf("interrupted while %s; rolled back to revision %d by chartpin upgrade", st, good.Version)
	if err := cfg.Releases.Update(last); err != nil {
		return nil, fmt.Errorf("upgrade %s: marking interrupted revision %d failed after the rollback: %w", opts.Release, last.Version, err)
	}
	if now, err := cfg.Releases.Last(opts.Release); err == nil {
		res.Revision = now.Version
	}
	return good, nil
}

// moveTo upgrades current to ch (res.Target), or recalls it when down is
// set: a recall is a deliberate downgrade, an upgrade to the lower chart, so
// values are kept exactly as on any upgrade. A dry run renders only.
func moveTo(ctx context.Context, cfg *action.Configuration, opts Options, log *slog.Logger, current *release.Release, ch *chart.Chart, down bool, res *Result) error {
	verb, done, would := "upgrade", DecisionUpgraded, DecisionWouldUpgrade
	if down {
		verb, done, would = "recall", DecisionRecalled, DecisionWouldRecall
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = current.Namespace
	up.Timeout = opts.Timeout
	up.Atomic = true // implies Wait; a failed upgrade rolls back
	up.ResetThenReuseValues = true
	up.MaxHistory = opts.MaxHistory
	up.DryRun = opts.DryRun
	up.Description = fmt.Sprintf("chartpin %s %s -> %s", verb, res.Current, res.Target)
	if opts.DryRun && res.Recovered != "" {
		// Helm refuses to render an upgrade over a pending revision, and a
		// dry run must not roll it back: the decision is all there is.
		res.Decision = would
		log.Info("decision: would roll back, then "+verb+" (dry run, nothing changed, not rendered)", "current", res.Current, "target", res.Target, "decision", res.Decision)
		return nil
	}
	if opts.DryRun {
		if _, err := up.RunWithContext(ctx, opts.Release, ch, nil); err != nil {
			return fmt.Errorf("upgrade %s: dry run of chart %s %s: %w", opts.Release, opts.Chart, res.Target, err)
		}
		res.Decision = would
		log.Info("decision: would "+verb+" (dry run, nothing changed)", "current", res.Current, "target", res.Target, "decision", res.Decision, "reason", res.Reason)
		return nil
	}
	log.Info("decision: "+verb, "current", res.Current, "target", res.Target, "reason", res.Reason, "timeout", opts.Timeout)
	before := res.Revision
	rel, err := up.RunWithContext(ctx, opts.Release, ch, nil)
	if err != nil {
		err = afterFailedUpgrade(cfg, opts, before, err, res)
		log.Error("decision: "+verb+" failed", "current", res.Current, "target", res.Target, "decision", res.Decision, "err", err)
		return fmt.Errorf("upgrade %s: chart %s %s -> %s failed: %w; inspect with `helm history %s -n %s`",
			opts.Release, opts.Chart, res.Current, res.Target, err, opts.Release, current.Namespace)
	}
	res.Revision = rel.Version
	res.Decision = done
	log.Info("decision: "+done, "current", res.Current, "target", res.Target, "revision", rel.Version, "decision", res.Decision)
	return nil
}

// afterFailedUpgrade sets res's decision and revision from what the store
// shows after a failed upgrade, not from what atomic promises, and says so
// in the error it returns.
func afterFailedUpgrade(cfg *action.Configuration, opts Options, before int, err error, res *Result) error {
	now, lerr := cfg.Releases.Last(opts.Release)
	switch {
	case lerr != nil:
		res.Decision = DecisionFailed
		return fmt.Errorf("%w; and reading the release afterwards failed: %v", err, lerr)
	case now.Version == before:
		res.Decision = DecisionFailed
		return fmt.Errorf("%w; nothing was changed", err)
	case now.Info.Status == release.StatusDeployed && chartVersion(now) == res.Current:
		res.Revision = now.Version
		res.Decision = DecisionRolledBack
		return fmt.Errorf("%w; rolled back to chart %s as revision %d", err, res.Current, now.Version)
	default:
		res.Revision = now.Version
		res.Decision = DecisionFailed
		return fmt.Errorf("%w; the release is left at revision %d, %s, chart %s", err, now.Version, now.Info.Status, chartVersion(now))
	}
}

// lastGood is the newest revision that was deployed or superseded (a
// superseded revision ran successfully before it was replaced).
func lastGood(history []*release.Release) *release.Release {
	for i := len(history) - 1; i >= 0; i-- {
		if s := history[i].Info.Status; s == release.StatusDeployed || s == release.StatusSuperseded {
			return history[i]
		}
	}
	return nil
}

func chartVersion(r *release.Release) string {
	if r.Chart == nil || r.Chart.Metadata == nil {
		return ""
	}
	return r.Chart.Metadata.Version
}

func chartName(r *release.Release) string {
	if r.Chart == nil || r.Chart.Metadata == nil {
		return ""
	}
	return r.Chart.Metadata.Name
}

func warnShadowed(log *slog.Logger, paths []string) {
	if len(paths) > 0 {
		log.Warn("user-supplied values override the chart's pins; upgrades re-apply them, so these pins never move (remove them from the release's values)", "paths", paths)
	}
}
