package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

const completionUsage = `rlock completion bash|zsh

Prints a shell completion script for rlock's commands, their flags and
the values some flags take (--wait forever, --trace stdout); after run's
"--" it completes the command and then file names.

  bash:  source <(rlock completion bash)
         or: rlock completion bash > /etc/bash_completion.d/rlock
  zsh:   source <(rlock completion zsh)
         or: rlock completion zsh > "${fpath[1]}/_rlock"`

func completionMain(args []string) error {
	if len(args) != 1 {
		return usagef("completion: give the shell: bash or zsh")
	}
	switch args[0] {
	case "bash":
		return writeBash(os.Stdout)
	case "zsh":
		return writeZsh(os.Stdout)
	case "-h", "-help", "--help":
		printCommandUsage(os.Stdout, lookup("completion"))
		return nil
	}
	return usagef("completion: unknown shell %q: want bash or zsh", args[0])
}

// compFlag is one flag as the completion scripts see it.
type compFlag struct {
	name   string
	usage  string
	isBool bool
	values []string // suggested values; none: free text
}

// fileFlags take a file name.
var fileFlags = []string{"redisson-config", "tls-ca", "tls-cert", "tls-key"}

// flagValues are the values suggested for some flags.
var flagValues = map[string][]string{
	"trace": {traceStdout},
	"wait":  {waitForever, "5", "30s", "10m"},
}

// compFlags lists c's flags, sorted by name.
func compFlags(c *command) []compFlag {
	if c.flags == nil {
		return nil
	}
	var out []compFlag
	c.flags().VisitAll(func(f *flag.Flag) {
		bf, ok := f.Value.(interface{ IsBoolFlag() bool })
		_, usage := flag.UnquoteUsage(f)
		out = append(out, compFlag{name: f.Name, usage: usage, isBool: ok && bf.IsBoolFlag(), values: flagValues[f.Name]})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// commandNames returns the subcommands' names.
func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}

// argWords are the words completed for a command's arguments (not its
// flags).
func argWords(c *command) string {
	switch c.name {
	case "help":
		return strings.Join(commandNames(), " ")
	case "completion":
		return "bash zsh"
	}
	return ""
}

func writeBash(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# bash completion for rlock: source <(rlock completion bash)
_rlock() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[1]} i flags="" valued="" words=""
    if (( COMP_CWORD == 1 )); then
        COMPREPLY=($(compgen -W "` + strings.Join(commandNames(), " ") + `" -- "$cur"))
        return
    fi
    if [[ $cmd == run ]]; then
        # After "--": the command, then its arguments (file names).
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                if (( i == COMP_CWORD - 1 )); then
                    COMPREPLY=($(compgen -c -- "$cur" | sort -u))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return
            fi
        done
    fi
    case $cmd in
`)
	for _, c := range commands {
		var flags, valued []string
		for _, f := range compFlags(c) {
			flags = append(flags, spelled(f.name))
			if !f.isBool {
				valued = append(valued, "--"+f.name, "-"+f.name)
			}
		}
		if c.name == "run" {
			flags = append(flags, "--")
		}
		fmt.Fprintf(&b, "    %s) flags=%q valued=%q words=%q ;;\n", c.name, strings.Join(flags, " "), " "+strings.Join(valued, " ")+" ", argWords(c))
	}
	b.WriteString(`    esac
    case $prev in
`)
	names := make([]string, 0, len(flagValues))
	for n := range flagValues {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "    --%s | -%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", n, n, strings.Join(flagValues[n], " "))
	}
	var files []string
	for _, n := range fileFlags {
		files = append(files, "--"+n, "-"+n)
	}
	fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", strings.Join(files, " | "))
	b.WriteString(`    esac
    if [[ $valued == *" $prev "* ]]; then
        return # a flag's value: free text
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ -n $words ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}
complete -F _rlock rlock
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// zshQuote escapes s for the inside of a zsh _arguments description.
func zshQuote(s string) string {
	s, _, _ = strings.Cut(s, "; ")
	r := strings.NewReplacer("'", "", "[", "(", "]", ")", ":", "", "\\", "", "`", "", "$", "")
	return r.Replace(s)
}

func writeZsh(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`#compdef rlock
# zsh completion for rlock: source <(rlock completion zsh)
_rlock() {
    local -a cmds
    cmds=(
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "        '%s:%s'\n", c.name, zshQuote(c.summary))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'rlock command' cmds
        return
    fi
    local cmd=$words[2]
    if [[ $cmd == run ]]; then
        # After "--": the command and its arguments.
        local i=${words[(i)--]}
        if (( i < CURRENT )); then
            shift $i words
            (( CURRENT -= i ))
            _normal
            return
        fi
    fi
    case $cmd in
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "    %s)\n        _arguments -S \\\n", c.name)
		for _, f := range compFlags(c) {
			desc := zshQuote(f.usage)
			sp := spelled(f.name)
			switch {
			case f.isBool:
				fmt.Fprintf(&b, "            '%s[%s]' \\\n", sp, desc)
			case len(f.values) > 0:
				fmt.Fprintf(&b, "            '%s=[%s]:%s:(%s)' \\\n", sp, desc, f.name, strings.Join(f.values, " "))
			case slices.Contains(fileFlags, f.name):
				fmt.Fprintf(&b, "            '%s=[%s]:%s:_files' \\\n", sp, desc, f.name)
			default:
				fmt.Fprintf(&b, "            '%s=[%s]:%s: ' \\\n", sp, desc, f.name)
			}
		}
		if ws := argWords(c); ws != "" {
			fmt.Fprintf(&b, "            '1:argument:(%s)'\n", ws)
		} else {
			b.WriteString("            '*: :_default'\n")
		}
		b.WriteString("        ;;\n")
	}
	b.WriteString(`    esac
}
if [[ $funcstack[1] == _rlock ]]; then
    _rlock "$@"
else
    compdef _rlock rlock
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}
