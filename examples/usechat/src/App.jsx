import { useEffect, useState } from 'react';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';

// The chat's id is the page's: ?chat=ID in the address, or a new one.
// firstword keeps the chat under it, so a reload shows it again.
function chatIdFromURL() {
  const url = new URL(window.location.href);
  let id = url.searchParams.get('chat');
  if (!id) {
    id = crypto.randomUUID();
    url.searchParams.set('chat', id);
    window.history.replaceState(null, '', url);
  }
  return id;
}

export default function App() {
  const [id] = useState(chatIdFromURL);
  const [initial, setInitial] = useState(null);
  const [loadError, setLoadError] = useState('');

  // The chat's stored messages, as useChat's initial messages.
  useEffect(() => {
    fetch(`/v1/ui/chat/${encodeURIComponent(id)}/messages`)
      .then(async (r) => {
        if (!r.ok) throw new Error(`${r.status}: ${await r.text()}`);
        return r.json();
      })
      .then(setInitial, (e) => setLoadError(String(e.message ?? e)));
  }, [id]);

  if (loadError) return <p className="error">Loading the chat failed: {loadError}</p>;
  if (!initial) return <p>Loading…</p>;
  return <Chat id={id} initial={initial} />;
}

const transport = new DefaultChatTransport({
  api: '/v1/ui/chat', // the dev server proxies /v1 to firstword
  // headers: { Authorization: 'Bearer fw_...' }, // not needed in local mode
  // body: { model: 'chat' },                      // the default model when left out
});

function Chat({ id, initial }) {
  const { messages, sendMessage, stop, status, error } = useChat({
    id,
    messages: initial,
    resume: true, // reconnect to an answer still being written
    transport,
  });
  const [input, setInput] = useState('');
  const busy = status === 'submitted' || status === 'streaming';

  async function stopAnswer() {
    await stop(); // ends this page's stream
    // and stops the answer itself (firstword would otherwise finish it
    // for a reconnect to read):
    await fetch(`/v1/ui/chat/${encodeURIComponent(id)}/stop`, { method: 'POST' });
  }

  return (
    <main data-status={status} style={{ maxWidth: 720, margin: '2rem auto', fontFamily: 'system-ui, sans-serif' }}>
      <h1 style={{ fontSize: '1.2rem' }}>useChat on firstword</h1>
      {messages.map((m) => (
        <div key={m.id} className="message" data-role={m.role} data-id={m.id} data-conversation={m.metadata?.conversation_id} style={{ margin: '1rem 0' }}>
          <strong>{m.role === 'user' ? 'You' : 'firstword'}</strong>
          {m.parts.map((p, i) =>
            p.type === 'reasoning' ? (
              <pre key={i} className="reasoning" style={{ color: '#666', whiteSpace: 'pre-wrap' }}>{p.text}</pre>
            ) : p.type === 'text' ? (
              <div key={i} className="text" style={{ whiteSpace: 'pre-wrap' }}>{p.text}</div>
            ) : null,
          )}
        </div>
      ))}
      {error && <p className="error" style={{ color: 'crimson' }}>{error.message}</p>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!input.trim() || busy) return;
          sendMessage({ text: input });
          setInput('');
        }}
        style={{ display: 'flex', gap: '0.5rem' }}
      >
        <input id="input" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Say something…" style={{ flex: 1 }} />
        {busy ? (
          <button id="stop" type="button" onClick={stopAnswer}>Stop</button>
        ) : (
          <button id="send" type="submit">Send</button>
        )}
      </form>
    </main>
  );
}
