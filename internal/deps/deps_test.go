package deps

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/firstword/firstword"

// imports lists every package of the module with its direct imports.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs[f[0]] = f[1:]
	}
	return pkgs
}

func internal(p string) string { return strings.TrimPrefix(p, module+"/") }

// TestImportRules enforces the architecture: heavy dependencies live in
// one adapter package each, the vocabulary packages use only the standard
// library, nothing imports the command line, only the command line
// imports the composition root (internal/gateway), and only the
// composition root imports the HTTP layer.
func TestImportRules(t *testing.T) {
	pkgs := imports(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	// An external dependency may be imported only by these packages.
	owners := map[string][]string{
		"modernc.org/sqlite":                  {"internal/store/sqlite"},
		"github.com/jackc/pgx":                {"internal/store/postgres"},
		"github.com/prometheus/client_golang": {"internal/metrics"},
		"github.com/redis/go-redis":           {"internal/cache/redis", "internal/journal/redis", "internal/limits/redis", "internal/redisconn"},
		"go.opentelemetry.io/otel/sdk":        {"internal/tracing"},
		"go.opentelemetry.io/otel/exporters":  {"internal/tracing"},
		"github.com/maypok86/otter":           {"internal/cache"},
		"github.com/DataDog/sketches-go":      {"internal/budget/window"},
		"gonum.org/v1/plot":                   {"internal/yardstick"},
		"github.com/schollz/progressbar":      {"internal/yardstick"},
	}
	// Packages that may import only the standard library (and the module's
	// own stdlib-only packages).
	stdlibOnly := []string{"internal/chat", "internal/sse", "internal/budget", "internal/jsonenc", "internal/jsonscan", "internal/simspec"}
	// Packages only these may import (besides their own subpackages and
	// tests); gatewaytest, a test harness, only tests.
	roots := map[string][]string{
		"internal/cli":                 {"cmd/firstword"},
		"internal/gateway":             {"internal/cli", "cmd/firstword"},
		"internal/gateway/gatewaytest": nil,
		"internal/httpapi":             {"internal/gateway"},
	}
	// Low layers that must not reach up.
	forbidden := map[string][]string{
		"internal/provider":     {"internal/router", "internal/httpapi", "internal/conversation", "internal/store", "internal/cli"},
		"internal/wire":         {"internal/provider", "internal/router", "internal/httpapi", "internal/store"},
		"internal/router":       {"internal/httpapi", "internal/conversation", "internal/store", "internal/cli", "internal/levers", "internal/call"},
		"internal/levers":       {"internal/httpapi", "internal/conversation", "internal/cli", "internal/call", "internal/metering"},
		"internal/metering":     {"internal/httpapi", "internal/conversation", "internal/cli", "internal/call"},
		"internal/call":         {"internal/httpapi", "internal/conversation", "internal/cli", "internal/gateway"},
		"internal/store":        {"internal/httpapi", "internal/conversation", "internal/router", "internal/cli", "internal/provider"},
		"internal/conversation": {"internal/httpapi", "internal/cli", "internal/gateway"},
		"internal/guard":        {"internal/httpapi", "internal/conversation", "internal/store", "internal/router"},
		"internal/contextsrc":   {"internal/httpapi", "internal/conversation", "internal/store", "internal/router"},
		"internal/journal":      {"internal/httpapi", "internal/conversation", "internal/store", "internal/router", "internal/cli"},
		"internal/config":       {"internal/provider", "internal/router", "internal/httpapi", "internal/store", "internal/cli"},
	}
	for pkg, imps := range pkgs {
		p := internal(pkg)
		for _, imp := range imps {
			for dep, allowed := range owners {
				if strings.HasPrefix(imp, dep) && !hasPrefixAny(p, allowed) {
					t.Errorf("%s imports %s; only %v may", p, imp, allowed)
				}
			}
			ip := internal(imp)
			for _, s := range stdlibOnly {
				if p == s && strings.Contains(strings.Split(imp, "/")[0], ".") && !strings.HasPrefix(imp, module) {
					t.Errorf("%s must use only the standard library, imports %s", p, imp)
				}
				if (p == s) && strings.HasPrefix(imp, module) && !contains(stdlibOnly, ip) {
					t.Errorf("%s must use only the standard library and %v, imports %s", p, stdlibOnly, ip)
				}
			}
			if allowed, ok := roots[ip]; ok && !contains(allowed, p) && !strings.HasPrefix(p, ip) {
				if len(allowed) == 0 {
					t.Errorf("%s imports %s; only tests may", p, ip)
				} else {
					t.Errorf("%s imports %s; only %v may", p, ip, allowed)
				}
			}
			for layer, bad := range forbidden {
				if p == layer || strings.HasPrefix(p, layer+"/") {
					for _, b := range bad {
						if ip == b || strings.HasPrefix(ip, b+"/") {
							t.Errorf("%s (layer %s) must not import %s", p, layer, ip)
						}
					}
				}
			}
		}
	}
}

func hasPrefixAny(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
