// Drives `talaria serve` with the official openai npm client: a streaming
// chat over several turns of one session (X-Session-Id), checking content,
// usage, and that later turns reuse the session's cached prefix.
import OpenAI from 'openai';

const baseURL = process.argv[2];
const fail = (message) => {
  console.error(`openai e2e: FAIL: ${message}`);
  process.exit(1);
};

const client = new OpenAI({
  baseURL,
  apiKey: 'e2e-test-key',
  defaultHeaders: { 'X-Session-Id': 'e2e-session' },
  maxRetries: 0,
});

const models = await client.models.list();
const ids = models.data.map((m) => m.id);
if (!ids.includes('qwen3-235b-a22b')) fail(`models: ${ids}`);

const messages = [
  { role: 'system', content: 'You are a coding agent working in a repository. '.repeat(20) },
  { role: 'user', content: 'Fix the failing test in astropy/io.' },
];
let cachedLater = 0;
for (let turn = 0; turn < 3; ++turn) {
  const stream = await client.chat.completions.create({
    model: 'qwen3-235b-a22b',
    messages,
    max_tokens: 8,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    const choice = chunk.choices?.[0];
    if (choice?.delta?.content) text += choice.delta.content;
    if (choice?.finish_reason) finish = choice.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  if (text.length === 0) fail(`turn ${turn}: no content`);
  if (chunks < 2) fail(`turn ${turn}: ${chunks} chunks, expected a stream`);
  if (finish !== 'length') fail(`turn ${turn}: finish_reason ${finish}`);
  if (!usage || usage.completion_tokens !== 8) fail(`turn ${turn}: usage ${JSON.stringify(usage)}`);
  if (turn > 0) cachedLater = Math.max(cachedLater, usage.prompt_tokens_details?.cached_tokens ?? 0);
  messages.push({ role: 'assistant', content: text });
  messages.push({ role: 'tool', content: `pytest output, run ${turn}: 1 failed` });
}
if (cachedLater <= 0) fail('later turns reused no cached prefix');

// A wrong key is refused with an OpenAI-style 401.
const stranger = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
try {
  await stranger.models.list();
  fail('a wrong API key was accepted');
} catch (e) {
  if (e.status !== 401) fail(`wrong key: status ${e.status}`);
}
console.log(`openai e2e: ok (3 streaming turns, ${cachedLater} cached prompt tokens on a later turn)`);
