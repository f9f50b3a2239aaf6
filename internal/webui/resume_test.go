package webui_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// The chat page resumes its answers (issue 19): a dropped connection is
// picked up where it broke off, Stop is the stop route, and a reload or a
// second tab follows an answer still being written.

// wire stands between the browser and the gateway: it notes each
// request, and cuts the connection under the first /v1/chat answer once
// cutAfter delta events have gone out (0: never), as a network that
// drops mid-answer.
type wire struct {
	cutAfter int
	// rewind, if set, answers the first resume itself, as a server that
	// took over an answer whose replica died: it is sent the message id
	// (from the resume's Last-Event-ID).
	rewind func(w http.ResponseWriter, msgID string)

	mu   sync.Mutex
	seen []string // "METHOD /path", with " Last-Event-ID=<id>" when sent
	cut  bool
}

func serveWire(t *testing.T, yamlText string, wr *wire) (*gatewaytest.Gateway, string) {
	t.Helper()
	cfg := gatewaytest.MustParse(t, yamlText)
	cfg.ShutdownTimeout = time.Second
	gw := gatewaytest.Start(t, cfg, wr.wrap)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the gateway saw: %q", wr.requests())
		}
	})
	return gw, gw.URL
}

func (wr *wire) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.Path
		if id := r.Header.Get("Last-Event-ID"); id != "" {
			line += " Last-Event-ID=" + id
		}
		wr.mu.Lock()
		wr.seen = append(wr.seen, line)
		cut := wr.cutAfter > 0 && !wr.cut && r.Method == "POST" && r.URL.Path == "/v1/chat"
		wr.cut = wr.cut || cut
		rewind := wr.rewind
		if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/stream") && r.Header.Get("Last-Event-ID") != "" {
			wr.rewind = nil
		} else {
			rewind = nil
		}
		wr.mu.Unlock()
		if rewind != nil {
			msgID, _, _ := strings.Cut(r.Header.Get("Last-Event-ID"), ":")
			rewind(w, msgID)
			return
		}
		if cut {
			w = &cutter{ResponseWriter: w, left: wr.cutAfter}
		}
		h.ServeHTTP(w, r)
	})
}

func (wr *wire) requests() []string {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return append([]string(nil), wr.seen...)
}

// matching returns the requests that start with prefix.
func (wr *wire) matching(prefix string) []string {
	var got []string
	for _, s := range wr.requests() {
		if strings.HasPrefix(s, prefix) {
			got = append(got, s)
		}
	}
	return got
}

var errCut = errors.New("connection cut by the test")

// cutter passes an event stream through until left delta events have
// been flushed, then closes the connection under it: the browser sees
// the body break off (no last chunk), the gateway a failed write.
type cutter struct {
	http.ResponseWriter
	left int
	cut  bool
}

func (c *cutter) Write(p []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	c.left -= bytes.Count(p, []byte("event: delta\n"))
	return c.ResponseWriter.Write(p)
}

func (c *cutter) FlushError() error {
	if c.cut {
		return errCut
	}
	rc := http.NewResponseController(c.ResponseWriter)
	if err := rc.Flush(); err != nil || c.left > 0 {
		return err
	}
	c.cut = true
	conn, _, err := rc.Hijack()
	if err != nil {
		return err
	}
	conn.Close()
	return errCut
}

func (c *cutter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// upstreamText runs message as a new conversation's first turn, over a
// connection nobody cuts, and returns the text of its deltas: what the
// sim answers this message (its text depends on the conversation only).
func upstreamText(t *testing.T, url, message string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"message": message})
	resp, err := http.Post(url+"/v1/chat", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	kind := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, ok := strings.CutPrefix(line, "event: "); ok {
			kind = k
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && kind == "delta" {
			var delta struct{ Text string }
			json.Unmarshal([]byte(d), &delta)
			text.WriteString(delta.Text)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return text.String()
}

// rendered is Markdown as the page shows it.
func rendered(t *testing.T, ctx contextT, md string) string {
	t.Helper()
	return webuitest.Eval[string](t, ctx, `(() => { const d = document.createElement("div"); fwMarkdown.render(d, `+jsString(md)+`); return d.textContent })()`)
}

// watchAnswer records, from now on, each distinct length of the last
// answer's text while it is not finished, and whether it was unfinished
// when the watch began; it works in a tab that is not in front.
func watchAnswer(t *testing.T, ctx contextT) {
	t.Helper()
	webuitest.Eval[bool](t, ctx, `(() => {
		const last = () => [...document.querySelectorAll(".msg.assistant")].pop();
		window.watch = {unfinished: !!last() && !last().dataset.status, lengths: [], reconnecting: 0};
		const note = () => {
			const m = last();
			if (!m || m.dataset.status) return;
			const n = m.querySelector(".body").textContent.length;
			if (watch.lengths[watch.lengths.length-1] !== n) watch.lengths.push(n);
			if (m.querySelector(".reconnecting")) watch.reconnecting++;
		};
		note();
		new MutationObserver(note).observe(document.getElementById("messages"), {childList: true, subtree: true, characterData: true, attributes: true});
		return true })()`)
}

type watched struct {
	Unfinished   bool
	Lengths      []int
	Reconnecting int
}

func watchResult(t *testing.T, ctx contextT) watched {
	t.Helper()
	var w watched
	json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, `JSON.stringify(window.watch)`)), &w)
	return w
}

