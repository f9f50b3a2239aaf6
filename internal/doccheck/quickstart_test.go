package doccheck

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// quickstart is the README's quickstart section, block by block.
type quickstart struct {
	config   block // the YAML block naming firstword.yaml
	commands []block
	python   block
	node     block
}

func readQuickstart(t *testing.T) quickstart {
	t.Helper()
	var q quickstart
	for _, b := range readBlocks(t, "README.md") {
		if !strings.HasPrefix(b.section, "Quickstart") {
			continue
		}
		switch {
		case b.lang == "yaml" && fileName(b.text) == "firstword.yaml":
			q.config = b
		case isShell(b.lang):
			q.commands = append(q.commands, b)
		case b.lang == "python":
			q.python = b
		case b.lang == "js" || b.lang == "javascript" || b.lang == "mjs":
			q.node = b
		}
	}
	if q.config.text == "" || len(q.commands) == 0 || q.python.text == "" || q.node.text == "" {
		t.Fatalf("README.md's Quickstart section needs a YAML block starting \"# firstword.yaml\", a sh block, a python block and a js block; found %+v", q)
	}
	return q
}

// The quickstart's addresses: OpenAI's API root in the config, the
// gateway's base URL in the SDK snippets.
const (
	openAIBaseURL  = "https://api.openai.com/v1"
	gatewayBaseURL = "http://" + documentedAddr + "/v1"
)

// TestQuickstart follows the README's quickstart word for word against a
// local fake of OpenAI's API, and checks that both SDK snippets get the
// fake's answer streamed through the gateway. Two substitutions are made,
// and only these: the config's base_url (https://api.openai.com/v1)
// becomes the fake's URL, and the gateway's address (127.0.0.1:8080, in
// serve's listen address and the snippets' base URL) becomes a free
// loopback port, as every doc test does. The config, the export line, the
// serve command and the snippets are otherwise run as written.
//
// The Node.js snippet runs with the official openai package, installed by
// `npm ci --prefix internal/cli/testdata/quickstart` (.ci/run does it); the
// Python snippet runs when Python's openai package is importable. Each
// says when it skipped.
func TestQuickstart(t *testing.T) {
	q := readQuickstart(t)
	fake := newFakeOpenAI(t, "The ", "first ", "word ", "arrives ", "first.")

	s := newSession(t)
	s.rewriteYAML = func(name, text string) string {
		if strings.Count(text, openAIBaseURL) != 1 {
			t.Fatalf("%s: the quickstart config should name %s once", q.config, openAIBaseURL)
		}
		return strings.Replace(text, openAIBaseURL, fake.URL+"/v1", 1)
	}
	s.writeYAML(q.config)
	for _, b := range q.commands {
		s.runBlock(b)
	}
	key, ok := s.env["OPENAI_API_KEY"]
	if !ok {
		t.Fatalf("the quickstart's commands do not export OPENAI_API_KEY")
	}
	base := s.url(documentedAddr) + "/v1"

	check := func(t *testing.T, lang, out string, before int) {
		t.Helper()
		if got := strings.TrimSpace(out); got != fake.answer() {
			t.Errorf("the %s snippet printed %q, want the fake's answer %q", lang, got, fake.answer())
		}
		reqs := fake.requests()
		if len(reqs) != before+1 {
			t.Fatalf("the fake got %d requests for the %s snippet, want 1", len(reqs)-before, lang)
		}
		r := reqs[before]
		if r.Path != "/v1/chat/completions" || r.Model != "gpt-4o-mini" || !r.Stream || r.Authorization != "Bearer "+key {
			t.Errorf("the fake got %+v; want POST /v1/chat/completions for gpt-4o-mini, streamed, with the exported key", r)
		}
	}

	// The README's line after the snippets: in local mode a provider's
	// model can be asked for as PROVIDER/MODEL.
	t.Run("provider/model name", func(t *testing.T) {
		before := len(fake.requests())
		status, body := post(t, base+"/chat/completions", fmt.Sprintf(streamedHi, "openai/gpt-4o-mini"), "Authorization", "Bearer local")
		if status != http.StatusOK || !strings.Contains(body, "first.") {
			t.Fatalf("POST /v1/chat/completions for openai/gpt-4o-mini = %d %s", status, body)
		}
		reqs := fake.requests()
		if len(reqs) != before+1 || reqs[before].Model != "gpt-4o-mini" {
			t.Errorf("the fake got %+v, want one request for gpt-4o-mini", reqs[before:])
		}
	})

	t.Run("node", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Skip("skipped: Node.js is not installed; the Node.js snippet was not run")
		}
		modules, err := filepath.Abs(filepath.Join("..", "cli", "testdata", "quickstart", "node_modules"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(modules, "openai")); err != nil {
			t.Skip("skipped: the openai npm package is not installed; run `npm ci --prefix internal/cli/testdata/quickstart` (.ci/run does)")
		}
		dir := t.TempDir()
		// The snippet imports "openai": give its directory the installed
		// packages, as `npm install openai` would.
		if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(dir, "quickstart.mjs")
		writeSnippet(t, q.node, script, base)
		before := len(fake.requests())
		out := runSnippet(t, s, node, script)
		check(t, "Node.js", out, before)
	})

	t.Run("python", func(t *testing.T) {
		python, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("skipped: python3 is not installed; the Python snippet was not run")
		}
		script := filepath.Join(t.TempDir(), "quickstart.py")
		writeSnippet(t, q.python, script, base)
		// Without the SDK, at least the snippet must be valid Python.
		if out, err := exec.Command(python, "-m", "py_compile", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: the Python snippet does not compile: %v\n%s", q.python, err, out)
		}
		if out, err := exec.Command(python, "-c", "import openai").CombinedOutput(); err != nil {
			t.Skipf("skipped: Python's openai package is not importable (pip install openai), so the Python snippet was only compiled, not run: %s", lastLine(string(out)))
		}
		before := len(fake.requests())
		out := runSnippet(t, s, python, script)
		check(t, "Python", out, before)
	})
}

// writeSnippet saves an SDK snippet with the gateway's documented base URL
// replaced by the one the test's gateway listens on.
func writeSnippet(t *testing.T, b block, path, base string) {
	t.Helper()
	if !strings.Contains(b.text, gatewayBaseURL) {
		t.Fatalf("%s: the snippet should use the base URL %s", b, gatewayBaseURL)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(b.text, gatewayBaseURL, base)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runSnippet runs an interpreter on a script, in the session's environment
// (where no OpenAI or firstword key is set: local mode takes any).
func runSnippet(t *testing.T, s *session, interpreter, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, script)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = s.environ()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(interpreter), filepath.Base(script), err, stderr.String())
	}
	return string(out)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
