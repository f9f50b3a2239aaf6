package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// A command is one of firstword's commands, or one action of keys. Its
// run function must parse its flags with parseFlags before it does
// anything else: "firstword help CMD" runs it with --help to get its
// FlagSet, and the usage printed is built from that FlagSet, so the help
// lists exactly the flags the command parses.
type command struct {
	name     string                              // "serve", or "keys create" for an action
	synopsis string                              // the usage line after the name (default "[flags]" if it has any)
	summary  string                              // the command's line in the top-level usage
	about    string                              // the help's text between the usage line and the flags
	hidden   bool                                // left out of the top-level usage (an internal helper, or keys, whose actions are listed)
	usage    func(w io.Writer, fs *flag.FlagSet) // prints the help instead of printUsage, when set
	flags    func() *flag.FlagSet                // every flag it takes, for suggestions, when its modes parse apart
	run      func(ctx context.Context, env *Env, args []string) error
}

// commands lists firstword's commands in the order the top-level usage
// shows them.
func commands() []*command {
	return []*command{
		{name: "serve", run: Serve,
			summary: "run the gateway (with no --config: simulated models on 127.0.0.1:8080)",
			about: `Run the gateway until SIGINT or SIGTERM, then shut down gracefully: stop
accepting, let open streams finish for shutdown_timeout, cancel the rest.

With no --config it serves the built-in simulated models (aliases chat,
sim-small, sim-medium, sim-large and sim-reasoner) on 127.0.0.1:8080.
Conversations and API keys are kept in the store the config names; with no
config, or a config without a store section, that is the SQLite file
./firstword.db in the working directory (created if missing). The "listening" log line names the store.
"firstword keys" must use the same store: run it in the same directory, or
pass it the same --config.

With no API key in the store, serve runs in single-user local mode and only on
a loopback address; create a key with "firstword keys create" to require one.`},
		{name: "budget", run: Budget,
			summary: "print where the time goes in a running gateway",
			about: `Print where the time goes in a running gateway, from its last minutes of
traffic: each stage's p50/p95/p99 against its target, the time to first word
and to complete, and the critical path to the first word.

Once API keys exist the gateway needs one: pass --key (or set
FIRSTWORD_API_KEY). A tenant's key shows that tenant's traffic; an admin key
(firstword keys create --admin) shows every tenant's.`},
		// The top-level usage lists keys' actions instead.
		{name: "keys", synopsis: "create|list|revoke|rotate [flags]", hidden: true,
			summary: "manage API keys",
			about: `Manage API keys. Keys are stored hashed; a key is shown once, when created.
With no key in the store, serve runs in single-user local mode on a loopback
address only; once a key exists, every API request needs one (the pages,
/v1/models, /healthz, /readyz and /metrics answer without).

Actions:
  create   create a key and print it, once, on stdout
  list     list the keys (prefixes only, never the keys)
  revoke   revoke a key by its ID or prefix
  rotate   replace a key with a new one of the same tenant, user and name

Run "firstword help keys ACTION" for an action's flags.

With --server URL an action goes through a running gateway's admin API
(/admin/v1/keys) instead of the store, with the admin key read from the
environment variable FIRSTWORD_ADMIN_KEY (--key-env NAME for another); the
admin key is never printed. The gateway that makes a change honours it at
once, the other replicas within auth.cache_ttl.

Keys live in the store the config names: with no --config, the SQLite file
./firstword.db in the working directory, which serve uses too when it runs
there with no config. Each action prints the store it uses on stderr; a running
gateway sees the changes within auth.cache_ttl.`, run: Keys},
		{name: "keys create", run: keysCreate, synopsis: "--tenant ID [flags]",
			summary: "create an API key and print it, once, on stdout",
			about: `Create an API key for a tenant (the tenant is created if new) and print the
key, once, on stdout; everything else goes to stderr, so
KEY=$(firstword keys create --tenant acme) captures just the key.

The key goes into the store the config names: with no --config, the SQLite
file ./firstword.db in the working directory. The store used is printed on
stderr, and if its SQLite file does not exist yet, that a new one is created:
serve must use the same store to see the key.`},
		{name: "keys list", run: keysList,
			summary: "list API keys (prefixes only)",
			about: `List the API keys in the store: ID, prefix, tenant, user, name, whether it is
an admin key, when it was created and revoked. The keys themselves are never
shown. The store used is printed on stderr (with no --config, the SQLite file
./firstword.db in the working directory; it is not created if missing).`},
		{name: "keys revoke", run: keysRevoke, synopsis: "[flags] ID|PREFIX",
			summary: "revoke an API key by its ID or prefix",
			about: `Revoke an API key, named by its ID (key_...) or its prefix, as "firstword
keys list" shows them. A running gateway refuses it within auth.cache_ttl. The
store used is printed on stderr (with no --config, the SQLite file
./firstword.db in the working directory).

Revoking the last active key leaves every API request refused (the gateway
does not go back to local mode once a key has existed): revoke asks first on
a terminal, and needs --yes otherwise.`},
		{name: "tenants", run: Tenants, synopsis: "list|show ID|set-limits [ID]|usage [ID] [flags]",
			summary: "show and set tenants' and keys' limits and budgets; read usage",
			about: `Show and set the rate limits, concurrency caps and budgets of tenants and
keys, and read usage by tenant, key, model and day (docs/security.md).

Actions:
  list                 tenants with a policy or spend this month
  show ID              one tenant: its policy, spend and budget state
  set-limits ID        set a tenant's limits (--set JSON); --key ID for a key
  usage [ID]           usage rows (--key, --model, --from, --to narrow them)

With --server URL, against a running gateway's admin API, with the admin key
in $FIRSTWORD_ADMIN_KEY (--key-env names another variable); the gateways
apply a change within limits.refresh. Without it, directly on the config's
store, which shows only what the store holds (overrides and spend).`},
		{name: "keys rotate", run: keysRotate, synopsis: "[flags] ID",
			summary: "replace an API key with a new one, printed once on stdout",
			about: `Create a new key of the same tenant, user, name and kind as key ID and print
it, once, on stdout; the old key is revoked at once, or when --grace ends, so
that the clients can move to the new key meanwhile. A running gateway refuses
the old key within auth.cache_ttl of its revocation.`},
		{name: "sim", run: Sim,
			summary: "run the simulated provider alone as an upstream in every dialect firstword reads",
			about: `Run the simulated provider alone, as a server at http://ADDR speaking every
upstream dialect firstword reads: OpenAI Chat Completions and Responses
(/v1/chat/completions, /v1/responses), Anthropic Messages (/v1/messages),
Gemini (/v1beta/models/MODEL:streamGenerateContent and :generateContent) and
Ollama (/api/chat), with /v1/models and /sim/stats; to put behind any gateway.
Models small, medium and large with their own time to first token and token
rate, and reasoner, which thinks before it answers; faults on request. See
docs/sim.md.`},
		{name: "bench", run: Bench, usage: benchUsage, flags: benchFlags,
			summary: "measure the gateway against a direct connection to a fake upstream",
			about: `Measure the gateway's overhead: start a fake upstream (firstword
bench-upstream), the gateway (firstword serve) and baselines (firstword
bench-proxy: Go's httputil.ReverseProxy and a TCP relay) as child processes of
this binary, drive each path with the same load, and print a Markdown report
(latency at concurrency 1 and 50, throughput, memory per open stream).

With --target NAME=URL (repeatable), measure any streaming endpoints instead
(OpenAI Chat Completions, Anthropic Messages, OpenAI Responses, firstword's
/v1/chat) side by side, in alternating rounds over a concurrency sweep: time to
first byte, first word and complete, chunk gaps, tokens per second, errors;
with --upstream builtin, whether each cancels the upstream and what it does
when the upstream drops. Writes a table, --json and --html; exits 1 when a
check fails, so it can gate CI. docs/bench.md explains every flag.`},
		{name: "levers", run: Levers,
			summary: "measure the latency levers against the simulated provider",
			about: `Start a gateway on loopback with the built-in simulated provider and measure
what each latency lever does to the time to first word, the total time and the
cost: streaming, shorter answers, a smaller model, a cache hit, a coalesced
duplicate and a cached prompt prefix. Prints a Markdown table.`},
		{name: "version", run: Version,
			summary: "print the version and the commit it was built from",
			about: `Print firstword's module version, the commit it was built from (and whether
the checkout had local changes) and the Go version, from the build info.
"firstword --version" does the same.`},
		{name: "bench-proxy", run: BenchProxy, hidden: true,
			summary: "serve Go's httputil.ReverseProxy in front of one upstream (bench's baseline)",
			about: `Serve Go's httputil.ReverseProxy (or, with --tcp, a byte-for-byte TCP relay)
in front of one upstream: the baseline "firstword bench" measures the gateway
against. With --parse, every event stream is read on its way, unchanged, by
firstword's own Chat Completions reader or by bufio and encoding/json: the
baseline that parsing sets. An internal helper that bench starts.`},
		{name: "bench-upstream", run: BenchUpstream, hidden: true,
			summary: "serve the benchmark's fake upstreams",
			about: `Serve the benchmark's fake OpenAI-compatible upstreams. An internal helper
that "firstword bench" starts.`},
	}
}

