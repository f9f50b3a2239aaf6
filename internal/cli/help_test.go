package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/config"
)

// mainOut runs Main with an environment holding only env and returns
// stdout, stderr and the exit code.
func mainOut(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(t.Context(), args, func(k string) string { return env[k] }, nil, &out, &errb)
	return out.String(), errb.String(), code
}

// flagSetOf returns the FlagSet c parses, as "help CMD" gets it.
func flagSetOf(t *testing.T, c *command) *flag.FlagSet {
	t.Helper()
	env := &Env{Getenv: func(string) string { return "" }, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	err := c.run(context.Background(), env, []string{"--help"})
	var ue *usageError
	if !errors.As(err, &ue) || ue.err != nil {
		t.Fatalf("%s --help returned %v, want a request for help before doing anything", c.name, err)
	}
	return ue.fs
}

// TestEveryCommandHelp: every command and keys action prints its usage,
// with each flag its FlagSet defines and each non-zero default, on stdout
// with exit 0 for --help, -h and "help CMD"; an unknown flag prints the
// error and the usage on stderr and exits 2.
func TestEveryCommandHelp(t *testing.T) {
	for _, c := range commands() {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			name := strings.Fields(c.name)
			argv := func(extra ...string) []string { return append(slices.Clone(name), extra...) }
			fs := flagSetOf(t, c)
			if fs.Name() != c.name {
				t.Errorf("its FlagSet is named %q, want %q", fs.Name(), c.name)
			}
			help, stderr, code := mainOut(t, nil, argv("--help")...)
			if code != 0 || stderr != "" {
				t.Fatalf("%s --help: exit %d, stderr %q; want 0 and nothing", c.name, code, stderr)
			}
			if want := "Usage: firstword " + c.name; !strings.HasPrefix(help, want) {
				t.Errorf("%s --help starts %q, want %q", c.name, firstLine(help), want)
			}
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(help, "\n  --"+f.Name+" ") && !strings.Contains(help, "\n  --"+f.Name+"\n") {
					t.Errorf("%s --help does not list --%s:\n%s", c.name, f.Name, help)
				}
				if _, usage := flag.UnquoteUsage(f); !strings.Contains(help, usage) {
					t.Errorf("%s --help lacks --%s's text %q", c.name, f.Name, usage)
				}
				if !isZeroDefault(f.DefValue) && !strings.Contains(help, "(default "+f.DefValue) {
					t.Errorf("%s --help does not give --%s's default %q", c.name, f.Name, f.DefValue)
				}
			})
			if fs.Lookup("config") != nil && !strings.Contains(help, "docs/config.md") {
				t.Errorf("%s --help takes --config but does not point at docs/config.md", c.name)
			}
			for _, args := range [][]string{argv("-h"), argv("-help"), append([]string{"help"}, name...)} {
				out, stderr, code := mainOut(t, nil, args...)
				if code != 0 || stderr != "" || out != help {
					t.Errorf("firstword %s: exit %d, stderr %q, stdout %q; want 0 and the --help text", strings.Join(args, " "), code, stderr, firstLine(out))
				}
			}
			out, stderr, code := mainOut(t, nil, argv("--no-such-flag")...)
			if code != 2 || out != "" || !strings.Contains(stderr, "no-such-flag") || !strings.Contains(stderr, "Usage: firstword "+c.name) {
				t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q; want 2, the error and the usage on stderr", c.name, code, out, stderr)
			}
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestTopLevelUsage: the top-level usage lists every command but the
// internal helpers, says how to get a command's help, and points at the
// config reference and the default store.
func TestTopLevelUsage(t *testing.T) {
	usage, _, code := mainOut(t, nil, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}} {
		if out, _, code := mainOut(t, nil, args...); code != 0 || out != usage {
			t.Errorf("firstword %s: exit %d, %q; want 0 and the usage", args[0], code, firstLine(out))
		}
	}
	if out, stderr, code := mainOut(t, nil); code != 2 || out != "" || stderr != usage {
		t.Errorf("firstword with no command: exit %d, stdout %q; want 2 and the usage on stderr", code, out)
	}
	for _, c := range commands() {
		listed := strings.Contains(usage, "\n  "+c.name+" ") && strings.Contains(usage, " "+c.summary+"\n")
		if listed == c.hidden {
			t.Errorf("%s (hidden %v) listed: %v", c.name, c.hidden, listed)
		}
	}
	for _, want := range []string{`"firstword help CMD"`, "--version", "docs/config.md", "./firstword.db"} {
		if !strings.Contains(usage, want) {
			t.Errorf("the usage lacks %q:\n%s", want, usage)
		}
	}
	if out, _, code := mainOut(t, nil, "help", "help"); code != 0 || out != usage {
		t.Errorf("help help: exit %d, %q; want 0 and the usage", code, firstLine(out))
	}
	if out, stderr, code := mainOut(t, nil, "help", "frobnicate"); code != 2 || out != "" || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestKeysActionsOwnFlags: each keys action has its own flags, and the
// keys command without a known action is a usage error.
func TestKeysActionsOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		action      string
		has, hasNot []string
	}{
		{"create", []string{"--config", "--tenant", "--user", "--name", "--admin"}, nil},
		{"list", []string{"--config", "--tenant"}, []string{"--user", "--name", "--admin"}},
		{"revoke", []string{"--config"}, []string{"--tenant", "--user", "--name", "--admin"}},
	} {
		out, _, code := mainOut(t, nil, "keys", tc.action, "--help")
		if code != 0 {
			t.Errorf("keys %s --help: exit %d", tc.action, code)
		}
		for _, f := range tc.has {
			if !strings.Contains(out, "\n  "+f) {
				t.Errorf("keys %s --help lacks %s", tc.action, f)
			}
		}
		for _, f := range tc.hasNot {
			if strings.Contains(out, f) {
				t.Errorf("keys %s --help shows %s, another action's flag:\n%s", tc.action, f, out)
			}
		}
	}
	if _, stderr, code := mainOut(t, nil, "keys", "list", "--name", "x"); code != 2 || !strings.Contains(stderr, "Usage: firstword keys list") {
		t.Errorf("keys list --name x: exit %d, stderr %q; want 2 and list's usage", code, stderr)
	}
	for _, args := range [][]string{{"keys"}, {"keys", "frobnicate"}} {
		if _, stderr, code := mainOut(t, nil, args...); code != 2 || !strings.Contains(stderr, "Usage: firstword keys create|list|revoke") {
			t.Errorf("firstword %s: exit %d, stderr %q; want 2 and keys' usage", strings.Join(args, " "), code, stderr)
		}
	}
	if out, _, code := mainOut(t, nil, "help", "keys"); code != 0 || !strings.Contains(out, "firstword help keys ACTION") {
		t.Errorf("help keys: exit %d, %q", code, out)
	}
}

