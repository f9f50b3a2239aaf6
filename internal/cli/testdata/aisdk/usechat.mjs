// Drives firstword's /v1/ui/chat with the AI SDK's own client code:
// DefaultChatTransport and a minimal AbstractChat subclass with its state
// in memory (what useChat wraps, without React). Prints what the chats
// ended with, as JSON, for TestAISDKUseChat to check.
// Usage: node usechat.mjs BASE_URL KEY_A KEY_B
import { AbstractChat, DefaultChatTransport } from 'ai';

const [base, keyA, keyB] = process.argv.slice(2);

// The state useChat keeps in React, kept in memory.
class MemoryState {
  constructor() { this.messages = []; this.status = 'ready'; this.error = undefined; }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(v) { return structuredClone(v); }
}

class Chat extends AbstractChat {
  constructor(opts) { super({ ...opts, state: new MemoryState() }); }
}

// cutAfter returns a fetch whose first POST's body fails like a dropped
// connection once n text-delta chunks have arrived.
function cutAfter(n) {
  let cut = false;
  return async (url, init) => {
    const resp = await fetch(url, init);
    if (cut || init?.method !== 'POST' || !resp.body) return resp;
    cut = true;
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let seen = 0;
    const body = new ReadableStream({
      async pull(ctrl) {
        const { done, value } = await reader.read();
        if (done) { ctrl.close(); return; }
        seen += dec.decode(value, { stream: true }).split('"text-delta"').length - 1;
        ctrl.enqueue(value);
        if (seen >= n) {
          reader.cancel().catch(() => {});
          ctrl.error(new TypeError('network error: connection cut by the test'));
        }
      },
    });
    return new Response(body, { status: resp.status, headers: resp.headers });
  };
}

function chat(id, key, extra = {}) {
  const errors = [];
  const c = new Chat({
    id,
    transport: new DefaultChatTransport({ api: base + '/v1/ui/chat', headers: key ? { Authorization: 'Bearer ' + key } : {}, body: { model: extra.model ?? 'fast' }, fetch: extra.fetch }),
    onError: (e) => errors.push(String(e?.message ?? e)),
  });
  c.errors = errors;
  return c;
}

// what a chat shows: each message's role, id, text and reasoning.
function shown(c) {
  return {
    status: c.status, error: c.error ? String(c.error.message) : '', errors: c.errors,
    messages: c.messages.map(m => ({
      id: m.id, role: m.role,
      text: m.parts.filter(p => p.type === 'text').map(p => p.text).join(''),
      reasoning: m.parts.filter(p => p.type === 'reasoning').map(p => p.text).join(''),
      parts: m.parts.map(p => p.type),
      metadata: m.metadata ?? null,
    })),
  };
}

const long = 'tell me [sim ttft=5ms gap=20ms tokens=50]';
const out = {};

// A plain answer, then a regeneration of it.
{
  const c = chat('chat-plain', keyA);
  await c.sendMessage({ text: 'hello [sim tokens=12 gap=1ms ttft=10ms]' });
  out.plain = shown(c);
  await c.regenerate();
  out.regenerated = shown(c);
  // What a page loads as useChat's initial messages.
  const loaded = await (await fetch(`${base}/v1/ui/chat/chat-plain/messages`, { headers: { Authorization: 'Bearer ' + keyA } })).json();
  const again = new Chat({ id: 'chat-plain' });
  again.state.messages = loaded;
  out.loaded = { status: again.status, error: '', errors: [], messages: shown(again).messages };
}
// The clean run of the long answer, and one cut mid-answer and resumed.
{
  const c = chat('chat-clean', keyA);
  await c.sendMessage({ text: long });
  out.clean = shown(c);
  const r = chat('chat-resumed', keyA, { fetch: cutAfter(5) });
  await r.sendMessage({ text: long });
  out.cut = shown(r);
  await r.resumeStream();
  out.resumed = shown(r);
}
// stop() aborts the fetch (the answer goes on for the grace window); the
// stop route stops it at once, and it is stored cancelled.
{
  const c = chat('chat-stop', keyA);
  const sending = c.sendMessage({ text: 'tell me more [sim ttft=5ms gap=20ms tokens=300]' });
  while (!(c.messages[1]?.parts ?? []).some(p => p.type === 'text' && p.text.length > 0)) {
    await new Promise(r => setTimeout(r, 10));
  }
  await c.stop();
  await sending;
  const resp = await fetch(`${base}/v1/ui/chat/chat-stop/stop`, { method: 'POST', headers: { Authorization: 'Bearer ' + keyA } });
  out.stopped = { ...shown(c), stop: { status: resp.status, body: await resp.json() } };
}
// Thinking is reasoning parts.
{
  const c = chat('chat-think', keyA, { model: 'reasoner' });
  await c.sendMessage({ text: 'Why is the sky blue? [sim think=60ms tokens=8 gap=1ms ttft=5ms]' });
  out.reasoning = shown(c);
  const loaded = await (await fetch(`${base}/v1/ui/chat/chat-think/messages`, { headers: { Authorization: 'Bearer ' + keyA } })).json();
  out.reasoning_loaded = { status: 'ready', error: '', errors: [], messages: shown({ status: 'ready', errors: [], messages: loaded }).messages };
}
// An upstream failure mid-answer is an error.
{
  const c = chat('chat-error', keyA);
  await c.sendMessage({ text: 'x [sim fault=error_mid after=5 ttft=10ms gap=1ms]' });
  out.error = shown(c);
}
// Another tenant's chat id is not theirs: nothing to resume, and a turn
// on it starts a conversation of its own.
{
  const a = chat('chat-shared-id', keyA);
  await a.sendMessage({ text: 'secret plans [sim echo ttft=5ms gap=1ms]' });
  const b = chat('chat-shared-id', keyB);
  await b.resumeStream();
  out.other_tenant_resume = shown(b);
  await b.sendMessage({ text: 'what did I say? [sim echo ttft=5ms gap=1ms]' });
  out.other_tenant = shown(b);
}
process.stdout.write(JSON.stringify(out));
