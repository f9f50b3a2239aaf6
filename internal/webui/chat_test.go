package webui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/webui"
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

// TestChatPageStreams: the typing indicator is on screen in the same task
// as the send, the answer paints in many growing steps, and the first
// words come long before the end. Nothing is measured against the wall
// clock: order, counts and ratios hold on a busy machine too, which the
// second run imitates by slowing the page's CPU sixfold.
func TestChatPageStreams(t *testing.T) {
	t.Run("idle", func(t *testing.T) { testChatPageStreams(t, 1, true) })
	t.Run("busy", func(t *testing.T) { testChatPageStreams(t, 6, false) })
}

func testChatPageStreams(t *testing.T, throttle float64, shots bool) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	if throttle > 1 {
		slow := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetCPUThrottlingRate, emulation.SetCPUThrottlingRateParams{Rate: throttle})
			return err
		})
		if err := chromedp.Do(ctx, slow); err != nil {
			t.Fatal(err)
		}
	}
	// Watch the answer once a frame: when the indicator and the first
	// text are seen, when it is complete, and each distinct length.
	webuitest.Eval[bool](t, ctx, `(() => {
		window.obs = {indicatorAt: 0, firstTextAt: 0, doneAt: 0, lengths: []};
		const tick = () => {
			const m = [...document.querySelectorAll(".msg.assistant")].pop();
			if (m && !obs.doneAt) {
				const now = performance.now();
				if (!obs.indicatorAt && m.querySelector(".typing")) obs.indicatorAt = now;
				const n = m.querySelector(".body").textContent.length;
				if (n && !obs.firstTextAt) obs.firstTextAt = now;
				if (n && obs.lengths[obs.lengths.length-1] !== n) obs.lengths.push(n);
				if (m.dataset.status === "complete") obs.doneAt = now;
			}
			requestAnimationFrame(tick);
		};
		requestAnimationFrame(tick);
		return true })()`)
	// The send and the check run in one task: the indicator is on screen
	// before any network reply could have arrived.
	sent := webuitest.Eval[bool](t, ctx, `(() => {
		window.sendAt = performance.now();
		document.getElementById("input").value = "Why stream the answer? [sim ttft=400ms gap=25ms tokens=60]";
		document.getElementById("composer").requestSubmit();
		return !!document.querySelector(".msg.assistant .typing") })()`)
	if !sent {
		t.Error("no typing indicator in the task that sent the message")
	}
	webuitest.WaitFor(t, ctx, `window.obs.doneAt > 0`, 30*time.Second)
	var obs struct {
		IndicatorAt, FirstTextAt, DoneAt float64
		Lengths                          []int
	}
	raw := webuitest.Eval[string](t, ctx, `JSON.stringify(window.obs)`)
	json.Unmarshal([]byte(raw), &obs)
	sendAt := webuitest.Eval[float64](t, ctx, `window.sendAt`)
	if obs.IndicatorAt == 0 || obs.FirstTextAt == 0 || obs.IndicatorAt >= obs.FirstTextAt {
		t.Errorf("indicator seen at %.0f ms, first text at %.0f ms: the indicator must come first", obs.IndicatorAt-sendAt, obs.FirstTextAt-sendAt)
	}
	// 60 tokens over 1.5 s: even at a few frames a second the text grows
	// in several paints, each longer than the last.
	text, _ := lastAnswer(t, ctx)
	if len(obs.Lengths) < 5 || obs.Lengths[len(obs.Lengths)-1] != len([]rune(text)) {
		t.Errorf("the answer appeared in %d paints %v (final length %d), want it to stream in over several", len(obs.Lengths), obs.Lengths, len([]rune(text)))
	}
	for i := 1; i < len(obs.Lengths); i++ {
		if obs.Lengths[i] < obs.Lengths[i-1] {
			t.Errorf("paint %d shrank the answer: %v", i, obs.Lengths)
			break
		}
	}
	// The first word waits 0.4 s of 1.9 s: on screen in the first part of
	// the answer's time, however slow the machine.
	if share := (obs.FirstTextAt - sendAt) / (obs.DoneAt - sendAt); share > 0.75 {
		t.Errorf("first text at %.0f ms of %.0f ms (%.0f%%): the answer did not stream", obs.FirstTextAt-sendAt, obs.DoneAt-sendAt, 100*share)
	}
	if !shots {
		return
	}
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
	for _, shot := range shotSizes {
		screenshot(t, ctx, "chat-"+shot.name)
	}
}

