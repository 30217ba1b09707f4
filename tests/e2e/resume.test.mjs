// Resumability: (a) a client drops a POST's SSE connection mid-call and
// resumes it with GET + Last-Event-ID; (b) mcpd is SIGKILLed mid-call and
// restarted on the same db: the session survives and the interrupted
// request's stream ends with a JSON-RPC error.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  LATEST,
  callTool,
  freePort,
  getStream,
  initSession,
  mcpHeaders,
  newId,
  openStream,
  parseEventId,
  sleep,
  startMcpd,
} from './lib/mcpd.mjs';

/** POST a countdown with a progress token; returns the open stream. */
async function startCountdown(port, session, n, interval_ms, progressToken) {
  const id = newId();
  const s = await openStream(port, {
    method: 'POST',
    headers: mcpHeaders({ session, version: LATEST }),
    body: {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n, interval_ms }, _meta: { progressToken } },
    },
  });
  assert.equal(s.status, 200, 'countdown POST status');
  assert.match(String(s.headers['content-type']), /^text\/event-stream/, 'countdown with progress replies with SSE');
  return { id, s };
}

/** Read until `count` progress notifications were seen; returns them and the last event id. */
async function readProgress(sse, count, token) {
  const seen = [];
  let lastId;
  while (seen.length < count) {
    const m = await sse.nextMessage(5000);
    assert.notEqual(m, null, `stream ended after ${seen.length} progress events`);
    assert.equal(m.msg.method, 'notifications/progress', `unexpected message ${JSON.stringify(m.msg)}`);
    assert.equal(m.msg.params.progressToken, token);
    assert.ok(m.ev.id, 'every message event carries an id');
    seen.push(m.msg.params.progress);
    lastId = m.ev.id;
  }
  return { seen, lastId };
}

test('(a) drop the POST SSE connection after 3 progress events, resume with GET + Last-Event-ID', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const token = 'resume-a';
    const { id, s } = await startCountdown(mcpd.port, session, 10, 100, token);
    const { seen, lastId } = await readProgress(s.sse, 3, token);
    assert.deepEqual(seen, [1, 2, 3]);
    // plan: SSE headers for proxies, and a priming event first for 2025-11-25
    assert.equal(s.headers['cache-control'], 'no-cache, no-transform');
    assert.equal(s.headers['x-accel-buffering'], 'no');
    assert.equal(s.headers['content-length'], undefined);
    const prime = s.sse.all[0];
    assert.equal(prime.data, '', `first event is a priming event: ${JSON.stringify(prime)}`);
    assert.equal(typeof prime.retry, 'number', 'priming event carries retry:');
    assert.match(prime.id ?? '', /^.+:-1$/, 'priming id is <stream>:-1 on a new stream');
    assert.equal(parseEventId(prime.id).stream, parseEventId(lastId).stream);
    s.close(); // destroy the socket mid-call

    const g = await getStream(mcpd.port, session, { lastEventId: lastId });
    assert.equal(g.status, 200, 'resume GET status');
    assert.match(String(g.headers['content-type']), /^text\/event-stream/);
    let msgs;
    try {
      msgs = await g.sse.rest(8000); // all remaining messages, then the stream ends
    } finally {
      g.close();
    }
    const progress = msgs.filter((m) => m.msg.method === 'notifications/progress').map((m) => m.msg.params.progress);
    assert.deepEqual(progress, [4, 5, 6, 7, 8, 9, 10], 'remaining progress exactly once, in order');
    const last = msgs[msgs.length - 1].msg;
    assert.equal(last.id, id, 'the final message is the response');
    assert.equal(last.result?.content?.[0]?.text, 'countdown finished');
    assert.equal(msgs.length, 8, `nothing else on the resumed stream: ${JSON.stringify(msgs.map((m) => m.msg))}`);
    // ids: same stream as the one resumed, strictly increasing seq after lastId
    const from = parseEventId(lastId);
    let prev = from.seq;
    for (const m of msgs) {
      const e = parseEventId(m.ev.id);
      assert.equal(e.stream, from.stream, `event ${m.ev.id} from another stream`);
      assert.ok(e.seq > prev, `event ids not increasing: ${m.ev.id} after seq ${prev}`);
      prev = e.seq;
    }
    await callTool(mcpd.port, session, 'echo', { message: 'after-resume' }).then((r) =>
      assert.equal(r.response?.result?.content?.[0]?.text, 'after-resume'),
    );
  } finally {
    await mcpd.cleanup();
  }
});

test('(b) SIGKILL mid-call, restart on the same db: session survives, stream ends with an error', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const token = 'resume-b';
    const { id, s } = await startCountdown(mcpd.port, session, 50, 100, token);
    const { seen, lastId } = await readProgress(s.sse, 3, token);
    assert.deepEqual(seen, [1, 2, 3]);

    mcpd.kill('SIGKILL');
    const ex = await mcpd.exited;
    assert.equal(ex.signal, 'SIGKILL');
    s.close();

    await sleep(100);
    await mcpd.restart({ port: await freePort() });

    // the old session works without initialize
    const e = await callTool(mcpd.port, session, 'echo', { message: 'survived' });
    assert.equal(e.status, 200, `echo on the old session after restart: HTTP ${e.status} ${e.text || ''}`);
    assert.equal(e.response?.result?.content?.[0]?.text, 'survived');

    // the interrupted stream: stored events after lastId, then an error, then the end
    const g = await getStream(mcpd.port, session, { lastEventId: lastId });
    assert.equal(g.status, 200, 'resume GET status after restart');
    let msgs;
    try {
      msgs = await g.sse.rest(8000);
    } finally {
      g.close();
    }
    assert.ok(msgs.length >= 1, 'resumed stream carries at least the terminal error');
    const last = msgs[msgs.length - 1].msg;
    assert.equal(last.id, id, `final message answers the countdown: ${JSON.stringify(last)}`);
    assert.ok(last.error, `final message is an error: ${JSON.stringify(last)}`);
    assert.equal(last.error.code, -32603);
    assert.match(last.error.message, /interrupted by server restart/);
    const progress = msgs.slice(0, -1).map((m) => {
      assert.equal(m.msg.method, 'notifications/progress', `unexpected ${JSON.stringify(m.msg)}`);
      return m.msg.params.progress;
    });
    // whatever had been stored after lastId, exactly once and in order
    progress.forEach((p, i) => assert.equal(p, 4 + i, `stored progress replayed in order: ${progress}`));
    assert.ok(progress.length < 47, 'countdown cannot have finished');
    const from = parseEventId(lastId);
    let prev = from.seq;
    for (const m of msgs) {
      const ev = parseEventId(m.ev.id);
      assert.equal(ev.stream, from.stream);
      assert.ok(ev.seq > prev, `event ids not increasing: ${m.ev.id}`);
      prev = ev.seq;
    }

    // resuming again from the same id gives the same messages (they are stored)
    const g2 = await getStream(mcpd.port, session, { lastEventId: lastId });
    assert.equal(g2.status, 200);
    let msgs2;
    try {
      msgs2 = await g2.sse.rest(8000);
    } finally {
      g2.close();
    }
    assert.deepEqual(
      msgs2.map((m) => m.msg),
      msgs.map((m) => m.msg),
      'a second resume replays the same stored messages',
    );
  } finally {
    await mcpd.cleanup();
  }
});
