package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// command is one subcommand of rlock.
type command struct {
	name    string
	summary string
	usage   string // the synopsis, then a blank line and details
	run     func(args []string) error
	flags   func() *flag.FlagSet // the subcommand's flags, for its help
}

// commands lists the subcommands in the order help shows them. It is
// filled by init, since the help command refers to it.
var commands []*command

func init() {
	commands = []*command{
		{name: "run", summary: "hold a lock while a command runs", usage: runUsage, run: runMain, flags: func() *flag.FlagSet { return newRunFlags(new(runOptions)) }},
		{name: "inspect", summary: "show who holds a lock, its TTL and waiters", usage: inspectUsage, run: inspectMain, flags: func() *flag.FlagSet { return newInspectFlags(new(inspectOptions)) }},
		{name: "demo", summary: "watch workers contend for a lock on an embedded Redis", usage: demoUsage, run: demoMain, flags: func() *flag.FlagSet { return newDemoFlags(new(demoOptions)) }},
		{name: "completion", summary: "print a bash or zsh completion script", usage: completionUsage, run: completionMain},
		{name: "help", summary: "show help for rlock or one command", usage: "rlock help [COMMAND]", run: helpMain},
		{name: "version", summary: "print the versions of rlock, its library, rueidis and Go", usage: versionUsage, run: versionMain},
	}
}

func main() {
	os.Exit(rlockMain(os.Args[1:]))
}

// rlockMain dispatches to a subcommand and returns the exit status.
func rlockMain(args []string) int {
	if len(args) == 0 {
		printUsage(os.Stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(os.Stderr, "rlock: unknown command %q\n\n", args[0])
		printUsage(os.Stderr)
		return exitUsage
	}
	err := cmd.run(args[1:])
	if err == nil {
		return exitOK
	}
	code := codeOf(err, exitConflict)
	w := errOut
	if code == exitUsage {
		w = os.Stderr // even with --quiet
	}
	report(w, err, exitConflict)
	var ee *exitErr
	if errors.As(err, &ee) && ee.synopsis {
		syn, _, _ := strings.Cut(cmd.usage, "\n\n")
		fmt.Fprintf(os.Stderr, "usage: %s\nRun \"rlock help %s\" for details.\n", syn, cmd.name)
	}
	return code
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// printUsage prints rlock's synopsis and its commands.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `rlock: distributed reentrant locks on Redis, compatible with Redisson's RLock

Usage:
  rlock COMMAND [FLAGS] [ARGS]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "rlock help COMMAND" for a command's flags and exit codes.
`)
}

// printCommandUsage prints one command's synopsis, details and flags.
func printCommandUsage(w io.Writer, c *command) {
	fmt.Fprintln(w, "Usage:")
	syn, details, _ := strings.Cut(c.usage, "\n\n")
	fmt.Fprintln(w, "  "+syn)
	if c.flags != nil {
		fmt.Fprintln(w, "\nFlags:")
		fs := c.flags()
		var b bytes.Buffer
		printFlags(&b, fs)
		fmt.Fprint(w, b.String())
	}
	if details != "" {
		fmt.Fprintln(w)
		fmt.Fprint(w, details)
		if !strings.HasSuffix(details, "\n") {
			fmt.Fprintln(w)
		}
	}
}

func helpMain(args []string) error {
	switch len(args) {
	case 0:
		printUsage(os.Stdout)
		return nil
	case 1:
		c := lookup(args[0])
		if c == nil {
			return usagef("help: unknown command %q", args[0])
		}
		printCommandUsage(os.Stdout, c)
		return nil
	}
	return usagef("help takes at most one command")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting or
// printing: parse turns them into usage errors.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("rlock "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs; a bad flag or value is a usage error (64),
// -h/--help prints the command's help and exits 0.
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		name := strings.TrimPrefix(fs.Name(), "rlock ")
		printCommandUsage(os.Stdout, lookup(name))
		return exitWith(exitOK, nil)
	}
	return usagef("%s", flagError(err))
}

// parseInterspersed parses flags that may come after positional
// arguments too ("rlock inspect NAME --json"), and returns the positional
// ones. "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag.Parse stops at the first positional argument, or after
		// "--": then everything left is positional.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// errOut receives rlock's own messages: stderr, or nothing with run's
// --quiet. Usage errors always go to stderr.
var errOut io.Writer = os.Stderr

// dialTimeout bounds connecting to Redis, so that an unreachable address
// fails in seconds (exit 69) instead of hanging.
const dialTimeout = 3 * time.Second

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