// findCommand returns the command that args start with and the arguments
// after its name, or nil. An action ("keys create") is preferred to its
// command.
func findCommand(args []string) (*command, []string) {
	if len(args) == 0 {
		return nil, nil
	}
	var found *command
	for _, c := range commands() {
		if len(args) > 1 && c.name == args[0]+" "+args[1] {
			return c, args[2:]
		}
		if c.name == args[0] {
			found = c
		}
	}
	if found == nil {
		return nil, nil
	}
	return found, args[1:]
}

// topUsage writes the top-level usage: each command and its summary.
func topUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`firstword: a latency-first LLM chat gateway

Usage: firstword COMMAND [flags]

Commands:
`)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(&b, "  %-12s %s\n", c.name, c.summary)
		}
	}
	b.WriteString(`  help CMD     print a command's usage: every flag and its default

Run "firstword help CMD" or "firstword CMD --help" for a command's flags, and
"firstword --version" for the version. serve and keys keep their data in
./firstword.db, in the working directory, unless a config file names a store.
The config file's format is described in docs/config.md.
`)
	io.WriteString(w, b.String())
}

// printUsage writes c's usage: its usage line, its description and every
// flag of fs with its default.
func (c *command) printUsage(w io.Writer, fs *flag.FlagSet) {
	if c.usage != nil {
		c.usage(w, fs)
		return
	}
	var b strings.Builder
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	line := "firstword " + c.name
	switch {
	case c.synopsis != "":
		line += " " + c.synopsis
	case hasFlags:
		line += " [flags]"
	}
	fmt.Fprintf(&b, "Usage: %s\n\n%s\n", line, c.about)
	if hasFlags {
		b.WriteString("\nFlags:\n")
		printFlags(&b, fs)
	}
	if fs.Lookup("config") != nil {
		b.WriteString("\nThe config file's format is described in docs/config.md.\n")
	}
	io.WriteString(w, b.String())
}

