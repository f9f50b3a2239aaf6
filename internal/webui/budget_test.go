package webui_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// serve runs a gateway from YAML text on a loopback socket.
func serve(t *testing.T, yamlText string) (*gatewaytest.Gateway, string) {
	t.Helper()
	cfg := gatewaytest.MustParse(t, yamlText)
	cfg.ShutdownTimeout = time.Second
	gw := gatewaytest.Start(t, cfg)
	return gw, gw.URL
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

	// It updates live: one more request appears within a few seconds.
	chatTurn(t, url, "one more [sim ttft=10ms gap=1ms tokens=5]")
	webuitest.WaitFor(t, ctx, `document.getElementById("summary").textContent.startsWith("5 requests")`, 10*time.Second)
}

// TestBudgetPageLayout: /budget fits a phone's width without sideways
// scrolling, shows every request's label whole at both widths, says what
// the share of TTFW means, and never shows a share over 100%.
func TestBudgetPageLayout(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	// Failures before the first word, a slow start, fast answers: stage
	// names and waterfalls of several kinds.
	for _, m := range []string{
		"a slow start [sim ttft=300ms gap=3ms tokens=20]",
		"a failure [sim fault=500]",
		"a broken stream [sim ttft=20ms gap=3ms tokens=20 fault=error_mid after=5]",
		"quick [sim ttft=20ms gap=1ms tokens=10]",
		"quick again [sim ttft=30ms gap=1ms tokens=10]",
	} {
		chatTurn(t, url, m)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/budget")); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.loaded === "1"`, 10*time.Second)
	if help := webuitest.Eval[string](t, ctx, `(document.getElementById("share-help") || {}).textContent || ""`); !strings.Contains(help, "first word") || !strings.Contains(help, "median") {
		t.Errorf("the page explains the share of TTFW as %q", help)
	}
	shares := webuitest.Eval[[]string](t, ctx, `[...document.querySelectorAll("#stages tbody td.share")].map(td => td.textContent)`)
	if len(shares) == 0 {
		t.Error("no share of TTFW cells")
	}
	for _, s := range shares {
		if v, err := strconv.Atoi(strings.TrimSuffix(s, "%")); err == nil && v > 100 {
			t.Errorf("a share of TTFW of %s", s)
		}
	}
	for _, size := range shotSizes {
		screenshot(t, ctx, "budget-"+size.name)
		var got struct {
			ScrollWidth, InnerWidth int
			Cut                     []string
		}
		raw := webuitest.Eval[string](t, ctx, `JSON.stringify({scrollWidth: document.scrollingElement.scrollWidth, innerWidth: innerWidth,
			cut: [...document.querySelectorAll("#waterfall .req .label")].filter(l => l.scrollWidth > l.clientWidth + 1 || l.scrollHeight > l.clientHeight + 1).map(l => l.textContent)})`)
		json.Unmarshal([]byte(raw), &got)
		if got.ScrollWidth > got.InnerWidth {
			t.Errorf("%s: the page is %d px wide in a %d px window", size.name, got.ScrollWidth, got.InnerWidth)
		}
		if len(got.Cut) > 0 {
			t.Errorf("%s: request labels cut off: %q", size.name, got.Cut)
		}
	}
}

// TestBudgetPageAdvice: once an alias has 20 requests, /budget shows the
// lever advisor's advice: its levers with their savings and the config
// that turns each on, and the two rankings.
func TestBudgetPageAdvice(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	for i := range 22 {
		chatTurn(t, url, fmt.Sprintf("question %d [sim ttft=5ms gap=1ms tokens=%d]", i, 5+20*(i%2)))
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/budget")); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `!!document.querySelector('#advice article[data-alias="chat"] tr[data-lever="ask_for_less"]')`, 10*time.Second)
	got := webuitest.Eval[string](t, ctx, `document.querySelector('#advice article[data-alias="chat"]').textContent`)
	for _, want := range []string{"chat · 22 requests", "Ask for less: cap answers at", "max_tokens:", "First for the whole answer: ask_for_less"} {
		if !strings.Contains(got, want) {
			t.Errorf("the advice panel lacks %q: %s", want, got)
		}
	}
}
