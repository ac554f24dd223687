// Load for the process-level fault test (tests/e2e/faults.sh): CONCURRENCY
// agent sessions stream chat calls through URL for SECONDS, each session
// growing its conversation, and every call's end is classified:
//   completed     the stream ended with a final chunk and [DONE]
//   error_event   it ended with an error event and [DONE] (the server saw a fault)
//   refused       an error status before the stream, or no connection at all
//   broken        the connection broke mid-answer (only a killed process may do this)
//   unterminated  the stream ended cleanly without [DONE] (never allowed)
//   hung          no end within 4 s (never allowed: a call streams for
//                 about 0.5 s, and a hung instance is found in 0.5 s)
// Prints one JSON line with the counts (and `completed_after_s`: calls
// completed that began after that many seconds, from argument 5).
// Usage: node fault_load.mjs URL SECONDS CONCURRENCY [AFTER_S]
const [url, seconds, concurrency, afterArg] = process.argv.slice(2);
const start = Date.now();
const end = start + Number(seconds) * 1000;
const after = Number(afterArg ?? 1e9) * 1000;
const counts = { completed: 0, error_event: 0, refused: 0, broken: 0, unterminated: 0, hung: 0, completed_after_s: 0 };

async function call(session, messages) {
  const began = Date.now() - start;
  let res;
  const abort = AbortSignal.timeout(4000);
  try {
    res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-Id': session },
      body: JSON.stringify({ model: 'qwen3-32b', max_tokens: 120, stream: true, messages }),
      signal: abort,
    });
  } catch (e) {
    counts[abort.aborted ? 'hung' : 'refused']++;
    await new Promise((r) => setTimeout(r, 50));  // nobody listening: do not spin
    return '';
  }
  if (res.status !== 200) {
    await res.text().catch(() => '');
    counts.refused++;
    await new Promise((r) => setTimeout(r, 50));
    return '';
  }
  let body = '';
  try {
    const decoder = new TextDecoder();
    for await (const chunk of res.body) body += decoder.decode(chunk, { stream: true });
  } catch (e) {
    counts[abort.aborted ? 'hung' : 'broken']++;
    return '';
  }
  if (!body.includes('data: [DONE]')) {
    counts.unterminated++;
    return '';
  }
  if (body.includes('"error"')) {
    counts.error_event++;
    return '';
  }
  counts.completed++;
  if (began >= after) counts.completed_after_s++;
  let text = '';
  for (const line of body.split('\n\n')) {
    if (!line.startsWith('data: {')) continue;
    const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta?.content;
    if (delta) text += delta;
  }
  return text;
}

async function session(k) {
  for (let s = 0; Date.now() < end; ++s) {
    const id = `fault-${k}-${s}`;
    const messages = [{ role: 'system', content: 'you are a coding agent '.repeat(30) }];
    for (let turn = 0; turn < 4 && Date.now() < end; ++turn) {
      messages.push({ role: 'user', content: `step ${turn} of session ${id}` });
      const answer = await call(id, messages);
      messages.push({ role: 'assistant', content: answer });
    }
  }
}

await Promise.all(Array.from({ length: Number(concurrency) }, (_, k) => session(k)));
console.log(JSON.stringify(counts));
