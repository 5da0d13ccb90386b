package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every command's --help shows at least one example, and every example is
// a command line chartpin parses: the command exists and knows each flag.
func TestEveryCommandHasExamples(t *testing.T) {
	for _, cmd := range newApp().Commands {
		out, errOut, code := runCLI(t, cmd.Name, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", cmd.Name, code, errOut)
		}
		_, section, ok := strings.Cut(out, "\nEXAMPLES:\n")
		section, _, _ = strings.Cut(section, "\n\nOPTIONS:")
		var lines []string
		for _, l := range strings.Split(section, "\n") {
			if _, line, found := strings.Cut(l, "chartpin "+cmd.Name); found && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				lines = append(lines, cmd.Name+line)
			}
		}
		if !ok || len(lines) == 0 {
			t.Errorf("%s --help shows no example:\n%s", cmd.Name, out)
			continue
		}
		for _, line := range lines {
			line, _, _ = strings.Cut(line, ")") // source <(chartpin …)
			line, _, _ = strings.Cut(line, ">") // chartpin … > FILE
			got, err := parseLine(t, "help", strings.Fields(line)...)
			if err != nil || got.Value == "" {
				t.Errorf("%s example %q does not parse: %v", cmd.Name, line, err)
			}
		}
	}
}

// drift's help names exactly the statuses its summary line counts
// (UNSIGNED, which only verify: produces, only when seen).
func TestDriftHelpListsEveryStatus(t *testing.T) {
	out, _, _ := runCLI(t, "drift", "--help")
	_, usage, _ := strings.Cut(out, "still resolve to it? ")
	usage, _, _ = strings.Cut(usage, "\n")
	inHelp := strings.Split(usage, " / ")

	chart := driftChart(t, "image:\n  repository: registry.example.com/team/app\n  tag: \"2.1\"\n  digest: \"\"\n")
	stdout, _, _ := runCLI(t, "drift", chart)
	_, summary, found := strings.Cut(stdout, "pin(s): ")
	if !found {
		t.Fatalf("no summary line:\n%s", stdout)
	}
	summary, _, _ = strings.Cut(summary, ";")
	summary, _, _ = strings.Cut(summary, "\n")
	var inOutput []string
	for _, m := range regexp.MustCompile(`\d+ ([^,]+)`).FindAllStringSubmatch(summary, -1) {
		inOutput = append(inOutput, m[1])
	}
	if len(inHelp) < 6 || !slices.Equal(inHelp, append(inOutput, "UNSIGNED")) {
		t.Errorf("help lists %q, the summary counts %q", inHelp, inOutput)
	}
}
