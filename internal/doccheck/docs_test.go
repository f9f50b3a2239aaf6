package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/config"
)

// fakeEnv stands in for the environment a documented config reads
// (api_key_env, url_env, ${NAME}): every variable is set, to a value of
// the right shape, and the names asked for are recorded.
type fakeEnv map[string]string

func (e fakeEnv) getenv(name string) string {
	v := "doccheck-" + strings.ToLower(name)
	switch {
	case strings.Contains(name, "REDIS"):
		v = "redis://127.0.0.1:6379/0"
	case strings.Contains(name, "DATABASE") || strings.Contains(name, "POSTGRES"):
		v = "postgres://firstword@127.0.0.1:5432/firstword?sslmode=disable"
	}
	e[name] = v
	return v
}

// minimalConfig is what a "# fragment" block is merged into: the smallest
// config that starts.
const minimalConfig = `
providers: {doccheck: {type: sim}}
models: {chat: {deployments: [{provider: doccheck, model: small}]}}
`

// withBase merges a fragment into minimalConfig: the fragment's keys win,
// and mappings merge key by key (so a fragment's models.chat.breaker joins
// the base's models.chat).
func withBase(t *testing.T, b block) []byte {
	t.Helper()
	var base, frag map[string]any
	if err := yaml.Unmarshal([]byte(minimalConfig), &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(b.text), &frag); err != nil {
		t.Fatalf("%s: a fragment must be a mapping of config keys: %v", b, err)
	}
	merge(base, frag)
	out, err := yaml.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// yamlBlocks lists every YAML block of the documentation.
func yamlBlocks(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, f := range docFiles(t) {
		for _, b := range readBlocks(t, f) {
			if b.lang == "yaml" || b.lang == "yml" {
				out = append(out, b)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d YAML blocks in the docs; the extraction is broken", len(out))
	}
	return out
}

// TestDocYAML loads every YAML block of README.md and docs/*.md with the
// config package, strictly (unknown keys are errors), as serve would. A
// block whose first line is "# fragment" is part of a config: it is
// merged into the smallest config that starts (one sim alias) and the
// result must load. Every fragment must stand alone that way; none is
// skipped. Environment variables the blocks name are all set.
func TestDocYAML(t *testing.T) {
	for _, b := range yamlBlocks(t) {
		t.Run(b.String(), func(t *testing.T) {
			src := []byte(b.text)
			if isFragment(b.text) {
				src = withBase(t, b)
			}
			if _, err := config.Parse(b.String(), src, fakeEnv{}.getenv); err != nil {
				t.Errorf("%s (%q): %v", b, b.section, err)
			}
		})
	}
}

// TestDocConfigsStart starts `firstword serve` with every whole config of
// the documentation, in a directory of its own, on a free loopback port,
// and stops it once /readyz answers. A config that needs a server to start
// (PostgreSQL as the store, Redis as the cache) is only loaded
// (TestDocYAML). Nothing is sent to any provider.
func TestDocConfigsStart(t *testing.T) {
	for _, b := range yamlBlocks(t) {
		if isFragment(b.text) {
			continue
		}
		t.Run(b.String(), func(t *testing.T) {
			env := fakeEnv{}
			cfg, err := config.Parse(b.String(), []byte(b.text), env.getenv)
			if err != nil {
				t.Skipf("does not load (TestDocYAML reports it): %v", err)
			}
			if cfg.Store.Driver == "postgres" || cfg.Cache.Driver == "redis" || cfg.Resume.Journal == "redis" {
				t.Skipf("skipped: this config needs PostgreSQL or Redis to start; TestDocYAML loads it")
			}
			s := newSession(t)
			for k, v := range env {
				s.env[k] = v
			}
			if err := os.WriteFile(filepath.Join(s.dir, "doc.yaml"), []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := s.start(b, []string{"serve", "--config", "doc.yaml"})
			s.stop(srv)
		})
	}
}

// TestDocCommands runs, for each document, every firstword command line
// of its sh blocks in order, as one reader would in one shell (see
// session): export lines set variables, a YAML block whose first line
// names a file ("# firstword.yaml") is saved under that name when the
// reading reaches it, serve and sim are started and left running for the
// commands after them (and stopped, with SIGTERM, at the end), and every
// other command must exit 0, or the status its line's comment gives
// ("# exits 1").
func TestDocCommands(t *testing.T) {
	for _, f := range docFiles(t) {
		blocks := readBlocks(t, f)
		has := false
		for _, b := range blocks {
			if isShell(b.lang) && strings.Contains(b.text, "firstword") {
				has = true
			}
		}
		if !has {
			continue
		}
		t.Run(f, func(t *testing.T) {
			s := newSession(t)
			for _, b := range blocks {
				switch {
				case b.lang == "yaml" || b.lang == "yml":
					s.writeYAML(b)
				case isShell(b.lang):
					s.runBlock(b)
				}
			}
			s.stopAll()
			for _, r := range s.ran {
				t.Log(r)
			}
		})
	}
}

func isShell(lang string) bool { return lang == "sh" || lang == "bash" || lang == "shell" }
