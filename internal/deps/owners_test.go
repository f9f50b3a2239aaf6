package deps

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sources returns the module's production Go files (no tests), by path
// relative to the module, with their text.
func sources(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{.Dir}}|{{join .GoFiles " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		for _, name := range strings.Fields(f[2]) {
			b, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			files[internal(f[0])+"/"+name] = string(b)
		}
	}
	return files
}

// TestOneOwner enforces docs/architecture.md's "who owns each fact" where
// a fact's owner shows in the code: each of these calls may be made only
// in the files or packages listed, so that a second package attaching a
// request's deadline or stamping its first word fails the build's tests.
func TestOneOwner(t *testing.T) {
	files := sources(t)
	if len(files) < 50 {
		t.Fatalf("found %d source files", len(files))
	}
	rules := []struct {
		fact  string
		call  *regexp.Regexp
		owner []string // files, or packages ending in "/"
	}{
		{"the request's deadline, with its cause", regexp.MustCompile(`With(Deadline|Timeout)Cause\([^\n]*ErrDeadline`), []string{"internal/chat/deadline.go"}},
		{"the request's deadline, attached", regexp.MustCompile(`chat\.WithDeadline\(`), []string{"internal/call/"}},
		{"the request's deadline, kept for shared work", regexp.MustCompile(`chat\.Detach\(`), []string{"internal/levers/coalesce.go"}},
		{"the first word", regexp.MustCompile(`\.FirstWord\(`), []string{"internal/call/"}},
		{"the router's stages", regexp.MustCompile(`\.AddStages\(`), []string{"internal/call/"}},
		{"the metering record", regexp.MustCompile(`Prices\.Build\(`), []string{"internal/call/"}},
	}
	for _, r := range rules {
		found := false
		for path, text := range files {
			if !r.call.MatchString(text) {
				continue
			}
			found = true
			if !ownedBy(path, r.owner) {
				t.Errorf("%s: %s is %v's (see docs/architecture.md, who owns each fact)", path, r.fact, r.owner)
			}
		}
		if !found {
			t.Errorf("no file makes %s (%v): the rule is stale", r.fact, r.call)
		}
	}
}

func ownedBy(path string, owners []string) bool {
	for _, o := range owners {
		if path == o || strings.HasSuffix(o, "/") && filepath.Dir(path)+"/" == o {
			return true
		}
	}
	return false
}
