package webui_test

// The browser protections (internal/httpapi/origin.go) seen from a real
// browser. A local-mode gateway holds a conversation; a page on another
// origin, and a page reached through a rebinding host name, try what a
// page can to run or read something on it, and neither runs nor reads
// anything. The control runs the same code where the gateway allows it
// (its own page, a configured host, a configured CORS origin) and does
// read, so the refusals are the protections, not a broken harness.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// secret is in the stored conversation: a page that read it would show it.
const secret = "launch-code-7f3a9c"

// TestForeignPageCannotUseGateway: a page on another origin tries every
// way a page has to send the gateway requests (fetch in both modes, a
// beacon, forms, images, a script, frames). Each reaches the gateway;
// nothing is stored, deleted, streamed or metered, and the page reads
// nothing. From another site and from another port of this one (any
// other local server), every one is refused (403 cross_origin_refused),
// frames, images and scripts included.
func TestForeignPageCannotUseGateway(t *testing.T) {
	for _, tc := range []struct {
		name, host string
	}{
		{"cross-site", "evil.test"},
		{"same-site other port", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, gw, rec := serveRecorded(t, simConfig)
			conv := seedConversation(t, app, gw)
			before := stateOf(t, app, gw)
			evil := servePage(t, func() string { return foreignPage(gw, conv) })
			ctx := webuitest.BrowserWith(t, webuitest.HostResolverRules("evil.test"))

			results := runForeignPage(t, ctx, "http://"+tc.host+":"+portOf(t, evil.URL)+"/")
			seen := rec.waitTricks(t, foreignTricks)

			for _, e := range seen {
				if !e.refused("cross_origin_refused") {
					t.Errorf("admitted a request from the page: %v", e)
				}
				if e.Trick == "" {
					t.Errorf("a request the page did not make reached the gateway (did a framed page run?): %v", e)
				}
			}
			assertNothingRead(t, results, conv)
			if diff := cmp.Diff(before, stateOf(t, app, gw)); diff != "" {
				t.Errorf("the page changed the gateway (-before +after):\n%s", diff)
			}
		})
	}
}

// TestRebindingPageCannotUseGateway: a page loaded from rebind.test,
// whose address then turns into the gateway's (DNS rebinding, simulated by
// a proxy that switches its backend), makes same-origin requests that
// reach the gateway under the foreign Host name: each gets 403
// host_refused, nothing runs, and the page reads only the refusal.
func TestRebindingPageCannotUseGateway(t *testing.T) {
	app, gw, rec := serveRecorded(t, simConfig)
	conv := seedConversation(t, app, gw)
	before := stateOf(t, app, gw)
	ctx := webuitest.BrowserWith(t, webuitest.HostResolverRules("rebind.test"))

	answers, host := rebindAndProbe(t, ctx, gw, conv)
	seen := rec.waitTricks(t, probeTricks)

	for _, trick := range probeTricks {
		a := answers[trick]
		if a.Status != http.StatusForbidden || !strings.Contains(a.Body, "host_refused") {
			t.Errorf("%s: the page got %d %s, want 403 host_refused", trick, a.Status, a.Body)
		}
	}
	for _, e := range seen {
		if e.Host != host {
			t.Errorf("a request reached the gateway under Host %q, want only %q: %v", e.Host, host, e)
		}
		if !e.refused("host_refused") {
			t.Errorf("not refused: %v", e)
		}
	}
	assertNothingRead(t, answers, conv)
	if diff := cmp.Diff(before, stateOf(t, app, gw)); diff != "" {
		t.Errorf("the page changed the gateway (-before +after):\n%s", diff)
	}
}