// TestUsageErrorsExit2: operands and flag values a command cannot take
// print the usage and exit 2, before anything runs.
func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "extra"},
		{"serve", "--addr", "8080"},
		{"budget", "extra"},
		{"keys", "create"}, // no --tenant
		{"keys", "revoke"},
		{"keys", "revoke", "a", "b"},
		{"sim", "--seed", "x"},
		{"bench", "--duration", "10"},
		{"levers", "extra"},
		{"version", "extra"},
		{"bench-proxy", "--upstream", ""},
	} {
		out, stderr, code := mainOut(t, nil, args...)
		if code != 2 || out != "" || !strings.Contains(stderr, "\n\nUsage: firstword "+args[0]) {
			t.Errorf("firstword %s: exit %d, stdout %q, stderr %q; want 2, an error and the usage", strings.Join(args, " "), code, out, stderr)
		}
	}
}

// TestBudgetHelpHidesKey: budget's --key defaults to $FIRSTWORD_API_KEY,
// and its help must not print the key.
func TestBudgetHelpHidesKey(t *testing.T) {
	out, _, _ := mainOut(t, map[string]string{"FIRSTWORD_API_KEY": "fw_secret_value"}, "budget", "--help")
	if strings.Contains(out, "fw_secret_value") {
		t.Errorf("budget --help shows $FIRSTWORD_API_KEY's value:\n%s", out)
	}
	if !strings.Contains(out, "--key") || !strings.Contains(out, "FIRSTWORD_API_KEY") {
		t.Errorf("budget --help does not tell how to pass a key:\n%s", out)
	}
}

