package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/auth"
	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/conversation"
	"github.com/firstword/firstword/internal/httpapi"
	"github.com/firstword/firstword/internal/levers"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider"
	"github.com/firstword/firstword/internal/provider/providertest"
	"github.com/firstword/firstword/internal/router"
	"github.com/firstword/firstword/internal/store/sqlite"
	"github.com/firstword/firstword/internal/webui"
	"github.com/firstword/firstword/internal/webui/webuitest"
)

// thinker is a provider that thinks "step 1. ... step n. " a delta every
// gap, signs it, then answers "The answer is 42." word by word. With
// restart, it first thinks "a false start. " and restarts, as the router
// does when an attempt fails before its first answer token.
func thinker(n int, gap time.Duration, restart bool) provider.Provider {
	return providertest.Func(func(ctx context.Context, req *chat.Request) chat.Stream {
		return func(yield func(chat.Chunk, error) bool) {
			after := func(d time.Duration, c chat.Chunk) bool {
				select {
				case <-ctx.Done():
					yield(chat.Chunk{}, context.Cause(ctx))
					return false
				case <-time.After(d):
				}
				return yield(c, nil)
			}
			send := func(c chat.Chunk) bool { return after(gap, c) }
			// The false start shows for a while (not only in the same read
			// as the restart).
			if restart && (!send(chat.Chunk{Thinking: "a false start. ", Model: "m"}) || !after(10*gap, chat.Chunk{Thought: &chat.Thought{Restart: true}})) {
				return
			}
			for i := range n {
				if !send(chat.Chunk{Thinking: fmt.Sprintf("step %d. ", i+1), Model: "m"}) {
					return
				}
			}
			if !yield(chat.Chunk{Thought: &chat.Thought{Signature: "c2ln", Format: chat.ThinkingAnthropic}}, nil) {
				return
			}
			for _, w := range strings.SplitAfter("The answer is 42.", " ") {
				if !send(chat.Chunk{Text: w}) {
					return
				}
			}
			yield(chat.Chunk{FinishReason: chat.FinishStop, Usage: &chat.Usage{InputTokens: 5, OutputTokens: 30}}, nil)
		}
	})
}

