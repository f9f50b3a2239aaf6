package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/cli"
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