func TestVersionLine(t *testing.T) {
	goVersion := runtime.Version()
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "firstword devel (no commit recorded, " + goVersion + ")"},
		{"checkout, clean", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc1234def5678901234"}, {Key: "vcs.modified", Value: "false"}}},
			"firstword devel (commit abc1234def56, go1.26.1)"},
		{"checkout, modified", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.0.0-20261201164000-abc1234def56+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc1234def5678901234"}, {Key: "vcs.modified", Value: "true"}}},
			"firstword v0.0.0-20261201164000-abc1234def56+dirty (commit abc1234def56, modified, go1.26.1)"},
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.2.3"}},
			"firstword v1.2.3 (no commit recorded, go1.26.1)"},
		{"short revision", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}},
			"firstword devel (commit abc, " + goVersion + ")"},
	} {
		if got := versionLine(tc.bi); got != tc.want {
			t.Errorf("%s: versionLine = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionLineStamped: a build without VCS information (the container
// image's) names the version and commit stamped with -ldflags -X; build
// info, when it has them, wins.
func TestVersionLineStamped(t *testing.T) {
	defer func(v, c string) { stampVersion, stampCommit = v, c }(stampVersion, stampCommit)
	stampVersion, stampCommit = "v1.4.0", "0123456789abcdef0123"
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	if got, want := versionLine(bi), "firstword v1.4.0 (commit 0123456789ab, go1.26.8)"; got != want {
		t.Errorf("stamped: versionLine = %q, want %q", got, want)
	}
	bi = &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v2.0.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba9876543210"}}}
	if got, want := versionLine(bi), "firstword v2.0.0 (commit fedcba987654, go1.26.8)"; got != want {
		t.Errorf("build info and stamps: versionLine = %q, want %q", got, want)
	}
}

// TestVersionCommand: --version and version print this binary's build
// info.
func TestVersionCommand(t *testing.T) {
	bi, _ := debug.ReadBuildInfo()
	want := versionLine(bi) + "\n"
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		out, stderr, code := mainOut(t, nil, args...)
		if code != 0 || out != want || stderr != "" {
			t.Errorf("firstword %s: exit %d, %q, stderr %q; want 0 and %q", args[0], code, out, stderr, want)
		}
		if !strings.HasPrefix(out, "firstword ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("firstword %s = %q, want the name and the Go version", args[0], out)
		}
	}
}

func TestStoreLocation(t *testing.T) {
	abs, err := filepath.Abs("firstword.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store config.Store
		want  string
	}{
		{"relative SQLite file", config.Store{Driver: "sqlite", Path: "firstword.db"}, "SQLite file " + abs},
		{"absolute SQLite file", config.Store{Driver: "sqlite", Path: "/var/lib/fw/fw.db"}, "SQLite file /var/lib/fw/fw.db"},
		{"memory", config.Store{Driver: "sqlite", Path: ":memory:"}, "SQLite in memory (nothing is kept)"},
		{"postgres URL", config.Store{Driver: "postgres", ResolvedURL: "postgres://fw:s3cret@db.internal:5432/firstword?sslmode=require&password=s3cret"}, "PostgreSQL at db.internal:5432/firstword"},
		{"postgres socket URL", config.Store{Driver: "postgres", ResolvedURL: "postgresql:///firstword?host=/run/postgresql"}, "PostgreSQL at /run/postgresql/firstword"},
		{"postgres keywords", config.Store{Driver: "postgres", ResolvedURL: "host=db port=5433 dbname=fw user=fw password=s3cret"}, "PostgreSQL at db:5433/fw"},
		{"postgres defaults", config.Store{Driver: "postgres", ResolvedURL: "user=fw password=s3cret"}, "PostgreSQL at localhost (the user's default database)"},
	} {
		got := storeLocation(tc.store)
		if got != tc.want {
			t.Errorf("%s: storeLocation = %q, want %q", tc.name, got, tc.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("%s: storeLocation shows the password: %q", tc.name, got)
		}
	}
}
