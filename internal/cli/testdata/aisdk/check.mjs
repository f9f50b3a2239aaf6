// Drives a running firstword with the Vercel AI SDK (OpenAI, OpenAI-compatible
// and Anthropic providers) and prints what the SDK
// read, as JSON, for TestVercelAISDK to check. Usage: node check.mjs BASE_URL
import { streamText, generateText, tool, jsonSchema } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createAnthropic } from '@ai-sdk/anthropic';

globalThis.AI_SDK_LOG_WARNINGS = false;

const base = process.argv[2];
const openai = createOpenAI({ baseURL: base + '/v1', apiKey: 'unused' });
const compat = createOpenAICompatible({ name: 'firstword', baseURL: base + '/v1', apiKey: 'unused', includeUsage: true });
const anthropic = createAnthropic({ baseURL: base + '/v1', apiKey: 'unused' });
const weather = { get_weather: tool({ description: 'weather', inputSchema: jsonSchema({ type: 'object', properties: { query: { type: 'string' } } }) }) };
const fast = '[sim tokens=12 gap=1ms ttft=10ms]';
const thinks = 'Why is the sky blue? [sim think=60ms tokens=8 gap=1ms ttft=5ms]';

async function stream(model, prompt, extra = {}) {
  const r = streamText({ model, prompt, tools: extra.tools, providerOptions: extra.providerOptions, maxRetries: 0, onError: () => {} });
  let text = '', deltas = 0, reasoning = '', reasoningAfterText = false, signature = '';
  const calls = [], errors = [];
  for await (const p of r.fullStream) {
    if (p.type === 'text-delta') { text += p.text; deltas++; }
    if (p.type === 'reasoning-delta') { reasoning += p.text; if (text) reasoningAfterText = true; }
    if (p.type.startsWith('reasoning') && p.providerMetadata?.anthropic?.signature) signature = p.providerMetadata.anthropic.signature;
    if (p.type === 'tool-call') calls.push({ name: p.toolName, input: p.input });
    if (p.type === 'error') errors.push(String(p.error?.message ?? p.error));
  }
  const usage = await r.usage;
  return { text, deltas, calls, errors, finish: await r.finishReason, outputTokens: usage.outputTokens ?? -1, inputTokens: usage.inputTokens ?? -1,
    reasoning, reasoningAfterText, signature, reasoningTokens: usage.outputTokenDetails?.reasoningTokens ?? usage.reasoningTokens ?? -1 };
}

async function generate(model, prompt, extra = {}) {
  const r = await generateText({ model, prompt, maxRetries: 0, ...extra });
  return { text: r.text, finish: r.finishReason, outputTokens: r.usage.outputTokens ?? -1, inputTokens: r.usage.inputTokens ?? -1 };
}

const cases = {
  chat_stream: () => stream(openai.chat('fast'), 'hello ' + fast),
  chat_generate: () => generate(openai.chat('fast'), 'hello ' + fast),
  chat_tool: () => stream(openai.chat('fast'), 'weather? [sim tool=get_weather ttft=10ms gap=1ms]', { tools: weather }),
  chat_error_mid: () => stream(openai.chat('fast'), 'x [sim fault=error_mid after=5 ttft=10ms gap=1ms]'),
  compat_stream: () => stream(compat('fast'), 'hello ' + fast),
  responses_stream: () => stream(openai('fast'), 'hello ' + fast),
  responses_generate: () => generate(openai('fast'), 'hello ' + fast),
  responses_tool: () => stream(openai('fast'), 'weather? [sim tool=get_weather ttft=10ms gap=1ms]', { tools: weather }),
  responses_error_mid: () => stream(openai('fast'), 'x [sim fault=error_mid after=5 ttft=10ms gap=1ms]'),
  responses_length: () => generate(openai('fast'), 'x [sim ttft=10ms gap=1ms]', { maxOutputTokens: 5 }),
  responses_history: () => generateText({
    model: openai('fast'), system: 'be brief', maxRetries: 0, messages: [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'get_weather', input: { query: 'x' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'get_weather', output: { type: 'text', value: 'sunny' } }] },
      { role: 'user', content: 'thanks [sim echo ttft=10ms gap=1ms]' }],
  }).then(r => ({ text: r.text, finish: r.finishReason })),
  unknown_model: () => generate(openai('nope'), 'x'),
  // A real second turn: the SDK leaves store on and refers to the first
  // answer by its item ID.
  responses_second_turn: async () => {
    const first = [{ role: 'user', content: 'hello ' + fast }];
    const r1 = await generateText({ model: openai('fast'), messages: first, maxRetries: 0 });
    const s1 = streamText({ model: openai('fast'), messages: first, maxRetries: 0, onError: () => {} });
    await s1.text;
    const turns = [];
    for (const earlier of [r1.response.messages, (await s1.response).messages]) {
      const r = await generateText({ model: openai('fast'), maxRetries: 0,
        messages: [...first, ...earlier, { role: 'user', content: 'again [sim echo ttft=10ms gap=1ms]' }] });
      turns.push(r.text);
    }
    return { text: turns.join('|'), finish: 'stop' };
  },
  anthropic_stream: () => stream(anthropic('fast'), 'hello ' + fast),
  anthropic_generate: () => generate(anthropic('fast'), 'hello ' + fast),
  anthropic_tool: () => stream(anthropic('fast'), 'weather? [sim tool=get_weather ttft=10ms gap=1ms]', { tools: weather }),
  anthropic_error_mid: () => stream(anthropic('fast'), 'x [sim fault=error_mid after=5 ttft=10ms gap=1ms]'),
  compat_reasoning: () => stream(compat('reasoner'), thinks),
  anthropic_reasoning: () => stream(anthropic('reasoner'), thinks,
    { providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } } }),
  responses_reasoning: () => stream(openai('reasoner'), thinks,
    { providerOptions: { openai: { forceReasoning: true, reasoningEffort: 'low', reasoningSummary: 'auto' } } }),
  anthropic_length: () => generate(anthropic('fast'), 'x [sim ttft=10ms gap=1ms]', { maxOutputTokens: 5 }),
};

const out = {};
for (const [name, f] of Object.entries(cases)) {
  try { out[name] = await f(); } catch (e) { out[name] = { thrown: String(e?.message ?? e), status: e?.statusCode ?? 0 }; }
}
console.log(JSON.stringify(out));