// TestOriginChecksControl runs the code of the tests above where the
// gateway allows it, and it reads and changes what it was refused above:
// on the gateway's own page, through the rebinding proxy with the name in
// allowed_hosts, and from the foreign page with its origin in
// cors.allowed_origins.
func TestOriginChecksControl(t *testing.T) {
	t.Run("gateway's own page", func(t *testing.T) {
		app, gw, _ := serveRecorded(t, simConfig)
		conv := seedConversation(t, app, gw)
		before := stateOf(t, app, gw)
		ctx := webuitest.Browser(t)
		openChat(t, ctx, gw)
		webuitest.Eval[bool](t, ctx, probeJS+"; true")
		assertProbeRan(t, app, gw, before, conv, probe(t, ctx, conv))
	})

	t.Run("rebinding name in allowed_hosts", func(t *testing.T) {
		app, gw, _ := serveRecorded(t, simConfig+"allowed_hosts: [rebind.test]\n")
		conv := seedConversation(t, app, gw)
		before := stateOf(t, app, gw)
		ctx := webuitest.BrowserWith(t, webuitest.HostResolverRules("rebind.test"))
		answers, _ := rebindAndProbe(t, ctx, gw, conv)
		assertProbeRan(t, app, gw, before, conv, answers)
	})

	t.Run("foreign origin in cors.allowed_origins", func(t *testing.T) {
		var page string // set before the server starts
		evil := httptest.NewUnstartedServer(pageHandler(func() string { return page }))
		t.Cleanup(evil.Close)
		origin := "http://evil.test:" + portOf(t, "http://"+evil.Listener.Addr().String())
		app, gw, rec := serveRecorded(t, simConfig+"cors: {allowed_origins: ["+origin+"]}\n")
		conv := seedConversation(t, app, gw)
		page = foreignPage(gw, conv)
		evil.Start()
		ctx := webuitest.BrowserWith(t, webuitest.HostResolverRules("evil.test"))

		results := runForeignPage(t, ctx, origin+"/")
		seen := rec.waitTricks(t, foreignTricks)

		if r := results["cors-list"]; !strings.Contains(r, conv) {
			t.Errorf("cors-list: the allowed page read %s, want the list with %s", r, conv)
		}
		if r := results["cors-conversation"]; !strings.Contains(r, secret) {
			t.Errorf("cors-conversation: the allowed page read %s, want the conversation with %q", r, secret)
		}
		// An allowed origin still sends no form or text/plain body.
		for _, e := range seen {
			if e.Trick == "nocors-chat" && e.Status != http.StatusUnsupportedMediaType {
				t.Errorf("a text/plain POST from the allowed origin: %v, want 415", e)
			}
		}
		var sims map[string]struct{ Started int64 }
		getJSON(t, app.URL+"/admin/sim", &sims)
		if n := sims["sim"].Started; n < 2 {
			t.Errorf("the sim started %d streams, want the page's JSON chat on top of the seed", n)
		}
	})
}

// foreignTricks name the page's attempts (foreignPage); each must reach
// the gateway (a preflighted one as its OPTIONS).
var foreignTricks = []string{
	"cors-list", "cors-conversation", "cors-runtime", "nocors-list",
	"nocors-completions", "nocors-messages", "nocors-responses", "nocors-chat",
	"nocors-json-chat", "nocors-gc", "cors-json-chat", "cors-delete",
	"beacon-chat", "form-text-chat", "form-urlencoded-chat",
	"img-runtime", "img-pprof", "script-list", "iframe-list", "iframe-chat-page",
}

