// Package cli is firstword's command line: each command parses its
// flags, loads the config and calls what does the work (internal/gateway
// for serve and levers, the store for keys, internal/bench), then prints.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Main runs the command in args and returns the process exit code: 0, 1
// when the command failed, 2 for a usage error (the usage then goes to
// stderr). "firstword help CMD" and "firstword CMD --help" print CMD's
// usage on stdout and exit 0.
func Main(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &Env{Getenv: getenv, Stdin: stdin, Stdout: stdout, Stderr: stderr}
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
			fmt.Fprintf(stderr, "firstword help: unknown command %q\n\n", args[1])
			topUsage(stderr)
			return 2
		}
		return run(ctx, env, c, []string{"--help"})
	case "-version", "--version":
		args = []string{"version"}
	}
	c, rest := findCommand(args)
	if c == nil {
		fmt.Fprintf(stderr, "firstword: unknown command %q\n\n", args[0])
		topUsage(stderr)
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
	fmt.Fprintf(env.Stderr, "firstword %s: %v\n\n", ue.fs.Name(), ue.err)
	uc.printUsage(env.Stderr, ue.fs)
	return 2
}

// Env is the process environment a command runs in.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// exitError is a failure with its own exit code, such as 130 for a run
// stopped by Ctrl-C.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
