package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// example is one command line a command's --help shows, under what it does.
type example struct{ what, line string }

// examples are every command's --help examples, in one place so that all
// commands show them the same way (TestEveryCommandHasExamples parses each).
var examples = map[string][]example{
	"resolve": {
		{"Resolve two tags to their index digests", "chartpin resolve docker.io/library/nginx:1.27 ghcr.io/stefanprodan/podinfo:6.7.0"},
		{"Record a lock file and fail unless both platforms are covered", "chartpin resolve quay.io/jetstack/cert-manager-controller:v1.16.2 --platforms linux/amd64,linux/arm64 --write-digests digests.yaml"},
	},
	"pin": {
		{"Show what pinning a chart would change, writing nothing", "chartpin pin charts/app --dry-run"},
		{"Pin the charts chartpin.yaml lists, as a minor release", "chartpin pin --config chartpin.yaml --bump minor"},
	},
	"bump": {
		{"Bump the chart's version (and a lockstep appVersion) by a patch", "chartpin bump charts/app"},
		{"Preview a minor bump that leaves appVersion alone", "chartpin bump charts/app minor --app-version-policy keep --dry-run"},
	},
	"drift": {
		{"Check every pin chartpin.yaml lists against its registry", "chartpin drift"},
		{"Check one chart and list the tags a drifted pin's new digest carries", "chartpin drift charts/app --show-tags -o markdown"},
	},
	"guard": {
		{"In a pull request: refuse chart changes without a version bump", "chartpin guard --base origin/main charts/app"},
		{"Also refuse a version already in the published index", "chartpin guard --base origin/main --index https://charts.example.com/index.yaml"},
	},
	"release": {
		{"Preview the commit and pull request, without the remote", "chartpin release charts/app --dry-run"},
		{"Pin, push chartpin/pins and open a labelled pull request (GITHUB_TOKEN set)", "chartpin release charts/app --base main --label dependencies"},
	},
	"publish": {
		{"Add a chart to a Helm repository directory", "chartpin publish charts/app --index-dir site --base-url https://charts.example.com"},
		{"Push a chart to an OCI registry", "chartpin publish charts/app --oci oci://ghcr.io/acme/charts"},
	},
	"reconcile": {
		{"Preview one tick from outside the cluster", "chartpin reconcile --targets targets.yaml --kubeconfig ~/.kube/config --dry-run"},
		{"One tick in the cluster, as the chart's CronJob runs it", "chartpin reconcile --targets /etc/chartpin/targets.yaml --jitter 2m"},
	},
	"upgrade": {
		{"Decide without changing anything", "chartpin upgrade --release web --namespace prod --repo https://charts.example.com --chart app --dry-run"},
		{"Upgrade to the newest version published at least a day ago", "chartpin upgrade --release web --oci oci://ghcr.io/acme/charts --chart app --min-age 24h"},
	},
	"demo": {
		{"Run the release job against an embedded registry", "chartpin demo"},
		{"Keep the pinned chart to look at", "chartpin demo --dir /tmp/chartpin-demo"},
	},
	"init": {
		{"Print the chartpin.yaml discovery would write for two charts", "chartpin init charts/app charts/worker --dry-run"},
		{"Write it, resolving offline from a lock file", "chartpin init charts/app --digests digests.yaml"},
	},
	"completion": {
		{"Complete chartpin in the running bash", "source <(chartpin completion bash)"},
		{"Install bash completion for every session", "chartpin completion bash > /etc/bash_completion.d/chartpin"},
	},
}

// withExamples gives c a help template that shows its examples between the
// description and the options.
func withExamples(c *cli.Command) {
	if len(examples[c.Name]) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("{{end}}\n\nEXAMPLES:")
	for i, e := range examples[c.Name] {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("\n   # " + e.what + "\n   " + e.line)
	}
	b.WriteString("{{if .VisibleFlagCategories}}")
	c.CustomHelpTemplate = strings.Replace(cli.CommandHelpTemplate, "{{end}}{{if .VisibleFlagCategories}}", b.String(), 1)
}
