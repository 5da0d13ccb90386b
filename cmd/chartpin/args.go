package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst rewrites a command line so that flags work wherever they stand,
// as in Helm, kubectl and crane. urfave/cli stops reading flags at the first
// positional argument and knows global flags only before the command name,
// so global flags move before the command name, command flags before the
// positional arguments, and the positional arguments follow a "--".
// Everything after a "--" on the original line stays positional. A flag
// neither the command nor the app defines stays with the command, which
// names it in its usage error.
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 2 || slices.Contains(args, "--generate-bash-completion") {
		return args
	}
	globals := valueFlags(app.Flags)
	var global []string
	i := 1
	for ; i < len(args) && isFlag(args[i]); i++ {
		n := consumes(globals, args, i)
		global = append(global, args[i:i+1+n]...)
		i += n
	}
	if i >= len(args) || args[i] == "--" {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args // urfave/cli reports the unknown command
	}
	name := args[i]
	local := valueFlags(cmd.Flags)
	var flags, positional []string
	for i++; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case !isFlag(a):
			positional = append(positional, a)
		default:
			key := flagKey(a)
			_, isLocal := local[key]
			_, isGlobal := globals[key]
			if isGlobal && !isLocal {
				n := consumes(globals, args, i)
				global = append(global, args[i:i+1+n]...)
				i += n
				continue
			}
			n := consumes(local, args, i)
			flags = append(flags, args[i:i+1+n]...)
			i += n
		}
	}
	out := append([]string{args[0]}, global...)
	out = append(out, name)
	out = append(out, flags...)
	if len(positional) > 0 {
		out = append(append(out, "--"), positional...)
	}
	return out
}

// valueFlags maps every name and alias of flags to whether it takes a value.
func valueFlags(flags []cli.Flag) map[string]bool {
	m := map[string]bool{"help": false, "h": false}
	for _, f := range flags {
		takes := false
		if v, ok := f.(cli.DocGenerationFlag); ok {
			takes = v.TakesValue()
		}
		for _, n := range f.Names() {
			m[n] = takes
		}
	}
	return m
}

// isFlag reports whether a looks like a flag ("-" alone is an argument).
func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

// flagKey is a flag's name without dashes or an "=value".
func flagKey(a string) string {
	k := strings.TrimLeft(a, "-")
	k, _, _ = strings.Cut(k, "=")
	return k
}

// consumes is how many of the arguments after args[i] belong to the flag
// args[i]: one for a flag that takes a value given as a separate argument.
func consumes(known map[string]bool, args []string, i int) int {
	if strings.Contains(args[i], "=") || !known[flagKey(args[i])] || i+1 >= len(args) {
		return 0
	}
	return 1
}
