package deploytest

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/config"
)

// helm returns the helm binary named by FIRSTWORD_HELM (.ci/run builds it
// from its Go module) or skips the test.
func helm(t *testing.T) string {
	t.Helper()
	h := os.Getenv("FIRSTWORD_HELM")
	if h == "" {
		t.Skip("FIRSTWORD_HELM is not set: the chart tests need helm (.ci/run builds it: go install helm.sh/helm/v3/cmd/helm@v3.22.0)")
	}
	return h
}

func chart(t *testing.T) string { return filepath.Join(root(t), "deploy/helm/firstword") }

// manifest is one rendered Kubernetes object.
type manifest map[string]any

// get walks m along path: map keys, or "[N]" for a list element.
func (m manifest) get(path ...string) any {
	var cur any = map[string]any(m)
	for _, p := range path {
		switch v := cur.(type) {
		case map[string]any:
			cur = v[p]
		case []any:
			var i int
			if _, err := fmt.Sscanf(p, "[%d]", &i); err != nil || i >= len(v) {
				return nil
			}
			cur = v[i]
		default:
			return nil
		}
	}
	return cur
}

// kubeVersion is the cluster helm template renders for: the oldest the
// chart accepts (helm's own default is older).
const kubeVersion = "1.30.0"

// render runs helm template with the values files and --set pairs and
// returns its objects by kind, or helm's error output.
func render(t *testing.T, valueFiles []string, sets ...string) (map[string][]manifest, string, error) {
	t.Helper()
	args := []string{"template", "fw", chart(t), "--namespace", "chat", "--kube-version", kubeVersion}
	for _, f := range valueFiles {
		args = append(args, "-f", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, stderr.String(), err
	}
	byKind := map[string][]manifest{}
	dec := yaml.NewDecoder(&stdout)
	for {
		// Into a plain map: yaml gives nested maps the target's type.
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if m == nil {
			continue
		}
		kind, _ := m["kind"].(string)
		byKind[kind] = append(byKind[kind], manifest(m))
	}
	return byKind, "", nil
}

func mustRender(t *testing.T, valueFiles []string, sets ...string) map[string][]manifest {
	t.Helper()
	objs, stderr, err := render(t, valueFiles, sets...)
	if err != nil {
		t.Fatalf("helm template %v %v: %v\n%s", valueFiles, sets, err, stderr)
	}
	return objs
}

func one(t *testing.T, objs map[string][]manifest, kind string) manifest {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("rendered %d %s objects, want 1", len(objs[kind]), kind)
	}
	return objs[kind][0]
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	return -1
}

// renderedConfig parses the ConfigMap's firstword.yaml the way serve
// does, with the Secret's values as the environment: the chart's config
// must be one firstword accepts, and every variable it names must be in
// the Secret.
func renderedConfig(t *testing.T, objs map[string][]manifest) *config.Config {
	t.Helper()
	env := map[string]string{}
	for _, s := range objs["Secret"] {
		data, _ := s["data"].(map[string]any)
		for k, v := range data {
			b, err := base64.StdEncoding.DecodeString(fmt.Sprint(v))
			if err != nil {
				t.Fatalf("Secret %s: %v", k, err)
			}
			env[k] = string(b)
		}
	}
	text, _ := one(t, objs, "ConfigMap").get("data", "firstword.yaml").(string)
	cfg, err := config.Parse("firstword.yaml", []byte(text), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the rendered firstword.yaml does not load: %v\n%s", err, text)
	}
	return cfg
}

var fleetValues = []string{"testdata/fleet-values.yaml"}

