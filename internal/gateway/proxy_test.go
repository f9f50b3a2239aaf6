package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// startNginx runs nginx with its default buffering (proxy_buffering on,
// HTTP/1.0 to the upstream) in front of upstream, and returns its URL.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		t.Skip("skipped: nginx is not installed (apt-get install -y nginx-light; .ci/run installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	server {
		listen %[2]s;
		location / { proxy_pass %[3]s; }
	}
}
`, dir, addr, upstream)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not start: %s %s", out.String(), b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr
}

// TestBehindBufferingNginx puts nginx with its default buffering between
// client and gateway: events still arrive one by one with the upstream's
// gaps (X-Accel-Buffering: no turns nginx's buffering off for the stream),
// heartbeats keep a long first token alive, and a client that leaves
// through nginx still cancels the upstream.
func TestBehindBufferingNginx(t *testing.T) {
	gw := gatewaytest.StartYAML(t, `
heartbeat: 150ms
providers:
  sim: {type: sim}
models:
  fast:
    deployments: [{provider: sim, model: small}]
`, "")
	proxy := startNginx(t, gw.URL)

	post := func(ctx context.Context, msg string) *http.Response {
		t.Helper()
		body := `{"model":"fast","stream":true,"messages":[{"role":"user","content":"` + msg + `"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", proxy+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp
	}

	t.Run("events keep their gaps", func(t *testing.T) {
		start := time.Now()
		resp := post(context.Background(), "Go. [sim ttft=600ms gap=80ms tokens=8]")
		defer resp.Body.Close()
		var pings int
		var arrivals []time.Duration
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				if len(arrivals) == 0 {
					pings++
				}
			case strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`):
				arrivals = append(arrivals, time.Since(start))
			}
		}
		if len(arrivals) != 8 {
			t.Fatalf("%d content events, want 8", len(arrivals))
		}
		if pings == 0 {
			t.Error("no heartbeat reached the client through nginx during the 600 ms first token")
		}
		for i := 1; i < len(arrivals); i++ {
			if gap := arrivals[i] - arrivals[i-1]; gap < 40*time.Millisecond {
				t.Errorf("event %d arrived %v after the previous one; the upstream's gap is 80 ms (bunched by the proxy?)", i, gap)
			}
		}
		t.Logf("first word after %v, heartbeats before it: %d, arrivals %v", arrivals[0], pings, arrivals)
	})

	t.Run("a client leaving cancels the upstream", func(t *testing.T) {
		before := gw.Sim("sim").Stats().Cancelled
		ctx, cancel := context.WithCancel(context.Background())
		resp := post(ctx, "Go. [sim ttft=50ms gap=50ms tokens=200]")
		br := bufio.NewReader(resp.Body)
		for seen := 0; seen < 3; {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, `"content":"`) {
				seen++
			}
		}
		cancel()
		resp.Body.Close()
		deadline := time.Now().Add(3 * time.Second)
		for gw.Sim("sim").Stats().Cancelled == before {
			if time.Now().After(deadline) {
				t.Fatalf("sim stats %+v: the upstream was not cancelled after the client left through nginx", gw.Sim("sim").Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