// printShortUsage writes c's usage line and where to read the rest, for
// after a usage error.
func (c *command) printShortUsage(w io.Writer, fs *flag.FlagSet) {
	line := "firstword " + c.name
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	switch {
	case c.synopsis != "":
		line += " " + c.synopsis
	case hasFlags:
		line += " [flags]"
	}
	fmt.Fprintf(w, "Usage: %s\nRun \"firstword help %s\" for what it does and every flag.\n", line, c.name)
}

// printFlags writes fs's flags as flag.PrintDefaults does, but with the
// double dash the docs use: "--name VALUE", its usage, its default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n        %s", strings.ReplaceAll(usage, "\n", "\n        "))
		switch {
		case isBoolFlag(f) && f.DefValue == "true":
			fmt.Fprintf(w, " (default true; --%s=false turns it off)", f.Name)
		case !isZeroDefault(f.DefValue):
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		io.WriteString(w, "\n")
	})
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func isZeroDefault(v string) bool {
	switch v {
	case "", "0", "false", "0s", "[]":
		return true
	}
	return false
}

// newFlagSet returns an empty FlagSet for the command name. It prints
// nothing: parseFlags returns its errors, and Main prints them with the
// command's usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args with fs. -h, -help or --help make it return a
// *usageError asking for the usage; a bad flag, one carrying the error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &usageError{fs: fs}
	default:
		return &usageError{fs: fs, err: err}
	}
}

// parseAll parses args with fs, as parseFlags, for a command that takes
// no operands: any is a usage error.
func parseAll(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return noOperands(fs)
}

// noOperands is a usage error unless fs parsed every argument.
func noOperands(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef(fs, "unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}

// A usageError stops a command before it does anything. With a nil err,
// help was asked for: Main prints the usage of fs's command on stdout and
// exits 0. Otherwise the command line was wrong: Main prints err and the
// usage on stderr and exits 2.
type usageError struct {
	fs  *flag.FlagSet
	err error
}

func (e *usageError) Error() string {
	if e.err == nil {
		return "help requested"
	}
	return e.err.Error()
}

func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usage error for fs's command.
func usagef(fs *flag.FlagSet, format string, args ...any) error {
	return &usageError{fs: fs, err: fmt.Errorf(format, args...)}
}

// Version prints the version line.
func Version(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet("version")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(env.Stdout, versionLine(bi))
	return nil
}

// stampVersion and stampCommit are set with -ldflags -X by builds that
// have no VCS information to read, such as the container image's
// (deploy/docker/build-stage.sh); build info, when it has them, wins.
var stampVersion, stampCommit string

// versionLine describes a build: "firstword VERSION (commit REV[,
// modified], GOVERSION)". VERSION is the main module's version, else
// stampVersion, else "devel" ("(devel)", or a test binary); REV is the
// first 12 digits of vcs.revision, else of stampCommit, and "modified"
// says the checkout had uncommitted changes (vcs.modified).
func versionLine(bi *debug.BuildInfo) string {
	version, goVersion := "devel", runtime.Version()
	var rev string
	var modified bool
	if bi != nil {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "devel" && stampVersion != "" {
		version = stampVersion
	}
	if rev == "" {
		rev = stampCommit
	}
	commit := "no commit recorded"
	if rev != "" {
		commit = "commit " + rev[:min(12, len(rev))]
		if modified {
			commit += ", modified"
		}
	}
	return fmt.Sprintf("firstword %s (%s, %s)", version, commit, goVersion)
}
