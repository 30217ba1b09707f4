// Resuming from the priming event's id: a 2025-11-25 client that loses its
// connection after the priming event (an id with empty data) and before
// the first message holds that id and resumes from it, as an EventSource
// would. The shared SSE reader (lib/mcpd.mjs) skips empty-data events in
// nextMessage(); its lastEventId must still move past them, or a client
// built on it (tests/soak/soak.mjs) has nothing to resume from.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { LATEST, freePort, getStream, initSession, mcpHeaders, newId, openStream, parseEventId, startMcpd, waitFor } from './lib/mcpd.mjs';

/** POST a countdown with a progress token; resolves once its priming event has arrived. */
async function countdownPrimed(port, session, n, interval_ms) {
  const id = newId();
  const s = await openStream(port, {
    method: 'POST',
    headers: mcpHeaders({ session, version: LATEST }),
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n, interval_ms }, _meta: { progressToken: 'prime' } } },
  });
  assert.equal(s.status, 200);
  assert.match(String(s.headers['content-type']), /^text\/event-stream/);
  await waitFor(() => s.sse.all.length >= 1, 5000, 'the priming event');
  const prime = s.sse.all[0];
  assert.equal(prime.data, '', `the first event is the priming event: ${JSON.stringify(prime)}`);
  assert.match(prime.id ?? '', /^.+:-1$/, 'the priming id is <stream>:-1');
  return { id, s, prime };
}

/** Reads a resumed stream to its end; every message must come from `stream`, in seq order. */
async function resumeAll(port, session, lastEventId, stream) {
  const g = await getStream(port, session, { lastEventId });
  assert.equal(g.status, 200, `resume from ${lastEventId}`);
  let msgs;
  try {
    msgs = await g.sse.rest(10000);
  } finally {
    g.close();
  }
  msgs.forEach((m, i) => assert.deepEqual(parseEventId(m.ev.id), { stream, seq: i }, `event ${i} of the resumed stream`));
  return msgs.map((m) => m.msg);
}

test('a connection dropped after the priming event resumes from its id and gets every message once', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const { id, s, prime } = await countdownPrimed(mcpd.port, session, 4, 1500);
    // The client waits for a message, skipping the priming event, and
    // gives up before the first progress (1.5 s away).
    await assert.rejects(s.sse.nextMessage(200), /timeout/);
    assert.equal(s.sse.all.length, 1, 'no message had arrived yet');
    s.close();
    assert.equal(s.sse.lastEventId, prime.id, 'the reader keeps the priming id as its resume cursor');

    const msgs = await resumeAll(mcpd.port, session, s.sse.lastEventId, parseEventId(prime.id).stream);
    assert.deepEqual(
      msgs.slice(0, -1).map((m) => m.params?.progress),
      [1, 2, 3, 4],
      'every progress once, in order',
    );
    assert.equal(msgs.at(-1).id, id);
    assert.equal(msgs.at(-1).result?.content?.[0]?.text, 'countdown finished');
  } finally {
    await mcpd.cleanup();
  }
});

test('SIGKILL after the priming event, before any message: resuming from its id after restart gets the terminal error', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const { id, s, prime } = await countdownPrimed(mcpd.port, session, 3, 3000);
    mcpd.kill('SIGKILL');
    assert.equal((await mcpd.exited).signal, 'SIGKILL');
    // What a client reading messages sees: the stream ends without one.
    assert.equal(await s.sse.nextMessage(5000), null, 'the connection ended with no message');
    assert.equal(s.sse.all.length, 1, 'the kill landed before any message');
    s.close();
    const cursor = s.sse.lastEventId;
    assert.equal(cursor, prime.id, 'the reader keeps the priming id as its resume cursor');

    await mcpd.restart({ port: await freePort() });
    const msgs = await resumeAll(mcpd.port, session, cursor, parseEventId(prime.id).stream);
    assert.equal(msgs.length, 1, `only the terminal error: ${JSON.stringify(msgs)}`);
    assert.equal(msgs[0].id, id);
    assert.equal(msgs[0].error?.code, -32603);
    assert.match(msgs[0].error?.message ?? '', /interrupted by server restart/);
  } finally {
    await mcpd.cleanup();
  }
});
