package deploytest

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// working directory, the generated admin key from the rendered Secret as
// its FIRSTWORD_ADMIN_KEY and no key created by hand. It starts, on
// 0.0.0.0, and is not open: only the key is let in. The probes' paths answer on the chart's port, and on SIGTERM
// readiness turns 503 (shutdown_delay) before the process exits 0.
func TestHelmConfigServes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestHelmConfigServes builds and runs the binary")
	}
	port := freePort(t)
	objs := mustRender(t, nil, "port="+strconv.Itoa(port))
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
	// The pod's environment: the generated admin key from its Secret,
	// and nothing else (no key is created by hand).
	key := adminKey(t, objs)
	serve := exec.Command(bin, "serve", "--config", cfgPath)
	serve.Dir = data
	serve.Env = []string{"FIRSTWORD_ADMIN_KEY=" + key}
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
	// generated key answers, and it is an admin key.
	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/v1/conversations", "", http.StatusUnauthorized},
		{"/v1/conversations", key, http.StatusOK},
		{"/admin/health", "", http.StatusUnauthorized},
		{"/admin/health", key, http.StatusOK},
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

// adminKey is the FIRSTWORD_ADMIN_KEY the rendered Deployment reads from
// the rendered Secret it names.
func adminKey(t *testing.T, objs map[string][]manifest) string {
	t.Helper()
	c := manifest(one(t, objs, "Deployment").get("spec", "template", "spec", "containers", "[0]").(map[string]any))
	env, _ := c.get("env").([]any)
	for _, e := range env {
		e := manifest(e.(map[string]any))
		if e.get("name") != "FIRSTWORD_ADMIN_KEY" {
			continue
		}
		for _, s := range objs["Secret"] {
			if s.get("metadata", "name") == e.get("valueFrom", "secretKeyRef", "name") {
				enc, _ := s.get("data", e.get("valueFrom", "secretKeyRef", "key").(string)).(string)
				b, err := base64.StdEncoding.DecodeString(enc)
				if err != nil || len(b) == 0 {
					t.Fatalf("Secret %v: FIRSTWORD_ADMIN_KEY %q: %v", s.get("metadata", "name"), enc, err)
				}
				return string(b)
			}
		}
		t.Fatalf("FIRSTWORD_ADMIN_KEY names Secret %v, which is not rendered", e.get("valueFrom", "secretKeyRef", "name"))
	}
	t.Fatalf("the Deployment sets no FIRSTWORD_ADMIN_KEY: env %v", env)
	return ""
}
