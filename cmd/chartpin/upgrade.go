package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/ghactions"
	"github.com/chartpin/chartpin/upgrade"
)

func upgradeCommand() *cli.Command {
	// Flags that are options fields bind straight into o.
	var o upgrade.Options
	return &cli.Command{
		Name:  "upgrade",
		Usage: "one auto-upgrade tick: move an installed release to the newest stable chart version that is not deprecated",
		Description: "Rolls a wedged (pending-*) release back to its last deployed revision first, skips a\n" +
			"release being uninstalled, and upgrades with reset-then-reuse-values, atomically.\n" +
			"Deprecated versions (chartpin publish --deprecate) are never taken, and a release running one\n" +
			"moves to the newest non-deprecated version, even a lower one (a recall). --min-age skips\n" +
			"versions published too recently (index created, or the OCI manifest's creation annotation).\n" +
			"Kubernetes access: in-cluster config by default, or --kubeconfig / KUBECONFIG.\n" +
			"Repository credentials: DOCKER_CONFIG's config.json (the chart mounts registryAuth.secret there)\n" +
			"or CHARTPIN_REGISTRY_AUTH, per host: basic auth to an https index host only, registry auth for OCI.\n" +
			"The command deadline (global --timeout) is extended when it would undercut the upgrade.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "release", Destination: &o.Release, Usage: "installed release `NAME`"},
			&cli.StringFlag{Name: "namespace", Usage: "release `NAMESPACE` (default: the kubeconfig's, or the pod's in-cluster)"},
			&cli.StringFlag{Name: "repo", Destination: &o.RepoURL, Usage: "chart repository `URL` holding index.yaml"},
			&cli.StringFlag{Name: "oci", Destination: &o.OCI, Usage: "OCI chart location `oci://HOST/PATH` (the chart is HOST/PATH/CHART)"},
			&cli.StringFlag{Name: "chart", Destination: &o.Chart, Usage: "chart `NAME` in the repository"},
			&cli.DurationFlag{Name: "timeout", Destination: &o.Timeout, Value: upgrade.DefaultTimeout, Usage: "Helm's wait for the rollback and the upgrade (as helm upgrade --timeout)"},
			&cli.DurationFlag{Name: "request-timeout", Destination: &o.RequestTimeout, Value: upgrade.DefaultRequestTimeout, Usage: "bound on each repository and Kubernetes API request"},
			&cli.BoolFlag{Name: "allow-prerelease", Destination: &o.AllowPrerelease, Usage: "consider prerelease versions (1.2.0-rc.1)"},
			&cli.DurationFlag{Name: "min-age", Destination: &o.MinAge, Usage: "take only versions published at least `DURATION` ago (a soak, e.g. 24h); a younger one is reported, not an error"},
			&cli.BoolFlag{Name: "dry-run", Destination: &o.DryRun, Usage: "decide and render, change nothing"},
			&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig `FILE` (default: in-cluster config, or KUBECONFIG)"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error { return runUpgrade(c, o) },
	}
}

func runUpgrade(c *cli.Context, opts upgrade.Options) error {
	if c.NArg() > 0 {
		return usage("upgrade takes no arguments, got %q", c.Args().Slice())
	}
	if _, err := format(c); err != nil {
		return err
	}
	log := logger(c)
	kc, err := keychain()
	if err != nil {
		return err
	}
	opts.PlainHTTP, opts.Keychain, opts.Logger = insecureOCI(c, opts.OCI), kc, log

	if err := opts.Validate(); err != nil {
		return err
	}

	cfg, ns, err := upgrade.NewConfiguration(upgrade.ClusterOptions{
		Namespace:      c.String("namespace"),
		Kubeconfig:     c.String("kubeconfig"),
		StorageDriver:  os.Getenv("HELM_DRIVER"),
		RequestTimeout: opts.RequestTimeout,
		Logger:         log,
	})
	if err != nil {
		return fmt.Errorf("upgrade: %w; check --kubeconfig, KUBECONFIG or the pod's service account", err)
	}
	opts.Namespace = ns

	// The global --timeout bounds the command; it must never cut the Helm
	// wait short (a hung tick must end, a slow one must finish), so it grows to what the upgrade may need.
	deadline, extended := upgrade.CommandDeadline(globalTimeout(c), opts)
	if extended {
		fmt.Fprintf(c.App.ErrWriter, "chartpin upgrade: extending the command deadline from %s (global --timeout) to %s: 3 × --timeout %s (rollback, upgrade, atomic rollback) plus repository requests\n",
			globalTimeout(c), deadline, opts.Timeout)
	}
	ctx, cancel := context.WithTimeout(c.Context, deadline)
	defer cancel()

	res, err := upgrade.Run(ctx, cfg, opts)
	if perr := show(c, upgradeView(res, opts.DryRun)); perr != nil && err == nil {
		err = perr
	}
	return err
}

