// How SSE replies are written. --reply-mode sse: a reply that is whole by
// the time its request has been handled (a quick tool's) goes out as one SSE
// body of known length, with the events a streamed reply carries (the
// priming event, then the response), and its event ids resume like any
// other; a reply still being written streams. A stream that has many
// messages ready (a resume of a finished call) goes out a block of events
// per HTTP chunk, not one chunk per event.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  LATEST,
  callTool,
  chunkedResponse,
  getStream,
  initSession,
  parseEventId,
  rawExchange,
  startMcpd,
} from './lib/mcpd.mjs';

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

test('a resume with many messages ready is written in blocks of events, each message once', async () => {
  const { session } = await initSession(mcpd.port);
  const n = 200;
  const r = await callTool(mcpd.port, session, 'countdown', { n, interval_ms: 0 }, { progressToken: 'b', ms: 20000 });
  assert.equal(r.response?.result?.content?.[0]?.text, 'countdown finished');
  const head =
    `GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nAccept: text/event-stream\r\n` +
    `Mcp-Session-Id: ${session}\r\nMCP-Protocol-Version: ${LATEST}\r\nLast-Event-ID: ${r.events[0].id}\r\n\r\n`;
  const x = await rawExchange(mcpd.port, head, { ms: 10000, until: (t) => t.includes('\r\n0\r\n\r\n') });
  assert.ok(!x.timedOut, `the replay ended: ${x.text.slice(0, 300)}`);
  const { head: h, chunks } = chunkedResponse(x.text);
  assert.match(h, /^HTTP\/1\.1 200 /);
  assert.match(h, /transfer-encoding: chunked/i);
  const body = chunks.join('');
  const data = body.split('\n').filter((l) => l.startsWith('data: ') && l.length > 6);
  const msgs = data.map((l) => JSON.parse(l.slice(6)));
  assert.deepEqual(
    msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress),
    Array.from({ length: n }, (_, i) => i + 1),
  );
  assert.equal(msgs[msgs.length - 1].id, r.id);
  assert.equal(msgs.length, n + 1);
  // ~120 bytes an event, 4 KiB blocks: a handful of chunks, not n + 1
  assert.ok(chunks.length <= n / 10, `${n + 1} messages in ${chunks.length} chunks`);
});
