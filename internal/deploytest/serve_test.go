package deploytest

import (
	"context"
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
// working directory, after the API key NOTES.txt tells the operator to
// create. The probes' paths answer on the chart's port, and on SIGTERM
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
	keys := exec.Command(bin, "keys", "create", "--config", cfgPath, "--tenant", "ops", "--admin")
	keys.Dir = data
	if out, err := keys.CombinedOutput(); err != nil {
		t.Fatalf("firstword keys create: %v\n%s", err, out)
	}
	serve := exec.Command(bin, "serve", "--config", cfgPath)
	serve.Dir = data
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
