package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func noenv(string) string { return "" }

func TestMinimalConfig(t *testing.T) {
	const minimal = `listen: 127.0.0.1:8080
providers:
  local:
    type: openai
    base_url: http://127.0.0.1:9000/v1
    api_key_env: LOCAL_API_KEY      # unset is fine for servers that need no key
models:
  chat:
    deployments:
      - provider: local
        model: mock-model
`
	c, err := Parse("min.yaml", []byte(minimal), func(k string) string {
		if k == "LOCAL_API_KEY" {
			return "sk-test"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.Providers["local"].APIKey != "sk-test" || c.Models["chat"].Deployments[0].Model != "mock-model" {
		t.Errorf("parsed %+v", c)
	}
	if c.Heartbeat != 10*time.Second || c.ShutdownTimeout != 30*time.Second || c.RequestBodyTimeout != 10*time.Second {
		t.Errorf("defaults not applied: heartbeat %v, shutdown %v, request body %v", c.Heartbeat, c.ShutdownTimeout, c.RequestBodyTimeout)
	}
}

func TestRouterKeys(t *testing.T) {
	c, err := Parse("r.yaml", []byte(`
providers:
  primary: {type: sim}
  backup: {type: sim}
models:
  chat:
    timeout: 20s
    first_token_timeout: 5s
    deployments:
      - provider: primary
        model: large
      - provider: backup
        model: small
        first_token_timeout: 3s
`), noenv)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Models["chat"]
	if m.Timeout != 20*time.Second || m.FirstTokenTimeout != 5*time.Second || m.Deployments[1].FirstTokenTimeout != 3*time.Second {
		t.Errorf("got %+v", m)
	}
}

func TestBadConfig(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"unknown key", "listen: 127.0.0.1:1\nlisten_addr: x\n", []string{"line 2", "listen_addr"}},
		{"unknown nested key", "providers:\n  p:\n    type: openai\n    base_url: http://x\n    apikey: k\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 5", "apikey"}},
		{"bad duration", "models:\n  m:\n    timeout: soon\n    deployments: [{provider: p, model: x}]\nproviders:\n  p: {type: sim}\n", []string{"line 3", "soon"}},
		{"unknown provider", "providers:\n  p: {type: sim}\nmodels:\n  m:\n    deployments:\n      - provider: q\n        model: x\n", []string{"line 6", "models.m.deployments[0].provider", `"q"`}},
		{"missing base_url", "providers:\n  p:\n    type: openai\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 2", "providers.p.base_url"}},
		{"bad type", "providers:\n  p:\n    type: openia\n    base_url: http://x\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 3", "providers.p.type", "openia"}},
		{"no deployments", "providers:\n  p: {type: sim}\nmodels:\n  m:\n    timeout: 1s\n", []string{"line 4", "models.m.deployments"}},
		{"ftt over timeout", "providers:\n  p: {type: sim}\nmodels:\n  m:\n    timeout: 1s\n    first_token_timeout: 2s\n    deployments: [{provider: p, model: x}]\n", []string{"line 6", "first_token_timeout"}},
		{"bad on_stream_failure", "providers:\n  p: {type: sim}\nmodels:\n  m:\n    on_stream_failure: retry\n    deployments: [{provider: p, model: small}]\n", []string{"line 5", "models.m.on_stream_failure", "retry"}},
		{"negative stall_timeout", "providers:\n  p: {type: sim}\nmodels:\n  m:\n    stall_timeout: -1s\n    deployments: [{provider: p, model: small}]\n", []string{"line 5", "stall_timeout"}},
		{"bad continuation", "providers:\n  p: {type: sim}\nmodels:\n  m:\n    deployments:\n      - {provider: p, model: small, continuation: guess}\n", []string{"line 6", "continuation", "guess"}},
		{"bad listen", "listen: 8080\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "listen"}},
		{"several at once", "providers:\n  p:\n    type: openai\nmodels:\n  m:\n    deployments:\n      - provider: q\n        model: x\n", []string{"2 problems", "base_url", "provider"}},
		{"empty", "", []string{"empty"}},
		{"unknown sim tier", "providers:\n  p: {type: sim, tiers: {tiny: {ttft: 10ms, tokens_per_second: 100}}}\nmodels:\n  m:\n    deployments: [{provider: p, model: hueg}]\n", []string{"line 5", "models.m.deployments[0].model", "large, medium, reasoner, small, tiny", `"hueg"`}},
		{"negative thinking time", "providers:\n  p: {type: sim, tiers: {slowthink: {ttft: 10ms, tokens_per_second: 100, thinking_time: -1s}}}\nmodels:\n  m:\n    deployments: [{provider: p, model: slowthink}]\n", []string{"line 2", "providers.p.tiers.slowthink", "thinking_time"}},
		{"a typo and a bad reference together", "heartbet: 1s\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments:\n      - provider: q\n        model: small\n", []string{"2 problems", "line 1", "heartbet", "line 7", `no provider named "q"`}},
		{"bad journal", "resume: {journal: disk}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "resume.journal", "disk"}},
		{"redis journal without a server", "resume: {journal: redis}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "resume.url"}},
		{"negative grace", "resume: {grace: -1s}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "resume"}},
		{"bad limits driver", "limits: {driver: etcd}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "limits.driver", "etcd"}},
		{"redis limits without a server", "limits: {driver: redis}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "limits.url"}},
		{"tiny limits period", "limits: {period: 1ms}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "limits.period"}},
		{"negative tenant limit", "tenants:\n  acme:\n    limits: {requests_per_minute: -1}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 3", "tenants.acme.limits"}},
		{"oversized tenant limit", "tenants:\n  acme:\n    limits: {tokens_per_minute: 100000000000}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 3", "tenants.acme.limits", "at most 1000000000"}},
		{"soft threshold over 1", "tenants:\n  acme:\n    budget: {usd_per_day: 1, soft_threshold: 2}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 3", "soft_threshold"}},
		{"unknown budget key", "tenants:\n  acme:\n    budget: {usd_per_week: 1}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 3", "usd_per_week"}},
		{"negative request body timeout", "request_body_timeout: -1s\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "request_body_timeout", "must not be negative"}},
		{"bad metrics listen", "metrics: {listen: 9090}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "metrics.listen", "HOST:PORT"}},
		{"metrics on listen's address", "listen: 0.0.0.0:8080\nmetrics: {listen: 0.0.0.0:8080}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 2", "metrics.listen", "port of its own"}},
		{"metrics listen with metrics off", "metrics: {enabled: false, listen: 0.0.0.0:9090}\nproviders:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 1", "metrics.enabled is false"}},
		{"cached prefix slower", "providers:\n  p: {type: sim, tiers: {t: {ttft: 10ms, tokens_per_second: 100, cached_prefix_speedup: 0.5}}}\nmodels:\n  m:\n    deployments: [{provider: p, model: t}]\n", []string{"line 2", "providers.p.tiers.t", "cached_prefix_speedup must be at least 1"}},
		{"sim fault", "providers:\n  p:\n    type: sim\n    fault: {mode: explode}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n", []string{"line 4", "explode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.yaml), noenv)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "bad.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// TestOtherHeadersEnvReference: the guard's, the lookups' and the
// tracing exporter's headers read ${NAME} as the providers' do, so a
// secret header need not be written in the file.
func TestOtherHeadersEnvReference(t *testing.T) {
	doc := "providers: {sim: {type: sim}}\nmodels: {chat: {deployments: [{provider: sim, model: small}]}}\n" +
		"guard: {http: {url: \"http://g/check\", headers: {Authorization: \"Bearer ${GUARD_TOKEN}\", X-Fixed: a}}}\n" +
		"sources: {lookups: [{name: crm, url: \"http://crm/u/{{user}}\", headers: {X-Key: \"${CRM_KEY}\"}}]}\n" +
		"tracing: {endpoint: \"http://otel:4318\", headers: {X-Tenant: \"${OTEL_TENANT}\"}}\n"
	env := map[string]string{"GUARD_TOKEN": "g-1", "CRM_KEY": "c-2", "OTEL_TENANT": "t-3"}
	c, err := Parse("o.yaml", []byte(doc), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Guard.HTTP.Headers; h["Authorization"] != "Bearer g-1" || h["X-Fixed"] != "a" {
		t.Errorf("guard headers = %v", h)
	}
	if h := c.Sources.Lookups[0].Headers; h["X-Key"] != "c-2" {
		t.Errorf("lookup headers = %v", h)
	}
	if h := c.Tracing.Headers; h["X-Tenant"] != "t-3" {
		t.Errorf("tracing headers = %v", h)
	}
	_, err = Parse("o.yaml", []byte(doc), noenv)
	for _, want := range []string{"guard.http.headers.Authorization: environment variable GUARD_TOKEN is not set", "sources.lookups.0.headers.X-Key: environment variable CRM_KEY is not set", "tracing.headers.X-Tenant: environment variable OTEL_TENANT is not set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("unset references: err = %v, want %q", err, want)
		}
	}
}

func TestHeaderEnvReference(t *testing.T) {
	c, err := Parse("h.yaml", []byte("providers:\n  p:\n    type: openai\n    base_url: http://x\n    headers: {X-Org: \"${ORG}\", X-Fixed: a}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n"), func(k string) string {
		if k == "ORG" {
			return "org-1"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Providers["p"].Headers; h["X-Org"] != "org-1" || h["X-Fixed"] != "a" {
		t.Errorf("headers = %v", h)
	}
	_, err = Parse("h.yaml", []byte("providers:\n  p:\n    type: openai\n    base_url: http://x\n    headers: {X-Org: \"${ORG}\"}\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n"), noenv)
	if err == nil || !strings.Contains(err.Error(), "ORG is not set") {
		t.Errorf("unset reference: err = %v", err)
	}
}

// TestHeaderEnvReferenceUnsetWhere checks that an unset ${VAR} in a
// provider header is reported at the header's own path and line, naming the
// provider and the variable apart (issue 17: it named the variable as the
// provider, at the providers: line).
func TestHeaderEnvReferenceUnsetWhere(t *testing.T) {
	src := "providers:\n" + // line 1
		"  openai:\n" + // 2
		"    type: openai\n" + // 3
		"    base_url: http://x\n" + // 4
		"    headers:\n" + // 5
		"      OpenAI-Organization: \"${OPENAI_ORG}\"\n" + // 6
		"models:\n" +
		"  m:\n" +
		"    deployments: [{provider: openai, model: x}]\n"
	_, err := Parse("h.yaml", []byte(src), noenv)
	want := "h.yaml: line 6: providers.openai.headers.OpenAI-Organization: environment variable OPENAI_ORG is not set"
	if err == nil || err.Error() != want {
		t.Errorf("Parse(unset header reference) = %v, want %s", err, want)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestDocumentedExamples parses every YAML block of the README,
// docs/config.md and docs/LEVERS.md, so the documentation cannot drift from the schema.
func TestDocumentedExamples(t *testing.T) {
	for _, path := range []string{"../../README.md", "../../docs/config.md", "../../docs/LEVERS.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```yaml\n")
		if len(blocks) < 2 {
			t.Fatalf("%s has no yaml example", path)
		}
		for i, blk := range blocks[1:] {
			text, _, _ := strings.Cut(blk, "```")
			if strings.Contains(text, "# fragment") {
				continue
			}
			if _, err := Parse(fmt.Sprintf("%s#%d", path, i+1), []byte(text), noenv); err != nil {
				t.Errorf("example %d of %s: %v", i+1, path, err)
			}
		}
	}
}

func TestSpillPathReadsTheEnvironment(t *testing.T) {
	env := func(name string) string { return map[string]string{"HOSTNAME": "pod-1"}[name] }
	c, err := Parse("t.yaml", []byte("usage:\n  spill_path: /var/lib/firstword/${HOSTNAME}.usage-spill\nproviders: {sim: {type: sim}}\nmodels: {chat: {deployments: [{provider: sim, model: small}]}}\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Usage.SpillPath != "/var/lib/firstword/pod-1.usage-spill" {
		t.Errorf("spill path %q", c.Usage.SpillPath)
	}
	_, err = Parse("t.yaml", []byte("usage:\n  spill_path: /x/${NOPE}.spill\nproviders: {sim: {type: sim}}\nmodels: {chat: {deployments: [{provider: sim, model: small}]}}\n"), env)
	if err == nil || !strings.Contains(err.Error(), "line 2: usage.spill_path: environment variable NOPE is not set") {
		t.Errorf("an unset variable: %v", err)
	}
}

func TestResumeConfig(t *testing.T) {
	const models = "providers:\n  p: {type: sim}\nmodels:\n  m:\n    deployments: [{provider: p, model: small}]\n"
	tests := []struct {
		name  string
		yaml  string
		grace time.Duration
		url   string
	}{
		{"defaults", models, 15 * time.Second, ""},
		{"grace off", "resume: {grace: 0s}\n" + models, 0, ""},
		{"the cache's redis", "cache: {driver: redis, url: redis://c:6379/0}\nresume: {journal: redis, grace: 3s}\n" + models, 3 * time.Second, "redis://c:6379/0"},
		{"its own redis", "resume: {journal: redis, url: redis://j:6379/1}\n" + models, 15 * time.Second, "redis://j:6379/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.yaml), noenv)
			if err != nil {
				t.Fatal(err)
			}
			if g := c.Resume.GraceWindow(); g != tt.grace {
				t.Errorf("grace %v, want %v", g, tt.grace)
			}
			if c.Resume.ResolvedURL != tt.url {
				t.Errorf("url %q, want %q", c.Resume.ResolvedURL, tt.url)
			}
			if c.Resume.Lease != 3*time.Second || c.Resume.Retain != 10*time.Minute || c.Resume.MaxAnswerBytes != 4<<20 {
				t.Errorf("defaults: %+v", c.Resume)
			}
		})
	}
}

// TestCORSValidation: credentials with any origin, or with "*" headers,
// and malformed methods are invalid config.
func TestCORSValidation(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"credentials with any origin", `cors: {allowed_origins: ["*"], allow_credentials: true}`, "cors.allow_credentials"},
		{"credentials with any header", `cors: {allowed_origins: ["https://a.example"], allowed_headers: ["*"], allow_credentials: true}`, "cors.allowed_headers"},
		{"lower-case method", `cors: {allowed_origins: ["https://a.example"], allowed_methods: [put]}`, "cors.allowed_methods"},
		{"negative max age", `cors: {allowed_origins: ["https://a.example"], max_age: -1s}`, "cors.max_age"},
		{"header name with a space", `cors: {allowed_origins: ["https://a.example"], allowed_headers: ["bad header"]}`, "cors.allowed_headers"},
		{"empty header name", `cors: {allowed_origins: ["https://a.example"], allowed_headers: [""]}`, "cors.allowed_headers"},
		{"wildcard inside a header name", `cors: {allowed_origins: ["https://a.example"], allowed_headers: ["x-*-id"]}`, "cors.allowed_headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%s) = %v, want an error naming %s", tc.yaml, err, tc.want)
			}
		})
	}
	cfg, err := Parse("t.yaml", []byte("providers: {sim: {type: sim}}\nmodels: {chat: {deployments: [{provider: sim, model: small}]}}\ncors: {allowed_origins: [\"https://a.example\"], allow_credentials: true, max_age: 1h, allowed_methods: [GET, PUT], allowed_headers: [x-stainless-*, X-Custom]}"), func(string) string { return "" })
	if err != nil {
		t.Fatalf("a valid policy: %v", err)
	}
	if !cfg.CORS.AllowCredentials || cfg.CORS.MaxAge != time.Hour {
		t.Errorf("a valid policy: %+v", cfg.CORS)
	}
}
