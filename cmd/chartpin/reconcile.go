package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/reconcile"
	"github.com/chartpin/chartpin/resolver"
)

func reconcileCommand() *cli.Command {
	return &cli.Command{
		Name:  "reconcile",
		Usage: "one in-cluster digest-on-update tick: re-image workloads that run an older digest than their tag names",
		Description: `Reads the targets file the library chart renders, resolves each floating tag once,
compares with what each workload runs (spec image and ready pods' imageID) and re-images
by digest with one patch per workload, then waits for the rollouts. Exit 1 on any read
error, stuck rollout, skip streak or lockout. The tick's budget is --deadline (the global
--timeout does not apply: it would undercut the rollout wait). Re-arm a locked-out workload with:
  kubectl -n NAMESPACE annotate deployment/NAME ` + reconcile.AttemptsAnnotation + `-`,
		Flags: append(resolverFlags(),
			&cli.StringFlag{Name: "targets", Usage: "targets `FILE` (the chart's ConfigMap key targets.yaml)"},
			&cli.StringFlag{Name: "kubeconfig", EnvVars: []string{"KUBECONFIG"}, Usage: "kubeconfig `FILE` (default: the in-cluster config)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "decide and print, change nothing"},
			&cli.DurationFlag{Name: "rollout-timeout", Value: 10 * time.Minute, Usage: "wait this long for each re-imaged workload (they roll out in parallel)"},
			&cli.DurationFlag{Name: "deadline", Value: 20 * time.Minute, Usage: "deadline for the whole tick; must exceed --rollout-timeout"},
			&cli.DurationFlag{Name: "request-timeout", Value: 30 * time.Second, Usage: "deadline for each API request"},
			&cli.IntFlag{Name: "max-skips", Value: 4, Usage: "fail once a workload was not settled on more than this many ticks in a row"},
			&cli.IntFlag{Name: "max-attempts", Value: 3, Usage: "lock a workload out after this many re-images without a completed rollout"},
			&cli.DurationFlag{Name: "jitter", Usage: "wait a fixed per-edge delay in [0, `WINDOW`) before the first request, so a fleet's ticks spread out"},
			&cli.StringFlag{Name: "jitter-key", Usage: "derive the --jitter delay from `KEY` (default: the ServiceAccount's namespace/UID from its token)"},
			outputFlag(),
		),
		Action: runReconcile,
	}
}

type reconcileOutput struct {
	*reconcile.Result
	Requests resolver.Stats `json:"requests"`
}

func runReconcile(c *cli.Context) error {
	if _, err := format(c); err != nil {
		return err
	}
	if c.String("targets") == "" {
		return usage("reconcile: --targets FILE is required (the chart mounts its ConfigMap at /etc/chartpin/targets.yaml)")
	}
	rollout, deadline, jitter := c.Duration("rollout-timeout"), c.Duration("deadline"), c.Duration("jitter")
	if err := reconcile.CheckBudget(deadline, rollout, jitter); err != nil {
		return err
	}
	var delay time.Duration
	if jitter > 0 {
		key := c.String("jitter-key")
		if key == "" {
			var err error
			if key, err = reconcile.ServiceAccountKey(serviceAccountToken); err != nil {
				return usage("--jitter: %w", err)
			}
		}
		delay = reconcile.SpreadDelay(key, jitter)
	}
	f, err := reconcile.ReadTargets(c.String("targets"))
	if err != nil {
		return err
	}
	cfg, err := kubeConfig(c.String("kubeconfig"))
	if err != nil {
		return err
	}
	cfg.Timeout = c.Duration("request-timeout")
	cfg.UserAgent = "chartpin/" + version + " reconcile"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return usage("kubernetes client: %w", err)
	}
	pull := reconcile.NewPullSecrets()
	res, err := newResolver(c, pull)
	if err != nil {
		return err
	}
	o := reconcile.DefaultOptions()
	o.PullSecrets, o.Spread, o.Logger, o.DryRun = pull, delay, logger(c), c.Bool("dry-run")
	o.RolloutTimeout, o.RequestTimeout = rollout, c.Duration("request-timeout")
	o.MaxSkips, o.MaxAttempts = c.Int("max-skips"), c.Int("max-attempts")
	o.Instance, o.Signatures = os.Getenv("HOSTNAME"), res.Signatures()
	r, err := reconcile.New(client, res, o)
	if err != nil {
		return err
	}
	// The tick's own budget: the global --timeout (5m) would undercut the rollout wait.
	ctx, cancel := context.WithTimeout(c.Context, deadline)
	defer cancel()
	result, tickErr := r.Tick(ctx, f)
	if tickErr == nil {
		tickErr = res.Finish()
	}
	if result == nil {
		return tickErr
	}
	if err := show(c, reconcileView(result, len(f.Targets), res.Stats(), c.Bool("dry-run"), tickErr)); err != nil {
		return err
	}
	return tickErr
}

// reconcileView is one tick's result: for a terminal one structured line
// per decision and a summary, for Markdown a table.
func reconcileView(result *reconcile.Result, targets int, st resolver.Stats, dry bool, tickErr error) view {
	return view{value: reconcileOutput{Result: result, Requests: st}, dryRun: dry,
		text: func(w io.Writer) error {
			log := slog.New(slog.NewTextHandler(w, nil))
			for _, d := range result.Decisions {
				log.Info("decision", "target", d.Target, "workload", d.Workload, "container", d.Container,
					"running", d.Running, "latest", d.Latest, "action", string(d.Action), "image", d.Image, "reason", d.Reason, "dryRun", d.DryRun)
			}
			log.Info("tick", "targets", targets, "patched", len(result.Patched), "rolledOut", len(result.RolledOut),
				"registryHEAD", st.HEAD, "registryGET", st.GET, "ok", tickErr == nil)
			return nil
		},
		markdown: func(w io.Writer) error {
			head := "### reconcile tick"
			if dry {
				head += " (dry run: nothing changed)"
			}
			fmt.Fprintf(w, "%s\n\n", head)
			rows := make([][]string, len(result.Decisions))
			for i, d := range result.Decisions {
				rows[i] = []string{ghactions.Text(d.Target), ghactions.Code(d.Workload), ghactions.Code(d.Container),
					ghactions.Text(string(d.Action)), ghactions.Code(strings.Join(d.Running, ", ")), ghactions.Code(d.Latest), ghactions.Text(d.Reason)}
			}
			if err := mdTable(w, []string{"TARGET", "WORKLOAD", "CONTAINER", "ACTION", "RUNNING", "LATEST", "REASON"}, rows); err != nil {
				return err
			}
			outcome := "ok"
			if tickErr != nil {
				outcome = "failed"
			}
			_, err := fmt.Fprintf(w, "\n%d targets, %d patched, %d rolled out; registry requests: HEAD %d, GET %d; %s\n",
				targets, len(result.Patched), len(result.RolledOut), st.HEAD, st.GET, outcome)
			return err
		},
	}
}

// serviceAccountToken is where Kubernetes mounts the pod's token.
const serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// kubeConfig is --kubeconfig (or KUBECONFIG, a path list), else the in-cluster config.
func kubeConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, usage("no in-cluster config: %w; outside a cluster pass --kubeconfig FILE or set KUBECONFIG", err)
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(path)}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, usage("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
