package webui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/store"
	"github.com/firstword/firstword/internal/store/sqlite"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// TestChatPageKeyRejected: once the gateway has keys, the page without one
// asks for one, a wrong key is told apart ("this key was rejected"), and
// the right one entered in the sidebar lets the chat go on.
func TestChatPageKeyRejected(t *testing.T) {
	ctx := webuitest.Browser(t)
	// The key exists before the gateway starts: it is not in local mode.
	db := filepath.Join(t.TempDir(), "fw.db")
	st, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if err := auth.EnsureTenant(bg, st, "acme", "acme"); err != nil {
		t.Fatal(err)
	}
	good, prefix, hash := auth.NewKey()
	if err := st.CreateAPIKey(bg, &store.APIKey{ID: store.NewID("key_"), TenantID: "acme", UserID: "u", Prefix: prefix, Hash: hash, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, url := serve(t, simConfig+"store: {driver: sqlite, path: "+jsString(db)+"}\n")
	time.Sleep(20 * time.Millisecond)
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatal(err)
	}
	noticeText := `document.getElementById("notice").textContent`
	webuitest.WaitFor(t, ctx, `document.body.dataset.auth === "required"`, 10*time.Second)
	if n := webuitest.Eval[string](t, ctx, noticeText); !strings.Contains(n, "requires an API key") || strings.Contains(n, "rejected") {
		t.Errorf("without a key the page says %q", n)
	}
	// A wrong key, as if saved earlier.
	webuitest.Eval[bool](t, ctx, `(() => { localStorage.setItem("fw-key", "fw_not_a_real_key"); return true })()`)
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.auth === "rejected"`, 10*time.Second)
	if n := webuitest.Eval[string](t, ctx, noticeText); !strings.Contains(strings.ToLower(n), "this key was rejected") {
		t.Errorf("with a wrong key the page says %q", n)
	}
	if hidden := webuitest.Eval[bool](t, ctx, `document.getElementById("keybox").hidden`); hidden {
		t.Error("the key box is hidden after a rejected key")
	}
	webuitest.Eval[bool](t, ctx, `(() => { document.body.dataset.ready = ""; document.getElementById("key").value = `+jsString(good)+`; document.getElementById("savekey").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `document.body.dataset.ready === "1"`, 10*time.Second)
	ask(t, ctx, "hello [sim ttft=10ms gap=1ms tokens=5]")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("with the right key the answer did not complete: %s", webuitest.Eval[string](t, ctx, `document.getElementById("messages").textContent + " | " + document.getElementById("notice").textContent`))
	}
	if n := webuitest.Eval[string](t, ctx, noticeText); strings.Contains(n, "rejected") {
		t.Errorf("with the right key the page still says %q", n)
	}
}

// TestChatPageWaitingForModel: when a streaming answer has had no event
// for 3 s the page says it is waiting for the model, and stops saying so
// when the words come.
func TestChatPageWaitingForModel(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	webuitest.Eval[bool](t, ctx, `(() => {
		window.sendAt = performance.now(); window.waitingAt = 0;
		const tick = () => { const m = [...document.querySelectorAll(".msg.assistant")].pop();
			if (m && m.dataset.waiting === "1" && !window.waitingAt) window.waitingAt = performance.now();
			if (!window.waitingAt) requestAnimationFrame(tick); };
		requestAnimationFrame(tick);
		return true })()`)
	ask(t, ctx, "Take your time. [sim ttft=4500ms gap=1ms tokens=5]")
	webuitest.WaitFor(t, ctx, `!!document.querySelector(".msg.assistant .stalled")`, 10*time.Second)
	says := webuitest.Eval[string](t, ctx, `document.querySelector(".msg.assistant .stalled").textContent`)
	after := webuitest.Eval[float64](t, ctx, `window.waitingAt - window.sendAt`)
	if !strings.Contains(says, "Waiting for the model") || after < 2900 {
		t.Errorf("after %.0f ms the page says %q; want \"Waiting for the model\" after 3 s of silence", after, says)
	}
	screenshot(t, ctx, "chat-waiting-phone-light.png")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 10*time.Second)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".stalled, [data-waiting]").length`); n != 0 {
		t.Errorf("%d waiting notes left after the answer", n)
	}
}

// TestChatPageKeyboardAndRegenerate: Enter sends, Shift+Enter does not,
// Esc stops the answer; Regenerate on the last answer writes it again,
// in place of the stopped one (POST /v1/chat with regenerate), and the
// stored conversation holds the new answer instead.
func TestChatPageKeyboardAndRegenerate(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	key := func(target, k string, shift bool) {
		webuitest.Eval[bool](t, ctx, `(() => { `+target+`.dispatchEvent(new KeyboardEvent("keydown", {key: `+jsString(k)+`, shiftKey: `+strconv.FormatBool(shift)+`, bubbles: true, cancelable: true})); return true })()`)
	}
	input := `document.getElementById("input")`
	webuitest.Eval[bool](t, ctx, `(() => { `+input+`.value = "Hello there [sim ttft=10ms gap=1ms tokens=5]"; return true })()`)
	key(input, "Enter", true)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".msg.user").length`); n != 0 {
		t.Fatalf("Shift+Enter sent the message (%d sent)", n)
	}
	key(input, "Enter", false)
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 1 && document.querySelector(".msg.assistant").dataset.status === "complete"`, 10*time.Second)
	ask(t, ctx, "Tell me everything. [sim ttft=10ms gap=20ms tokens=150]")
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 2 && [...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body").textContent.length > 0`, 10*time.Second)
	key("document", "Escape", false)
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "cancelled"`, 10*time.Second)
	stopped := webuitest.Eval[string](t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.messageId`)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll("button.regen").length`); n != 1 {
		t.Fatalf("%d Regenerate buttons, want one on the last answer", n)
	}
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector("button.regen").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 2 && [...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 30*time.Second)
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	resp, err := http.Get(url + "/v1/conversations/" + conv)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Messages []struct{ ID, Role, Content, Status string }
	}
	json.NewDecoder(resp.Body).Decode(&c)
	var got []string
	for _, m := range c.Messages {
		got = append(got, m.Role+" "+m.Status)
	}
	if len(c.Messages) != 4 || strings.Join(got, ",") != "user complete,assistant complete,user complete,assistant complete" ||
		!strings.HasPrefix(c.Messages[2].Content, "Tell me everything.") || c.Messages[3].ID == stopped {
		t.Errorf("stored after the regeneration: %v (the stopped answer was %s)", c.Messages, stopped)
	}
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".msg.user").length`); n != 2 {
		t.Errorf("%d user messages on screen after the regeneration, want 2", n)
	}
}

