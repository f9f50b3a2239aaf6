package deploytest

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/metrics"
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

// helmTemplate runs helm template with the values files and --set pairs
// and returns its output, or helm's error output.
func helmTemplate(t *testing.T, valueFiles []string, sets ...string) ([]byte, string, error) {
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
	return stdout.Bytes(), "", nil
}

// render runs helm template and returns its objects by kind, or helm's
// error output.
func render(t *testing.T, valueFiles []string, sets ...string) (map[string][]manifest, string, error) {
	t.Helper()
	out, stderr, err := helmTemplate(t, valueFiles, sets...)
	if err != nil {
		return nil, stderr, err
	}
	byKind := map[string][]manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
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

// service is the Service of the given component: "" for the one the
// Ingress routes, "metrics" for /metrics.
func service(t *testing.T, objs map[string][]manifest, component string) manifest {
	t.Helper()
	var found []manifest
	for _, s := range objs["Service"] {
		if c, _ := s.get("metadata", "labels", "app.kubernetes.io/component").(string); c == component {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("rendered %d Services of component %q, want 1", len(found), component)
	}
	return found[0]
}

// workload is the one Deployment or StatefulSet the chart runs the pods
// with.
func workload(t *testing.T, objs map[string][]manifest) manifest {
	t.Helper()
	if n := len(objs["Deployment"]) + len(objs["StatefulSet"]); n != 1 {
		t.Fatalf("rendered %d Deployments and %d StatefulSets, want one of them", len(objs["Deployment"]), len(objs["StatefulSet"]))
	}
	if len(objs["StatefulSet"]) == 1 {
		return objs["StatefulSet"][0]
	}
	return objs["Deployment"][0]
}

// podSpec and container are the workload's pod spec and its container.
func podSpec(t *testing.T, objs map[string][]manifest) manifest {
	t.Helper()
	return manifest(workload(t, objs).get("spec", "template", "spec").(map[string]any))
}

func container(t *testing.T, objs map[string][]manifest) manifest {
	t.Helper()
	return manifest(podSpec(t, objs).get("containers", "[0]").(map[string]any))
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
			spec, c := podSpec(t, objs), container(t, objs)
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
	c := container(t, objs)
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
	objs = mustRender(t, fleetValues, "secrets=null", "existingSecret=firstword-prod")
	if len(objs["Secret"]) != 0 {
		t.Errorf("existingSecret: rendered %d Secrets, want none", len(objs["Secret"]))
	}
	c = container(t, objs)
	if got := c.get("envFrom", "[0]", "secretRef", "name"); got != "firstword-prod" {
		t.Errorf("existingSecret: envFrom = %v, want firstword-prod", c.get("envFrom"))
	}
}

// TestHelmFleetObjects: the fleet's values give an HPA on the workload
// (which then leaves replicas to it), a PDB, and an Ingress with the SSE
// annotations for ingress-nginx beside the user's own.
func TestHelmFleetObjects(t *testing.T) {
	objs := mustRender(t, fleetValues)
	w := workload(t, objs)
	if r := w.get("spec", "replicas"); r != nil {
		t.Errorf("%v replicas = %v with the HPA on, want none (the HPA owns it)", w["kind"], r)
	}
	hpa := one(t, objs, "HorizontalPodAutoscaler")
	if hpa.get("spec", "scaleTargetRef", "name") != w.get("metadata", "name") || hpa.get("spec", "scaleTargetRef", "kind") != w["kind"] ||
		toInt(hpa.get("spec", "minReplicas")) != 3 || toInt(hpa.get("spec", "maxReplicas")) != 12 {
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
	if got := ing.get("spec", "rules", "[0]", "http", "paths", "[0]", "backend", "service", "name"); got != service(t, objs, "").get("metadata", "name") {
		t.Errorf("Ingress backend = %v, want the Service", got)
	}
	// The config's heartbeat is well inside the read timeout.
	if hb := renderedConfig(t, objs).Heartbeat; hb <= 0 || 300*time.Second < 3*hb {
		t.Errorf("heartbeat %v vs proxy-read-timeout 300s", hb)
	}

	// Defaults: one replica, no HPA, no Ingress, and no PDB: with one
	// replica a budget either blocks every drain or allows everything.
	// No Secret either: the chart makes no admin key (TestHelmAdminKey).
	objs = mustRender(t, nil)
	if n := len(objs["HorizontalPodAutoscaler"]) + len(objs["Ingress"]) + len(objs["PodDisruptionBudget"]) + len(objs["Secret"]); n != 0 {
		t.Errorf("defaults rendered HPA %d, Ingress %d, PDB %d, Secret %d; want none", len(objs["HorizontalPodAutoscaler"]), len(objs["Ingress"]), len(objs["PodDisruptionBudget"]), len(objs["Secret"]))
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
	if r := toInt(workload(t, objs).get("spec", "replicas")); r != 1 {
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
		{"metrics on the http port", nil, []string{"metrics.port=8080"}, "metrics.port (8080) must differ from port"},
		{"metrics.listen in the config", nil, []string{"config.metrics.listen=0.0.0.0:9000"}, "config.metrics.listen is set by the chart (metrics.port)"},
		{"ServiceMonitor without metrics", nil, []string{"config.metrics.enabled=false", "metrics.serviceMonitor.enabled=true"}, "need /metrics: config.metrics.enabled is false"},
		{"PrometheusRule without metrics", nil, []string{"config.metrics.enabled=false", "metrics.prometheusRule.enabled=true"}, "need /metrics: config.metrics.enabled is false"},
		{"a generated admin key", nil, []string{"adminKey.generate=true"}, "adminKey.generate is gone: the key it made changed on every helm template"},
		{"spill file off the claim", fleetValues, []string{"config.usage.spill_path=/tmp/usage.spill"}, "config.usage.spill_path /tmp/usage.spill is outside /data"},
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
	if g := toInt(podSpec(t, objs).get("terminationGracePeriodSeconds")); g != 120 {
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

// TestHelmMetricsNotRouted: /metrics is served on a port of its own (the
// rendered config's metrics.listen, the container port named metrics)
// behind a ClusterIP Service of its own, whatever service.type is; the
// Ingress routes only the main Service's http port, and that Service has
// no port to the metrics one. TestHelmConfigServes checks that the binary
// then answers 404 at /metrics on the http port.
func TestHelmMetricsNotRouted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
		port  int
	}{
		{"defaults with an Ingress", nil, []string{"ingress.enabled=true"}, 9090},
		{"fleet", fleetValues, nil, 9090},
		{"fleet on a load balancer, another port", fleetValues, []string{"service.type=LoadBalancer", "metrics.port=9100"}, 9100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.files, tc.sets...)
			cfg := renderedConfig(t, objs)
			if _, p, err := net.SplitHostPort(cfg.Metrics.Listen); err != nil || p != strconv.Itoa(tc.port) {
				t.Errorf("config metrics.listen = %q, want port %d", cfg.Metrics.Listen, tc.port)
			}
			ports := map[string]int{}
			for _, p := range container(t, objs).get("ports").([]any) {
				p := manifest(p.(map[string]any))
				ports[fmt.Sprint(p.get("name"))] = toInt(p.get("containerPort"))
			}
			if ports["metrics"] != tc.port || ports["http"] == tc.port {
				t.Errorf("container ports %v, want metrics on %d apart from http", ports, tc.port)
			}
			ms := service(t, objs, "metrics")
			if ms.get("spec", "type") != "ClusterIP" || len(ms.get("spec", "ports").([]any)) != 1 || ms.get("spec", "ports", "[0]", "targetPort") != "metrics" {
				t.Errorf("metrics Service spec %v, want ClusterIP with one port to metrics", ms.get("spec"))
			}
			main := service(t, objs, "")
			for _, p := range main.get("spec", "ports").([]any) {
				if tp := p.(map[string]any)["targetPort"]; tp != "http" {
					t.Errorf("the routed Service has a port to %v, want http only", tp)
				}
			}
			ing := one(t, objs, "Ingress")
			for _, r := range ing.get("spec", "rules").([]any) {
				for _, p := range manifest(r.(map[string]any)).get("http", "paths").([]any) {
					b := manifest(p.(map[string]any))
					if b.get("backend", "service", "name") != main.get("metadata", "name") || b.get("backend", "service", "port", "name") != "http" {
						t.Errorf("Ingress path %v routes to %v, want the main Service's http port", b.get("path"), b.get("backend"))
					}
				}
			}
		})
	}
	// Metrics off: no port, no Service, no listener.
	objs := mustRender(t, nil, "config.metrics.enabled=false")
	if l := renderedConfig(t, objs).Metrics.Listen; l != "" {
		t.Errorf("metrics off: metrics.listen %q", l)
	}
	if ports := container(t, objs).get("ports").([]any); len(ports) != 1 || len(objs["Service"]) != 1 {
		t.Errorf("metrics off: container ports %v, %d Services; want http alone and one Service", ports, len(objs["Service"]))
	}
}

// TestHelmMonitoring: the ServiceMonitor and the PrometheusRule are off by
// default. On, the ServiceMonitor picks the metrics Service alone and
// scrapes its metrics port, and the rules are the alerts docs/operations.md
// suggests for usage rows, each an expression promQL accepts, on a metric
// the binary exports, selecting the ServiceMonitor's job (the metrics
// Service's name) in the release's namespace.
func TestHelmMonitoring(t *testing.T) {
	objs := mustRender(t, fleetValues)
	if n := len(objs["ServiceMonitor"]) + len(objs["PrometheusRule"]); n != 0 {
		t.Errorf("defaults rendered %d ServiceMonitors and PrometheusRules, want none", n)
	}
	objs = mustRender(t, fleetValues, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom",
		"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prom")
	sm := one(t, objs, "ServiceMonitor")
	metricsSvc, mainSvc := service(t, objs, "metrics"), service(t, objs, "")
	picks := func(svc manifest) bool {
		sel, _ := sm.get("spec", "selector", "matchLabels").(map[string]any)
		for k, v := range sel {
			if svc.get("metadata", "labels", k) != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !picks(metricsSvc) || picks(mainSvc) {
		t.Errorf("ServiceMonitor selector %v: picks the metrics Service %v, the main one %v; want the metrics one alone", sm.get("spec", "selector"), picks(metricsSvc), picks(mainSvc))
	}
	if sm.get("spec", "endpoints", "[0]", "port") != "metrics" || sm.get("spec", "endpoints", "[0]", "path") != "/metrics" ||
		sm.get("spec", "namespaceSelector", "matchNames", "[0]") != "chat" || sm.get("metadata", "labels", "release") != "prom" {
		t.Errorf("ServiceMonitor = %v", sm)
	}

	exported := binaryMetrics(t)
	rules := map[string]manifest{}
	pr := one(t, objs, "PrometheusRule")
	if pr.get("metadata", "labels", "release") != "prom" {
		t.Errorf("PrometheusRule labels %v, want release: prom", pr.get("metadata", "labels"))
	}
	for _, g := range pr.get("spec", "groups").([]any) {
		for _, r := range manifest(g.(map[string]any)).get("rules").([]any) {
			r := manifest(r.(map[string]any))
			rules[fmt.Sprint(r.get("alert"))] = r
		}
	}
	job := fmt.Sprintf("job=%q", metricsSvc.get("metadata", "name"))
	want := []struct{ alert, metric, wait, severity string }{
		{"FirstwordUsageRowsDropped", "firstword_usage_rows_dropped_total", "", "critical"},
		{"FirstwordUsageRowsQueued", "firstword_usage_rows_queued", "5m", "warning"},
		{"FirstwordUsageSpillNotReplayed", "firstword_usage_spill_rows", "10m", "warning"},
		{"FirstwordUsageWriteErrors", "firstword_usage_write_errors_total", "", "warning"},
	}
	if len(rules) != len(want) {
		t.Errorf("rendered alerts %v, want %d", slices.Sorted(maps.Keys(rules)), len(want))
	}
	for _, w := range want {
		r, ok := rules[w.alert]
		if !ok {
			t.Errorf("no alert %s", w.alert)
			continue
		}
		expr, _ := r.get("expr").(string)
		names, problem := promQL(expr)
		if problem != "" || !slices.Equal(names, []string{w.metric}) || !exported[w.metric] {
			t.Errorf("%s: expr %q: problem %q, metrics %v; want %s, which the binary exports (%v)", w.alert, expr, problem, names, w.metric, exported[w.metric])
		}
		if !strings.Contains(expr, job) || !strings.Contains(expr, `namespace="chat"`) {
			t.Errorf("%s: expr %q does not select %s in namespace chat", w.alert, expr, job)
		}
		if wait, _ := r.get("for").(string); wait != w.wait || r.get("labels", "severity") != w.severity || r.get("annotations", "summary") == nil {
			t.Errorf("%s: for %q, labels %v, annotations %v; want for %q, severity %s and a summary", w.alert, wait, r.get("labels"), r.get("annotations"), w.wait, w.severity)
		}
	}
	// Scraped some other way, the alerts select what they are told.
	objs = mustRender(t, fleetValues, "metrics.prometheusRule.enabled=true", `metrics.prometheusRule.selector=job="kubernetes-pods"`)
	for _, r := range ruleExprs(t, objs) {
		if _, problem := promQL(r); problem != "" || !strings.Contains(r, `{job="kubernetes-pods"}`) {
			t.Errorf("selector override: expr %q (%s)", r, problem)
		}
	}

	// promQL catches what it is there to catch.
	for _, tc := range []struct{ expr, problem string }{
		{`rate(firstword_x_total{job="a"}[5m]) > 0`, ""},
		{`rate(firstword_x_total{job="a"}[5m] > 0`, "unbalanced"},
		{`firstword_x{job=a} > 0`, "label matchers"},
		{`firstword_x{job="a"} > `, "comparison"},
		{`rat(firstword_x_total[5m]) > 0`, "unknown function rat"},
		{`rate(firstword_x_total[5 m]) > 0`, "range"},
	} {
		if _, problem := promQL(tc.expr); (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
			t.Errorf("promQL(%q) = %q, want %q", tc.expr, problem, tc.problem)
		}
	}
}

// TestHelmAdminKey: the chart makes no admin key, so what it renders is
// the same on every run, byte for byte (helm template, as Argo CD and Flux
// run it, has no cluster to look a generated key up in). The key, if any,
// comes from the Secret the pods read: secrets.FIRSTWORD_ADMIN_KEY, or
// existingSecret.
func TestHelmAdminKey(t *testing.T) {
	const key = "fw_adminkey_0123456789abcdefghijklmnop"
	for _, tc := range []struct {
		name   string
		files  []string
		sets   []string
		secret string // the Secret the pods read, "" for none
		key    string // its FIRSTWORD_ADMIN_KEY when the chart renders it
	}{
		{"defaults", nil, nil, "", ""},
		{"secrets", nil, []string{"secrets.FIRSTWORD_ADMIN_KEY=" + key}, "fw-firstword", key},
		{"fleet", fleetValues, nil, "fw-firstword", "fw_SENTINEL_adminkey-SENTINEL-adminkey"},
		{"existingSecret", fleetValues, []string{"secrets=null", "existingSecret=firstword-prod"}, "firstword-prod", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, stderr, err := helmTemplate(t, tc.files, tc.sets...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, stderr)
			}
			second, _, _ := helmTemplate(t, tc.files, tc.sets...)
			if !bytes.Equal(first, second) {
				t.Errorf("two helm template runs differ")
			}
			objs := mustRender(t, tc.files, tc.sets...)
			c := container(t, objs)
			if got, _ := c.get("envFrom", "[0]", "secretRef", "name").(string); got != tc.secret {
				t.Errorf("envFrom Secret %q, want %q", got, tc.secret)
			}
			if env := c.get("env"); env != nil {
				t.Errorf("env %v, want none (the admin key comes with the Secret)", env)
			}
			if tc.key != "" && podEnv(t, objs)["FIRSTWORD_ADMIN_KEY"] != tc.key {
				t.Errorf("the pods' FIRSTWORD_ADMIN_KEY = %q, want %q", podEnv(t, objs)["FIRSTWORD_ADMIN_KEY"], tc.key)
			}
			if n := len(objs["Secret"]); (tc.key == "") != (n == 0) {
				t.Errorf("rendered %d Secrets", n)
			}
		})
	}
}

// TestHelmSpillVolume: with more than one replica each pod's /data, where
// its usage spill file is (spill_path's default is the working directory,
// /data), is a claim of its own from the StatefulSet's volumeClaimTemplate:
// it outlives the pod, and the pod that replaces one has its name and so
// its claim. With one replica, or spillClaim off, the pods are a
// Deployment with /data an emptyDir or existingClaim.
func TestHelmSpillVolume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
		kind  string
		data  string // the pods' /data volume: emptyDir, a claim's name, or "template"
		size  string
		class any
	}{
		{"one replica", nil, nil, "Deployment", "emptyDir", "", nil},
		{"one replica on a claim", nil, []string{"persistence.existingClaim=fw-data"}, "Deployment", "fw-data", "", nil},
		{"autoscaled fleet", fleetValues, nil, "StatefulSet", "template", "1Gi", nil},
		{"two fixed replicas", fleetValues, []string{"autoscaling.enabled=false", "replicaCount=2"}, "StatefulSet", "template", "1Gi", nil},
		{"fleet, a class and a size", fleetValues, []string{"persistence.spillClaim.storageClassName=fast-ssd", "persistence.spillClaim.size=5Gi"}, "StatefulSet", "template", "5Gi", "fast-ssd"},
		{"fleet, spill under /data", fleetValues, []string{"config.usage.spill_path=/data/usage.spill"}, "StatefulSet", "template", "1Gi", nil},
		{"fleet, spillClaim off", fleetValues, []string{"persistence.spillClaim.enabled=false"}, "Deployment", "emptyDir", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.files, tc.sets...)
			w := workload(t, objs)
			if w["kind"] != tc.kind {
				t.Fatalf("workload %v, want %s", w["kind"], tc.kind)
			}
			mounted := false
			for _, m := range container(t, objs).get("volumeMounts").([]any) {
				m := m.(map[string]any)
				mounted = mounted || (m["name"] == "data" && m["mountPath"] == "/data")
			}
			var vol manifest
			for _, v := range podSpec(t, objs).get("volumes").([]any) {
				if v := manifest(v.(map[string]any)); v.get("name") == "data" {
					vol = v
				}
			}
			switch tc.data {
			case "emptyDir":
				mounted = mounted && vol != nil && vol.get("emptyDir") != nil
			case "template":
				vct := manifest(w.get("spec", "volumeClaimTemplates", "[0]").(map[string]any))
				mounted = mounted && vol == nil && vct.get("metadata", "name") == "data"
				if vct.get("spec", "resources", "requests", "storage") != tc.size || vct.get("spec", "storageClassName") != tc.class || vct.get("spec", "accessModes", "[0]") != "ReadWriteOnce" {
					t.Errorf("volumeClaimTemplate spec %v, want %s of class %v, ReadWriteOnce", vct.get("spec"), tc.size, tc.class)
				}
				if w.get("spec", "podManagementPolicy") != "Parallel" || w.get("spec", "serviceName") != service(t, objs, "").get("metadata", "name") {
					t.Errorf("StatefulSet podManagementPolicy %v, serviceName %v", w.get("spec", "podManagementPolicy"), w.get("spec", "serviceName"))
				}
				if p := renderedConfig(t, objs).Usage.SpillPath; filepath.IsAbs(p) && !strings.HasPrefix(p, "/data/") {
					t.Errorf("spill_path %q is off the claim", p)
				}
			default:
				mounted = mounted && vol != nil && vol.get("persistentVolumeClaim", "claimName") == tc.data
			}
			if !mounted {
				t.Errorf("/data is not %s: volume %v", tc.data, vol)
			}
		})
	}
}

