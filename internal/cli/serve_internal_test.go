package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeBusyPort: serve on a port another process holds exits 1 with
// a sentence saying so, before it creates the store.
func TestServeBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "firstword.db")
	cfg := filepath.Join(dir, "firstword.yaml")
	if err := os.WriteFile(cfg, []byte("store: {path: "+db+"}\nproviders:\n  sim: {type: sim}\nmodels:\n  chat:\n    deployments: [{provider: sim, model: small}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := mainOut(t, nil, "serve", "--config", cfg, "--addr", busy.Addr().String())
	if code != 1 || out != "" || !strings.Contains(stderr, busy.Addr().String()+" is in use by another process") || !strings.Contains(stderr, "--addr") {
		t.Errorf("serve on a busy port: exit %d, stdout %q, stderr %q; want 1 and why", code, out, stderr)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the store %s was created (%v): the port must be checked first", db, err)
	}
}

// TestReadyLine: the line under the JSON log names the URL to open (a
// loopback one for an unspecified address) and the auth mode; it is
// printed only on a terminal.
func TestReadyLine(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		local bool
		want  []string
	}{
		{"127.0.0.1:8080", true, []string{"open http://127.0.0.1:8080/ for the chat page", "http://127.0.0.1:8080/v1", "local mode", "Ctrl-C"}},
		{"0.0.0.0:9000", false, []string{"open http://127.0.0.1:9000/", "API keys required"}},
		{"[::]:9000", false, []string{"open http://127.0.0.1:9000/"}},
		{"[::1]:9000", true, []string{"open http://[::1]:9000/"}},
	} {
		got := readyLine(tc.addr, tc.local)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("readyLine(%s, %v) = %q, want %q in it", tc.addr, tc.local, got, w)
			}
		}
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	if isTerminal(f) || isTerminal(devnull) || isTerminal(&strings.Builder{}) {
		t.Error("a file, /dev/null or a buffer is taken for a terminal")
	}
}
