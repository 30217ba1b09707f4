// One client cannot take every worker (issue 7, defect 6): a 2025-03-26 batch
// of 3,000 long-polls holds no thread while it waits (the poll lot follows
// them all), a session has at most --max-inflight-per-session requests in
// flight (running handlers and waiting polls; the rest get 429 / -32015 at
// once), and 100 long countdowns on one session do not delay another
// session's request. Every process this file signals is one it started.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { integrityCheck } from './lib/integrity.mjs';
import { ON_POSTGRES, echo, initSession, mcpHeaders, newId, procThreads, request, rpc, sleep, withMcpd } from './lib/mcpd.mjs';

const TOO_MANY_IN_FLIGHT = -32015;

/** Samples mcpd's thread count until stop() is called; resolves the peak. */
function threadSampler(pid) {
  let peak = procThreads(pid);
  let on = true;
  const done = (async () => {
    while (on) {
      peak = Math.max(peak, procThreads(pid));
      await sleep(20);
    }
    return peak;
  })();
  return { stop: () => ((on = false), done) };
}

/** A stream that stays empty for a while: a countdown opted in to long-polling. */
async function quietStream(port, session, version) {
  const r = await request(port, {
    headers: mcpHeaders({ session, version }),
    body: { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'countdown', arguments: { n: 1, interval_ms: 20000 }, stream: true } },
  });
  assert.equal(r.json?.result?.status, 'streaming_started', r.text);
  return r.json.result.stream_id;
}

async function timed(fn) {
  const t0 = Date.now();
  const v = await fn();
  return { v, ms: Date.now() - t0 };
}

test('a batch of 3,000 waiting long-polls holds no threads; past the per-session cap they are refused at once', async () => {
  await withMcpd(['--max-inflight-per-session', '128'], {}, async (m) => {
    const { session } = await initSession(m.port, { protocolVersion: '2025-03-26' });
    const streamId = await quietStream(m.port, session, null);
    const baseline = procThreads(m.pid);
    const sampler = threadSampler(m.pid);
    const batch = Array.from({ length: 3000 }, (_, i) => ({
      jsonrpc: '2.0',
      id: `p${i}`,
      method: 'mcpd/poll',
      params: { stream_id: streamId, from_seq: 0, wait_ms: 3000 },
    }));
    const pending = rpc(m.port, batch, { session, version: null, ms: 60000 });
    await sleep(500);
    // Another session is served while the polls wait.
    const other = await initSession(m.port);
    const { v: text, ms } = await timed(() => echo(m.port, other.session, 'not-starved'));
    assert.equal(text, 'not-starved');
    assert.ok(ms < 5000, `another session waited ${ms} ms`);
    const r = await pending;
    const peak = await sampler.stop();
    assert.equal(r.status, 200, r.text?.slice(0, 300));
    const replies = r.messages.filter((x) => 'result' in x || 'error' in x);
    assert.equal(replies.length, 3000);
    const waited = replies.filter((x) => x.result);
    const refused = replies.filter((x) => x.error);
    // The quiet countdown itself is one of the session's 128.
    assert.equal(waited.length, 127, 'the cap of polls waited');
    for (const w of waited) assert.deepEqual(w.result.chunks, []);
    for (const e of refused) assert.equal(e.error.code, TOO_MANY_IN_FLIGHT);
    assert.match(refused[0].error.message, /--max-inflight-per-session/);
    assert.ok(peak < baseline + 40, `threads went from ${baseline} to ${peak} for 3,000 waiting polls`);
    if (!ON_POSTGRES) assert.equal(integrityCheck(m.db), 'ok'); // SQLite's own check
  });
});

test('100 long countdowns on one session: the cap refuses the excess with 429, another session is not delayed', async () => {
  await withMcpd(['--max-inflight-per-session', '60'], {}, async (m) => {
    const { session } = await initSession(m.port);
    const calls = Array.from({ length: 100 }, () =>
      request(m.port, {
        headers: mcpHeaders({ session }),
        body: { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 1500 } } },
        timeout: 60000,
      }),
    );
    await sleep(300);
    const other = await initSession(m.port);
    const { v: text, ms } = await timed(() => echo(m.port, other.session, 'other'));
    assert.equal(text, 'other');
    assert.ok(ms < 2000, `another session's echo took ${ms} ms next to 100 countdowns`);
    const results = await Promise.all(calls);
    const refused = results.filter((r) => r.status === 429);
    const served = results.filter((r) => r.status === 200);
    assert.equal(served.length + refused.length, 100, results.map((r) => r.status).join(','));
    assert.equal(served.length, 60, 'the cap of countdowns ran');
    for (const r of refused) assert.equal(r.json.error.code, TOO_MANY_IN_FLIGHT);
    // The slots are free again.
    assert.equal(await echo(m.port, session, 'again'), 'again');
  });
});