// foreignPage is a page on another origin that, once loaded, sends the
// gateway at gw every request a page can make, each tagged with
// ?trick=NAME, and notes in window.results what it could read of each.
func foreignPage(gw, conv string) string {
	return strings.NewReplacer("GATEWAY", jsString(gw), "CONVERSATION", jsString(conv)).Replace(`<!doctype html>
<meta charset="utf-8">
<title>a page on another origin</title>
<iframe name="sink1" hidden></iframe>
<iframe name="sink2" hidden></iframe>
<form id="formText" method="POST" enctype="text/plain" target="sink1"><input name='{"message":"from a form ' value=' [sim echo]"}'></form>
<form id="formURL" method="POST" target="sink2"><input name="message" value="from a form"></form>
<script>
const gw = GATEWAY, conv = CONVERSATION;
const at = (path, trick) => gw + path + (path.includes("?") ? "&" : "?") + "trick=" + trick;
const sleep = ms => new Promise(r => setTimeout(r, ms));
window.results = {};
window.done = false;
async function attempt(trick, f) {
	try {
		results[trick] = String(await Promise.race([f(), sleep(5000).then(() => "no answer within 5s")]));
	} catch (e) {
		results[trick] = "threw " + e.name + ": " + e.message;
	}
}
const describe = async r => r.type + " " + r.status + " " + JSON.stringify(await r.text());
// What the page can see inside a frame once it loaded.
function peek(f) {
	try { return "read " + JSON.stringify(f.contentWindow.document.body.innerText); }
	catch (e) { return "threw " + e.name; }
}
function frame(url) {
	return new Promise(resolve => {
		const f = document.createElement("iframe");
		f.onload = () => resolve("loaded, " + peek(f));
		f.src = url;
		document.body.append(f);
	});
}
function submit(form, sink, url) {
	return new Promise(resolve => {
		const f = document.querySelector("iframe[name=" + sink + "]");
		f.onload = () => resolve("loaded, " + peek(f));
		form.action = url;
		form.submit();
	});
}
function element(tag, url) {
	return new Promise(resolve => {
		const el = document.createElement(tag);
		el.onload = () => resolve("load" + (tag === "img" ? " " + el.naturalWidth + "x" + el.naturalHeight : ""));
		el.onerror = () => resolve("error");
		el.src = url;
		document.body.append(el);
	});
}
const say = "from another origin [sim ttft=1ms gap=1ms tokens=3]";
const bodies = {
	"/v1/chat/completions": {model: "chat", messages: [{role: "user", content: say}]},
	"/v1/messages": {model: "chat", max_tokens: 16, messages: [{role: "user", content: say}]},
	"/v1/responses": {model: "chat", input: say},
	"/v1/chat": {message: say},
};
async function run() {
	// Reads: a CORS request carries the page's Origin, and the page sees
	// the answer only if the gateway allows that origin.
	await attempt("cors-list", async () => describe(await fetch(at("/v1/conversations", "cors-list"))));
	await attempt("cors-conversation", async () => describe(await fetch(at("/v1/conversations/" + conv, "cors-conversation"))));
	await attempt("cors-runtime", async () => describe(await fetch(at("/admin/runtime", "cors-runtime"))));
	await attempt("nocors-list", async () => describe(await fetch(at("/v1/conversations", "nocors-list"), {mode: "no-cors"})));
	// "Simple" writes: sent without asking, whatever the answer.
	for (const [trick, path] of [["nocors-completions", "/v1/chat/completions"], ["nocors-messages", "/v1/messages"], ["nocors-responses", "/v1/responses"], ["nocors-chat", "/v1/chat"]]) {
		await attempt(trick, async () => describe(await fetch(at(path, trick), {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: JSON.stringify(bodies[path])})));
	}
	// no-cors drops a JSON Content-Type: the body goes as text/plain.
	await attempt("nocors-json-chat", async () => describe(await fetch(at("/v1/chat", "nocors-json-chat"), {method: "POST", mode: "no-cors", headers: {"Content-Type": "application/json"}, body: JSON.stringify(bodies["/v1/chat"])})));
	await attempt("nocors-gc", async () => describe(await fetch(at("/admin/gc", "nocors-gc"), {method: "POST", mode: "no-cors"})));
	// Preflighted: the browser asks with OPTIONS and sends nothing when refused.
	await attempt("cors-json-chat", async () => describe(await fetch(at("/v1/chat", "cors-json-chat"), {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(bodies["/v1/chat"])})));
	await attempt("cors-delete", async () => describe(await fetch(at("/v1/conversations/" + conv, "cors-delete"), {method: "DELETE"})));
	await attempt("beacon-chat", async () => "queued " + navigator.sendBeacon(at("/v1/chat", "beacon-chat"), JSON.stringify(bodies["/v1/chat"])));
	// Forms: navigations of a hidden frame, the text/plain one shaped as JSON.
	await attempt("form-text-chat", () => submit(document.getElementById("formText"), "sink1", at("/v1/chat", "form-text-chat")));
	await attempt("form-urlencoded-chat", () => submit(document.getElementById("formURL"), "sink2", at("/v1/chat", "form-urlencoded-chat")));
	// Subresources and frames: GETs without an Origin header.
	await attempt("img-runtime", () => element("img", at("/admin/runtime", "img-runtime")));
	await attempt("img-pprof", () => element("img", at("/admin/debug/pprof/profile?seconds=1", "img-pprof")));
	await attempt("script-list", () => element("script", at("/v1/conversations", "script-list")));
	await attempt("iframe-list", () => frame(at("/v1/conversations", "iframe-list")));
	await attempt("iframe-chat-page", () => frame(at("/", "iframe-chat-page")));
	window.done = true;
}
addEventListener("load", run);
</script>
`)
}