// serveThinker serves the pages and the API, with alias "chat" answered
// by p, on a store of its own: the API as the gateway wires it, with a
// fake provider in place of an upstream.
func serveThinker(t *testing.T, p provider.Provider) string {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "fw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := auth.EnsureTenant(t.Context(), st, auth.LocalTenant, "local"); err != nil {
		t.Fatal(err)
	}
	r, err := router.New(router.Config{Aliases: []router.Alias{{Name: "chat", Deployments: []router.Deployment{{ProviderName: "fake", Model: "m", Provider: p}}}}})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Routes: levers.New(levers.Options{Inner: r, Unlisted: &levers.Alias{}}), Models: r,
		Meter: metering.NewMemory(10), Store: st, Chat: conversation.New(conversation.Options{Store: st})})
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/", webui.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestChatPageThinking: the page shows the model's thinking live in a
// "Thinking…" section above the answer, filling before the answer's
// first word, collapsed with its duration once the answer begins; a
// restart clears it; a reloaded conversation shows the stored thinking,
// collapsed.
func TestChatPageThinking(t *testing.T) {
	ctx := webuitest.Browser(t)
	url := serveThinker(t, thinker(12, 40*time.Millisecond, true))
	openChat(t, ctx, url)
	// Watch the answer once a frame: when the thinking first shows, its
	// lengths while it fills, whether it was open then, when the first
	// answer text shows, and whether the false start was ever shown after
	// the restart.
	webuitest.Eval[bool](t, ctx, `(() => {
		window.obs = {thinkAt: 0, textAt: 0, openWhileThinking: true, lengths: [], falseStartCleared: false, sawFalseStart: false};
		const tick = () => {
			const m = [...document.querySelectorAll(".msg.assistant")].pop();
			if (m && m.dataset.status !== "complete") {
				const now = performance.now();
				const box = m.querySelector(".thinking");
				const th = box ? box.querySelector(".thought").textContent : "";
				const text = m.querySelector(".body").textContent;
				if (th && !obs.thinkAt) obs.thinkAt = now;
				if (th.includes("a false start")) obs.sawFalseStart = true;
				if (obs.sawFalseStart && th.startsWith("step 1.")) obs.falseStartCleared = true;
				if (th && !text && !box.open) obs.openWhileThinking = false;
				if (th && !text && obs.lengths[obs.lengths.length-1] !== th.length) obs.lengths.push(th.length);
				if (text && !obs.textAt) obs.textAt = now;
			}
			requestAnimationFrame(tick);
		};
		requestAnimationFrame(tick);
		return true })()`)
	ask(t, ctx, "What is six times seven?")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 20*time.Second)
	var obs struct {
		ThinkAt, TextAt                  float64
		OpenWhileThinking                bool
		Lengths                          []int
		FalseStartCleared, SawFalseStart bool
	}
	json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, `JSON.stringify(window.obs)`)), &obs)
	if obs.ThinkAt == 0 || obs.TextAt == 0 || obs.ThinkAt >= obs.TextAt {
		t.Errorf("the thinking showed at %.0f ms, the answer at %.0f ms: want the thinking first", obs.ThinkAt, obs.TextAt)
	}
	if len(obs.Lengths) < 4 {
		t.Errorf("the thinking filled in %d steps (%v), want it to grow as it arrives", len(obs.Lengths), obs.Lengths)
	}
	if !obs.OpenWhileThinking {
		t.Error("the thinking section was collapsed before the answer began")
	}
	if !obs.SawFalseStart || !obs.FalseStartCleared {
		t.Errorf("the false start was shown %v, then cleared by the restart %v", obs.SawFalseStart, obs.FalseStartCleared)
	}
	wantThinking := ""
	for i := range 12 {
		wantThinking += fmt.Sprintf("step %d. ", i+1)
	}
	// After the answer: collapsed, with how long it thought, above the
	// answer, the answer's text apart.
	type section struct {
		Open             bool
		Summary, Thought string
		Above            bool
		Answer           string
	}
	read := `(() => { const m = [...document.querySelectorAll(".msg.assistant")].pop(); const box = m.querySelector(".thinking");
		return JSON.stringify(box ? {open: box.open, summary: box.querySelector("summary").textContent, thought: box.querySelector(".thought").textContent,
			above: !!(box.compareDocumentPosition(m.querySelector(".body")) & Node.DOCUMENT_POSITION_FOLLOWING), answer: m.querySelector(".body").textContent.trim()} : {}) })()`
	var live section
	json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, read)), &live)
	if live.Open || !strings.HasPrefix(live.Summary, "Thought for ") || !strings.HasSuffix(live.Summary, " s") || live.Thought != wantThinking || !live.Above || live.Answer != "The answer is 42." {
		t.Errorf("after the answer, the thinking section is %+v; want collapsed, \"Thought for … s\", %q, above the answer", live, wantThinking)
	}
	// Open it: the text is there.
	webuitest.Eval[bool](t, ctx, `(() => { [...document.querySelectorAll(".msg.assistant .thinking summary")].pop().click(); return true })()`)
	if open := webuitest.Eval[bool](t, ctx, `[...document.querySelectorAll(".msg.assistant .thinking")].pop().open`); !open {
		t.Error("clicking the summary does not open the thinking")
	}
	settle(t, ctx)
	webuitest.Screenshot(t, ctx, "chat-thinking.png")

	// Reloaded: the stored thinking, collapsed.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	webuitest.WaitFor(t, ctx, `document.body.dataset.loaded && document.querySelectorAll(".msg.assistant").length === 1`, 10*time.Second)
	var stored section
	json.Unmarshal([]byte(webuitest.Eval[string](t, ctx, read)), &stored)
	if stored.Open || !strings.HasPrefix(stored.Summary, "Thought") || stored.Thought != wantThinking || !stored.Above || stored.Answer != "The answer is 42." {
		t.Errorf("reloaded, the thinking section is %+v; want collapsed with %q above the answer", stored, wantThinking)
	}
	// The waterfall draws the thinking stages (done.timings.stages'
	// first_thought and thinking) in their own colour, like any other.
	segs := webuitest.Eval[string](t, ctx, `(() => { const track = document.createElement("div");
		fwStages.waterfall(track, [{name: "upstream fake/m", start_ms: 2, end_ms: 90, group: true}, {name: "ttft", start_ms: 2, end_ms: 60},
			{name: "first_thought", start_ms: 2, end_ms: 20}, {name: "thinking", start_ms: 20, end_ms: 60}], 100, 60);
		return [...track.querySelectorAll(".seg")].map(s => s.className + "=" + s.title).join("; ") })()`)
	if want := "seg st-context group=upstream fake/m: 88 ms; seg st-ttft=ttft: 58 ms; seg st-thinking=first_thought: 18 ms; seg st-thinking=thinking: 40 ms"; segs != want {
		t.Errorf("waterfall segments %q, want %q", segs, want)
	}
}
