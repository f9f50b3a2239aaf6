package deploytest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePort returns a TCP port nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitStatus polls url until it answers want or ctx ends.
func waitStatus(ctx context.Context, t *testing.T, url string, want int) {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s never answered %d; last: %s", url, want, last)
}

// TestHelmConfigServes runs the real binary as the chart's pod would: the
// rendered firstword.yaml as its config, in /data's stand-in as its
// working directory, and as its only environment the Secret the pods read
// (secrets.FIRSTWORD_ADMIN_KEY, no key created by hand). It starts, on
// 0.0.0.0, and is not open: only the key is let in. The probes' paths
// answer on the chart's port; /metrics answers 404 there and is served on
// the metrics port, with every metric the PrometheusRule's alerts and the
// HPA's open-streams metric name. On SIGTERM readiness turns 503
// (shutdown_delay) before the process exits 0.
func TestHelmConfigServes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestHelmConfigServes builds and runs the binary")
	}
	port, metricsPort := freePort(t), freePort(t)
	objs := mustRender(t, nil, "port="+strconv.Itoa(port), "metrics.port="+strconv.Itoa(metricsPort),
		"secrets.FIRSTWORD_ADMIN_KEY=fw_helmtest_0123456789abcdefghijklmnopqrstuv",
		"metrics.prometheusRule.enabled=true")
	// Autoscaling needs the fleet's store: its HPA is rendered apart.
	hpa := one(t, mustRender(t, fleetValues, "autoscaling.openStreams.enabled=true"), "HorizontalPodAutoscaler")
	text, _ := one(t, objs, "ConfigMap").get("data", "firstword.yaml").(string)
	data := t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "firstword.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "firstword")
	build := exec.Command("go", "build", "-o", bin, "./cmd/firstword")
	build.Dir = root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := podEnv(t, objs)
	key := env["FIRSTWORD_ADMIN_KEY"]
	serve := exec.Command(bin, "serve", "--config", cfgPath)
	serve.Dir = data
	for k, v := range env {
		serve.Env = append(serve.Env, k+"="+v)
	}
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	serve.Stdout, serve.Stderr = logFile, logFile
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	waited := false
	defer func() {
		if !waited {
			serve.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("serve's log:\n%s", b)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitStatus(ctx, t, base+"/readyz", http.StatusOK)
	waitStatus(ctx, t, base+"/healthz", http.StatusOK)
	if _, err := os.Stat(filepath.Join(data, "firstword.db")); err != nil {
		t.Errorf("the store is not in the working directory (/data in the pod): %v", err)
	}
	// Not open to anyone: a request without the key is refused, the
	// Secret's key answers, and it is an admin key.
	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/v1/conversations", "", http.StatusUnauthorized},
		{"/v1/conversations", key, http.StatusOK},
		{"/admin/health", "", http.StatusUnauthorized},
		{"/admin/health", key, http.StatusOK},
		// What the Ingress routes (the http port) has no /metrics.
		{"/metrics", "", http.StatusNotFound},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+tc.path, nil)
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with key %v: %d, want %d", tc.path, tc.key != "", resp.StatusCode, tc.want)
		}
	}
	// One stream, so that the open-streams gauge has a series.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi [sim ttft=5ms gap=1ms tokens=5]"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a streamed completion: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exposition, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics port: %d", resp.StatusCode)
	}
	served := exposedNames(exposition)
	wanted := append(ruleMetrics(t, objs), hpaPodsMetrics(hpa)...)
	if len(wanted) < 5 {
		t.Fatalf("the rules and the HPA name %v, want the four usage metrics and open streams", wanted)
	}
	for _, name := range wanted {
		if !served[name] {
			t.Errorf("the chart's alerts or HPA read %s, which the binary's /metrics does not serve", name)
		}
	}
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitStatus(ctx, t, base+"/readyz", http.StatusServiceUnavailable)
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit 0", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not exit after SIGTERM")
	}
}

// podEnv is the environment the rendered pods get from the Secret their
// envFrom names (which must be rendered too).
func podEnv(t *testing.T, objs map[string][]manifest) map[string]string {
	t.Helper()
	name := container(t, objs).get("envFrom", "[0]", "secretRef", "name")
	for _, s := range objs["Secret"] {
		if s.get("metadata", "name") != name {
			continue
		}
		env := map[string]string{}
		data, _ := s.get("data").(map[string]any)
		for k, v := range data {
			b, err := base64.StdEncoding.DecodeString(fmt.Sprint(v))
			if err != nil {
				t.Fatalf("Secret %v: %s: %v", name, k, err)
			}
			env[k] = string(b)
		}
		return env
	}
	t.Fatalf("the pods read the Secret %v, which is not rendered", name)
	return nil
}
