package webui_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/firstword/firstword/internal/webui/webuitest"
)

// TestChatPageMarkdown: an answer's Markdown table is a <table>, its
// fenced code is highlighted (highlight.js classes, no style attribute)
// and the code block's copy button puts the code on the clipboard.
func TestChatPageMarkdown(t *testing.T) {
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	msg := "Here:\n\n| stage | ms |\n|---|---|\n| ttft | 120 |\n| total | 900 |\n\n```go\nfunc main() { fmt.Println(\"hi\") }\n```\n\n[sim echo gap=1ms]"
	ask(t, ctx, msg)
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 10*time.Second)
	var got struct {
		Tables, Cells, Spans, Styled int
		Lang, Code                   string
	}
	raw := webuitest.Eval[string](t, ctx, `(() => {
		const b = [...document.querySelectorAll(".msg.assistant")].pop().querySelector(".body");
		const code = b.querySelector("pre > code");
		return JSON.stringify({tables: b.querySelectorAll("table").length, cells: b.querySelectorAll("table td").length,
			spans: code ? code.querySelectorAll("span[class^=hljs-]").length : 0, styled: b.querySelectorAll("[style]").length,
			lang: code ? code.dataset.lang || "" : "", code: code ? code.textContent : ""}) })()`)
	json.Unmarshal([]byte(raw), &got)
	if got.Tables != 1 || got.Cells != 4 {
		t.Errorf("the table rendered as %d tables with %d cells; want 1 with 4", got.Tables, got.Cells)
	}
	if got.Spans < 2 || got.Lang != "go" || got.Styled != 0 || !strings.Contains(got.Code, `fmt.Println("hi")`) {
		t.Errorf("code block: %+v; want highlighted Go, no style attributes", got)
	}
	// Headless Chromium has no clipboard to read back: the test's
	// clipboard records what the button writes.
	copied, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		window.clip = "";
		navigator.clipboard.writeText = async (s) => { window.clip = s; };
		const b = [...document.querySelectorAll(".msg.assistant")].pop().querySelector("pre button.copy");
		if (!b) return "no copy button";
		b.click();
		for (let i = 0; i < 50 && !b.dataset.copied; i++) await new Promise(r => setTimeout(r, 20));
		return b.dataset.copied === "1" ? window.clip : "copy failed";
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || !strings.Contains(copied, `fmt.Println("hi")`) {
		t.Errorf("copy button copied %q, %v", copied, err)
	}
	if c := webuitest.Eval[bool](t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().querySelector("pre button.copy").classList.contains("copied")`); !c {
		t.Error("the copy button shows no copied state")
	}
	screenshot(t, ctx, "chat-markdown-desktop-light.png")
}

// TestChatPageMarkdownXSS: each family of injection in model output stays
// inert: nothing runs (no dialog, no flag set), no dangerous element or
// link survives, and nothing carries a style attribute. The payloads go
// through the page's renderer in the page, attached to the document, so
// an image's onerror or an SVG's onload would fire if it survived; one
// answer also carries all of them through the gateway.
func TestChatPageMarkdownXSS(t *testing.T) {
	families := []struct{ name, payload string }{
		{"script tag", `<script>window.pwned="script"</script>`},
		{"event handler attribute", `<div onmouseover="window.pwned='handler'" onclick="window.pwned='handler'">hover</div> <b onpointerenter=window.pwned=1>x</b>`},
		{"javascript: link", `<a href="javascript:window.pwned='jslink'">click</a>`},
		{"data: link", `<a href="data:text/html,<script>alert(1)</script>">data</a> [d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)`},
		{"svg onload and script", `<svg onload="window.pwned='svg'"><script>window.pwned='svg2'</script></svg>`},
		{"image onerror", `<img src=x onerror="window.pwned='img'">`},
		{"iframe, object and embed", `<iframe src="javascript:window.pwned='iframe'"></iframe><object data="javascript:alert(1)"></object><embed src="javascript:alert(1)">`},
		{"HTML inside a code block", "```html\n<script>window.pwned='code'</script><img src=x onerror=\"window.pwned='code2'\">\n```\n`<img src=x onerror=alert(1)>`"},
		{"entity tricks", `[e](&#106;avascript:window.pwned='entity') <a href="&#106;&#97;vascript:alert(1)">e2</a> [e3](jav&#x09;ascript:alert(1))`},
		{"markdown link injection", `[x](javascript:alert(1)) [y](JaVaScRiPt:window.pwned='mdlink') [z]( javascript:alert(1) ) <javascript:alert(1)>`},
		{"markdown image injection", `![x](javascript:alert(1)) ![y](x" onerror="window.pwned='mdimg') ![z](https://example.invalid/x.png)`},
		{"style injection", `<p style="background:url(javascript:alert(1))">s</p><style>body{display:none}</style>`},
		{"form and button", `<form action="javascript:alert(1)"><button formaction="javascript:alert(1)">b</button><input autofocus onfocus=alert(1)></form>`},
		{"meta refresh and base", `<meta http-equiv="refresh" content="0;url=javascript:alert(1)"><base href="javascript:alert(1)//">`},
		{"math and details ontoggle", `<math><mi xlink:href="javascript:alert(1)">m</mi></math><details open ontoggle="window.pwned='toggle'">d</details>`},
	}
	ctx := webuitest.Browser(t)
	_, url := serve(t, simConfig)
	openChat(t, ctx, url)
	// Any dialog is an alert that ran: count them, and dismiss them so
	// the page goes on.
	webuitest.Eval[bool](t, ctx, `(() => { window.dialogs = 0; window.alert = window.confirm = window.prompt = () => { window.dialogs++; }; return true })()`)
	var all []string
	for _, f := range families {
		all = append(all, f.payload)
		webuitest.Eval[bool](t, ctx, `(() => { const d = document.createElement("div"); d.className = "xss msg assistant"; d.innerHTML = '<div class="body"></div>'; document.getElementById("messages").appendChild(d); fwMarkdown.render(d.querySelector(".body"), `+jsString(f.payload)+`); return true })()`)
	}
	ask(t, ctx, strings.Join(all, "\n\n")+"\n\n[sim echo gap=1ms]")
	webuitest.WaitFor(t, ctx, `[...document.querySelectorAll(".msg.assistant")].pop().dataset.status === "complete"`, 15*time.Second)
	// Nothing to wait for when nothing runs: give injected handlers two
	// frames and a moment, and hover and click every rendered element.
	webuitest.Eval[bool](t, ctx, `(() => { for (const el of document.querySelectorAll(".msg.assistant .body *")) { if (el.closest("button.copy") || el.tagName === "A") continue;
		for (const ev of ["mouseover", "pointerenter", "click", "focus", "toggle"]) el.dispatchEvent(new Event(ev)); } return true })()`)
	settle(t, ctx)
	time.Sleep(300 * time.Millisecond)
	var got struct {
		Pwned          string
		Dialogs        int
		Bad, Styled    []string
		Links          []string
		TextHasPayload bool
	}
	raw := webuitest.Eval[string](t, ctx, `(() => {
		const bodies = [...document.querySelectorAll(".msg.assistant .body")];
		const els = bodies.flatMap(b => [...b.querySelectorAll("*")]);
		const bad = els.filter(e => /^(script|svg|math|iframe|object|embed|img|style|form|input|meta|base|link)$/i.test(e.tagName) ||
			[...e.attributes].some(a => /^on/i.test(a.name))).map(e => e.outerHTML);
		return JSON.stringify({pwned: window.pwned === undefined ? "" : String(window.pwned), dialogs: window.dialogs,
			bad, styled: els.filter(e => e.hasAttribute("style")).map(e => e.outerHTML),
			links: els.filter(e => e.tagName === "A").map(a => a.getAttribute("href")).filter(h => !/^(https?:|mailto:)/i.test(h || "")),
			textHasPayload: bodies.some(b => b.textContent.includes("<script>window.pwned=\"script\"</script>"))}) })()`)
	json.Unmarshal([]byte(raw), &got)
	if got.Pwned != "" || got.Dialogs != 0 {
		t.Errorf("model output ran code: window.pwned = %q, %d dialogs", got.Pwned, got.Dialogs)
	}
	if len(got.Bad) != 0 {
		t.Errorf("dangerous elements or handlers survived: %q", got.Bad)
	}
	if len(got.Styled) != 0 {
		t.Errorf("style attributes survived: %q", got.Styled)
	}
	if len(got.Links) != 0 {
		t.Errorf("links to other than http(s) or mailto survived: %q", got.Links)
	}
	if !got.TextHasPayload {
		t.Error("raw HTML in the answer is not shown as text")
	}
}
