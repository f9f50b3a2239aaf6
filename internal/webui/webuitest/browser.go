// Package webuitest drives the pages in headless Chromium (Debian's
// chromium package) with chromedp, for the browser tests of the web UI.
package webuitest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// ChromePath is Debian's Chromium.
const ChromePath = "/usr/bin/chromium"

// Browser starts headless Chromium and returns a chromedp context for one
// tab, with a 60 s budget. Without Chromium the test is skipped, unless
// FIRSTWORD_TEST_BROWSER is set (as CI does), where it fails. BrowserWith
// takes extra Chromium options.
func Browser(t *testing.T) context.Context {
	t.Helper()
	return BrowserWith(t)
}

// ArtifactDir is where screenshots go: $FIRSTWORD_ARTIFACTS/screenshots,
// or artifacts/screenshots at the repository root.
func ArtifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FIRSTWORD_ARTIFACTS")
	if dir == "" {
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(string(trim(root)), "artifacts")
	}
	dir = filepath.Join(dir, "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Screenshot saves a full-page PNG as name in the artifact directory.
func Screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(ArtifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// WaitFor polls a JavaScript expression until it is truthy.
func WaitFor(t *testing.T, ctx context.Context, expr string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// Type focuses the element sel and types text into it as one input
// event (what a paste or an IME commit sends). chromedp's SendKeys reads
// the element's attributes without the lock its DOM events take, which
// the race detector reports when the page changes an attribute meanwhile
// (React does, on every render).
func Type(sel, text string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(sel)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
			return err
		}),
	)
}