// seqOf is the number of an event id <message_id>:<n>, -1 if it has none.
func seqOf(id string) int {
	n, err := strconv.Atoi(id[strings.LastIndexByte(id, ':')+1:])
	if err != nil {
		return -1
	}
	return n
}

// TestChatPageResumes: the connection under an answer is cut mid-answer;
// the page says it is reconnecting, resumes from the last event it got,
// and ends with exactly the upstream's text, once, stored complete. The
// answer was neither sent again nor cancelled.
func TestChatPageResumes(t *testing.T) {
	ctx := webuitest.Browser(t)
	wr := &wire{cutAfter: 10}
	app, url := serveWire(t, simConfig, wr)
	openChat(t, ctx, url)
	watchAnswer(t, ctx)
	const message = "Why resume? [sim ttft=50ms gap=20ms tokens=120]"
	ask(t, ctx, message)
	webuitest.WaitFor(t, ctx, `!![...document.querySelectorAll(".msg.assistant")].pop().dataset.status`, 40*time.Second)
	text, status := lastAnswer(t, ctx)
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	st := stored(t, url, conv)
	content, _ := st["content"].(string)
	if status != "complete" || st["status"] != "complete" {
		t.Fatalf("the answer ended %q on the page, stored %v %q", status, st["status"], content)
	}
	want := upstreamText(t, url, message)
	if content != want {
		t.Errorf("stored text %q, want the upstream's %q", content, want)
	}
	if r := rendered(t, ctx, want); text != r {
		t.Errorf("the page shows %q, want the upstream's text %q", text, r)
	}
	if w := watchResult(t, ctx); w.Reconnecting == 0 {
		t.Errorf("the page never showed it was reconnecting (lengths seen %v)", w.Lengths)
	}
	// One turn sent; resumed with the cursor of an event past the cut.
	if sent := wr.matching("POST /v1/chat"); len(sent) != 2 { // the page's and upstreamText's
		t.Errorf("/v1/chat requests %q: the page sent its message again", sent)
	}
	resumes := wr.matching("GET /v1/conversations/" + conv + "/stream")
	msgID, _ := st["id"].(string)
	if len(resumes) == 0 {
		t.Fatal("the page never resumed")
	}
	id, _ := strings.CutPrefix(resumes[0], "GET /v1/conversations/"+conv+"/stream Last-Event-ID=")
	if !strings.HasPrefix(id, msgID+":") || seqOf(id) < 1 {
		t.Errorf("the first resume was %q, want Last-Event-ID=%s:<n> with n past the meta event", resumes[0], msgID)
	}
	if s := app.SimStats(t, "sim", ""); s.Cancelled != 0 || s.Completed != 2 {
		t.Errorf("sim stats %+v: want both answers complete, none cancelled", s)
	}
}

// TestChatPageStop: Stop calls the stop route; the upstream is cancelled,
// and the page ends on the cancelled done event with exactly the text
// stored.
func TestChatPageStop(t *testing.T) {
	ctx := webuitest.Browser(t)
	wr := &wire{}
	app, url := serveWire(t, simConfig, wr)
	openChat(t, ctx, url)
	ask(t, ctx, "Tell me a long story. [sim ttft=50ms gap=40ms tokens=400]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body").textContent.length > 40`, 10*time.Second)
	webuitest.Eval[bool](t, ctx, `(() => { document.getElementById("stop").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "cancelled"`, 10*time.Second)
	text, _ := lastAnswer(t, ctx)
	if text == "" {
		t.Fatal("the partial answer left the screen")
	}
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	if stops := wr.matching("POST /v1/conversations/" + conv + "/stop"); len(stops) != 1 {
		t.Errorf("stop requests %q, want one", stops)
	}
	// The sim counts its cancel on its own time: poll, with room for a
	// busy machine.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && app.SimStats(t, "sim", "").Cancelled == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	st := stored(t, url, conv)
	content, _ := st["content"].(string)
	if st["status"] != "cancelled" || rendered(t, ctx, content) != text {
		t.Errorf("stored %v %q; on screen %q", st["status"], content, text)
	}
	if s := app.SimStats(t, "sim", ""); s.Cancelled != 1 || s.Completed != 0 {
		t.Errorf("the sim's stream was not cancelled: %+v", s)
	}
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".msg.assistant .problem.warn").length`); n != 1 {
		t.Errorf("%d notes say the answer was stopped, want 1", n)
	}
}

// TestChatPageReattachesOnReload: reloading the page mid-answer shows the
// answer still being written and follows it live to its end, with the
// whole stored text once.
func TestChatPageReattachesOnReload(t *testing.T) {
	ctx := webuitest.Browser(t)
	app, url := serve(t, simConfig)
	openChat(t, ctx, url)
	ask(t, ctx, "Tell me a long story. [sim ttft=50ms gap=25ms tokens=240]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body").textContent.length > 40`, 10*time.Second)
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.loaded === `+jsString(conv), 10*time.Second)
	watchAnswer(t, ctx)
	webuitest.WaitFor(t, ctx, `!![...document.querySelectorAll(".msg.assistant")].pop().dataset.status`, 30*time.Second)
	checkFollowed(t, ctx, url, conv)
	if s := app.SimStats(t, "sim", ""); s.Cancelled != 0 || s.Completed != 1 {
		t.Errorf("sim stats %+v: the reload stopped the answer", s)
	}
}

