// --reply-mode sse: a reply that is whole by the time its request has been
// handled (a quick tool's) goes out as one SSE body of known length, with the
// events a streamed reply carries (the priming event, then the response), and
// its event ids resume like any other. A reply still being written streams.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { callTool, getStream, initSession, parseEventId, startMcpd } from './lib/mcpd.mjs';

let mcpd;
before(async () => {
  mcpd = await startMcpd({ args: ['--reply-mode', 'sse'] });
});
after(async () => {
  await mcpd?.cleanup();
});

test('a ready reply is one SSE body of known length: priming event, then the response', async () => {
  const { session } = await initSession(mcpd.port);
  const r = await callTool(mcpd.port, session, 'echo', { message: 'whole' });
  assert.equal(r.status, 200);
  assert.match(String(r.headers['content-type']), /^text\/event-stream/);
  assert.equal(r.headers['cache-control'], 'no-cache, no-transform');
  assert.equal(r.headers['transfer-encoding'], undefined, 'not chunked');
  assert.ok(Number(r.headers['content-length']) > 0, `a length: ${JSON.stringify(r.headers)}`);
  assert.equal(r.events.length, 2, `two events: ${JSON.stringify(r.events)}`);
  const [prime, reply] = r.events;
  assert.equal(prime.data, '');
  assert.equal(typeof prime.retry, 'number', 'the priming event carries retry:');
  assert.match(prime.id ?? '', /^.+:-1$/);
  assert.equal(parseEventId(reply.id).stream, parseEventId(prime.id).stream);
  assert.equal(parseEventId(reply.id).seq, 0);
  assert.equal(r.response?.result?.content?.[0]?.text, 'whole');
});

test('its priming event id resumes: a GET with it replays the response', async () => {
  const { session } = await initSession(mcpd.port);
  const r = await callTool(mcpd.port, session, 'echo', { message: 'again' });
  const g = await getStream(mcpd.port, session, { lastEventId: r.events[0].id });
  try {
    assert.equal(g.status, 200);
    const msgs = await g.sse.rest(8000);
    assert.equal(msgs.length, 1, JSON.stringify(msgs.map((m) => m.msg)));
    assert.equal(msgs[0].msg.id, r.id);
    assert.equal(msgs[0].msg.result?.content?.[0]?.text, 'again');
    assert.equal(msgs[0].ev.id, r.events[1].id);
  } finally {
    g.close();
  }
});

test('a reply still being written streams: chunked, progress before the response', async () => {
  const { session } = await initSession(mcpd.port);
  const r = await callTool(mcpd.port, session, 'countdown', { n: 3, interval_ms: 50 }, { progressToken: 'w' });
  assert.equal(r.status, 200);
  assert.match(String(r.headers['content-type']), /^text\/event-stream/);
  assert.equal(r.headers['content-length'], undefined);
  assert.match(String(r.headers['transfer-encoding']), /chunked/);
  const progress = r.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
  assert.deepEqual(progress, [1, 2, 3]);
  assert.equal(r.response?.result?.content?.[0]?.text, 'countdown finished');
  assert.equal(r.events[0].data, '', 'the priming event first');
});
