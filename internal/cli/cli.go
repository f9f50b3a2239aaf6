// Package cli is firstword's command line: each command parses its
// flags, loads the config and calls what does the work (internal/gateway
// for serve and levers, the store for keys, internal/bench), then prints.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/firstword/firstword/internal/typo"
)

// Main runs the command in args and returns the process exit code: 0, 1
// when the command failed, 2 for a usage error (the usage then goes to
// stderr). "firstword help CMD" and "firstword CMD --help" print CMD's
// usage on stdout and exit 0.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &Env{Getenv: getenv, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if f, ok := stdin.(*os.File); ok {
		env.Interactive = term.IsTerminal(int(f.Fd()))
	}
	if len(args) == 0 {
		topUsage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 || args[0] != "help" || args[1] == "help" {
			topUsage(stdout)
			return 0
		}
		// "help CMD" is "CMD --help": every command parses its flags
		// before it does anything.
		c, _ := findCommand(args[1:])
		if c == nil {
			unknownCommand(stderr, "firstword help", args[1])
			return 2
		}
		return run(ctx, env, c, []string{"--help"})
	case "-version", "--version":
		args = []string{"version"}
	}
	c, rest := findCommand(args)
	if c == nil {
		unknownCommand(stderr, "firstword", args[0])
		return 2
	}
	return run(ctx, env, c, rest)
}

// run runs c and turns its error into an exit code.
func run(ctx context.Context, env *Env, c *command, args []string) int {
	err := c.run(ctx, env, args)
	if err == nil {
		return 0
	}
	var xe *exitError
	if errors.As(err, &xe) {
		fmt.Fprintf(env.Stderr, "firstword %s: %v\n", c.name, xe.err)
		return xe.code
	}
	var ue *usageError
	if !errors.As(err, &ue) {
		fmt.Fprintf(env.Stderr, "firstword %s: %v\n", c.name, err)
		return 1
	}
	// The FlagSet names the command that failed: keys reports its
	// actions' errors as theirs.
	uc, _ := findCommand(strings.Fields(ue.fs.Name()))
	if uc == nil {
		uc = c
	}
	if ue.err == nil {
		uc.printUsage(env.Stdout, ue.fs)
		return 0
	}
	known := ue.fs
	if uc.flags != nil {
		known = uc.flags()
	}
	fmt.Fprintf(env.Stderr, "firstword %s: %v\n\n", ue.fs.Name(), explainFlagError(ue.err, known))
	uc.printShortUsage(env.Stderr, ue.fs)
	return 2
}

// unknownCommand says that name is no command, with the nearest one if
// it looks like a typo of it, or the list of commands.
func unknownCommand(w io.Writer, prefix, name string) {
	names := []string{"help"}
	for _, c := range commands() {
		if !strings.Contains(c.name, " ") && (!c.hidden || c.name == "keys") {
			names = append(names, c.name)
		}
	}
	if s := typo.Nearest(name, names); s != "" {
		fmt.Fprintf(w, "%s: unknown command %q; did you mean %q?\n", prefix, name, s)
	} else {
		fmt.Fprintf(w, "%s: unknown command %q; the commands are %s\n", prefix, name, strings.Join(names, ", "))
	}
	fmt.Fprintln(w, `Run "firstword help" for what each does.`)
}

// unknownAction is the usage error for an action that is none of
// actions, with the nearest one if it looks like a typo of it.
func unknownAction(fs *flag.FlagSet, action string, actions ...string) error {
	if s := typo.Nearest(action, actions); s != "" {
		return usagef(fs, "unknown action %q; did you mean %q?", action, s)
	}
	return usagef(fs, "unknown action %q: want %s or %s", action, strings.Join(actions[:len(actions)-1], ", "), actions[len(actions)-1])
}

// explainFlagError words the flag package's "flag provided but not
// defined: -adr" as an unknown flag with the nearest defined one.
func explainFlagError(err error, fs *flag.FlagSet) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return err
	}
	name = strings.TrimLeft(name, "-")
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	if s := typo.Nearest(name, flags); s != "" {
		return fmt.Errorf("unknown flag --%s; did you mean --%s?", name, s)
	}
	return fmt.Errorf("unknown flag --%s", name)
}

// Env is the process environment a command runs in.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Interactive: stdin is a terminal, so a command may ask.
	Interactive bool
}

// exitError is a failure with its own exit code, such as 130 for a run
// stopped by Ctrl-C.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