// runForeignPage loads the page and returns what it read.
func runForeignPage(t *testing.T, ctx context.Context, pageURL string) map[string]string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `window.done === true`, 30*time.Second)
	results := webuitest.Eval[map[string]string](t, ctx, `window.results`)
	for _, trick := range foreignTricks {
		if _, ok := results[trick]; !ok {
			t.Errorf("the page did not try %s", trick)
		}
	}
	return results
}

// probeTricks name probeJS's requests.
var probeTricks = []string{"list", "conversation", "runtime", "completions", "chat", "delete"}

// probeJS defines probe(conv): same-origin requests to whatever server
// answers for the page's host name now, each answer's status and text.
// The last one deletes the conversation.
const probeJS = `window.probe = async conv => {
	const out = {};
	const ask = async (trick, path, init) => {
		try {
			const r = await fetch(path + "?trick=" + trick, {cache: "no-store", ...init});
			out[trick] = {status: r.status, body: await r.text()};
		} catch (e) {
			out[trick] = {status: 0, body: "threw " + e.name + ": " + e.message};
		}
	};
	const json = body => ({method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
	const say = "from the page [sim ttft=1ms gap=1ms tokens=3]";
	await ask("list", "/v1/conversations");
	await ask("conversation", "/v1/conversations/" + conv);
	await ask("runtime", "/admin/runtime");
	await ask("completions", "/v1/chat/completions", json({model: "chat", messages: [{role: "user", content: say}]}));
	await ask("chat", "/v1/chat", json({message: say}));
	await ask("delete", "/v1/conversations/" + conv, {method: "DELETE"});
	return out;
}`

// answer is what the page read of one request.
type answer struct {
	Status int
	Body   string
}

