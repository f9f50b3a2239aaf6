package cli_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

func TestServeBadConfigExits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("providers:\n  p:\n    type: openai\nmodels:\n  m:\n    deployments: [{provider: p, model: x}]\n"), 0o600)
	var stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"serve", "--config", path}, os.Getenv, nil, &bytes.Buffer{}, &stderr)
	if code == 0 {
		t.Fatal("serve with a bad config exited 0")
	}
	if msg := stderr.String(); !strings.Contains(msg, "line 2") || !strings.Contains(msg, "providers.p.base_url") {
		t.Errorf("stderr = %q, want the field and its line", msg)
	}
}

func TestUnknownCommand(t *testing.T) {
	var stderr bytes.Buffer
	if code := cli.Main(context.Background(), []string{"frobnicate"}, os.Getenv, nil, &bytes.Buffer{}, &stderr); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
}

// TestServeLogsStore: serve's "listening" line names the store: with no
// config, the absolute path of firstword.db in the working directory.
func TestServeLogsStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var stderr gatewaytest.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, func(string) string { return "" }, nil, io.Discard, &stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"listening"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d: %s", code, stderr.String())
	}
	want := `"store_at":"SQLite file ` + filepath.Join(wd, "firstword.db") + `"`
	if line := logLine(stderr.String(), `"msg":"listening"`); !strings.Contains(line, want) {
		t.Errorf("the listening line %q lacks %s", line, want)
	}
}

func logLine(logs, substr string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}

// TestVersionOfBinary: a binary built with VCS stamping prints its module
// version and commit, as its build info records them.
func TestVersionOfBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: it builds the binary (make test and .ci/run run it)")
	}
	bin := filepath.Join(t.TempDir(), "firstword")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "github.com/firstword/firstword/cmd/firstword").CombinedOutput(); err != nil {
		t.Skipf("no VCS-stamped build here (not a git checkout, or no git): %v\n%s", err, out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("firstword --version: %v", err)
	}
	got := string(out)
	var rev string
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			rev = s.Value
		}
	}
	if rev == "" {
		t.Fatalf("-buildvcs=true recorded no vcs.revision: %v", bi.Settings)
	}
	for _, want := range []string{"firstword " + bi.Main.Version + " ", "(commit " + rev[:12], bi.GoVersion + ")\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("firstword --version = %q, lacks %q", got, want)
		}
	}
}
