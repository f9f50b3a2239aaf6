// The chat page: the reference client of the /v1/chat event stream
// (docs/events.md). It shows something at once, appends text as it
// arrives, stops on demand, tells errors from answers, and shows where each
// answer's time went.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const state = {
    conv: null,         // current conversation id
    model: localStorage.getItem("fw-model") || "",
    turn: null,         // the turn in flight: {abort, el, text, ...}
    queue: [],          // messages sent while a turn was in flight: {text, m}
    lastUser: "",
  };
  const key = () => localStorage.getItem("fw-key") || "";
  const headers = (extra) => Object.assign(key() ? { Authorization: "Bearer " + key() } : {}, extra || {});

  // Theme: the system's unless the user picked one.
  const theme = localStorage.getItem("fw-theme");
  if (theme) document.documentElement.dataset.theme = theme;
  $("theme").addEventListener("click", () => {
    const dark = document.documentElement.dataset.theme === "dark" ||
      (!document.documentElement.dataset.theme && matchMedia("(prefers-color-scheme: dark)").matches);
    document.documentElement.dataset.theme = dark ? "light" : "dark";
    localStorage.setItem("fw-theme", document.documentElement.dataset.theme);
  });

  async function api(path, opts) {
    const resp = await fetch(path, Object.assign({}, opts, { headers: headers(opts && opts.headers) }));
    if (resp.status === 401) {
      $("keybox").hidden = false;
      // A key that was sent and refused is not the same as no key.
      const sent = !!key();
      document.body.dataset.auth = sent ? "rejected" : "required";
      notice(sent ? "This key was rejected: check it, or enter another in the sidebar."
        : "This gateway requires an API key: enter it in the sidebar.");
      throw new Error("unauthorized");
    }
    return resp;
  }

  function notice(text) {
    $("notice").textContent = text;
    $("notice").hidden = !text;
  }

  // ---- messages --------------------------------------------------------

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function addUser(text) {
    const m = el("article", "msg user");
    m.appendChild(el("div", "who", "You"));
    m.appendChild(el("div", "body", text));
    $("messages").appendChild(m);
    return m;
  }

  // addAssistant adds an answer's element at the end, or right after the
  // user message it answers (a queued message may not be the last).
  function addAssistant(after) {
    const m = el("article", "msg assistant");
    m.setAttribute("aria-busy", "true");
    m.appendChild(el("div", "who", "Assistant"));
    const body = el("div", "body");
    const typing = el("div", "typing");
    typing.setAttribute("role", "status");
    typing.setAttribute("aria-label", "The assistant is answering");
    typing.append(el("span"), el("span"), el("span"));
    body.appendChild(typing);
    m.appendChild(body);
    if (after) after.after(m);
    else $("messages").appendChild(m);
    return m;
  }

  // ---- the thinking ---------------------------------------------------------

  // thinkingBox returns the answer's "Thinking…" section, made (open,
  // above the answer) if it has none.
  function thinkingBox(m) {
    let box = m.querySelector(".thinking");
    if (box) return box;
    box = el("details", "thinking");
    box.open = true;
    box.appendChild(el("summary", "", "Thinking…"));
    box.appendChild(el("div", "thought"));
    m.querySelector(".body").before(box);
    return box;
  }

  // showThinking fills the section of a stored answer, collapsed.
  function showThinking(m, th, ms) {
    if (!th || (!th.text && !th.redacted)) return;
    const box = thinkingBox(m);
    box.querySelector(".thought").textContent = th.text || "";
    showRedacted(box, th.redacted || 0);
    thought(box, ms);
  }

  // showRedacted says how many blocks of the thinking the provider
  // redacted (their text is never shown, only passed back to the model).
  function showRedacted(box, n) {
    let r = box.querySelector(".redacted");
    if (!n) { if (r) r.remove(); return; }
    if (!r) { r = el("p", "redacted"); box.appendChild(r); }
    r.textContent = n === 1 ? "One part of the thinking was redacted by the provider." : n + " parts of the thinking were redacted by the provider.";
  }

  // thought ends the live part of a thinking section: collapsed, with how
  // long the model thought (ms; unknown when not a number).
  function thought(box, ms) {
    delete box.dataset.live;
    box.open = false;
    box.querySelector("summary").textContent = typeof ms === "number" && ms > 0 ? "Thought for " + (ms / 1000).toFixed(1) + " s" : "Thought";
  }

  // storedThinkingMs is how long a stored answer thought: its timings'
  // thinking_ms, else its thinking stage.
  function storedThinkingMs(t) {
    if (!t) return undefined;
    if (typeof t.thinking_ms === "number") return t.thinking_ms;
    const s = (t.stages || []).find((x) => x.name === "thinking");
    return s ? s.end_ms - s.start_ms : undefined;
  }

  function scrollDown() {
    const box = $("messages");
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 200) box.scrollTop = box.scrollHeight;
  }

  const labels = {
    cancelled: "Stopped: this is the part of the answer that arrived.",
    timeout: "Cut off by the time limit: this is the part that arrived.",
    interrupted: "Interrupted by a server restart: this is the part that was saved.",
  };

  // plain says what an error code means to the person reading, and what
  // they can do about it. The gateway's own message (for operators) is in
  // the details, with the code and the request id.
  const plain = {
    upstream_unavailable: ["The model's service could not be reached.", "Try again in a moment."],
    overloaded: ["The model's service is too busy right now.", "Try again in a moment."],
    rate_limited: ["Too many requests are going to the model right now.", "Wait a few seconds, then try again."],
    timeout: ["The model took too long to start answering.", "Try again in a moment."],
    protocol: ["The model's answer broke off in a way the gateway could not read.", "Try again."],
    context_length: ["This conversation has grown too long for the model.", "Start a new chat, or send a shorter message."],
    prompt_too_large: ["This conversation has grown too long to send.", "Start a new chat."],
    too_many_messages: ["This conversation has too many messages to send.", "Start a new chat."],
    request_too_large: ["Your message is too long.", "Shorten it and send it again."],
    content_filter: ["The model's provider declined to answer this.", "Try asking in another way."],
    guard_unavailable: ["Your message could not be checked by the safety filter, so it was not sent.", "Try again in a moment."],
    context_unavailable: ["Information the answer needs could not be loaded.", "Try again in a moment."],
    server_shutting_down: ["The server restarted while answering.", "Send your message again to continue."],
    store_unavailable: ["Conversations cannot be saved right now, so nothing was sent.", "Try again in a moment."],
    client_closed_request: ["The connection closed before the answer began.", "Send your message again."],
    invalid_request: ["The gateway could not accept this message.", "Check it and send it again."],
    not_found: ["This conversation no longer exists.", "Start a new chat."],
    model_not_found: ["The chosen model is no longer available.", "Pick another one in the sidebar."],
    auth: ["The gateway could not sign in to the model's service.", "Ask whoever runs this gateway to check its keys."],
    network: ["The connection to the gateway was lost.", "Check your network, then try again."],
    reconnect_failed: ["The connection to the gateway was lost and could not be restored.", "Reload the page once you are back online: the answer may have gone on without you."],
    internal: ["Something went wrong inside the gateway.", "Try again."],
  };
  // Errors where sending the same message again cannot help.
  const final = new Set(["insufficient_quota", "guardrail_blocked", "request_too_large", "prompt_too_large", "too_many_messages", "context_length", "not_found", "model_not_found"]);

  // says is the sentence shown for an error; partial: text had arrived.
  function says(error, partial) {
    if (error.code === "guardrail_blocked") return "Refused by the guardrail: " + (error.message || "the message was not allowed.");
    // Admission refused it (docs/security.md): a rate limit, or a budget.
    if (error.code === "rate_limit_exceeded") return "Refused by a limit: " + (error.message || "too many requests.") + (error.retryAfter ? ` Try again in ${error.retryAfter} s.` : "");
    if (error.code === "insufficient_quota") return "Refused by a budget: " + (error.message || "the budget is spent.");
    let [what, todo] = plain[error.code] || ["The answer could not be completed.", "Try again."];
    if (partial && error.code === "upstream_unavailable") what = "The model's service stopped answering partway through.";
    return what + (partial ? " What arrived is kept above. " : " ") + todo;
  }

  // details lists what an operator needs: the code, the gateway's message,
  // the HTTP status and the request id (X-Request-Id) when known.
  function details(error, requestId) {
    const d = el("details");
    d.appendChild(el("summary", "", "Details"));
    const dl = el("dl");
    const row = (name, value) => { if (value) dl.append(el("dt", "", name), el("dd", "", String(value))); };
    row("Code", error.code);
    row("Message", error.message);
    row("HTTP status", error.status);
    row("Admission", error.admission);
    row("Retry-After", error.retryAfter && error.retryAfter + " s");
    row("Request id", requestId);
    d.appendChild(dl);
    return d;
  }

  // finishMessage adds the status, the problem (if any) and the meta line.
  function finishMessage(m, info) {
    m.removeAttribute("aria-busy");
    const typing = m.querySelector(".typing");
    if (typing) typing.remove();
    m.querySelectorAll(".problem, .meta, .stages").forEach((e) => e.remove());
    const status = info.status;
    m.dataset.status = status;
    if (status === "error") m.classList.add("failed");
    if (status === "cancelled" || status === "timeout" || status === "interrupted") m.classList.add("cut");
    const label = info.label || labels[status];
    if (info.error || label) {
      const p = el("div", "problem" + (info.error ? "" : " warn"));
      p.setAttribute("role", info.error ? "alert" : "note");
      const partial = !!m.querySelector(".body").textContent;
      p.appendChild(el("p", "says", info.error ? says(info.error, partial) : label));
      if (info.error && info.error.code === "guardrail_blocked") p.classList.add("refusal");
      if (info.error && !final.has(info.error.code) && info.retry) {
        const b = el("button", "retry", "Retry");
        b.type = "button";
        b.addEventListener("click", () => send(info.retry));
        p.appendChild(b);
      }
      if (info.error) p.appendChild(details(info.error, info.requestId));
      m.appendChild(p);
    }
    const meta = el("div", "meta");
    const badge = (cls, text) => meta.appendChild(el("span", "badge " + cls, text));
    if (status && status !== "complete") badge(status === "error" && info.error && info.error.code === "guardrail_blocked" ? "blocked" : status, status);
    if (info.cached) badge("cached", "cache hit");
    if (info.fallback) badge("fallback", "fallback");
    const t = info.timings || {};
    const part = (text) => meta.appendChild(el("span", "", text));
    if (t.ttfthought_ms) part("first thought " + fwStages.ms(t.ttfthought_ms));
    if (t.ttfw_ms) part("first word " + fwStages.ms(t.ttfw_ms));
    if (t.ttc_ms) part("total " + fwStages.ms(t.ttc_ms));
    const u = info.usage;
    if (u && (u.input_tokens || u.output_tokens)) part(`${u.input_tokens} in · ${u.output_tokens} out tokens${u.estimated ? " (estimated)" : ""}`);
    if (info.cost) part("$" + info.cost.toFixed(6));
    if (info.deployment) part((info.model ? info.model + " → " : "") + info.deployment);
    if (t.stages && t.stages.length) {
      const b = el("button", "", "Where the time went");
      b.type = "button";
      b.setAttribute("aria-expanded", "false");
      b.addEventListener("click", () => toggleStages(m, t, b));
      meta.appendChild(b);
    }
    m.appendChild(meta);
  }

  function toggleStages(m, t, button) {
    const open = m.querySelector(".stages");
    if (open) { open.remove(); button.setAttribute("aria-expanded", "false"); return; }
    const box = el("div", "stages");
    const track = el("div", "track");
    const span = Math.max(t.ttc_ms || 0, ...t.stages.map((s) => s.end_ms), 1);
    fwStages.waterfall(track, t.stages, span, t.ttfw_ms);
    const list = el("ol");
    for (const s of t.stages) {
      const li = el("li", "", `${s.name} ${fwStages.ms(s.end_ms - s.start_ms)}` + (s.note ? ` (${s.note})` : ""));
      li.prepend(el("span", "sw " + fwStages.kind(s.name)));
      list.appendChild(li);
    }
    box.append(track, list);
    m.appendChild(box);
    button.setAttribute("aria-expanded", "true");
  }

  // ---- the event stream ---------------------------------------------------

  // events parses a text/event-stream body into {event, data, id, retry}
  // objects. A block with a retry field but no data yields just the retry.
  async function* events(body) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let event = "message", data = [], id = "", retry = 0;
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const c = line.indexOf(":");
            const name = c < 0 ? line : line.slice(0, c);
            const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
            if (name === "event") event = val;
            if (name === "data") data.push(val);
            if (name === "id") id = val;
            if (name === "retry" && /^\d+$/.test(val)) retry = Number(val);
          }
          if (data.length || retry) yield { event, data: data.length ? data.join("\n") : "", id, retry };
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  // Reconnecting after a dropped stream: the first wait is the stream's
  // retry hint, then each wait doubles up to maxWait; after giveUpAfter
  // without getting back, the turn ends with what arrived.
  const maxWait = 8000, giveUpAfter = 30000;

  // A turn is one answer shown while it arrives: one this page asked for,
  // or one it follows (a reload mid-answer, a second tab). Its events carry
  // ids <message_id>:<n>, and <message_id>:<g>:<n> once another server
  // took the answer over (generation g); gen and seq are those of the last
  // one applied, and lastId is what a resume hands back. floor: the length of the stored text on
  // screen, which a replay from the start replaces once it has caught up.
  function newTurn(m, retry) {
    return {
      abort: new AbortController(), m, body: m.querySelector(".body"), retry,
      text: "", pending: "", frame: 0, floor: 0,
      // The thinking: what arrived since the last frame, when the first
      // thought came (performance.now()), redacted blocks, and whether the
      // answer began (the section is then collapsed, with its duration).
      thinkPending: "", thinkAt: 0, redacted: 0, answered: false,
      conv: "", msgId: "", gen: 0, seq: -1, lastId: "", retryMs: 1000,
      live: false,    // a stream is being read
      stopped: false, // the user asked to stop
      dropped: false, // its connection broke off at least once
      over: null,     // the turn's end, decided outside its stream (stop, leave)
      done: false,    // the turn has ended
      requestId: "",
    };
  }

  // paint shows the text that arrived since the last frame. The page
  // paints at most once a frame, and only this message.
  function paint(turn) {
    turn.frame = 0;
    if (turn.thinkPending) {
      const t = thinkingBox(turn.m).querySelector(".thought");
      t.appendChild(document.createTextNode(turn.thinkPending));
      turn.thinkPending = "";
      t.scrollTop = t.scrollHeight;
      scrollDown();
    }
    if (!turn.pending) return;
    // The thinking collapses in the frame the answer's first text shows.
    if (!turn.answered) answerBegins(turn);
    turn.text += turn.pending;
    turn.pending = "";
    if (turn.text.length < turn.floor) return;
    fwMarkdown.render(turn.body, turn.text);
    scrollDown();
  }

  // apply takes one event into the turn. It returns the turn's end on a
  // last event, {again: true} when the stream asks to be resumed, {other:
  // true} when the stream is another answer's, else null.
  function apply(turn, ev) {
    if (ev.retry) turn.retryMs = ev.retry;
    if (!ev.data) return null;
    let d;
    try { d = JSON.parse(ev.data); } catch { return null; }
    // A resume that could not read the journal says so with an error
    // still "streaming", numbered after the last event it sent: not one
    // of the answer's events, so its number is not taken.
    if (ev.event === "error" && d.status === "streaming") return { again: true };
    if (ev.id) {
      const parts = ev.id.split(":");
      const msg = parts[0], n = Number(parts[parts.length - 1]);
      const gen = parts.length > 2 ? Number(parts[1]) : 0;
      if (turn.msgId && msg !== turn.msgId) return { other: true };
      // Already shown: a resume never repeats an event, but a duplicate
      // must not show twice if one ever did.
      if (gen < turn.gen || (gen === turn.gen && n <= turn.seq)) return null;
      turn.gen = gen;
      turn.seq = n;
      turn.lastId = ev.id;
    }
    if (ev.event === "meta") {
      turn.conv = d.conversation_id;
      turn.msgId = d.message_id;
      turn.m.dataset.messageId = d.message_id;
      if (state.turn === turn && state.conv !== d.conversation_id) {
        state.conv = d.conversation_id;
        history.replaceState(null, "", "#" + state.conv);
        loadConversations();
      }
      if (turn.stopped) postStop(turn);
    } else if (ev.event === "thinking") {
      think(turn, d);
    } else if (ev.event === "rewind") {
      // The server that wrote the answer died after sending text it had
      // not saved: from offset (characters) on, the text is replaced by
      // what follows. What was saved stays on screen.
      const kept = Array.from(turn.text + turn.pending).slice(0, d.offset).join("");
      turn.text = kept;
      turn.pending = "";
      if (turn.text.length >= turn.floor) fwMarkdown.render(turn.body, turn.text);
    } else if (ev.event === "delta") {
      turn.pending += d.text;
      turn.m.dataset.streaming = "1";
      if (!turn.frame) turn.frame = requestAnimationFrame(() => paint(turn));
    } else if (ev.event === "done") {
      return Object.assign({ retry: turn.retry }, d);
    } else if (ev.event === "error") {
      return Object.assign({ retry: turn.retry }, d, { error: { code: d.code, message: d.message }, status: d.status || "error" });
    }
    return null;
  }

  // think takes a thinking event: text fills the section (once a frame,
  // like the answer), a restart empties it (the model's new attempt thinks
  // from its start), a redacted block is counted. The duration shown is
  // from the first thought: what the reader waited.
  function think(turn, d) {
    const box = thinkingBox(turn.m);
    if (!turn.thinkAt) {
      turn.thinkAt = performance.now();
      if (!turn.answered) box.dataset.live = "1";
    }
    if (d.restart) {
      turn.thinkPending = "";
      turn.redacted = 0;
      box.querySelector(".thought").replaceChildren();
      showRedacted(box, 0);
      return;
    }
    if (d.redacted) { showRedacted(box, ++turn.redacted); return; }
    if (!d.text) return;
    turn.thinkPending += d.text;
    if (!turn.frame) turn.frame = requestAnimationFrame(() => paint(turn));
  }

  // answerBegins collapses the thinking, if any, with how long it took.
  function answerBegins(turn) {
    turn.answered = true;
    const box = turn.m.querySelector(".thinking");
    if (box && turn.thinkAt) thought(box, performance.now() - turn.thinkAt);
  }

  // follow reads a stream into the turn. It returns the turn's end, or
  // null when the stream broke off before its last event (a dropped
  // connection: the caller resumes).
  async function follow(turn, resp) {
    turn.live = true;
    turn.heardAt = performance.now();
    const watch = setInterval(() => silent(turn), 500);
    try {
      for await (const ev of events(resp.body)) {
        // Heartbeats keep the connection, not the reader, waiting.
        if (ev.data) { turn.heardAt = performance.now(); silent(turn); }
        const r = apply(turn, ev);
        if (r && r.again) return null;
        if (r && r.other) return (await fromStore(turn)) || lost(turn);
        if (r) return r;
      }
      return null;
    } catch (e) {
      if (turn.over) return turn.over;
      return null;
    } finally {
      turn.live = false;
      clearInterval(watch);
      turn.heardAt = 0;
      silent(turn);
    }
  }

  // silent shows "Waiting for the model…" while a streaming answer has
  // had no event for stallMs (the model is slow to start or has paused),
  // and takes it away with the next event.
  const stallMs = 3000;
  function silent(turn) {
    const on = !!turn.heardAt && !turn.done && performance.now() - turn.heardAt >= stallMs;
    let w = turn.m.querySelector(".stalled");
    if (!on) {
      if (w) w.remove();
      delete turn.m.dataset.waiting;
      return;
    }
    if (w) return;
    w = el("div", "stalled", "Waiting for the model…");
    w.setAttribute("role", "status");
    turn.m.querySelector(".body").after(w);
    turn.m.dataset.waiting = "1";
  }

  // reconnecting shows, quietly, that the answer's connection is being
  // restored; the text so far stays as it is.
  function reconnecting(turn, on) {
    let r = turn.m.querySelector(".reconnecting");
    if (!on) {
      if (r) r.remove();
      delete turn.m.dataset.reconnecting;
      return;
    }
    if (r) return;
    r = el("div", "reconnecting", "Reconnecting…");
    r.setAttribute("role", "status");
    turn.m.dataset.reconnecting = "1";
    turn.body.after(r);
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  // resume follows the turn's answer on GET /v1/conversations/{id}/stream,
  // from the last event applied (Last-Event-ID), until its last event. It
  // waits wait ms before its first try (0: attaching, at once), backs off
  // after each failed one, and gives up after giveUpAfter without getting
  // back.
  async function resume(turn, wait) {
    if (!turn.msgId) {
      // The connection broke before the answer had an id: there is
      // nothing to resume.
      return { status: "error", error: { code: "network", message: "the connection closed before the answer began" }, retry: turn.retry };
    }
    let since = Date.now();
    try {
      for (;;) {
        if (turn.over) return turn.over;
        if (wait) {
          turn.dropped = true;
          if (Date.now() + wait - since > giveUpAfter) return (await fromStore(turn)) || lost(turn);
          reconnecting(turn, true);
          await sleep(wait, turn.abort.signal);
          if (turn.over) return turn.over;
        }
        wait = Math.min(Math.max(wait * 2, turn.retryMs), maxWait);
        let resp;
        try {
          resp = await api("/v1/conversations/" + encodeURIComponent(turn.conv) + "/stream", {
            headers: Object.assign({ Accept: "text/event-stream" }, turn.lastId ? { "Last-Event-ID": turn.lastId } : {}),
            signal: turn.abort.signal,
          });
        } catch (e) {
          if (turn.over) return turn.over;
          if (e && e.message === "unauthorized") return { status: "error" };
          continue;
        }
        if (resp.status === 200) {
          reconnecting(turn, false);
          const seq = turn.seq;
          const info = await follow(turn, resp);
          if (info) return info;
          if (turn.seq > seq) { since = Date.now(); wait = turn.retryMs; }
          continue;
        }
        // Busy, failing, or on another server (409): try again.
        if (resp.status >= 500 || resp.status === 409 || resp.status === 429) continue;
        // 204 (nothing left to resume: the stored message is the whole
        // answer), 404 (deleted), anything else: the store tells the end.
        return (await fromStore(turn)) || lost(turn);
      }
    } finally {
      reconnecting(turn, false);
    }
  }

  // lost is the end of a turn whose stream could not be got back.
  function lost(turn) {
    return { status: "error", error: { code: "reconnect_failed", message: "the answer's stream could not be resumed after " + giveUpAfter / 1000 + " s (last event " + (turn.lastId || "none") + ")" } };
  }

  // storedInfo is what finishMessage needs, from a stored message.
  function storedInfo(msg, retry) {
    return {
      status: msg.status, usage: msg.usage, cost: msg.cost, deployment: msg.deployment, model: msg.model,
      timings: msg.timings, error: msg.error, retry, cached: msg.meta && msg.meta.cached, fallback: msg.meta && msg.meta.fallback,
    };
  }

  // fromStore ends the turn with its stored message, when the stream
  // cannot tell the rest; null while the answer is still being written or
  // the store cannot be read.
  async function fromStore(turn) {
    let resp;
    try { resp = await api("/v1/conversations/" + encodeURIComponent(turn.conv)); } catch { return null; }
    if (resp.status === 404) return { status: "error", error: { code: "not_found", message: "the conversation was deleted" } };
    if (!resp.ok) return null;
    const c = await resp.json().catch(() => null);
    const msg = c && (c.messages || []).find((x) => x.id === turn.msgId);
    if (!msg || msg.status === "streaming") return null;
    turn.thinkPending = "";
    const box = turn.m.querySelector(".thinking");
    if (box) box.remove();
    showThinking(turn.m, msg.thinking, storedThinkingMs(msg.timings));
    turn.answered = true;
    turn.pending = msg.content || "";
    turn.text = "";
    turn.floor = 0;
    paint(turn);
    return storedInfo(msg, turn.retry);
  }

  // send runs one turn. A message sent while another turn is in flight
  // waits in the queue, on screen, and is sent when that turn ends; queued
  // is its element then. mode "regenerate" answers the stored last user
  // message again, "edit" sends text in its place: either replaces the
  // conversation's last exchange.
  async function send(text, queued, mode) {
    if (!text.trim()) return;
    if (state.turn) { enqueue(text); return; }
    regenButton(null);
    notice("");
    state.lastUser = text;
    if ($("messages").querySelector(".empty")) $("messages").replaceChildren();
    // Something happens at once, before any network reply: the message
    // and the typing indicator are on screen in this same frame.
    let u = queued;
    if (u) {
      u.classList.remove("queued");
      u.querySelectorAll(".waiting").forEach((e) => e.remove());
    } else {
      u = addUser(text);
    }
    const m = addAssistant(queued && u);
    scrollDown();
    const turn = state.turn = newTurn(m, text);
    turn.conv = state.conv || "";
    setBusy(true);
    let info = null;
    try {
      const resp = await api("/v1/chat", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(mode === "regenerate"
          ? { regenerate: true, model: state.model || undefined, conversation_id: state.conv }
          : { message: text, edit: mode === "edit" || undefined, model: state.model || undefined, conversation_id: state.conv || undefined }),
        signal: turn.abort.signal,
      });
      turn.requestId = resp.headers.get("X-Request-Id") || "";
      if (resp.ok) {
        info = await follow(turn, resp);
      } else {
        const e = await resp.json().catch(() => ({}));
        info = { status: "error", retry: text, error: { code: (e.error && e.error.code) || String(resp.status), message: (e.error && e.error.message) || resp.statusText, status: resp.status } };
        info.error.retryAfter = resp.headers.get("Retry-After") || "";
        const st = resp.headers.get("Server-Timing") || ""; // admission;dur=…;desc="refused: …"
        if (st.startsWith("admission;")) info.error.admission = st;
        if (info.error.code === "request_too_large" && !$("input").value) $("input").value = text;
      }
    } catch (e) {
      if (turn.over) info = turn.over;
      else if (e && e.message === "unauthorized") info = { status: "error", retry: text };
      else info = { status: "error", error: { code: "network", message: "the connection failed: " + (e && e.message) }, retry: text };
    }
    // A dropped connection is not the end of the answer: the gateway
    // keeps it for a while, and the page picks it up where it broke off.
    if (!info) info = await resume(turn, turn.retryMs);
    end(turn, info);
  }

  // attach follows an answer that is still being written when the page
  // opens its conversation (a reload mid-answer, a second tab): its stored
  // text stays on screen until the replay from the answer's start has
  // caught up with it, then the replay goes on live.
  async function attach(m, msg, retry) {
    const turn = state.turn = newTurn(m, retry);
    turn.conv = state.conv;
    turn.msgId = msg.id;
    turn.floor = (msg.content || "").length;
    m.dataset.streaming = "1";
    setBusy(true);
    end(turn, await resume(turn, 0));
  }

  // end shows how the turn ended and starts the next queued message.
  function end(turn, info) {
    if (turn.done) return;
    turn.done = true;
    if (turn.frame) cancelAnimationFrame(turn.frame);
    if (info.left) return;
    paint(turn);
    if (!turn.answered) answerBegins(turn);
    const { m, body } = turn;
    if (!turn.text && !turn.floor && !info.error && info.status !== "cancelled") body.replaceChildren();
    info.requestId = turn.requestId;
    // Cancelled without a stop: the gateway's grace window ended before
    // the page got back.
    if (info.status === "cancelled" && turn.dropped && !turn.stopped) info.label = "The connection was lost for too long, so the answer was stopped: this is the part that arrived.";
    finishMessage(m, info);
    delete m.dataset.streaming;
    if (state.turn !== turn) return;
    state.turn = null;
    setBusy(false);
    if (!state.queue.length) regenButton(m);
    $("input").focus();
    const next = state.queue.shift();
    if (next) send(next.text, next.m);
  }

  // enqueue shows a message sent during a turn as waiting; it can be taken
  // back into the box until it is sent.
  function enqueue(text) {
    const m = addUser(text);
    m.classList.add("queued");
    const note = el("div", "waiting");
    note.setAttribute("role", "status");
    note.appendChild(el("span", "", "Waiting: sends when the answer above ends."));
    const edit = el("button", "", "Edit");
    edit.type = "button";
    edit.addEventListener("click", () => {
      state.queue = state.queue.filter((q) => q.m !== m);
      m.remove();
      takeBack(text);
    });
    note.appendChild(edit);
    m.appendChild(note);
    state.queue.push({ text, m });
    scrollDown();
  }

  // takeBack puts text into the message box, after what is there.
  function takeBack(text) {
    const i = $("input");
    i.value = i.value ? i.value + "\n\n" + text : text;
    i.focus();
  }

  // unqueue returns waiting messages to the box when the conversation
  // changes: they were meant for the one being left.
  function unqueue() {
    for (const q of state.queue.splice(0)) takeBack(q.text);
  }

  // stop asks the gateway to stop the answer, on the stop route (a
  // dropped connection no longer stops it). The turn ends on the done
  // event the stream then delivers, with status cancelled. Before the
  // answer has an id (the meta event comes first) the stop waits for it.
  function stop() {
    const turn = state.turn;
    if (!turn || turn.stopped) return;
    turn.stopped = true;
    $("stop").disabled = true;
    if (turn.msgId) postStop(turn);
  }

  async function postStop(turn) {
    let resp = null, ans = {};
    try {
      resp = await api("/v1/conversations/" + encodeURIComponent(turn.conv) + "/stop", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: "{}",
      });
      ans = await resp.json().catch(() => ({}));
    } catch { resp = null; }
    if (turn.done) return;
    if (resp && resp.ok && turn.live) return; // the stream brings the end
    let over;
    if (resp && resp.ok) {
      // The stream is gone (the page is reconnecting): the stop's
      // answer ends the turn, with the stored message.
      over = (await fromStore(turn)) || { status: ans.status === "streaming" ? "cancelled" : ans.status || "cancelled" };
    } else if (resp && resp.status === 404) {
      over = { status: "error", error: { code: "not_found", message: "the conversation was deleted" } };
    } else {
      // The stop could not be sent: let go of the answer here. The
      // gateway cancels it when nobody resumes it within its grace window.
      over = { status: "cancelled" };
    }
    if (turn.done) return;
    turn.over = over;
    turn.abort.abort();
  }

  // leave lets go of the turn on screen when another conversation opens.
  // Leaving is not stopping: the answer goes on for the gateway's grace
  // window, for this page (coming back) or another tab to follow.
  function leave() {
    const turn = state.turn;
    if (!turn) return;
    turn.over = { left: true };
    turn.abort.abort();
    state.turn = null;
    setBusy(false);
  }

  // setBusy shows Stop during a turn. Send stays: what it sends then
  // waits for the answer to end.
  // regenButton puts "Regenerate" on m, the last answer of a stored
  // conversation (null: on none), and "Edit" on the user message it
  // answers. Regenerate writes that answer again: the last exchange is
  // replaced by the stored user message asked again. Edit replaces it by
  // the edited message and its answer.
  function regenButton(m) {
    $("messages").querySelectorAll(".actions").forEach((r) => r.remove());
    $("messages").querySelectorAll(".editing").forEach((f) => {
      f.parentElement.querySelector(".body").hidden = false;
      f.remove();
    });
    if (!m || !state.conv || m !== [...$("messages").querySelectorAll(".msg")].pop()) return;
    editButton(m.previousElementSibling, m);
    const b = el("button", "regen", "Regenerate");
    b.type = "button";
    b.title = "Write this answer again";
    b.addEventListener("click", () => {
      if (state.turn) return;
      const u = m.previousElementSibling;
      if (!u || !u.classList.contains("user")) return;
      const text = u.querySelector(".body").textContent;
      m.remove();
      u.remove();
      send(text, null, "regenerate");
    });
    // Its own row, after the answer's details.
    let row = m.querySelector(".actions");
    if (!row) { row = el("div", "actions"); m.appendChild(row); }
    row.appendChild(b);
  }

  // editButton puts "Edit" on u, the last user message, answered by m.
  // The message turns into a text box: Enter (or Save) sends the edit in
  // place of the last exchange, Esc (or Cancel) puts the message back.
  function editButton(u, m) {
    if (!u || !u.classList.contains("user")) return;
    const b = el("button", "edit", "Edit");
    b.type = "button";
    b.title = "Edit this message and send it again";
    b.addEventListener("click", () => {
      if (state.turn) return;
      const body = u.querySelector(".body");
      const box = el("textarea", "editbox");
      box.value = body.textContent;
      box.setAttribute("aria-label", "Edit your message");
      const save = el("button", "save", "Save and send");
      save.type = "button";
      const cancel = el("button", "cancel", "Cancel");
      cancel.type = "button";
      const form = el("div", "editing");
      form.append(box, save, cancel);
      body.hidden = true;
      row.hidden = true;
      u.appendChild(form);
      box.focus();
      const close = () => { form.remove(); body.hidden = false; row.hidden = false; };
      const submit = () => {
        const text = box.value;
        if (!text.trim() || state.turn) return;
        m.remove();
        u.remove();
        send(text, null, "edit");
      };
      save.addEventListener("click", submit);
      cancel.addEventListener("click", close);
      box.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
        if (e.key === "Escape") { e.stopPropagation(); close(); }
      });
    });
    const row = el("div", "actions");
    row.appendChild(b);
    u.appendChild(row);
  }

  function setBusy(busy) {
    $("stop").hidden = !busy;
    $("stop").disabled = false;
    $("send").title = busy ? "Sends when the current answer ends" : "";
    $("input").disabled = false;
  }

  // setTitle names the conversation in the header and the tab.
  function setTitle(title) {
    $("title").textContent = title || "New chat";
    document.title = title ? title + " · firstword" : "firstword";
  }

  // ---- conversations ------------------------------------------------------

  async function loadConversations() {
    let resp;
    try { resp = await api("/v1/conversations?limit=100"); } catch { return; }
    if (!resp.ok) return;
    const { data } = await resp.json();
    const current = data.find((c) => c.id === state.conv);
    if (current && current.title) setTitle(current.title);
    const ul = $("convs");
    ul.replaceChildren();
    for (const c of data) {
      const li = el("li");
      li.dataset.id = c.id;
      if (c.id === state.conv) li.className = "active";
      const a = el("a", "", c.title || "Untitled");
      a.href = "#" + c.id;
      if (c.id === state.conv) a.setAttribute("aria-current", "page");
      const ren = el("button", "rename", "✎");
      ren.type = "button";
      ren.title = "Rename";
      ren.setAttribute("aria-label", "Rename " + (c.title || "conversation"));
      ren.addEventListener("click", () => rename(li, a, c));
      const del = el("button", "", "✕");
      del.type = "button";
      del.setAttribute("aria-label", "Delete " + (c.title || "conversation"));
      del.addEventListener("click", async () => {
        if (!confirm("Delete this conversation?")) return;
        await api("/v1/conversations/" + encodeURIComponent(c.id), { method: "DELETE" });
        if (state.conv === c.id) newChat();
        loadConversations();
      });
      li.append(a, ren, del);
      ul.appendChild(li);
    }
  }

  // rename turns a conversation's entry into a text box: Enter (or
  // leaving the box) saves the title with PATCH /v1/conversations/{id},
  // Esc keeps the old one.
  function rename(li, a, c) {
    const box = el("input", "rename");
    box.type = "text";
    box.value = c.title || "";
    box.maxLength = 200;
    box.setAttribute("aria-label", "New title");
    a.hidden = true;
    li.insertBefore(box, a);
    box.focus();
    box.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = box.value.trim();
      if (save && title && title !== c.title) {
        let resp;
        try {
          resp = await api("/v1/conversations/" + encodeURIComponent(c.id), {
            method: "PATCH", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ title }),
          });
        } catch { resp = null; }
        if (resp && !resp.ok) {
          const e = await resp.json().catch(() => ({}));
          notice("Could not rename: " + ((e.error && e.error.message) || resp.statusText));
        }
        if (resp && resp.ok && c.id === state.conv) setTitle(title);
      }
      loadConversations();
    };
    box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.isComposing) { e.preventDefault(); finish(true); }
      if (e.key === "Escape") { e.stopPropagation(); finish(false); }
    });
    box.addEventListener("blur", () => finish(true));
  }

  async function openConversation(id) {
    unqueue();
    leave();
    state.conv = id;
    $("messages").replaceChildren();
    let resp;
    try { resp = await api("/v1/conversations/" + encodeURIComponent(id)); } catch { return; }
    if (resp.status === 404) { notice("That conversation does not exist."); newChat(); return; }
    const c = await resp.json();
    setTitle(c.title || "Conversation");
    let lastUser = "", live = null;
    c.messages.forEach((msg, i) => {
      if (msg.role === "user") { addUser(msg.content); lastUser = msg.content; return; }
      const m = addAssistant();
      m.dataset.messageId = msg.id;
      // A live answer's thinking comes again with its replay.
      if (msg.status !== "streaming") showThinking(m, msg.thinking, storedThinkingMs(msg.timings));
      if (msg.content) fwMarkdown.render(m.querySelector(".body"), msg.content);
      // The answer still being written is followed live.
      if (msg.status === "streaming" && i === c.messages.length - 1) live = [m, msg, lastUser];
      else finishMessage(m, storedInfo(msg, lastUser));
    });
    $("messages").scrollTop = $("messages").scrollHeight;
    if (live && state.conv === id && !state.turn) attach(...live);
    else if (live) finishMessage(live[0], storedInfo(live[1], live[2]));
    if (!state.turn) regenButton([...$("messages").querySelectorAll(".msg.assistant")].pop() || null);
    document.body.dataset.loaded = id;
    loadConversations();
  }

  function newChat() {
    unqueue();
    leave();
    state.conv = null;
    history.replaceState(null, "", location.pathname);
    setTitle("");
    $("messages").replaceChildren(el("p", "empty", "Ask anything. The first word is the one that counts."));
    loadConversations();
    $("input").focus();
  }

  async function loadModels() {
    let resp;
    try { resp = await api("/v1/models"); } catch { return; }
    const { data } = await resp.json();
    const sel = $("model");
    sel.replaceChildren();
    for (const m of data) sel.appendChild(new Option(m.id, m.id));
    if (!state.model || !data.some((m) => m.id === state.model)) state.model = data.some((m) => m.id === "chat") ? "chat" : (data[0] && data[0].id);
    sel.value = state.model;
  }

  // ---- wiring -------------------------------------------------------------

  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value;
    if (!text.trim()) return;
    $("input").value = "";
    $("input").style.height = "";
    send(text);
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("input").addEventListener("input", () => {
    const t = $("input");
    t.style.height = "";
    t.style.height = Math.min(t.scrollHeight, 240) + "px";
  });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") stop(); });
  $("stop").addEventListener("click", stop);
  $("new").addEventListener("click", newChat);
  $("model").addEventListener("change", () => { state.model = $("model").value; localStorage.setItem("fw-model", state.model); });
  $("savekey").addEventListener("click", () => {
    localStorage.setItem("fw-key", $("key").value.trim());
    $("keybox").hidden = true;
    notice("");
    init();
  });
  $("menu").addEventListener("click", () => {
    const open = $("sidebar").classList.toggle("open");
    $("menu").setAttribute("aria-expanded", String(open));
  });
  window.addEventListener("hashchange", () => {
    const id = location.hash.slice(1);
    if (id && id !== state.conv) openConversation(id);
    $("sidebar").classList.remove("open");
  });

  async function init() {
    await loadModels();
    const id = location.hash.slice(1);
    if (id) await openConversation(id);
    else newChat();
    document.body.dataset.ready = "1";
  }
  init();
})();