// TestHelmTopologySpread: by default the pods spread over zones and over
// nodes without ever blocking scheduling (ScheduleAnyway), each constraint
// selecting this release's pods; a constraint's own labelSelector is kept,
// and [] turns spreading off.
func TestHelmTopologySpread(t *testing.T) {
	own := filepath.Join(t.TempDir(), "spread.yaml")
	if err := os.WriteFile(own, []byte("topologySpreadConstraints:\n  - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {tier: chat}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files []string
		sets  []string
		want  []string // topologyKey/whenUnsatisfiable
		own   bool     // the labelSelector is the values', not the release's
	}{
		{"defaults", nil, nil, []string{"topology.kubernetes.io/zone/ScheduleAnyway", "kubernetes.io/hostname/ScheduleAnyway"}, false},
		{"fleet", fleetValues, nil, []string{"topology.kubernetes.io/zone/ScheduleAnyway", "kubernetes.io/hostname/ScheduleAnyway"}, false},
		{"own constraint", []string{own}, nil, []string{"kubernetes.io/hostname/DoNotSchedule"}, true},
		{"off", nil, []string{"topologySpreadConstraints=null"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := mustRender(t, tc.files, tc.sets...)
			spec := podSpec(t, objs)
			podLabels := workload(t, objs).get("spec", "template", "metadata", "labels").(map[string]any)
			list, _ := spec.get("topologySpreadConstraints").([]any)
			var got []string
			for _, c := range list {
				c := manifest(c.(map[string]any))
				got = append(got, fmt.Sprintf("%v/%v", c.get("topologyKey"), c.get("whenUnsatisfiable")))
				sel, _ := c.get("labelSelector", "matchLabels").(map[string]any)
				if tc.own {
					if sel["tier"] != "chat" || len(sel) != 1 {
						t.Errorf("labelSelector %v, want the values' own", sel)
					}
					continue
				}
				if len(sel) != 2 || sel["app.kubernetes.io/instance"] != "fw" {
					t.Errorf("labelSelector %v, want the release's selector labels", sel)
				}
				for k, v := range sel {
					if podLabels[k] != v {
						t.Errorf("labelSelector %s=%v does not select the pods (%v)", k, v, podLabels)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("constraints %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHelmAutoscalingOpenStreams: the HPA scales on CPU and, with
// autoscaling.openStreams on, on open streams per pod too: a Pods metric
// (from the custom metrics API) on firstword_open_streams, which the
// binary exports, at an average value per pod.
func TestHelmAutoscalingOpenStreams(t *testing.T) {
	exported := binaryMetrics(t)
	for _, tc := range []struct {
		name  string
		sets  []string
		pods  []string
		value string
	}{
		{"CPU alone", nil, nil, ""},
		{"open streams", []string{"autoscaling.openStreams.enabled=true"}, []string{"firstword_open_streams"}, "100"},
		{"open streams, 250 a pod", []string{"autoscaling.openStreams.enabled=true", "autoscaling.openStreams.averageValue=250"}, []string{"firstword_open_streams"}, "250"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hpa := one(t, mustRender(t, fleetValues, tc.sets...), "HorizontalPodAutoscaler")
			if hpa.get("spec", "metrics", "[0]", "resource", "name") != "cpu" || toInt(hpa.get("spec", "metrics", "[0]", "resource", "target", "averageUtilization")) != 70 {
				t.Errorf("first metric %v, want CPU at 70%%", hpa.get("spec", "metrics", "[0]"))
			}
			if got := hpaPodsMetrics(hpa); !slices.Equal(got, tc.pods) {
				t.Errorf("Pods metrics %v, want %v", got, tc.pods)
			}
			for _, name := range tc.pods {
				if !exported[name] {
					t.Errorf("%s is not a metric the binary exports", name)
				}
				if target := manifest(hpa.get("spec", "metrics", "[1]", "pods", "target").(map[string]any)); target.get("type") != "AverageValue" || target.get("averageValue") != tc.value {
					t.Errorf("Pods target %v, want AverageValue %s", target, tc.value)
				}
			}
		})
	}
}

// ruleExprs are the rendered PrometheusRule's expressions.
func ruleExprs(t *testing.T, objs map[string][]manifest) []string {
	t.Helper()
	var out []string
	for _, g := range one(t, objs, "PrometheusRule").get("spec", "groups").([]any) {
		for _, r := range manifest(g.(map[string]any)).get("rules").([]any) {
			out = append(out, fmt.Sprint(r.(map[string]any)["expr"]))
		}
	}
	return out
}

// ruleMetrics are the metrics the rendered PrometheusRule reads.
func ruleMetrics(t *testing.T, objs map[string][]manifest) []string {
	t.Helper()
	var out []string
	for _, e := range ruleExprs(t, objs) {
		names, problem := promQL(e)
		if problem != "" {
			t.Errorf("rule %q: %s", e, problem)
		}
		out = append(out, names...)
	}
	return out
}

// hpaPodsMetrics are the names of the HPA's Pods metrics.
func hpaPodsMetrics(hpa manifest) []string {
	var out []string
	for _, m := range hpa.get("spec", "metrics").([]any) {
		if m := manifest(m.(map[string]any)); m.get("type") == "Pods" {
			out = append(out, fmt.Sprint(m.get("pods", "metric", "name")))
		}
	}
	return out
}

// binaryMetrics are the metric names the binary's metrics package
// exports, with the usage writer's and an open stream's series present.
func binaryMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New(nil)
	m.ObserveUsage(func() metering.UsageStats { return metering.UsageStats{} })
	m.Open("chat")()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return exposedNames(rec.Body.Bytes())
}

// exposedNames are the metric families of a Prometheus text exposition.
func exposedNames(text []byte) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllSubmatch(text, -1) {
		names[string(m[1])] = true
	}
	return names
}

var (
	promFuncs    = map[string]bool{"rate": true, "increase": true, "sum": true, "max": true, "min": true, "avg": true, "histogram_quantile": true}
	promKeywords = map[string]bool{"by": true, "without": true, "and": true, "or": true, "unless": true, "on": true, "ignoring": true, "bool": true, "offset": true}
	promIdent    = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promMatcher  = `[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"`
	promMatchers = regexp.MustCompile(`^\s*(?:` + promMatcher + `(?:\s*,\s*` + promMatcher + `)*)?\s*,?\s*$`)
	promRange    = regexp.MustCompile(`^\[[0-9]+[smhdw]\]`)
	promCompare  = regexp.MustCompile(`\s(?:>|<|>=|<=|==|!=)\s*[0-9]+(?:\.[0-9]+)?$`)
)

// promQL reads the PromQL subset alert expressions here use: selectors
// with label matchers and ranges, functions and aggregations, ending in a
// comparison with a number. It returns the metric names expr reads, or
// what it could not read.
func promQL(expr string) (names []string, problem string) {
	if !promCompare.MatchString(expr) {
		return nil, "no comparison with a number at the end"
	}
	depth := 0
	for i := 0; i < len(expr); {
		rest := expr[i:]
		switch c := rest[0]; {
		case c == '(':
			depth++
			i++
		case c == ')':
			if depth--; depth < 0 {
				return nil, "unbalanced parentheses"
			}
			i++
		case c == '{':
			end, quoted := -1, false
			for j := 1; j < len(rest) && end < 0; j++ {
				switch {
				case quoted && rest[j] == '\\':
					j++
				case rest[j] == '"':
					quoted = !quoted
				case !quoted && rest[j] == '}':
					end = j
				}
			}
			if end < 0 || !promMatchers.MatchString(rest[1:end]) {
				return nil, fmt.Sprintf("bad label matchers at %q", rest)
			}
			i += end + 1
		case c == '[':
			r := promRange.FindString(rest)
			if r == "" {
				return nil, fmt.Sprintf("bad range at %q", rest)
			}
			i += len(r)
		case promIdent.MatchString(rest):
			id := promIdent.FindString(rest)
			i += len(id)
			next := strings.TrimLeft(expr[i:], " ")
			switch {
			case promKeywords[id]:
			case strings.HasPrefix(next, "("):
				if !promFuncs[id] {
					return nil, "unknown function " + id
				}
			default:
				names = append(names, id)
			}
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, "unbalanced parentheses"
	}
	return names, ""
}
