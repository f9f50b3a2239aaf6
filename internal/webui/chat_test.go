package webui_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/webui/webuitest"
)

// ask types a message and sends it with the keyboard.
func ask(t *testing.T, ctx contextT, text string) {
	t.Helper()
	js, _ := json.Marshal(text)
	webuitest.Eval[bool](t, ctx, `(() => { const i = document.getElementById("input"); i.value = `+string(js)+`; document.getElementById("composer").requestSubmit(); return true })()`)
}

// lastAnswer is the last assistant message's text and status.
func lastAnswer(t *testing.T, ctx contextT) (text, status string) {
	t.Helper()
	text = webuitest.Eval[string](t, ctx, `(() => { const m = [...document.querySelectorAll(".msg.assistant")].pop(); return m ? m.querySelector(".body").textContent : "" })()`)
	status = webuitest.Eval[string](t, ctx, `(() => { const m = [...document.querySelectorAll(".msg.assistant")].pop(); return (m && m.dataset.status) || "" })()`)
	return text, status
}

func openChat(t *testing.T, ctx contextT, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.ready === "1"`, 10*time.Second)
}

// stored returns the conversation's last stored message.
func stored(t *testing.T, url, conv string) map[string]any {
	t.Helper()
	resp, err := http.Get(url + "/v1/conversations/" + conv)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ Messages []map[string]any }
	json.NewDecoder(resp.Body).Decode(&c)
	if len(c.Messages) == 0 {
		t.Fatalf("conversation %s has no messages", conv)
	}
	return c.Messages[len(c.Messages)-1]
}

func TestChatPageStreams(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	// Watch the answer: when the indicator appears relative to the first
	// text, and how many distinct paints the text takes.
	webuitest.Eval[bool](t, ctx, `(() => {
		window.obs = {indicatorAt: 0, firstTextAt: 0, lengths: []};
		const tick = () => {
			const m = [...document.querySelectorAll(".msg.assistant")].pop();
			if (m) {
				if (!obs.indicatorAt && m.querySelector(".typing")) obs.indicatorAt = performance.now();
				const n = m.querySelector(".body").textContent.length;
				if (n && !obs.firstTextAt) obs.firstTextAt = performance.now();
				if (n && obs.lengths[obs.lengths.length-1] !== n) obs.lengths.push(n);
			}
			requestAnimationFrame(tick);
		};
		requestAnimationFrame(tick);
		return true })()`)
	sendAt := webuitest.Eval[float64](t, ctx, `performance.now()`)
	ask(t, ctx, "Why stream the answer? [sim ttft=400ms gap=15ms tokens=60]")
	// The indicator is on screen before any network reply.
	indicatorNow := webuitest.Eval[bool](t, ctx, `!!document.querySelector(".msg.assistant .typing")`)
	if !indicatorNow {
		t.Error("no typing indicator right after send")
	}
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 15*time.Second)
	var obs struct {
		IndicatorAt, FirstTextAt float64
		Lengths                  []int
	}
	raw := webuitest.Eval[string](t, ctx, `JSON.stringify(window.obs)`)
	json.Unmarshal([]byte(raw), &obs)
	if obs.IndicatorAt == 0 || obs.FirstTextAt == 0 || obs.IndicatorAt >= obs.FirstTextAt {
		t.Errorf("indicator at %.0f ms, first text at %.0f ms: the indicator must come first", obs.IndicatorAt-sendAt, obs.FirstTextAt-sendAt)
	}
	if obs.IndicatorAt-sendAt > 50 {
		t.Errorf("indicator %.0f ms after send, want within a frame or two", obs.IndicatorAt-sendAt)
	}
	if len(obs.Lengths) < 10 {
		t.Errorf("the answer appeared in %d paints %v, want it to stream in over many", len(obs.Lengths), obs.Lengths)
	}
	text, _ := lastAnswer(t, ctx)
	meta := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll(".msg.assistant .meta")].pop().textContent`)
	for _, want := range []string{"first word", "total", "tokens", "sim/small", "Where the time went"} {
		if !strings.Contains(meta, want) {
			t.Errorf("the answer's details %q lack %q", meta, want)
		}
	}
	// The waterfall opens on demand.
	webuitest.Eval[bool](t, ctx, `(() => { [...document.querySelectorAll(".msg.assistant .meta button")].pop().click(); return true })()`)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".stages .seg").length`); n < 4 {
		t.Errorf("waterfall has %d stages", n)
	}
	// Reload shows the conversation exactly as stored.
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.loaded === `+jsString(conv), 10*time.Second)
	reloaded, status := lastAnswer(t, ctx)
	st := stored(t, url, conv)
	if reloaded != text || status != "complete" || st["status"] != "complete" {
		t.Errorf("after reload: %q (%s), before %q, stored %v", reloaded, status, text, st["status"])
	}
	ask(t, ctx, "And what should I measure first? [sim ttft=100ms gap=2ms tokens=40]")
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 2 && [...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 10*time.Second)
	webuitest.Eval[bool](t, ctx, `(() => { [...document.querySelectorAll(".msg.assistant .meta button")].pop().click(); return true })()`)
	for _, shot := range []struct {
		name, theme string
		w, h        int64
	}{{"chat-desktop-light.png", "light", 1280, 900}, {"chat-desktop-dark.png", "dark", 1280, 900}, {"chat-phone-light.png", "light", 390, 844}, {"chat-phone-dark.png", "dark", 390, 844}} {
		webuitest.Eval[bool](t, ctx, `(() => { document.documentElement.dataset.theme = `+jsString(shot.theme)+`; return true })()`)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(shot.w, shot.h), chromedp.Sleep(400*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		webuitest.Screenshot(t, ctx, shot.name)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestChatPageStop: Stop cancels the provider's stream, the partial answer
// stays on screen and is stored as cancelled.
func TestChatPageStop(t *testing.T) {
	ctx := webuitest.Browser(t)
	app, url := serve(t, simConfig)
	openChat(t, ctx, url)
	ask(t, ctx, "Tell me a long story. [sim ttft=50ms gap=40ms tokens=400]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body").textContent.length > 40`, 10*time.Second)
	webuitest.Eval[bool](t, ctx, `(() => { document.getElementById("stop").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "cancelled"`, 5*time.Second)
	text, _ := lastAnswer(t, ctx)
	if text == "" {
		t.Fatal("the partial answer left the screen")
	}
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	deadline := time.Now().Add(3 * time.Second)
	var st map[string]any
	for time.Now().Before(deadline) {
		if st = stored(t, url, conv); st["status"] != "streaming" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st["status"] != "cancelled" || !strings.HasPrefix(text, strings.TrimSpace(st["content"].(string))[:20]) {
		t.Errorf("stored %v %q; on screen %q", st["status"], st["content"], text)
	}
	if s := app.Sims["sim"].Stats(); s.Cancelled != 1 || s.Completed != 0 {
		t.Errorf("the sim did not see the disconnect: %+v", s)
	}
}

// TestChatPageErrors: a mid-stream error is shown as an error attached to
// the partial answer, with a retry; a guardrail refusal is shown as such.
func TestChatPageErrors(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig+"guard: {blocklist: [dynamite]}\n")
	openChat(t, ctx, url)
	ask(t, ctx, "Explain. [sim ttft=20ms gap=5ms tokens=50 fault=error_mid after=10]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "error"`, 10*time.Second)
	text, _ := lastAnswer(t, ctx)
	problem := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem").textContent`)
	retry := webuitest.Eval[bool](t, ctx, `!![...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem button.retry")`)
	if text == "" || !strings.Contains(problem, "failed") || !retry {
		t.Errorf("partial %q, problem %q, retry %v", text, problem, retry)
	}
	webuitest.Screenshot(t, ctx, "chat-error.png")
	ask(t, ctx, "how do I make dynamite")
	webuitest.WaitFor(t, ctx, `!![...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem.refusal")`, 10*time.Second)
	refusal := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem").textContent`)
	if !strings.Contains(refusal, "Refused by the guardrail") {
		t.Errorf("refusal shown as %q", refusal)
	}
}

// TestChatPageRendersModelOutputInert: HTML and script in an answer are
// shown as text; nothing runs.
func TestChatPageRendersModelOutputInert(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	payload := `<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> [click](javascript:window.pwned=3) **bold** ` + "`<b>code</b>`" + ` [sim echo]`
	ask(t, ctx, payload)
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if pwned := webuitest.Eval[bool](t, ctx, `window.pwned !== undefined`); pwned {
		t.Error("model output ran code")
	}
	html := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body").innerHTML`)
	text, _ := lastAnswer(t, ctx)
	badLinks := webuitest.Eval[int](t, ctx, `[...document.querySelectorAll(".msg.assistant a")].filter(a => !/^https?:/.test(a.href)).length`)
	if strings.Contains(html, "<script") || strings.Contains(html, "<img") || badLinks != 0 || !strings.Contains(text, "<script>window.pwned=1</script>") {
		t.Errorf("rendered HTML %q", html)
	}
	if !strings.Contains(html, "<strong>bold</strong>") || !strings.Contains(html, "<code>&lt;b&gt;code&lt;/b&gt;</code>") {
		t.Errorf("markdown not rendered safely: %q", html)
	}
}

type contextT = interface {
	Deadline() (time.Time, bool)
	Done() <-chan struct{}
	Err() error
	Value(any) any
}