// probe runs probe(conv) in the page.
func probe(t *testing.T, ctx context.Context, conv string) map[string]answer {
	t.Helper()
	answers, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]answer](`probe(`+jsString(conv)+`)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return answers
}

// rebindAndProbe loads a page holding probeJS from rebind.test (a proxy to
// a page server), points the proxy at the gateway, as a rebound DNS name
// would, and probes. It returns the answers and the Host header the
// gateway saw.
func rebindAndProbe(t *testing.T, ctx context.Context, gw, conv string) (map[string]answer, string) {
	t.Helper()
	evil := servePage(t, func() string {
		return `<!doctype html><meta charset="utf-8"><title>rebind.test</title><script>` + probeJS + `; window.ready = true</script>`
	})
	proxy := startSwitchProxy(t, hostOf(t, evil.URL))
	host := "rebind.test:" + portOf(t, "http://"+proxy.Addr())
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+host+"/")); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `window.ready === true`, 10*time.Second)
	proxy.SwitchTo(hostOf(t, gw))
	return probe(t, ctx, conv), host
}

// assertProbeRan checks that the probe read the gateway's answers and
// changed it: the control of the refusals.
func assertProbeRan(t *testing.T, app *gatewaytest.Gateway, gw string, before gatewayState, conv string, answers map[string]answer) {
	t.Helper()
	for _, c := range []struct{ trick, want string }{
		{"list", conv},
		{"conversation", secret},
		{"runtime", `"goroutines"`},
		{"completions", `"choices"`},
		{"chat", "event:"},
	} {
		if a := answers[c.trick]; a.Status != http.StatusOK || !strings.Contains(a.Body, c.want) {
			t.Errorf("%s: the page got %d %.300s, want 200 with %q", c.trick, a.Status, a.Body, c.want)
		}
	}
	if a := answers["delete"]; a.Status/100 != 2 {
		t.Errorf("delete: the page got %d %s, want 2xx", a.Status, a.Body)
	}
	after := stateOf(t, app, gw)
	if _, ok := after.Conversations[conv]; ok {
		t.Errorf("the conversation %s is still stored after the page deleted it", conv)
	}
	if got := after.SimStreams - before.SimStreams; got != 2 {
		t.Errorf("the page's two model requests started %d sim streams", got)
	}
}

// assertNothingRead fails if anything the page read holds the
// conversation or the runtime statistics.
func assertNothingRead[V any](t *testing.T, read map[string]V, conv string) {
	t.Helper()
	for trick, v := range read {
		s := fmt.Sprint(v)
		for _, leak := range []string{conv, secret, "goroutines", "heap_inuse"} {
			if strings.Contains(s, leak) {
				t.Errorf("%s: the page read %q: %s", trick, leak, s)
			}
		}
	}
}

// serveRecorded is serve with every browser request and its answer
// recorded (the test's own Go client is left out).
func serveRecorded(t *testing.T, yamlText string) (*gatewaytest.Gateway, string, *recorder) {
	t.Helper()
	cfg := gatewaytest.MustParse(t, yamlText)
	cfg.ShutdownTimeout = time.Second
	rec := &recorder{}
	t.Cleanup(func() {
		if t.Failed() {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, e := range rec.seen {
				t.Logf("the gateway saw: %v", e)
			}
		}
	})
	gw := gatewaytest.Start(t, cfg, rec.wrap)
	return gw, gw.URL, rec
}

// recorder keeps the requests a browser sent the gateway.
type recorder struct {
	mu   sync.Mutex
	seen []exchange
}

// exchange is one request the gateway answered.
type exchange struct {
	Method, Path, Trick                string
	Host, Origin, FetchSite, FetchMode string
	Status                             int
	Body                               string // the start of the answer
}

func (e exchange) String() string {
	return fmt.Sprintf("%s %s [%s] Host=%s Origin=%q Sec-Fetch-Site=%q Sec-Fetch-Mode=%q -> %d %.120q",
		e.Method, e.Path, e.Trick, e.Host, e.Origin, e.FetchSite, e.FetchMode, e.Status, e.Body)
}

// refused reports whether the gateway answered 403 with code (or, on
// /v1/messages, whose errors have Anthropic's shape and no code, with a
// permission_error).
func (e exchange) refused(code string) bool {
	var body struct{ Error struct{ Code, Type string } }
	json.Unmarshal([]byte(e.Body), &body)
	return e.Status == http.StatusForbidden &&
		(body.Error.Code == code || strings.HasPrefix(e.Path, "/v1/messages") && body.Error.Type == "permission_error")
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.UserAgent(), "Go-http-client") {
			h.ServeHTTP(w, r)
			return
		}
		cw := &capture{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.seen = append(rec.seen, exchange{
			Method: r.Method, Path: r.URL.Path, Trick: r.URL.Query().Get("trick"),
			Host: r.Host, Origin: r.Header.Get("Origin"),
			FetchSite: r.Header.Get("Sec-Fetch-Site"), FetchMode: r.Header.Get("Sec-Fetch-Mode"),
			Status: cw.status, Body: string(cw.body),
		})
	})
}

// waitTricks waits until each trick has reached the gateway and been
// answered, and returns every request seen.
func (rec *recorder) waitTricks(t *testing.T, tricks []string) []exchange {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec.mu.Lock()
		seen := slices.Clone(rec.seen)
		rec.mu.Unlock()
		var missing []string
		for _, trick := range tricks {
			if !slices.ContainsFunc(seen, func(e exchange) bool { return e.Trick == trick }) {
				missing = append(missing, trick)
			}
		}
		if len(missing) == 0 {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("these requests never reached the gateway: %v", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// capture notes a response's status and first KiB. It has no Flush of its
// own: the gateway's stream flushes through Unwrap.
type capture struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if room := 1024 - len(c.body); room > 0 {
		c.body = append(c.body, b[:min(room, len(b))]...)
	}
	return c.ResponseWriter.Write(b)
}

func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// seedConversation stores one finished conversation holding secret and
// returns its ID.
func seedConversation(t *testing.T, app *gatewaytest.Gateway, gw string) string {
	t.Helper()
	chatTurn(t, gw, "Remember "+secret+". [sim echo ttft=1ms gap=1ms]")
	var list struct{ Data []struct{ ID string } }
	getJSON(t, gw+"/v1/conversations", &list)
	if len(list.Data) != 1 {
		t.Fatalf("%d conversations after one turn", len(list.Data))
	}
	conv := list.Data[0].ID
	// The turn is over once its answer is stored complete and metered.
	deadline := time.Now().Add(5 * time.Second)
	for stored(t, gw, conv)["status"] != "complete" || len(app.Meter().Recent()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the seed turn did not finish: %v, %d metered", stored(t, gw, conv), len(app.Meter().Recent()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return conv
}

// gatewayState is what a request that ran would change: the stored
// conversations (ID → messages), the streams the sim started, the
// requests metered.
type gatewayState struct {
	Conversations map[string]int
	SimStreams    int64
	Metered       int
}

func stateOf(t *testing.T, app *gatewaytest.Gateway, gw string) gatewayState {
	t.Helper()
	var sims map[string]struct{ Started int64 }
	getJSON(t, gw+"/admin/sim", &sims)
	st := gatewayState{
		Conversations: map[string]int{},
		SimStreams:    sims["sim"].Started,
		Metered:       len(app.Meter().Recent()),
	}
	var list struct{ Data []struct{ ID string } }
	getJSON(t, gw+"/v1/conversations?limit=500", &list)
	for _, c := range list.Data {
		var full struct{ Messages []json.RawMessage }
		getJSON(t, gw+"/v1/conversations/"+c.ID, &full)
		st.Conversations[c.ID] = len(full.Messages)
	}
	return st
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %s", u, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// servePage serves a page at / from a server of its own. Every answer
// closes its connection, so that no connection outlives a rebinding.
func servePage(t *testing.T, page func() string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(pageHandler(page))
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func pageHandler(page func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, page())
	})
}

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func portOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// switchProxy is a TCP proxy whose backend can change, as a rebound DNS
// name's address does. Each connection goes to the backend current when
// the browser sends its first bytes, so that one opened before the switch
// but used after it (a preconnect) follows the switch too.
type switchProxy struct {
	ln      net.Listener
	backend atomic.Pointer[string]
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func startSwitchProxy(t *testing.T, backend string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.SwitchTo(backend)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *switchProxy) Addr() string { return p.ln.Addr().String() }

// SwitchTo sends connections that have sent nothing yet to backend.
func (p *switchProxy) SwitchTo(backend string) { p.backend.Store(&backend) }

func (p *switchProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *switchProxy) forward(c net.Conn) {
	defer p.untrack(c)
	buf := make([]byte, 32<<10)
	n, err := c.Read(buf)
	if err != nil {
		return
	}
	b, err := net.Dial("tcp", *p.backend.Load())
	if err != nil || !p.track(b) {
		return
	}
	defer p.untrack(b)
	if _, err := b.Write(buf[:n]); err != nil {
		return
	}
	back := make(chan struct{})
	go func() {
		defer close(back)
		io.Copy(c, b)
		c.Close()
		b.Close()
	}()
	io.Copy(b, c)
	c.Close()
	b.Close()
	<-back
}

// track notes an open connection, or closes it and reports false once
// the proxy is closed.
func (p *switchProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *switchProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *switchProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