// TestChatPageEditAndRename: the last user message's Edit turns it into
// a text box; Esc puts it back, Enter sends the edit, which replaces the
// last exchange on screen and in the store. A conversation's ✎ in the
// sidebar renames it (PATCH /v1/conversations/{id}): the sidebar, the
// header and the store show the new title.
func TestChatPageEditAndRename(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	ask(t, ctx, "First question [sim ttft=5ms gap=1ms tokens=5]")
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 1 && document.querySelector(".msg.assistant").dataset.status === "complete"`, 10*time.Second)
	ask(t, ctx, "Second question, with a typo [sim ttft=5ms gap=1ms tokens=5]")
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 2 && [...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete" && !!document.querySelector("button.edit")`, 10*time.Second)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll("button.edit").length`); n != 1 {
		t.Fatalf("%d Edit buttons, want one, on the last user message", n)
	}
	if !webuitest.Eval[bool](t, ctx, `document.querySelector("button.edit").closest(".msg") === [...document.querySelectorAll(".msg.user")].pop()`) {
		t.Fatal("the Edit button is not on the last user message")
	}
	conv := webuitest.Eval[string](t, ctx, `location.hash.slice(1)`)
	stored := func() []string {
		t.Helper()
		resp, err := http.Get(url + "/v1/conversations/" + conv)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var c struct {
			Title    string
			Messages []struct{ Role, Content, Status string }
		}
		json.NewDecoder(resp.Body).Decode(&c)
		out := []string{c.Title}
		for _, m := range c.Messages {
			if m.Role == "user" {
				out = append(out, m.Content)
			} else {
				out = append(out, m.Role+" "+m.Status)
			}
		}
		return out
	}
	keyIn := func(target, k string) {
		webuitest.Eval[bool](t, ctx, `(() => { `+target+`.dispatchEvent(new KeyboardEvent("keydown", {key: `+jsString(k)+`, bubbles: true, cancelable: true})); return true })()`)
	}

	// Esc puts the message back as it was.
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector("button.edit").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `!!document.querySelector(".editing textarea") && document.activeElement === document.querySelector(".editing textarea")`, 5*time.Second)
	keyIn(`document.querySelector(".editing textarea")`, "Escape")
	if got := webuitest.Eval[string](t, ctx, `!document.querySelector(".editing") && [...document.querySelectorAll(".msg.user")].pop().querySelector(".body").checkVisibility() ? [...document.querySelectorAll(".msg.user")].pop().querySelector(".body").textContent : "still editing"`); !strings.HasPrefix(got, "Second question, with a typo") {
		t.Fatalf("after Esc the last user message shows %q", got)
	}
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".msg.assistant").length`); n != 2 {
		t.Fatalf("Esc in the edit box changed the answers on screen: %d", n)
	}

	// Enter sends the edit in place of the last exchange.
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector("button.edit").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `!!document.querySelector(".editing textarea")`, 5*time.Second)
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector(".editing textarea").value = "Second question, edited [sim ttft=5ms gap=1ms tokens=5]"; return true })()`)
	keyIn(`document.querySelector(".editing textarea")`, "Enter")
	webuitest.WaitFor(t, ctx, `document.querySelectorAll(".msg.assistant").length === 2 && [...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete" && [...document.querySelectorAll(".msg.user")].pop().querySelector(".body").textContent.startsWith("Second question, edited")`, 10*time.Second)
	if n := webuitest.Eval[int](t, ctx, `document.querySelectorAll(".msg.user").length`); n != 2 {
		t.Errorf("%d user messages on screen after the edit, want 2", n)
	}
	got := stored()
	if len(got) != 5 || !strings.HasPrefix(got[1], "First question") || got[2] != "assistant complete" ||
		!strings.HasPrefix(got[3], "Second question, edited") || got[4] != "assistant complete" {
		t.Errorf("stored after the edit: %q; want the first exchange, then the edited question and its answer", got)
	}

	// Rename from the sidebar.
	webuitest.WaitFor(t, ctx, `!!document.querySelector("#convs li.active button.rename")`, 5*time.Second)
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector("#convs li.active button.rename").click(); return true })()`)
	webuitest.WaitFor(t, ctx, `!!document.querySelector("#convs input.rename") && document.activeElement === document.querySelector("#convs input.rename")`, 5*time.Second)
	webuitest.Eval[bool](t, ctx, `(() => { document.querySelector("#convs input.rename").value = "  Budgets, measured  "; return true })()`)
	keyIn(`document.querySelector("#convs input.rename")`, "Enter")
	webuitest.WaitFor(t, ctx, `!document.querySelector("#convs input.rename") && document.querySelector("#convs li.active a").textContent === "Budgets, measured" && document.getElementById("title").textContent === "Budgets, measured" && document.title.startsWith("Budgets, measured")`, 5*time.Second)
	if got := stored(); got[0] != "Budgets, measured" {
		t.Errorf("stored title %q, want the new one", got[0])
	}
	webuitest.Screenshot(t, ctx, "chat-edit-rename.png")
}
