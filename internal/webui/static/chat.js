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
      notice("This gateway requires an API key: enter it in the sidebar.");
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
    internal: ["Something went wrong inside the gateway.", "Try again."],
  };
  // Errors where sending the same message again cannot help.
  const final = new Set(["guardrail_blocked", "request_too_large", "prompt_too_large", "too_many_messages", "context_length", "not_found", "model_not_found"]);

  // says is the sentence shown for an error; partial: text had arrived.
  function says(error, partial) {
    if (error.code === "guardrail_blocked") return "Refused by the guardrail: " + (error.message || "the message was not allowed.");
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
    if (info.error || labels[status]) {
      const p = el("div", "problem" + (info.error ? "" : " warn"));
      p.setAttribute("role", info.error ? "alert" : "note");
      const partial = !!m.querySelector(".body").textContent;
      p.appendChild(el("p", "says", info.error ? says(info.error, partial) : labels[status]));
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

  // events parses a text/event-stream body into {event, data} objects.
  async function* events(body) {
    const reader = body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let event = "message", data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const c = line.indexOf(":");
          const name = c < 0 ? line : line.slice(0, c);
          const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
          if (name === "event") event = val;
          if (name === "data") data.push(val);
        }
        if (data.length) yield { event, data: data.join("\n") };
      }
    }
  }

  // send runs one turn. A message sent while another turn is in flight
  // waits in the queue, on screen, and is sent when that turn ends; queued
  // is its element then.
  async function send(text, queued) {
    if (!text.trim()) return;
    if (state.turn) { enqueue(text); return; }
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
    const abort = new AbortController();
    const turn = state.turn = { abort, m, text: "", pending: "", frame: 0, stopped: false };
    setBusy(true);
    const body = m.querySelector(".body");
    const paint = () => {
      turn.frame = 0;
      if (!turn.pending) return;
      turn.text += turn.pending;
      turn.pending = "";
      fwMarkdown.render(body, turn.text);
      scrollDown();
    };
    let info = { status: "error", retry: text };
    let requestId = "";
    try {
      const resp = await api("/v1/chat", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ message: text, model: state.model || undefined, conversation_id: state.conv || undefined }),
        signal: abort.signal,
      });
      requestId = resp.headers.get("X-Request-Id") || "";
      if (!resp.ok) {
        const e = await resp.json().catch(() => ({}));
        info.error = { code: (e.error && e.error.code) || String(resp.status), message: (e.error && e.error.message) || resp.statusText, status: resp.status };
        if (info.error.code === "request_too_large" && !$("input").value) $("input").value = text;
        throw null;
      }
      for await (const ev of events(resp.body)) {
        const d = JSON.parse(ev.data);
        if (ev.event === "meta") {
          if (state.conv !== d.conversation_id) {
            state.conv = d.conversation_id;
            history.replaceState(null, "", "#" + state.conv);
            loadConversations();
          }
          m.dataset.messageId = d.message_id;
        } else if (ev.event === "delta") {
          // Text is appended as it arrives; the page paints at most once a
          // frame, and only this message.
          turn.pending += d.text;
          m.dataset.streaming = "1";
          if (!turn.frame) turn.frame = requestAnimationFrame(paint);
        } else if (ev.event === "done") {
          info = Object.assign({ retry: text }, d);
        } else if (ev.event === "error") {
          info = Object.assign({ retry: text }, d, { error: { code: d.code, message: d.message }, status: d.status || "error" });
        }
      }
      if (!info.timings && !info.error) info = { status: "interrupted", retry: text };
    } catch (e) {
      if (turn.stopped || (e && e.name === "AbortError")) {
        info = { status: "cancelled" };
      } else if (e && e.message !== "unauthorized" && !info.error) {
        info = { status: "error", error: { code: "network", message: "the connection failed: " + e.message }, retry: text };
      }
    }
    info.requestId = requestId;
    if (turn.frame) cancelAnimationFrame(turn.frame);
    paint();
    if (!turn.text && !info.error && info.status !== "cancelled") body.replaceChildren();
    finishMessage(m, info);
    delete m.dataset.streaming;
    state.turn = null;
    setBusy(false);
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

  function stop() {
    if (!state.turn) return;
    state.turn.stopped = true;
    // Aborting the request closes the connection: the server cancels the
    // provider's stream and stores the partial answer as cancelled.
    state.turn.abort.abort();
  }

  // setBusy shows Stop during a turn. Send stays: what it sends then
  // waits for the answer to end.
  function setBusy(busy) {
    $("stop").hidden = !busy;
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
      const del = el("button", "", "✕");
      del.type = "button";
      del.setAttribute("aria-label", "Delete " + (c.title || "conversation"));
      del.addEventListener("click", async () => {
        if (!confirm("Delete this conversation?")) return;
        await api("/v1/conversations/" + encodeURIComponent(c.id), { method: "DELETE" });
        if (state.conv === c.id) newChat();
        loadConversations();
      });
      li.append(a, del);
      ul.appendChild(li);
    }
  }

  async function openConversation(id) {
    unqueue();
    if (state.turn) stop();
    state.conv = id;
    $("messages").replaceChildren();
    let resp;
    try { resp = await api("/v1/conversations/" + encodeURIComponent(id)); } catch { return; }
    if (resp.status === 404) { notice("That conversation does not exist."); newChat(); return; }
    const c = await resp.json();
    setTitle(c.title || "Conversation");
    let lastUser = "";
    for (const msg of c.messages) {
      if (msg.role === "user") { addUser(msg.content); lastUser = msg.content; continue; }
      const m = addAssistant();
      m.dataset.messageId = msg.id;
      fwMarkdown.render(m.querySelector(".body"), msg.content);
      let timings;
      try { timings = msg.timings; } catch { timings = null; }
      finishMessage(m, {
        status: msg.status, usage: msg.usage, cost: msg.cost, deployment: msg.deployment, model: msg.model,
        timings, error: msg.error, retry: lastUser, cached: msg.meta && msg.meta.cached, fallback: msg.meta && msg.meta.fallback,
      });
    }
    $("messages").scrollTop = $("messages").scrollHeight;
    document.body.dataset.loaded = id;
    loadConversations();
  }

  function newChat() {
    unqueue();
    if (state.turn) stop();
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
