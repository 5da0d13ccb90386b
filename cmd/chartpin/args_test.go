package main

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/urfave/cli/v2"
)

// parsed is what one command saw: its arguments, one flag and a global flag.
type parsed struct {
	Args   []string
	Set    bool
	Value  string
	Global []string
}

// parseLine runs chartpin's app on args with every command's action
// replaced by a recorder of flag (and the global --insecure-registry).
func parseLine(t *testing.T, flag string, args ...string) (parsed, error) {
	t.Helper()
	app := newApp()
	var got parsed
	for _, c := range app.Commands {
		c.Action = func(c *cli.Context) error {
			got = parsed{Args: c.Args().Slice(), Set: c.IsSet(flag), Value: fmt.Sprint(c.Value(flag)),
				Global: c.StringSlice("insecure-registry")}
			return nil
		}
	}
	err := app.RunContext(context.Background(), flagsFirst(app, append([]string{"chartpin"}, args...)))
	return got, err
}

// sampleArgs is flag f as a user types it, with a value for flags that take one.
func sampleArgs(f cli.Flag) []string {
	name := "--" + f.Names()[0]
	switch f.(type) {
	case *cli.BoolFlag:
		return []string{name}
	case *cli.DurationFlag:
		return []string{name, "3s"}
	case *cli.IntFlag:
		return []string{name, "3"}
	}
	return []string{name, "v1"}
}

// Every flag of every command parses the same wherever it stands: before
// the positional argument, after it, and with the global flag before or
// after the command name.
func TestFlagsAnywhere(t *testing.T) {
	commands := newApp().Commands
	if len(commands) < 10 {
		t.Fatalf("%d commands", len(commands))
	}
	checked := 0
	for _, cmd := range commands {
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			fl := sampleArgs(f)
			g := []string{"--insecure-registry", "reg.test"}
			lines := map[string][]string{
				"global, command, flag, argument": join(g, []string{cmd.Name}, fl, []string{"ARG"}),
				"command, argument, flag, global": join([]string{cmd.Name, "ARG"}, fl, g),
				"command, global, argument, flag": join([]string{cmd.Name}, g, []string{"ARG"}, fl),
				"command, flag, argument, global": join([]string{cmd.Name}, fl, []string{"ARG"}, g),
			}
			var want *parsed
			for order, line := range lines {
				got, err := parseLine(t, name, line...)
				if err != nil {
					t.Errorf("chartpin %v (%s): %v", line, order, err)
					continue
				}
				if !got.Set || !reflect.DeepEqual(got.Args, []string{"ARG"}) || !reflect.DeepEqual(got.Global, []string{"reg.test"}) {
					t.Errorf("chartpin %v (%s) parsed %+v: want --%s set, arguments [ARG], --insecure-registry reg.test", line, order, got, name)
				}
				if want == nil {
					want = &got
				} else if !reflect.DeepEqual(got, *want) {
					t.Errorf("chartpin %v (%s) parsed %+v, another order %+v", line, order, got, *want)
				}
			}
			checked++
		}
	}
	if checked < 50 {
		t.Errorf("only %d flags checked", checked)
	}
}

// "--" ends flags: what follows is an argument even when it looks like a flag;
// short flags, --flag=value and the global --timeout work after arguments too.
func TestFlagsEndAtDoubleDash(t *testing.T) {
	for _, tc := range []struct {
		line []string
		flag string
		want parsed
	}{
		{[]string{"pin", "--", "--dry-run"}, "dry-run", parsed{Args: []string{"--dry-run"}, Value: "false"}},
		{[]string{"pin", "chart", "--config", "c.yaml", "--", "-x", "y"}, "config", parsed{Args: []string{"chart", "-x", "y"}, Set: true, Value: "c.yaml"}},
		{[]string{"resolve", "nginx:1", "-o", "json"}, "output", parsed{Args: []string{"nginx:1"}, Set: true, Value: "json"}},
		{[]string{"resolve", "nginx:1", "--output=json", "-"}, "output", parsed{Args: []string{"nginx:1", "-"}, Set: true, Value: "json"}},
		{[]string{"bump", "charts/x", "patch", "--dry-run"}, "dry-run", parsed{Args: []string{"charts/x", "patch"}, Set: true, Value: "true"}},
		{[]string{"resolve", "nginx:1", "--timeout", "3s"}, "timeout", parsed{Args: []string{"nginx:1"}, Set: true, Value: "3s"}},
	} {
		got, err := parseLine(t, tc.flag, tc.line...)
		got.Global = nil
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("chartpin %v: parsed %+v (%v), want %+v", tc.line, got, err, tc.want)
		}
	}
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