// TestHelmLint: helm lint --strict passes with the default values and the
// fleet's.
func TestHelmLint(t *testing.T) {
	h := helm(t)
	for _, args := range [][]string{{}, {"-f", fleetValues[0]}} {
		out, err := exec.Command(h, append([]string{"lint", "--strict", chart(t)}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", args, err, out)
		}
	}
}

// TestHelmDeployment: the pods are probed on /readyz and /healthz, sleep
// in preStop, get a grace period above preStop + shutdown_delay +
// shutdown_timeout (read back from the rendered config), and run non-root
// on a read-only root filesystem without capabilities.
func TestHelmDeployment(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  []string
		sets   []string
		sleep  int
		margin int
	}{
		{"defaults", nil, nil, 10, 10},
		{"fleet", fleetValues, nil, 10, 10},
		{"no preStop, long timeout", nil, []string{"shutdown.preStopSleepSeconds=0", "shutdown.timeoutSeconds=300", "shutdown.marginSeconds=5"}, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.files, tc.sets...)
			cfg := renderedConfig(t, objs)
			if cfg.Listen != "0.0.0.0:8080" {
				t.Errorf("config listen = %q, want 0.0.0.0:8080 (the container port)", cfg.Listen)
			}
			d := one(t, objs, "Deployment")
			spec := manifest(d.get("spec", "template", "spec").(map[string]any))
			c := manifest(spec.get("containers", "[0]").(map[string]any))
			if got := c.get("ports", "[0]", "containerPort"); toInt(got) != 8080 || c.get("ports", "[0]", "name") != "http" {
				t.Errorf("container port = %v, want 8080 named http", c.get("ports"))
			}
			for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
				if got := c.get(probe, "httpGet", "path"); got != path {
					t.Errorf("%s path = %v, want %s", probe, got, path)
				}
				if got := c.get(probe, "httpGet", "port"); got != "http" {
					t.Errorf("%s port = %v, want http", probe, got)
				}
			}
			grace := time.Duration(toInt(spec.get("terminationGracePeriodSeconds"))) * time.Second
			sleep := time.Duration(toInt(c.get("lifecycle", "preStop", "sleep", "seconds"))) * time.Second
			if tc.sleep == 0 {
				if c.get("lifecycle") != nil {
					t.Errorf("lifecycle = %v, want none with preStopSleepSeconds 0", c.get("lifecycle"))
				}
				sleep = 0
			} else if sleep != time.Duration(tc.sleep)*time.Second {
				t.Errorf("preStop sleep = %v, want %ds", c.get("lifecycle"), tc.sleep)
			}
			need := sleep + cfg.ShutdownDelay + cfg.ShutdownTimeout
			if grace != need+time.Duration(tc.margin)*time.Second {
				t.Errorf("terminationGracePeriodSeconds = %v; want preStop %v + shutdown_delay %v + shutdown_timeout %v + margin %ds", grace, sleep, cfg.ShutdownDelay, cfg.ShutdownTimeout, tc.margin)
			}
			if c.get("securityContext", "readOnlyRootFilesystem") != true || c.get("securityContext", "allowPrivilegeEscalation") != false {
				t.Errorf("container securityContext = %v", c.get("securityContext"))
			}
			if caps, _ := c.get("securityContext", "capabilities", "drop").([]any); len(caps) != 1 || caps[0] != "ALL" {
				t.Errorf("capabilities drop = %v, want [ALL]", caps)
			}
			if spec.get("securityContext", "runAsNonRoot") != true || toInt(spec.get("securityContext", "runAsUser")) != 65532 {
				t.Errorf("pod securityContext = %v, want runAsNonRoot and uid 65532 (the image's)", spec.get("securityContext"))
			}
			// Writable paths are volumes: /data (the working directory
			// and the SQLite store) and /tmp.
			mounts := map[string]bool{}
			for _, m := range c.get("volumeMounts").([]any) {
				mounts[fmt.Sprint(m.(map[string]any)["mountPath"])] = true
			}
			if !mounts["/data"] || !mounts["/tmp"] || !mounts["/etc/firstword"] {
				t.Errorf("volume mounts %v, want /data, /tmp and /etc/firstword", mounts)
			}
			if args, _ := c.get("args").([]any); len(args) != 2 || args[0] != "--config" || args[1] != "/etc/firstword/firstword.yaml" {
				t.Errorf("args = %v, want --config /etc/firstword/firstword.yaml", args)
			}
		})
	}
}

