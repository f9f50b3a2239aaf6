package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/cli"
	"github.com/firstword/firstword/internal/config"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// serve runs a gateway from YAML text on a loopback socket.
func serve(t *testing.T, yamlText string) (*cli.App, string) {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yamlText), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := cli.Build(context.Background(), cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		<-done
		app.Close()
	})
	return app, "http://" + ln.Addr().String()
}

// chatTurn runs one /v1/chat turn to completion.
func chatTurn(t *testing.T, url, message string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"message": message})
	resp, err := http.Post(url+"/v1/chat", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

const simConfig = `
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
`

// TestBudgetPage: /budget shows each stage's percentiles against its
// target and recent requests as waterfalls, and updates live.
func TestBudgetPage(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	for i := range 4 {
		chatTurn(t, url, fmt.Sprintf("question %d [sim ttft=80ms gap=3ms tokens=20]", i))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/budget")); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.loaded === "1"`, 10*time.Second)
	summary := webuitest.Eval[string](t, ctx, `document.getElementById("summary").textContent`)
	stageRows := webuitest.Eval[int](t, ctx, `document.querySelectorAll("#stages tbody tr").length`)
	waterfalls := webuitest.Eval[int](t, ctx, `document.querySelectorAll("#waterfall .req").length`)
	segments := webuitest.Eval[int](t, ctx, `document.querySelectorAll("#waterfall .seg").length`)
	if !strings.HasPrefix(summary, "4 requests") || stageRows < 6 || waterfalls != 4 || segments < 4*5 {
		t.Errorf("summary %q, %d stage rows, %d waterfalls, %d segments", summary, stageRows, waterfalls, segments)
	}
	ttft := webuitest.Eval[string](t, ctx, `document.querySelector('#stages tr[data-stage="ttft"] td:nth-child(2)').textContent`)
	if !strings.HasSuffix(ttft, "ms") {
		resp, _ := http.Get(url + "/v1/budget")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Errorf("ttft p50 cell %q; report %s", ttft, b)
	}
	webuitest.Screenshot(t, ctx, "budget-desktop.png")

	// It updates live: one more request appears within a few seconds.
	chatTurn(t, url, "one more [sim ttft=10ms gap=1ms tokens=5]")
	webuitest.WaitFor(t, ctx, `document.getElementById("summary").textContent.startsWith("5 requests")`, 10*time.Second)
}
