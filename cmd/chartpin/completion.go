package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:        "completion",
		Usage:       "print a shell completion script (bash or zsh)",
		ArgsUsage:   "bash|zsh",
		Description: "Load it with: source <(chartpin completion bash)",
		Action: func(c *cli.Context) error {
			shell := c.Args().First()
			script, ok := completionScripts[shell]
			if !ok {
				return usage("completion: unknown shell %q; want bash or zsh", shell)
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}

// completionScripts ask the binary itself for candidates through urfave/cli's
// --generate-bash-completion flag.
var completionScripts = map[string]string{
	"bash": `_chartpin_complete() {
  local cur opts
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o default -F _chartpin_complete chartpin
`,
	"zsh": `#compdef chartpin
_chartpin() {
  local -a opts
  opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  _describe 'values' opts
}
compdef _chartpin chartpin
`,
}
