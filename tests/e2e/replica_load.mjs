// Load for the gateway-replica deployment test (tests/e2e/replicas.sh):
// CONCURRENCY agent sessions of CALLS calls each go through URL for
// SECONDS, each call extending its session's conversation with the answer
// and a tool result after a 10-40 ms tool gap. Every call is logged as one
// JSON line in LOG: session, call index, start and end (ms since the epoch),
// HTTP status (0: no answer), the instance that served it, its cached
// tokens and the replica nginx sent it to (X-Talaria-Replica).
//
//   node replica_load.mjs run URL SECONDS CONCURRENCY CALLS LOG
//   node replica_load.mjs summarize LOG
// `summarize` prints one JSON line: calls, ok, failed, returns (calls after
// a session's first whose previous call succeeded), affinity (the fraction
// of those served by the previous call's instance with cached tokens),
// replicas (distinct replicas seen) and sessions_on_both (sessions whose
// calls reached more than one replica).
import { appendFileSync, readFileSync } from 'node:fs';

const [mode, ...args] = process.argv.slice(2);

async function run(url, seconds, concurrency, calls, log) {
  const end = Date.now() + Number(seconds) * 1000;
  const system = 'you are a coding agent working in a large repository. '.repeat(30);
  async function session(id) {
    const messages = [{ role: 'system', content: system }, { role: 'user', content: `task ${id}: fix the bug` }];
    for (let i = 0; i < Number(calls); ++i) {
      const rec = { session: id, call: i, start: Date.now(), status: 0, instance: '', cached: 0, replica: '' };
      try {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-Session-Id': id },
          body: JSON.stringify({ model: 'qwen3-32b', max_tokens: 12, messages }),
          signal: AbortSignal.timeout(10000),
        });
        rec.status = res.status;
        rec.replica = res.headers.get('x-talaria-replica') ?? '';
        const body = await res.json().catch(() => ({}));
        if (res.status === 200) {
          rec.instance = body.talaria?.instance ?? '';
          rec.cached = body.usage?.prompt_tokens_details?.cached_tokens ?? 0;
          messages.push({ role: 'assistant', content: body.choices?.[0]?.message?.content ?? '' });
          messages.push({ role: 'tool', content: `result ${i} of ${id}` });
        } else {
          rec.error = JSON.stringify(body).slice(0, 200);
        }
      } catch (e) {
        rec.error = String(e).slice(0, 200);
      }
      rec.end = Date.now();
      appendFileSync(log, JSON.stringify(rec) + '\n');
      if (rec.status !== 200) return;
      await new Promise((r) => setTimeout(r, 10 + Math.random() * 30));
    }
  }
  async function worker(w) {
    for (let n = 0; Date.now() < end; ++n) await session(`agent-${process.pid}-${w}-${n}`);
  }
  await Promise.all(Array.from({ length: Number(concurrency) }, (_, w) => worker(w)));
}

function summarize(log) {
  const recs = readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const bySession = new Map();
  for (const r of recs) {
    if (!bySession.has(r.session)) bySession.set(r.session, []);
    bySession.get(r.session).push(r);
  }
  let returns = 0, kept = 0, onBoth = 0;
  const replicas = new Set();
  for (const calls of bySession.values()) {
    calls.sort((a, b) => a.call - b.call);
    const seen = new Set();
    for (let i = 0; i < calls.length; ++i) {
      if (calls[i].replica) { seen.add(calls[i].replica); replicas.add(calls[i].replica); }
      if (i === 0 || calls[i - 1].status !== 200 || calls[i].status !== 200) continue;
      ++returns;
      if (calls[i].instance === calls[i - 1].instance && calls[i].cached > 0) ++kept;
    }
    if (seen.size > 1) ++onBoth;
  }
  const failed = recs.filter((r) => r.status !== 200);
  console.log(JSON.stringify({
    calls: recs.length, ok: recs.length - failed.length, failed: failed.length,
    returns, affinity: returns ? kept / returns : 0, replicas: replicas.size, sessions: bySession.size,
    sessions_on_both: onBoth, first_failures: failed.slice(0, 3),
  }));
}

if (mode === 'run') await run(...args);
else if (mode === 'summarize') summarize(args[0]);
else { console.error('usage: replica_load.mjs run URL SECONDS CONCURRENCY CALLS LOG | summarize LOG'); process.exit(2); }