// shotSizes are the four ways every page is photographed: phone and
// desktop width, light and dark.
var shotSizes = []struct {
	name, theme string
	w, h        int64
}{
	{"desktop-light.png", "light", 1280, 900},
	{"desktop-dark.png", "dark", 1280, 900},
	{"phone-light.png", "light", 390, 844},
	{"phone-dark.png", "dark", 390, 844},
}

// screenshot saves the page at the size and theme its name ends with
// (one of shotSizes), once the layout has settled, and checks that the
// page is no wider than the window.
func screenshot(t *testing.T, ctx contextT, name string) {
	t.Helper()
	for _, s := range shotSizes {
		if !strings.HasSuffix(name, s.name) {
			continue
		}
		webuitest.Eval[bool](t, ctx, `(() => { document.documentElement.dataset.theme = `+jsString(s.theme)+`; return true })()`)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(s.w, s.h)); err != nil {
			t.Fatal(err)
		}
		settle(t, ctx)
		// No page scrolls sideways, at any width.
		if w := webuitest.Eval[int](t, ctx, `document.scrollingElement.scrollWidth`); w > int(s.w) {
			t.Errorf("%s: the page is %d px wide in a %d px window", name, w, s.w)
		}
		webuitest.Screenshot(t, ctx, name)
		return
	}
	t.Fatalf("screenshot %s: the name must end with one of the sizes", name)
}

