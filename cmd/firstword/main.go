// Command firstword is a latency-first LLM chat gateway. Run
// "firstword help" for its commands, "firstword help CMD" for a command's
// flags, and "firstword --version" for the module version and commit it
// was built from.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/firstword/firstword/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
