package webui_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// TestUseChatExample runs the example app of examples/usechat (a Vite +
// React page with the AI SDK's useChat) in Chromium against an in-process
// firstword: its production build (dist/, `npm run build`) is served by a
// server that proxies /v1 to the gateway, as the example's dev server does.
// A message typed into the page streams in (the answer grows on screen
// over several renders) and ends equal to the answer firstword stored; a
// reload shows the stored chat; the Stop button stops a long answer, stored
// cancelled at once. It skips when the example is not built (.ci/run builds it) or, as every
// browser test, without Chromium.
func TestUseChatExample(t *testing.T) {
	dist := filepath.Join("..", "..", "examples", "usechat", "dist")
	if _, err := os.Stat(filepath.Join(dist, "index.html")); err != nil {
		t.Skip("skipped: the example app is not built; run `npm ci --prefix examples/usechat && npm run build --prefix examples/usechat` (.ci/run does)")
	}
	gw := gatewaytest.StartYAML(t, `
heartbeat: 200ms
providers:
  sim: {type: sim}
models:
  chat:
    deployments: [{provider: sim, model: small}]
`, "")
	target, err := url.Parse(gw.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The dev server's proxy: /v1 to firstword with the page's Host left
	// as it is (the gateway sees a same-origin request), the rest the app.
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	mux := http.NewServeMux()
	mux.Handle("/v1/", proxy)
	mux.Handle("/", http.FileServer(http.Dir(dist)))
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)

	ctx := webuitest.Browser(t)
	const msg = "Hello from the example. [sim ttft=5ms gap=20ms tokens=30]"
	// Record the answer's length after every change of the page, to see
	// it grow.
	const sampler = `window.lengths = [];
new MutationObserver(() => {
  const a = document.querySelector('[data-role=assistant] .text');
  const n = a ? a.textContent.length : 0;
  if (window.lengths[window.lengths.length - 1] !== n) window.lengths.push(n);
}).observe(document.body, {subtree: true, childList: true, characterData: true}); true`
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/?chat=example-test"), chromedp.WaitVisible(chromedp.CSS("#send"))); err != nil {
		t.Fatal(err)
	}
	webuitest.Eval[bool](t, ctx, sampler)
	if err := chromedp.Do(ctx, webuitest.Type("#input", msg), chromedp.Click(chromedp.CSS("#send"))); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.querySelector('main').dataset.status === 'ready' && !!document.querySelector('[data-role=assistant][data-conversation]')`, 30*time.Second)
	webuitest.Screenshot(t, ctx, "usechat-example.png")

	user := webuitest.Eval[string](t, ctx, `document.querySelector('[data-role=user] .text').textContent`)
	text := webuitest.Eval[string](t, ctx, `document.querySelector('[data-role=assistant] .text').textContent`)
	id := webuitest.Eval[string](t, ctx, `document.querySelector('[data-role=assistant]').dataset.id`)
	conv := webuitest.Eval[string](t, ctx, `document.querySelector('[data-role=assistant]').dataset.conversation`)
	lengths := webuitest.Eval[[]int](t, ctx, `window.lengths`)
	errText := webuitest.Eval[string](t, ctx, `document.querySelector('.error')?.textContent ?? ''`)
	t.Logf("answer %s in %s: %q; lengths seen %v", id, conv, text, lengths)
	if errText != "" {
		t.Errorf("the page shows an error: %s", errText)
	}
	if user != msg {
		t.Errorf("the user's message shows as %q, want %q", user, msg)
	}
	// Streamed: the page showed the answer part-written at least twice
	// before it showed all of it.
	partial := 0
	for _, n := range lengths {
		if n > 0 && n < lengths[len(lengths)-1] {
			partial++
		}
	}
	if text == "" || partial < 2 {
		t.Errorf("the answer %q showed with lengths %v; want it to grow over several renders", text, lengths)
	}

	code, stored := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+conv, "")
	msgs, _ := stored["messages"].([]any)
	if code != 200 || len(msgs) != 2 {
		t.Fatalf("GET /v1/conversations/%s: %d %v; want one stored turn", conv, code, stored)
	}
	answer := msgs[1].(map[string]any)
	if answer["id"] != id || answer["content"] != text || answer["status"] != "complete" {
		t.Errorf("stored answer %v; want %s, complete, with the text the page shows, %q", answer, id, text)
	}

	// A reload shows the stored chat (GET /v1/ui/chat/{id}/messages).
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/?chat=example-test"), chromedp.WaitVisible(chromedp.CSS("#send"))); err != nil {
		t.Fatal(err)
	}
	if got := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll('.message')].map(m => m.dataset.id + ' ' + m.textContent).join('\n')`); !strings.Contains(got, id+" firstword"+text) {
		t.Errorf("after a reload the page shows %q; want the stored answer %s %q", got, id, text)
	}

	// Stop: a long answer, stopped once it shows, is stored cancelled at
	// once (the stop route), not after the grace window (15 s).
	if err := chromedp.Do(ctx, webuitest.Type("#input", "More, please. [sim ttft=5ms gap=20ms tokens=2000]"), chromedp.Click(chromedp.CSS("#send"))); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.querySelectorAll('[data-role=assistant] .text').length === 2 && document.querySelectorAll('[data-role=assistant] .text')[1].textContent.length > 0 && !!document.querySelector('#stop')`, 30*time.Second)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#stop"))); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.querySelector('main').dataset.status === 'ready' && !!document.querySelector('#send')`, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, stored = gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+conv, "")
		msgs, _ = stored["messages"].([]any)
		if len(msgs) == 4 && msgs[3].(map[string]any)["status"] == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after Stop the conversation is %v; want the second answer stored cancelled", stored)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
