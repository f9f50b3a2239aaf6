package webuitest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BrowserWith is Browser with extra Chromium options, such as
// HostResolverRules. It skips or fails without Chromium as Browser does.
func BrowserWith(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path := ChromePath
	if _, err := os.Stat(path); err != nil {
		if p, err := exec.LookPath("chromium"); err == nil {
			path = p
		} else if os.Getenv("FIRSTWORD_TEST_BROWSER") != "" {
			t.Fatalf("FIRSTWORD_TEST_BROWSER is set but Chromium is not installed (apt-get install -y chromium)")
		} else {
			t.Skip("Chromium not installed: skipping the browser tests (apt-get install -y chromium; CI sets FIRSTWORD_TEST_BROWSER to require them)")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// HostResolverRules makes Chromium resolve each name to 127.0.0.1, so
// that a test can load loopback servers under other host names (a
// cross-site origin, a rebinding name) without touching DNS.
func HostResolverRules(names ...string) chromedp.ExecAllocatorOption {
	rules := make([]string, len(names))
	for i, n := range names {
		rules[i] = "MAP " + n + " 127.0.0.1"
	}
	return chromedp.Flag("host-resolver-rules", strings.Join(rules, ", "))
}