// globalTimeout is the app-level --timeout: this command's own --timeout
// shadows it in c.
func globalTimeout(c *cli.Context) time.Duration {
	for _, parent := range c.Lineage()[1:] {
		if d := parent.Duration("timeout"); d > 0 {
			return d
		}
	}
	return 0
}

func upgradeView(res upgrade.Result, dry bool) view {
	return view{value: res, dryRun: dry,
		text:     func(w io.Writer) error { return writeUpgradeText(w, res) },
		markdown: func(w io.Writer) error { return writeUpgradeMarkdown(w, res, dry) },
	}
}

// writeUpgradeMarkdown is the tick as a table, with the recovery and the
// shadowed pins above it and the reason below.
func writeUpgradeMarkdown(w io.Writer, res upgrade.Result, dry bool) error {
	head := "### upgrade " + ghactions.Code(res.Release) + " in " + ghactions.Code(res.Namespace)
	if dry {
		head += " (dry run: nothing changed)"
	}
	fmt.Fprintf(w, "%s\n\n", head)
	if res.Recovered != "" {
		fmt.Fprintf(w, "Recovered first: %s\n\n", ghactions.Text(res.Recovered))
	}
	if res.Decision == "" {
		return nil // the error says why the tick stopped after the recovery
	}
	if len(res.Shadowed) > 0 {
		fmt.Fprintf(w, "> **Warning:** user-supplied values override the chart's pins at %s; upgrades re-apply them, so these pins never move.\n\n",
			ghactions.Code(strings.Join(res.Shadowed, ", ")))
	}
	latest := res.Latest
	if latest == "" {
		latest = "not fetched"
	}
	if err := mdTable(w, []string{"CURRENT", "LATEST", "TARGET", "DECISION", "REVISION"}, [][]string{{
		ghactions.Code(res.Current), ghactions.Code(latest), ghactions.Code(res.Target), ghactions.Text(res.Decision), fmt.Sprint(res.Revision),
	}}); err != nil {
		return err
	}
	if res.Reason != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", ghactions.Text(res.Reason))
		return err
	}
	return nil
}

func writeUpgradeText(w io.Writer, res upgrade.Result) error {
	if res.Recovered != "" {
		if _, err := fmt.Fprintf(w, "release %s (namespace %s): %s\n", res.Release, res.Namespace, res.Recovered); err != nil {
			return err
		}
	}
	if res.Decision == "" {
		return nil // the error says why the tick stopped after the recovery
	}
	if len(res.Shadowed) > 0 {
		if _, err := fmt.Fprintf(w, "release %s (namespace %s): warning: user-supplied values override the chart's pins at %s; upgrades re-apply them, so these pins never move\n",
			res.Release, res.Namespace, strings.Join(res.Shadowed, ", ")); err != nil {
			return err
		}
	}
	latest := res.Latest
	if latest == "" {
		latest = "not fetched"
	}
	if res.Target != "" && res.Target != res.Latest {
		latest += ", target " + res.Target
	}
	reason := ""
	if res.Reason != "" {
		reason = ": " + res.Reason
	}
	_, err := fmt.Fprintf(w, "release %s (namespace %s): current %s, latest %s: %s (revision %d)%s\n",
		res.Release, res.Namespace, res.Current, latest, res.Decision, res.Revision, reason)
	return err
}

// insecureOCI reports whether the --oci host was named by --insecure-registry.
func insecureOCI(c *cli.Context, oci string) bool {
	if oci == "" {
		return false
	}
	host, _, _ := strings.Cut(strings.TrimPrefix(oci, "oci://"), "/")
	for _, h := range c.StringSlice("insecure-registry") {
		if h == host {
			return true
		}
	}
	return false
}