// settle waits for the page's finite animations and transitions (the
// sidebar sliding away when the viewport narrows) to end, then for two
// frames, so that a new viewport or theme has been laid out and painted.
func settle(t *testing.T, ctx contextT) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
		await new Promise(r => requestAnimationFrame(r));
		const finite = document.getAnimations().filter(a => a.effect && a.effect.getComputedTiming().iterations !== Infinity);
		await Promise.all(finite.map(a => a.finished.catch(() => {})));
		await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
		return true })()`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestChatPageErrors: a failure is told in a plain sentence, never in the
// gateway's internal words; the code, the message and the request id are
// one click away; a partial answer stays, with a retry; a guardrail refusal
// is shown as such.
func TestChatPageErrors(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig+"guard: {blocklist: [dynamite]}\n")
	openChat(t, ctx, url)
	// The request ids the gateway gave, as the page's requests saw them.
	webuitest.Eval[bool](t, ctx, `(() => {
		window.requestIDs = [];
		const f = window.fetch;
		window.fetch = async function (u, o) {
			const resp = await f.apply(this, arguments);
			if (String(u).endsWith("/v1/chat")) requestIDs.push(resp.headers.get("X-Request-Id"));
			return resp;
		};
		return true })()`)
	for i, tc := range []struct {
		name, message, code, says string
		partial, retry            bool
	}{
		{"mid-stream", "Explain. [sim ttft=20ms gap=5ms tokens=50 fault=error_mid after=5]", "upstream_unavailable", "stopped answering partway", true, true},
		{"before the first word", "Explain. [sim fault=500]", "upstream_unavailable", "could not be reached", false, true},
		{"overloaded", "Explain. [sim fault=503]", "overloaded", "too busy", false, true},
		{"cut short", "Explain. [sim ttft=20ms gap=5ms tokens=50 fault=truncate after=5]", "protocol", "broke off", true, true},
		// Sending it again cannot help: no retry.
		{"refused before the stream", strings.Repeat("long ", 60<<10), "request_too_large", "too long", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask(t, ctx, tc.message)
			n := strconv.Itoa(i + 1)
			webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === `+n+` && [...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "error"`, 15*time.Second)
			var got struct {
				Says, Details, Summary string
				Open, Retry            bool
			}
			raw := webuitest.Eval[string](t, ctx, `(() => {
				const p = [...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem");
				const d = p.querySelector("details");
				return JSON.stringify({says: p.querySelector(".says").textContent, summary: d.querySelector("summary").textContent,
					details: d.textContent, open: d.open, retry: !!p.querySelector("button.retry")}) })()`)
			json.Unmarshal([]byte(raw), &got)
			text, _ := lastAnswer(t, ctx)
			id := webuitest.Eval[string](t, ctx, `window.requestIDs[`+strconv.Itoa(i)+`] || ""`)
			message := ""
			if conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`); conv != "" && tc.code != "request_too_large" {
				st := stored(t, url, conv)
				if e, _ := st["error"].(map[string]any); e != nil {
					message, _ = e["message"].(string)
				}
				if st["status"] != "error" || message == "" {
					t.Errorf("stored answer %v", st)
				}
			}
			if !strings.Contains(got.Says, tc.says) || strings.Contains(got.Says, tc.code) || (message != "" && strings.Contains(got.Says, message)) {
				t.Errorf("the page says %q; want a plain sentence with %q, without the code %q or the gateway's message %q", got.Says, tc.says, tc.code, message)
			}
			if got.Open || got.Summary != "Details" || !strings.Contains(got.Details, tc.code) || !strings.Contains(got.Details, message) || id == "" || !strings.Contains(got.Details, id) {
				t.Errorf("details (open %v) %q; want them closed, with the code %q, the message %q and the request id %q", got.Open, got.Details, tc.code, message, id)
			}
			if (text != "") != tc.partial || got.Retry != tc.retry {
				t.Errorf("partial answer %q (want one: %v), retry %v (want %v)", text, tc.partial, got.Retry, tc.retry)
			}
		})
	}
	// One click opens the details.
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector(".msg.assistant .problem summary").click(); document.getElementById("messages").scrollTop = 0; return true })()`)
	if open := webuitest.Eval[bool](t, ctx, `document.querySelector(".msg.assistant .problem details").open`); !open {
		t.Error("clicking Details did not open them")
	}
	for _, shot := range shotSizes {
		screenshot(t, ctx, "chat-error-"+shot.name)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
	// A stored error reads the same after a reload.
	says := webuitest.Eval[string](t, ctx, `document.querySelector(".msg.assistant .problem .says").textContent`)
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.loaded === location.hash.slice(1)`, 10*time.Second)
	if again := webuitest.Eval[string](t, ctx, `document.querySelector(".msg.assistant .problem .says").textContent`); again != says {
		t.Errorf("after a reload the error says %q, before %q", again, says)
	}
	ask(t, ctx, "how do I make dynamite")
	webuitest.WaitFor(t, ctx, `!![...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem.refusal")`, 10*time.Second)
	refusal := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".problem .says").textContent`)
	if !strings.Contains(refusal, "Refused by the guardrail") {
		t.Errorf("refusal shown as %q", refusal)
	}
}

// TestChatPageQueuesWhileStreaming: a message sent while an answer streams
// is kept, shown as waiting, and sent when that answer ends; both turns
// are stored, in order.
func TestChatPageQueuesWhileStreaming(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	// Each /v1/chat request, with the first answer's status as it leaves.
	webuitest.Eval[bool](t, ctx, `(() => {
		window.sent = [];
		const f = window.fetch;
		window.fetch = function (u, o) {
			if (String(u).endsWith("/v1/chat")) {
				const first = document.querySelector(".msg.assistant");
				sent.push({message: JSON.parse(o.body).message, first: (first && first.dataset.status) || "streaming"});
			}
			return f.apply(this, arguments);
		};
		return true })()`)
	first := "Tell me about latency. [sim ttft=50ms gap=30ms tokens=60]"
	second := "And about throughput? [sim ttft=10ms gap=2ms tokens=10]"
	ask(t, ctx, first)
	webuitest.WaitFor(t, ctx, `document.querySelector(".msg.assistant .body").textContent.length > 0`, 10*time.Second)
	ask(t, ctx, second)
	var waiting struct {
		Queued      int
		Note, Input string
		Assistants  int
		FirstStatus string
	}
	raw := webuitest.Eval[string](t, ctx, `(() => {
		const q = document.querySelectorAll(".msg.user.queued");
		return JSON.stringify({queued: q.length, note: q.length ? q[0].textContent : "", input: document.getElementById("input").value,
			assistants: document.querySelectorAll(".msg.assistant").length,
			firstStatus: document.querySelector(".msg.assistant").dataset.status || "streaming"}) })()`)
	json.Unmarshal([]byte(raw), &waiting)
	if waiting.Queued != 1 || !strings.Contains(waiting.Note, "And about throughput?") || !strings.Contains(waiting.Note, "Waiting") || waiting.Assistants != 1 || waiting.FirstStatus != "streaming" {
		t.Errorf("while the first answer streams: %+v; want the second message shown once as waiting", waiting)
	}
	screenshot(t, ctx, "chat-queued-phone-light.png")
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 2 && [...document.querySelectorAll(".msg.assistant")].every(m => m.dataset.status === "complete")`, 20*time.Second)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".msg.user.queued").length`); n != 0 {
		t.Errorf("%d messages still shown as waiting", n)
	}
	var sent []struct{ Message, First string }
	json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, `JSON.stringify(window.sent)`)), &sent)
	want := []struct{ Message, First string }{{first, "streaming"}, {second, "complete"}}
	if diff := cmp.Diff(want, sent); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	resp, err := http.Get(url + "/v1/conversations/" + conv)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Messages []struct {
			Role, Content, Status string
			Usage                 struct {
				OutputTokens int `json:"output_tokens"`
			}
		}
	}
	json.NewDecoder(resp.Body).Decode(&c)
	var got []string
	for _, m := range c.Messages {
		got = append(got, m.Role+" "+m.Status)
	}
	if diff := cmp.Diff([]string{"user complete", "assistant complete", "user complete", "assistant complete"}, got); diff != "" {
		t.Fatalf("stored turns (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(c.Messages[0].Content, "Tell me about latency.") || !strings.HasPrefix(c.Messages[2].Content, "And about throughput?") || c.Messages[1].Usage.OutputTokens != 60 {
		t.Errorf("stored %+v", c.Messages)
	}
}

// TestChatPageTitle: the header and the tab show the conversation's title
// once it has one, and "New chat" again for a new one; both pages have an
// icon, which /favicon.ico serves too.
func TestChatPageTitle(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	if h := webuitest.Eval[string](t, ctx, `document.getElementById("title").textContent`); h != "New chat" {
		t.Errorf("a new chat's header says %q", h)
	}
	ask(t, ctx, "Plan a weekend in Lisbon [sim ttft=10ms gap=1ms tokens=5]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 10*time.Second)
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	resp, err := http.Get(url + "/v1/conversations/" + conv)
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Title string }
	json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if c.Title == "" {
		t.Fatal("the conversation has no title")
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("title").textContent === `+jsString(c.Title), chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Errorf("the header says %q, want the title %q", webuitest.Eval[string](t, ctx, `document.getElementById("title").textContent`), c.Title)
	}
	if tab := webuitest.Eval[string](t, ctx, `document.title`); !strings.Contains(tab, c.Title) {
		t.Errorf("the tab says %q, want the title %q", tab, c.Title)
	}
	webuitest.Eval[bool](t, ctx, `(() => { document.getElementById("new").click(); return true })()`)
	if h := webuitest.Eval[string](t, ctx, `document.getElementById("title").textContent`); h != "New chat" {
		t.Errorf("after New chat the header says %q", h)
	}
	for _, page := range []string{"/", "/budget"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(url+page)); err != nil {
			t.Fatal(err)
		}
		icon, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
			const l = document.querySelector('link[rel="icon"]');
			if (!l) return "no <link rel=icon>";
			const r = await fetch(l.href);
			return r.status + " " + r.headers.get("Content-Type") + " " + (await r.text()).slice(0, 4) })()`, chromedp.EvalAwaitPromise))
		if err != nil || icon != "200 image/svg+xml <svg" {
			t.Errorf("%s: icon %q, %v", page, icon, err)
		}
	}
}

// TestFavicon: /favicon.ico is the same small SVG icon the pages link to.
func TestFavicon(t *testing.T) {
	srv := httptest.NewServer(webui.Handler())
	defer srv.Close()
	for _, path := range []string{"/favicon.ico", "/static/icon.svg"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(string(b), "<svg") || len(b) > 2048 {
			t.Errorf("GET %s: %d %s, %d bytes %.40q", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b), b)
		}
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
	// Nothing to wait for when nothing runs: give an injected handler
	// (an image's onerror) two frames and a moment to fire.
	settle(t, ctx)
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