// checkFollowed checks that the page (watched since it opened conv) was
// following the answer live and ended with the whole stored answer.
func checkFollowed(t *testing.T, ctx contextT, url, conv string) {
	t.Helper()
	text, status := lastAnswer(t, ctx)
	st := stored(t, url, conv)
	content, _ := st["content"].(string)
	if status != "complete" || st["status"] != "complete" {
		t.Fatalf("the answer ended %q on the page, stored %v", status, st["status"])
	}
	if r := rendered(t, ctx, content); text != r {
		t.Errorf("the page shows %q, want the stored text %q", text, r)
	}
	w := watchResult(t, ctx)
	if !w.Unfinished || len(w.Lengths) < 2 {
		t.Errorf("opened with the answer unfinished: %v, its lengths while followed: %v; want it followed live as it grew", w.Unfinished, w.Lengths)
	}
	for i := 1; i < len(w.Lengths); i++ {
		if w.Lengths[i] < w.Lengths[i-1] {
			t.Errorf("the followed answer shrank: %v", w.Lengths)
			break
		}
	}
}

// TestChatPageSecondTab: a second tab opening the conversation mid-answer
// follows it live; both tabs end with the whole stored answer.
func TestChatPageSecondTab(t *testing.T) {
	ctx := webuitest.Browser(t)
	app, url := serve(t, simConfig)
	openChat(t, ctx, url)
	ask(t, ctx, "Tell me a long story. [sim ttft=50ms gap=25ms tokens=240]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body").textContent.length > 40`, 10*time.Second)
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	if err := chromedp.Do(tab, chromedp.Navigate(url+"/#"+conv)); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, tab, `document.body.dataset.loaded === `+jsString(conv), 10*time.Second)
	watchAnswer(t, tab)
	for _, c := range []contextT{tab, ctx} {
		webuitest.WaitFor(t, c, `!![...document.querySelectorAll(".msg.assistant")].pop().dataset.status`, 30*time.Second)
	}
	checkFollowed(t, tab, url, conv)
	first, _ := lastAnswer(t, ctx)
	second, _ := lastAnswer(t, tab)
	if first != second {
		t.Errorf("the first tab shows %q, the second %q", first, second)
	}
	if s := app.SimStats(t, "sim", ""); s.Cancelled != 0 || s.Completed != 1 {
		t.Errorf("sim stats %+v", s)
	}
}

// TestChatPageRewinds: the answer's connection is cut mid-answer and the
// resume is answered as by a server that took the answer over from one
// that died (issue 33): a rewind to a point before what the page shows
// (text the dead server sent but never saved), then the continuation,
// with ids of the new generation. The page keeps the saved text, drops
// only the unsaved tail, and shows the continuation once: no duplicate,
// nothing saved lost.
func TestChatPageRewinds(t *testing.T) {
	ctx := webuitest.Browser(t)
	const keep = 6 // characters of the answer the rewind keeps
	const tail = " and then the continuation, once."
	wr := &wire{cutAfter: 10}
	wr.rewind = func(w http.ResponseWriter, msgID string) {
		w.Header().Set("Content-Type", "text/event-stream")
		rw, _ := json.Marshal(map[string]any{"message_id": msgID, "offset": keep, "offset_bytes": keep, "generation": 1})
		delta, _ := json.Marshal(map[string]string{"text": tail})
		done, _ := json.Marshal(map[string]any{"message_id": msgID, "status": "complete", "finish_reason": "stop", "continued": true})
		for i, ev := range []struct{ kind, data string }{{"rewind", string(rw)}, {"delta", string(delta)}, {"done", string(done)}} {
			fmt.Fprintf(w, "id: %s:1:%d\nevent: %s\ndata: %s\n\n", msgID, 900+i, ev.kind, ev.data)
		}
	}
	_, url := serveWire(t, simConfig, wr)
	openChat(t, ctx, url)
	const message = "Why rewind? [sim ttft=50ms gap=20ms tokens=120]"
	ask(t, ctx, message)
	webuitest.WaitFor(t, ctx, `!![...document.querySelectorAll(".msg.assistant")].pop().dataset.status`, 40*time.Second)
	text, status := lastAnswer(t, ctx)
	want := string([]rune(upstreamText(t, url, message))[:keep]) + tail
	if r := rendered(t, ctx, want); text != r || status != "complete" {
		t.Errorf("the page shows %q (%s), want the saved start and the continuation, %q", text, status, r)
	}
	if wr.rewind != nil {
		t.Error("the page never resumed")
	}
}
