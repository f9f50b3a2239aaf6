package webui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// corsPage is a page of another loopback origin that sends a /v1/chat
// turn to the gateway with fetch() (JSON and an Idempotency-Key: a
// preflighted request), reads the streamed answer, sends it again with
// the same key, and leaves what it read in window.result.
func corsPage(gw string) string {
	return fmt.Sprintf(`<!doctype html><meta charset="utf-8"><title>app</title><script>
async function send() {
  const resp = await fetch(%q + "/v1/chat", {method: "POST",
    headers: {"Content-Type": "application/json", "Idempotency-Key": "browser-1"},
    body: JSON.stringify({message: "Hello from another origin. [sim ttft=5ms gap=5ms tokens=30]"})});
  const reader = resp.body.getReader(), dec = new TextDecoder();
  let buf = "", text = "", deltas = 0, conv = "", last = "";
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    buf += dec.decode(value, {stream: true});
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i); buf = buf.slice(i + 2);
      let kind = "", data = "";
      for (const line of ev.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (kind === "delta") { text += JSON.parse(data).text; deltas++; }
      if (kind === "meta") conv = JSON.parse(data).conversation_id;
      if (kind) last = kind;
    }
  }
  return {status: resp.status, text, deltas, conv, last, requestId: resp.headers.get("X-Request-Id") || "",
    replayed: resp.headers.get("Idempotent-Replayed") || ""};
}
window.result = null;
(async () => {
  try {
    const first = await send(), again = await send();
    window.result = {first, again};
  } catch (e) {
    window.result = {error: String(e)};
  }
})();
</script>`, gw)
}

// TestCORSFetchStreams: in Chromium, a page on another loopback origin
// that cors.allowed_origins lists calls /v1/chat with fetch(): the
// preflight passes, the page reads the streamed answer as it comes, and
// the exposed headers (X-Request-Id, Idempotent-Replayed) are readable; a
// retry with the same Idempotency-Key reads the same answer, replayed.
// The same page on an origin not listed reads nothing.
func TestCORSFetchStreams(t *testing.T) {
	var gwURL string
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, corsPage(gwURL))
	}))
	t.Cleanup(page.Close)
	other := httptest.NewServer(page.Config.Handler)
	t.Cleanup(other.Close)
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, fmt.Sprintf(`
providers:
  sim: {type: sim}
models:
  chat: {deployments: [{provider: sim, model: small}]}
cors:
  allowed_origins: [%q]
`, page.URL)))
	gwURL = gw.URL
	ctx := webuitest.Browser(t)

	type sent struct {
		Status    int    `json:"status"`
		Text      string `json:"text"`
		Deltas    int    `json:"deltas"`
		Conv      string `json:"conv"`
		Last      string `json:"last"`
		RequestID string `json:"requestId"`
		Replayed  string `json:"replayed"`
	}
	var got struct {
		First sent   `json:"first"`
		Again sent   `json:"again"`
		Error string `json:"error"`
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(page.URL)); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, "window.result !== null", 30*time.Second)
	if err := json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, "JSON.stringify(window.result)")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != "" {
		t.Fatalf("the allowed page's fetch failed: %s", got.Error)
	}
	f, a := got.First, got.Again
	if f.Status != 200 || f.Last != "done" || f.Deltas < 2 || f.Text == "" || f.RequestID == "" || f.Replayed != "" {
		t.Errorf("first fetch: %+v", f)
	}
	if a.Status != 200 || a.Replayed != "true" || a.Text != f.Text || a.Conv != f.Conv || a.Last != "done" {
		t.Errorf("retry with the same key: %+v, want the first's answer %q replayed", a, f.Text)
	}
	_, conv := gatewaytest.GetJSON(t, gw.URL+"/v1/conversations/"+f.Conv, "")
	msgs, _ := conv["messages"].([]any)
	if len(msgs) != 2 || msgs[1].(map[string]any)["content"] != f.Text {
		t.Errorf("stored conversation %v, want one turn whose answer is the text the page read", conv)
	}

	// The same page from an origin not listed: the preflight is refused.
	got.Error = ""
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL)); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, "window.result !== null", 30*time.Second)
	if err := json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, "JSON.stringify(window.result)")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Error == "" {
		t.Errorf("a page on an origin not listed read an answer: %+v", got)
	}
}