// TestHelmSecretsNeverInConfigMaps: each secret value in the fleet's
// values reaches the pods through the Secret only: no rendered ConfigMap
// holds it, raw or base64-encoded, and the pods read the Secret.
func TestHelmSecretsNeverInConfigMaps(t *testing.T) {
	values, err := os.ReadFile(fleetValues[0])
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Secrets map[string]string `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Secrets) < 4 {
		t.Fatalf("%s has %d secrets, want the four sentinels", fleetValues[0], len(v.Secrets))
	}
	objs := mustRender(t, fleetValues)
	secret := one(t, objs, "Secret")
	for name, value := range v.Secrets {
		enc := base64.StdEncoding.EncodeToString([]byte(value))
		if secret.get("data", name) != enc {
			t.Errorf("Secret data %s = %v, want the value base64-encoded", name, secret.get("data", name))
		}
		for _, cm := range objs["ConfigMap"] {
			b, _ := yaml.Marshal(cm)
			if bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte(enc)) || bytes.Contains(b, []byte("SENTINEL")) {
				t.Errorf("ConfigMap %v holds secret %s:\n%s", cm.get("metadata", "name"), name, b)
			}
		}
	}
	c := manifest(one(t, objs, "Deployment").get("spec", "template", "spec", "containers", "[0]").(map[string]any))
	if got := c.get("envFrom", "[0]", "secretRef", "name"); got != secret.get("metadata", "name") {
		t.Errorf("envFrom = %v, want the Secret %v", c.get("envFrom"), secret.get("metadata", "name"))
	}
	// The config loads with the Secret as its environment: every
	// variable it names is there.
	cfg := renderedConfig(t, objs)
	if cfg.Store.ResolvedURL != v.Secrets["FIRSTWORD_DATABASE_URL"] || cfg.Providers["openai"].APIKey != v.Secrets["OPENAI_API_KEY"] {
		t.Errorf("config resolved store URL %q, OpenAI key %q from the Secret", cfg.Store.ResolvedURL, cfg.Providers["openai"].APIKey)
	}

	// With existingSecret the chart makes no Secret and the pods read
	// the one named.
	objs = mustRender(t, fleetValues, "secrets=null", "existingSecret=firstword-prod", "adminKey.generate=false")
	if len(objs["Secret"]) != 0 {
		t.Errorf("existingSecret: rendered %d Secrets, want none", len(objs["Secret"]))
	}
	c = manifest(one(t, objs, "Deployment").get("spec", "template", "spec", "containers", "[0]").(map[string]any))
	if got := c.get("envFrom", "[0]", "secretRef", "name"); got != "firstword-prod" {
		t.Errorf("existingSecret: envFrom = %v, want firstword-prod", c.get("envFrom"))
	}
}

// TestHelmFleetObjects: the fleet's values give an HPA on the Deployment
// (which then leaves replicas to it), a PDB, and an Ingress with the SSE
// annotations for ingress-nginx beside the user's own.
func TestHelmFleetObjects(t *testing.T) {
	objs := mustRender(t, fleetValues)
	name := one(t, objs, "Deployment").get("metadata", "name")
	if r := one(t, objs, "Deployment").get("spec", "replicas"); r != nil {
		t.Errorf("Deployment replicas = %v with the HPA on, want none (the HPA owns it)", r)
	}
	hpa := one(t, objs, "HorizontalPodAutoscaler")
	if hpa.get("spec", "scaleTargetRef", "name") != name || toInt(hpa.get("spec", "minReplicas")) != 3 || toInt(hpa.get("spec", "maxReplicas")) != 12 {
		t.Errorf("HPA spec = %v", hpa.get("spec"))
	}
	pdb := one(t, objs, "PodDisruptionBudget")
	if toInt(pdb.get("spec", "maxUnavailable")) != 1 || pdb.get("spec", "selector", "matchLabels", "app.kubernetes.io/instance") != "fw" {
		t.Errorf("PDB spec = %v", pdb.get("spec"))
	}
	ing := one(t, objs, "Ingress")
	want := map[string]string{
		"nginx.ingress.kubernetes.io/proxy-buffering":    "off",
		"nginx.ingress.kubernetes.io/proxy-http-version": "1.1",
		"nginx.ingress.kubernetes.io/proxy-read-timeout": "300",
		"nginx.ingress.kubernetes.io/proxy-send-timeout": "300",
		"cert-manager.io/cluster-issuer":                 "letsencrypt",
	}
	for k, v := range want {
		if got := ing.get("metadata", "annotations", k); got != v {
			t.Errorf("Ingress annotation %s = %v, want %q", k, got, v)
		}
	}
	if got := ing.get("spec", "rules", "[0]", "http", "paths", "[0]", "backend", "service", "name"); got != one(t, objs, "Service").get("metadata", "name") {
		t.Errorf("Ingress backend = %v, want the Service", got)
	}
	// The config's heartbeat is well inside the read timeout.
	if hb := renderedConfig(t, objs).Heartbeat; hb <= 0 || 300*time.Second < 3*hb {
		t.Errorf("heartbeat %v vs proxy-read-timeout 300s", hb)
	}

	// Defaults: one replica, no HPA, no Ingress, and no PDB: with one
	// replica a budget either blocks every drain or allows everything.
	// The one Secret is the generated admin key (TestHelmConfigServes).
	objs = mustRender(t, nil)
	if n := len(objs["HorizontalPodAutoscaler"]) + len(objs["Ingress"]) + len(objs["PodDisruptionBudget"]); n != 0 {
		t.Errorf("defaults rendered HPA %d, Ingress %d, PDB %d; want none", len(objs["HorizontalPodAutoscaler"]), len(objs["Ingress"]), len(objs["PodDisruptionBudget"]))
	}
	if s := one(t, objs, "Secret"); s.get("metadata", "name") != "fw-firstword-admin-key" {
		t.Errorf("default Secret %v, want fw-firstword-admin-key", s.get("metadata", "name"))
	}
	for _, sets := range [][]string{{"podDisruptionBudget.minAvailable=1"}, {"persistence.existingClaim=fw-data"}} {
		if pdbs := mustRender(t, nil, sets...)["PodDisruptionBudget"]; len(pdbs) != 0 {
			t.Errorf("one replica with %v: rendered a PDB %v", sets, pdbs)
		}
	}
	// Two fixed replicas (on PostgreSQL and Redis) get one.
	objs = mustRender(t, fleetValues, "autoscaling.enabled=false", "replicaCount=2")
	if toInt(one(t, objs, "PodDisruptionBudget").get("spec", "maxUnavailable")) != 1 {
		t.Errorf("PDB with 2 replicas = %v", objs["PodDisruptionBudget"])
	}
	objs = mustRender(t, nil)
	if r := toInt(one(t, objs, "Deployment").get("spec", "replicas")); r != 1 {
		t.Errorf("default replicas = %d, want 1", r)
	}
	objs = mustRender(t, nil, "podDisruptionBudget.enabled=false", "ingress.enabled=true", "ingress.sse=false")
	if len(objs["PodDisruptionBudget"]) != 0 {
		t.Errorf("podDisruptionBudget.enabled=false rendered a PDB")
	}
	if a := one(t, objs, "Ingress").get("metadata", "annotations", "nginx.ingress.kubernetes.io/proxy-buffering"); a != nil {
		t.Errorf("ingress.sse=false: proxy-buffering annotation %v", a)
	}
}

// TestHelmRefuses: settings that cannot work fail rendering with a
// message that says what to change.
func TestHelmRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
		want  string
	}{
		{"replicas on sqlite", nil, []string{"replicaCount=3"}, "needs config.store.driver postgres (it is sqlite)"},
		{"autoscaling on sqlite", nil, []string{"autoscaling.enabled=true"}, "needs config.store.driver postgres"},
		{"replicas with a memory journal", fleetValues, []string{"config.resume.journal=memory"}, "needs config.resume.journal redis (it is memory)"},
		{"replicas without a journal setting", fleetValues, []string{"config.resume=null", "autoscaling.enabled=false"}, "needs config.resume.journal redis (it is memory)"},
		{"store URL in the config", nil, []string{"config.store.url=postgres://u:pw@db/x"}, "config.store.url would put a connection URL"},
		{"redis URL in the config", fleetValues, []string{"config.cache.url=redis://:pw@r:6379/0"}, "config.cache.url would put a connection URL"},
		{"listen in the config", nil, []string{"config.listen=0.0.0.0:9000"}, "config.listen is set by the chart"},
		{"short grace override", nil, []string{"shutdown.terminationGracePeriodSeconds=30"}, "must be above preStopSleepSeconds + delaySeconds + timeoutSeconds (45)"},
		{"secrets and existingSecret", fleetValues, []string{"existingSecret=x"}, "set secrets or existingSecret, not both"},
		{"shutdown timeout with a unit", nil, []string{"shutdown.timeoutSeconds=30s"}, `shutdown.timeoutSeconds must be a whole number of seconds, like 30 (it is "30s")`},
		{"shutdown delay with a unit", nil, []string{"shutdown.delaySeconds=2m"}, `shutdown.delaySeconds must be a whole number of seconds, like 30 (it is "2m")`},
		{"shutdown sleep as a fraction", nil, []string{"shutdown.preStopSleepSeconds=1.5"}, `shutdown.preStopSleepSeconds must be a whole number of seconds`},
		{"grace period with a unit", nil, []string{"shutdown.terminationGracePeriodSeconds=90s"}, `shutdown.terminationGracePeriodSeconds must be a whole number of seconds`},
		{"negative margin", nil, []string{"shutdown.marginSeconds=-5"}, "shutdown.marginSeconds must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := render(t, tc.files, tc.sets...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template --set %v: err %v, stderr %q; want a failure saying %q", tc.sets, err, stderr, tc.want)
			}
		})
	}
	// Whole seconds from --set (integers) and from a values file (YAML
	// numbers) become durations with one unit.
	objs := mustRender(t, nil, "shutdown.timeoutSeconds=45", "shutdown.delaySeconds=3")
	if cfg := renderedConfig(t, objs); cfg.ShutdownTimeout != 45*time.Second || cfg.ShutdownDelay != 3*time.Second {
		t.Errorf("shutdown_timeout %v, shutdown_delay %v; want 45s, 3s", cfg.ShutdownTimeout, cfg.ShutdownDelay)
	}
	// A grace override above the sum is taken as given.
	objs = mustRender(t, nil, "shutdown.terminationGracePeriodSeconds=120")
	if g := toInt(one(t, objs, "Deployment").get("spec", "template", "spec", "terminationGracePeriodSeconds")); g != 120 {
		t.Errorf("terminationGracePeriodSeconds = %d with the override 120", g)
	}
}

// TestHelmClaimRecreates: on a claim (one SQLite file, ReadWriteOnce) the
// old pod goes before the new one starts; on an emptyDir the rollout
// surges, a new pod ready before an old one drains.
func TestHelmClaimRecreates(t *testing.T) {
	strategy := func(objs map[string][]manifest) manifest {
		s, _ := one(t, objs, "Deployment").get("spec", "strategy").(map[string]any)
		return manifest(s)
	}
	s := strategy(mustRender(t, nil, "persistence.existingClaim=fw-data"))
	if s.get("type") != "Recreate" || s.get("rollingUpdate") != nil {
		t.Errorf("existingClaim: strategy %v, want Recreate", s)
	}
	s = strategy(mustRender(t, nil))
	if s.get("type") != "RollingUpdate" || toInt(s.get("rollingUpdate", "maxSurge")) != 1 || toInt(s.get("rollingUpdate", "maxUnavailable")) != 0 {
		t.Errorf("emptyDir: strategy %v, want RollingUpdate maxSurge 1 maxUnavailable 0", s)
	}
}

// TestHelmIngressBodySize: ingress-nginx takes bodies up to the config's
// max_request_bytes (its own default, 1m, is below firstword's 4 MiB);
// the user's annotation wins.
func TestHelmIngressBodySize(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{nil, "4m"},
		{[]string{"config.max_request_bytes=16777216"}, "16m"},
		{[]string{"config.max_request_bytes=10240"}, "10k"},
		{[]string{"config.max_request_bytes=5000"}, "5000"},
		{[]string{"ingress.sse=false"}, "4m"},
		{[]string{`ingress.annotations.nginx\.ingress\.kubernetes\.io/proxy-body-size=20m`}, "20m"},
	} {
		objs := mustRender(t, nil, append([]string{"ingress.enabled=true"}, tc.sets...)...)
		if got := one(t, objs, "Ingress").get("metadata", "annotations", "nginx.ingress.kubernetes.io/proxy-body-size"); got != tc.want {
			t.Errorf("%v: proxy-body-size %v, want %q", tc.sets, got, tc.want)
		}
	}
}

// TestHelmKubeVersion: the preStop sleep action needs Kubernetes 1.30, so
// the chart refuses older clusters.
func TestHelmKubeVersion(t *testing.T) {
	cmd := exec.Command(helm(t), "template", "fw", chart(t), "--kube-version", "1.29.9")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "chart requires kubeVersion: >=1.30.0-0") {
		t.Errorf("helm template --kube-version 1.29.9: err %v, output %s; want the kubeVersion refusal", err, out)
	}
}

// TestHelmRefusesLiteralSecrets: a secret written into config would land
// in the ConfigMap, so the chart refuses it, naming the setting but not
// echoing the value; the forms that read the environment render.
func TestHelmRefusesLiteralSecrets(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"config.providers.sim.api_key=SENTINEL-key", "config.providers.sim.api_key would put the key in a ConfigMap: set api_key_env"},
		{"config.providers.sim.base_url=https://user:SENTINEL-pw@llm.example/v1", "config.providers.sim.base_url has user info"},
		{"config.providers.sim.base_url=https://SENTINEL-token@llm.example/v1", "config.providers.sim.base_url has user info"},
		{"config.providers.sim.base_url=https://llm.example/v1?key=SENTINEL-key", "config.providers.sim.base_url has a query string"},
		{"config.providers.sim.headers.X-Api-Key=SENTINEL-key", "config.providers.sim.headers.X-Api-Key is written out"},
		{"config.providers.sim.headers.Authorization=Bearer SENTINEL-token", "config.providers.sim.headers.Authorization is written out"},
		{"config.guard.http.url=https://guard.example/check?token=SENTINEL-token", "config.guard.http.url has a query string"},
		{"config.guard.http.url=https://u:SENTINEL-pw@guard.example/check", "config.guard.http.url has user info"},
		{"config.guard.http.headers.Authorization=SENTINEL-token", "config.guard.http.headers.Authorization is written out"},
		{"config.sources.lookups[0].url=https://crm.example/u/{{user}}?apikey=SENTINEL-key", "config.sources.lookups[0].url has a query string"},
		{"config.sources.lookups[0].headers.X-Key=SENTINEL-key", "config.sources.lookups[0].headers.X-Key is written out"},
		{"config.tracing.endpoint=https://u:SENTINEL-pw@otel.example:4318", "config.tracing.endpoint has user info"},
		{"config.tracing.headers.X-Honeycomb-Team=SENTINEL-key", "config.tracing.headers.X-Honeycomb-Team is written out"},
	} {
		_, stderr, err := render(t, nil, tc.set)
		if err == nil || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "SENTINEL") {
			t.Errorf("--set %s: err %v, stderr %q; want a failure saying %q without the value", tc.set, err, stderr, tc.want)
		}
	}
	// References and placeholders are not secrets.
	objs := mustRender(t, nil,
		"config.providers.sim.base_url=https://llm.example/v1",
		"config.providers.sim.headers.Authorization=Bearer ${LLM_TOKEN}",
		"config.guard.http.url=https://guard.example/check",
		"config.guard.http.headers.Authorization=${GUARD_TOKEN}",
		"config.sources.lookups[0].name=crm",
		"config.sources.lookups[0].url=https://crm.example/u/{{user}}?q={{question}}",
		"config.sources.lookups[0].headers.X-Key=${CRM_KEY}",
		"config.tracing.headers.X-Honeycomb-Team=${OTEL_KEY}",
	)
	text, _ := one(t, objs, "ConfigMap").get("data", "firstword.yaml").(string)
	for _, want := range []string{"Bearer ${LLM_TOKEN}", "${GUARD_TOKEN}", "${CRM_KEY}", "${OTEL_KEY}", "{{user}}?q={{question}}"} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, text)
		}
	}
}
