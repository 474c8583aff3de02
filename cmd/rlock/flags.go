package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// flagAliases are flock(1)'s short options that mean what one of run's
// long options means: help shows them on the long option's line.
var flagAliases = map[string][]string{
	"shared":             {"s"},
	"exclusive":          {"x", "e"},
	"conflict-exit-code": {"E"},
}

// isAlias reports a short option that help shows with its long option.
func isAlias(name string) bool {
	for _, shorts := range flagAliases {
		for _, s := range shorts {
			if s == name {
				return true
			}
		}
	}
	return false
}

// spelled is a flag's name as the docs write it: -n, --name.
func spelled(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// printFlags prints fs's flags as the docs spell them: "--addr host:port"
// for a long option, "-s, --shared" for one that a flock short option
// means too, "-n" for flock's own.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if isAlias(f.Name) {
			return
		}
		var names []string
		for _, s := range flagAliases[f.Name] {
			names = append(names, spelled(s))
		}
		names = append(names, spelled(f.Name))
		arg, usage := flag.UnquoteUsage(f)
		line := "  " + strings.Join(names, ", ")
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		switch f.DefValue {
		case "", "0", "0s", "false":
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// flagName matches a flag as package flag names it in its errors.
var flagName = regexp.MustCompile(`(flag(?: provided but not defined:| needs an argument:)?) -([a-zA-Z][a-zA-Z0-9-]*)`)

// flagError rewrites package flag's error text with the flags spelled as
// the docs spell them: "--lease", not "-lease".
func flagError(err error) string {
	return flagName.ReplaceAllStringFunc(err.Error(), func(m string) string {
		sub := flagName.FindStringSubmatch(m)
		return sub[1] + " " + spelled(sub[2])
	})
}

// durationValue is a duration flag whose parse error says what is wanted
// (package flag's own says only "parse error").
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want a duration such as 30s, 2m or 1h30m, of at most 2562047h")
	}
	*v.d = d
	return nil
}

// durationVar defines a duration flag with durationValue's errors.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}
