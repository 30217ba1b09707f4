// HTTP long-polling (issue 3): "stream": true opt-in and mcpd/poll.
// Ack shape; a poll blocks until a chunk exists (and no longer); max_chunks;
// has_more/next_seq/state through a stream's life; a client that crashes and
// restarts from_seq gets every chunk exactly once; after SIGKILL + restart
// the stored chunks are served and the stream ends with the restart error;
// bad inputs (unknown / other session's / expired stream, bad params, huge
// wait_ms); an elicitation answered by POST while long-polling. After each,
// the server keeps serving.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { ACCEPT_BOTH, echo, initSession, mcpHeaders, newId, openStream, request, sleep, startMcpd } from './lib/mcpd.mjs';

/** POST one message on a session; {status, headers, msg (parsed JSON), text, ms}. */
async function post(port, session, body, { timeout = 40000 } = {}) {
  const t0 = Date.now();
  const r = await request(port, { headers: mcpHeaders({ session }), body, timeout });
  return { status: r.status, headers: r.headers, msg: r.json, text: r.text, ms: Date.now() - t0 };
}

/** tools/call with "stream": true; asserts the ack; returns {id, streamId}. */
async function startStream(port, session, name, args, { progressToken, id = newId() } = {}) {
  const params = { name, arguments: args, stream: true };
  if (progressToken !== undefined) params._meta = { progressToken };
  const r = await post(port, session, { jsonrpc: '2.0', id, method: 'tools/call', params });
  assert.equal(r.status, 200, `ack HTTP status: ${r.text}`);
  assert.match(String(r.headers['content-type']), /^application\/json/, 'the ack is a JSON reply');
  assert.equal(r.msg?.result?.status, 'streaming_started', `ack: ${r.text}`);
  return { id, streamId: r.msg.result.stream_id, ack: r.msg, ms: r.ms };
}

/** mcpd/poll; returns {status, msg, result, error, ms}. */
async function poll(port, session, params, opts) {
  const r = await post(port, session, { jsonrpc: '2.0', id: newId(), method: 'mcpd/poll', params }, opts);
  return { ...r, result: r.msg?.result, error: r.msg?.error };
}

/** Poll from `from` until the end chunk; returns all chunks read. */
async function pollToEnd(port, session, streamId, from = 0, { maxChunks = 100, deadlineMs = 20000 } = {}) {
  const chunks = [];
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    assert.ok(Date.now() < deadline, `stream ${streamId} did not end within ${deadlineMs} ms`);
    const p = await poll(port, session, { stream_id: streamId, from_seq: from, wait_ms: 5000, max_chunks: maxChunks });
    assert.equal(p.status, 200, p.text);
    assert.ok(p.result, `poll error: ${p.text}`);
    for (const c of p.result.chunks) {
      assert.equal(c.seq, from, `chunks in order without gaps: ${p.text}`);
      from++;
      chunks.push(c);
    }
    assert.equal(p.result.next_seq, from, `next_seq: ${p.text}`);
    if (chunks.length && chunks.at(-1).end) return { chunks, last: p.result };
  }
}

const progressOf = (c) => c.message?.params?.progress;

let mcpd;
let session;

before(async () => {
  mcpd = await startMcpd();
  ({ session } = await initSession(mcpd.port, { capabilities: { elicitation: {} } }));
});

after(async () => {
  const exit = await mcpd.stop('SIGTERM', 10000);
  const stderr = mcpd.stderr;
  await mcpd.cleanup();
  assert.doesNotMatch(stderr, /ERROR: (Address|Leak)Sanitizer|runtime error:/, 'no sanitizer reports');
  assert.equal(exit?.code, 0, `mcpd exit after SIGTERM: ${JSON.stringify(exit)}\n${stderr}`);
});

test('ack: immediate JSON handle {stream_id, status, transport:"http"} and nothing else', async () => {
  const id = newId();
  const { ack, streamId, ms } = await startStream(mcpd.port, session, 'countdown', { n: 2, interval_ms: 500 }, { id });
  assert.deepEqual(ack, {
    jsonrpc: '2.0',
    id,
    result: { stream_id: streamId, status: 'streaming_started', transport: 'http' },
  });
  assert.equal(typeof streamId, 'string');
  assert.ok(streamId.length > 0);
  assert.ok(ms < 500, `the ack does not wait for the call (${ms} ms)`);
  // any request may opt in, not only tools/call
  const l = await post(mcpd.port, session, { jsonrpc: '2.0', id: 'list', method: 'tools/list', params: { stream: true } });
  assert.equal(l.msg?.result?.status, 'streaming_started', l.text);
  const { chunks } = await pollToEnd(mcpd.port, session, l.msg.result.stream_id);
  assert.equal(chunks.length, 1);
  assert.equal(chunks[0].message.id, 'list');
  assert.ok(Array.isArray(chunks[0].message.result.tools), 'the opted-in tools/list result arrives by poll');
  // the backend never sees the opt-in: the polled result of the countdown is the plain one
  const { chunks: c2 } = await pollToEnd(mcpd.port, session, streamId);
  assert.deepEqual(c2.at(-1).message, { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'countdown finished' }] } });
  await echo(mcpd.port, session);
});

test('the ack is JSON in --reply-mode sse too', async () => {
  const m = await startMcpd({ args: ['--reply-mode', 'sse'] });
  try {
    const { session: s } = await initSession(m.port);
    const { streamId } = await startStream(m.port, s, 'echo', { message: 'x' });
    const p = await poll(m.port, s, { stream_id: streamId, from_seq: 0, wait_ms: 2000 });
    assert.match(String(p.headers['content-type']), /^application\/json/, 'a poll result is JSON in sse mode');
    assert.equal(p.result?.chunks?.[0]?.message?.result?.content?.[0]?.text, 'x', p.text);
  } finally {
    await m.cleanup();
  }
});

test('wait_ms: a poll blocks until the first chunk exists, then returns at once', async () => {
  const { streamId } = await startStream(mcpd.port, session, 'countdown', { n: 3, interval_ms: 300 }, { progressToken: 'w' });
  const p = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 2000, max_chunks: 10 });
  assert.equal(p.status, 200, p.text);
  assert.ok(p.ms >= 150, `returned after ${p.ms} ms, before the first chunk could exist`);
  assert.ok(p.ms < 1200, `returned after ${p.ms} ms: should return when the first chunk (at ~300 ms) exists`);
  assert.equal(p.result.chunks.length, 1, `one chunk: ${p.text}`);
  assert.equal(p.result.chunks[0].seq, 0);
  assert.equal(progressOf(p.result.chunks[0]), 1);
  assert.equal(p.result.chunks[0].end, false);
  // wait_ms 0 (or absent): no waiting at all
  const q = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 1 });
  assert.ok(q.ms < 250, `a poll without wait_ms returned after ${q.ms} ms`);
  assert.ok(Array.isArray(q.result?.chunks), q.text);
  // a poll that is waiting does not hold up the session's other requests
  const { streamId: idle } = await startStream(mcpd.port, session, 'countdown', { n: 1, interval_ms: 2500 });
  const waiting = poll(mcpd.port, session, { stream_id: idle, from_seq: 0, wait_ms: 10000 });
  await sleep(100);
  const t0 = Date.now();
  await echo(mcpd.port, session, 'while-polling');
  assert.ok(Date.now() - t0 < 1000, 'echo answered while a long poll waits');
  const w = await waiting;
  assert.ok(w.ms >= 1500 && w.ms < 6000, `the idle poll returned after ${w.ms} ms (the result comes at ~2.5 s)`);
  assert.equal(w.result.chunks.length, 1);
  assert.equal(w.result.chunks[0].end, true);
});

test('state, has_more, next_seq through a stream: initializing → active → finished', async () => {
  const { id, streamId } = await startStream(mcpd.port, session, 'countdown', { n: 2, interval_ms: 300 }, { progressToken: 's' });
  const p0 = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 0 });
  assert.deepEqual(p0.result, { stream_id: streamId, chunks: [], has_more: true, next_seq: 0, state: 'initializing' }, p0.text);

  const p1 = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 3000 });
  assert.equal(p1.result.state, 'active', p1.text);
  assert.equal(p1.result.has_more, true);
  assert.equal(p1.result.next_seq, 1);
  assert.deepEqual(p1.result.chunks.map((c) => [c.seq, progressOf(c), c.end]), [[0, 1, false]]);

  // nothing new yet: an immediate poll from next_seq is empty but still active
  const p1b = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 1, wait_ms: 0 });
  assert.deepEqual(p1b.result, { stream_id: streamId, chunks: [], has_more: true, next_seq: 1, state: 'active' }, p1b.text);

  await sleep(1000); // progress 2 at ~600 ms, the result right after
  const p2 = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 1, wait_ms: 3000 });
  assert.equal(p2.result.state, 'finished', p2.text);
  assert.equal(p2.result.has_more, false);
  assert.equal(p2.result.next_seq, 3);
  assert.deepEqual(
    p2.result.chunks.map((c) => [c.seq, c.end]),
    [
      [1, false],
      [2, true],
    ],
  );
  assert.equal(progressOf(p2.result.chunks[0]), 2);
  assert.deepEqual(p2.result.chunks[1].message, { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'countdown finished' }] } });

  // past the end of a finished stream: at once, empty, no more (even with wait_ms)
  const p3 = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 3, wait_ms: 5000 });
  assert.ok(p3.ms < 1000, `polling past the end of a finished stream waited ${p3.ms} ms`);
  assert.deepEqual(p3.result, { stream_id: streamId, chunks: [], has_more: false, next_seq: 3, state: 'finished' }, p3.text);

  // a finished stream can be read again from any seq
  const p4 = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, max_chunks: 100 });
  assert.deepEqual(p4.result.chunks.map((c) => c.seq), [0, 1, 2]);
  assert.equal(p4.result.has_more, false);
});

test('max_chunks caps the chunks per poll; has_more tells there is more', async () => {
  const { streamId } = await startStream(mcpd.port, session, 'countdown', { n: 5, interval_ms: 1 }, { progressToken: 'm' });
  await pollToEnd(mcpd.port, session, streamId); // let it finish: 5 progress + result = seq 0..5
  const seen = [];
  let from = 0;
  for (const expect of [
    [0, 1],
    [2, 3],
    [4, 5],
  ]) {
    const p = await poll(mcpd.port, session, { stream_id: streamId, from_seq: from, max_chunks: 2 });
    assert.deepEqual(p.result.chunks.map((c) => c.seq), expect, p.text);
    from = p.result.next_seq;
    assert.equal(from, expect[1] + 1);
    assert.equal(p.result.state, 'finished');
    assert.equal(p.result.has_more, from < 6, `has_more after seq ${expect[1]}: ${p.text}`);
    seen.push(...p.result.chunks);
  }
  assert.deepEqual(seen.map(progressOf).slice(0, 5), [1, 2, 3, 4, 5]);
  assert.equal(seen[5].end, true);
  // max_chunks 1 while the stream is live
  const { streamId: live } = await startStream(mcpd.port, session, 'countdown', { n: 3, interval_ms: 100 }, { progressToken: 'm2' });
  await sleep(450);
  const p = await poll(mcpd.port, session, { stream_id: live, from_seq: 0, max_chunks: 1, wait_ms: 1000 });
  assert.deepEqual(p.result.chunks.map((c) => c.seq), [0], p.text);
  assert.equal(p.result.has_more, true);
  assert.equal(p.result.next_seq, 1);
});

test('client crash: restart polling from the last seq + 1 → every chunk exactly once, in order', async () => {
  const N = 12;
  const { id, streamId } = await startStream(mcpd.port, session, 'countdown', { n: N, interval_ms: 60 }, { progressToken: 'crash' });
  const processed = []; // what the "first client life" processed
  let from = 0;
  while (processed.length < 4) {
    const p = await poll(mcpd.port, session, { stream_id: streamId, from_seq: from, wait_ms: 3000, max_chunks: 2 });
    for (const c of p.result.chunks) processed.push(c);
    from = p.result.next_seq;
  }
  // crash mid-poll: a long poll in flight is cut off (its reply is lost)
  const cut = await openStream(mcpd.port, {
    method: 'POST',
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id: newId(), method: 'mcpd/poll', params: { stream_id: streamId, from_seq: from, wait_ms: 5000 } },
    timeout: 10000,
  }).catch(() => null);
  cut?.close();
  // everything but the stream id and the last processed seq is forgotten
  const saved = { streamId, last: processed.at(-1).seq };
  await sleep(300); // chunks go on accumulating meanwhile
  const { chunks: rest } = await pollToEnd(mcpd.port, session, saved.streamId, saved.last + 1, { maxChunks: 3 });
  const all = [...processed, ...rest];
  assert.deepEqual(
    all.map((c) => c.seq),
    Array.from({ length: N + 1 }, (_, i) => i),
    'every chunk exactly once, in order',
  );
  assert.deepEqual(all.slice(0, N).map(progressOf), Array.from({ length: N }, (_, i) => i + 1));
  assert.deepEqual(all.at(-1).message, { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'countdown finished' }] } });
  assert.deepEqual(all.map((c) => c.end), [...Array(N).fill(false), true]);
  await echo(mcpd.port, session);
});

test('SIGKILL + restart on the same db: stored chunks, then the restart error (end, state error)', async () => {
  const m = await startMcpd();
  try {
    const { session: s } = await initSession(m.port);
    const { id, streamId } = await startStream(m.port, s, 'countdown', { n: 50, interval_ms: 100 }, { progressToken: 'k' });
    const seen = [];
    let from = 0;
    while (seen.length < 3) {
      const p = await poll(m.port, s, { stream_id: streamId, from_seq: from, wait_ms: 3000 });
      seen.push(...p.result.chunks);
      from = p.result.next_seq;
    }
    await sleep(350); // a few more chunks are stored but not polled
    m.kill('SIGKILL');
    await m.exited;
    await m.restart();
    const { chunks, last } = await pollToEnd(m.port, s, streamId, from);
    const all = [...seen, ...chunks];
    assert.deepEqual(all.map((c) => c.seq), Array.from({ length: all.length }, (_, i) => i), 'no gap, no duplicate');
    const progress = all.slice(0, -1).map(progressOf);
    assert.deepEqual(progress, Array.from({ length: progress.length }, (_, i) => i + 1), 'the stored progress, in order');
    assert.ok(progress.length >= 3 && progress.length < 50, `progress before the kill: ${progress.length}`);
    const end = all.at(-1);
    assert.equal(end.end, true);
    assert.equal(end.message.id, id, `the end chunk answers the request: ${JSON.stringify(end)}`);
    assert.equal(end.message.error?.code, -32603, JSON.stringify(end));
    assert.match(end.message.error?.message ?? '', /interrupted by server restart/);
    assert.equal(last.state, 'error');
    assert.equal(last.has_more, false);
    await echo(m.port, s, 'after-restart');
  } finally {
    await m.cleanup();
  }
});

test('SIGKILL right after the ack, before the stream has a message: the stream id still resolves after restart', async () => {
  const m = await startMcpd();
  try {
    const { session: s } = await initSession(m.port);
    const { id, streamId } = await startStream(m.port, s, 'countdown', { n: 1, interval_ms: 30000 });
    m.kill('SIGKILL');
    await m.exited;
    await m.restart();
    const { chunks, last } = await pollToEnd(m.port, s, streamId, 0);
    assert.equal(chunks.length, 1, JSON.stringify(chunks));
    assert.equal(chunks[0].message.id, id);
    assert.match(chunks[0].message.error?.message ?? '', /interrupted by server restart/);
    assert.equal(last.state, 'error');
  } finally {
    await m.cleanup();
  }
});

test('bad input: unknown, other session\'s and malformed polls; the server keeps serving', async () => {
  const notFound = (p, sid) => {
    assert.equal(p.status, 200, p.text);
    assert.deepEqual(p.error, { code: -32001, message: 'Stream session not found or expired', data: { stream_id: sid, transport: 'http' } }, p.text);
  };
  notFound(await poll(mcpd.port, session, { stream_id: 'no-such-stream', from_seq: 0 }), 'no-such-stream');
  notFound(await poll(mcpd.port, session, { stream_id: 'no-such-stream', from_seq: 0, wait_ms: 3000 }), 'no-such-stream');
  notFound(await poll(mcpd.port, session, { stream_id: '', from_seq: 0 }), '');

  // another session's stream is not found, not readable
  const { session: other } = await initSession(mcpd.port);
  const { streamId } = await startStream(mcpd.port, other, 'echo', { message: 'secret' });
  const p = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 1000 });
  notFound(p, streamId);
  assert.doesNotMatch(p.text, /secret/);
  // ... while its owner reads it fine
  const own = await pollToEnd(mcpd.port, other, streamId);
  assert.equal(own.chunks[0].message.result.content[0].text, 'secret');

  for (const params of [
    {},
    { from_seq: 0 },
    { stream_id: 42, from_seq: 0 },
    { stream_id: null, from_seq: 0 },
    { stream_id: streamId, from_seq: -1 },
    { stream_id: streamId, from_seq: '0' },
    { stream_id: streamId, from_seq: 1.5 },
  ]) {
    const r = await poll(mcpd.port, other, params);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.error?.code, -32602, `params ${JSON.stringify(params)}: ${r.text}`);
  }
  const noParams = await post(mcpd.port, session, { jsonrpc: '2.0', id: newId(), method: 'mcpd/poll' });
  assert.equal(noParams.msg?.error?.code, -32602, `mcpd/poll without params: ${noParams.text}`);

  // from_seq far beyond the end of a finished stream: empty, no wait
  const far = await poll(mcpd.port, other, { stream_id: streamId, from_seq: 9007199254740991, wait_ms: 5000 });
  assert.ok(far.ms < 1000, `waited ${far.ms} ms`);
  assert.deepEqual(far.result?.chunks, [], far.text);
  assert.equal(far.result?.has_more, false);

  // a poll without a session header is a 400, as any non-initialize request
  const nos = await request(mcpd.port, {
    headers: { Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' },
    body: { jsonrpc: '2.0', id: 1, method: 'mcpd/poll', params: { stream_id: streamId, from_seq: 0 } },
  });
  assert.equal(nos.status, 400, nos.text);

  await echo(mcpd.port, session);
  await echo(mcpd.port, other);
});

test('wait_ms is capped: a huge or negative wait_ms is accepted', async () => {
  // huge: returns when the (soon) chunk exists, not an error or overflow
  const { streamId } = await startStream(mcpd.port, session, 'countdown', { n: 1, interval_ms: 400 });
  const p = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 999999 });
  assert.ok(p.result, p.text);
  assert.ok(p.ms >= 200 && p.ms < 3000, `returned after ${p.ms} ms`);
  assert.equal(p.result.chunks.length, 1);
  const q = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 5, wait_ms: 1e300 });
  assert.ok(q.result || q.error?.code === -32602, q.text);
  // negative: no wait
  const { streamId: idle } = await startStream(mcpd.port, session, 'countdown', { n: 1, interval_ms: 3000 });
  const n = await poll(mcpd.port, session, { stream_id: idle, from_seq: 0, wait_ms: -5 });
  assert.ok(n.ms < 500, `wait_ms -5 waited ${n.ms} ms`);
  assert.deepEqual(n.result?.chunks, [], n.text);
  await echo(mcpd.port, session);
});

test(
  'wait_ms above 30000 is capped at 30 s on an idle stream',
  { skip: !process.env.MCPD_SLOW_TESTS && 'slow (≈30 s): set MCPD_SLOW_TESTS=1' },
  async () => {
    const { streamId } = await startStream(mcpd.port, session, 'countdown', { n: 1, interval_ms: 60000 });
    const p = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 999999 }, { timeout: 60000 });
    assert.ok(p.ms >= 29000 && p.ms < 32000, `returned after ${p.ms} ms`);
    assert.deepEqual(p.result.chunks, []);
    assert.equal(p.result.has_more, true);
  },
);

test('an expired stream (past --stream-retention-ms) is -32001', async () => {
  const m = await startMcpd({ args: ['--stream-retention-ms', '300'] });
  try {
    const { session: s } = await initSession(m.port);
    const { streamId } = await startStream(m.port, s, 'echo', { message: 'soon gone' });
    await pollToEnd(m.port, s, streamId);
    const deadline = Date.now() + 15000;
    let p;
    for (;;) {
      p = await poll(m.port, s, { stream_id: streamId, from_seq: 0 });
      if (p.error || p.result?.state === 'expired' || Date.now() > deadline) break;
      await sleep(250);
    }
    assert.deepEqual(p.error, { code: -32001, message: 'Stream session not found or expired', data: { stream_id: streamId, transport: 'http' } }, p.text);
    await echo(m.port, s);
  } finally {
    await m.cleanup();
  }
});

test('elicitation while long-polling: the server request is a chunk, the answer is POSTed (202)', async () => {
  const { id, streamId } = await startStream(mcpd.port, session, 'test_elicitation', { message: 'Your name?' });
  const p0 = await poll(mcpd.port, session, { stream_id: streamId, from_seq: 0, wait_ms: 5000 });
  assert.equal(p0.result?.chunks?.length, 1, p0.text);
  const req = p0.result.chunks[0];
  assert.equal(req.end, false);
  assert.equal(req.message.method, 'elicitation/create', p0.text);
  assert.equal(req.message.params.message, 'Your name?');
  assert.ok(req.message.id !== undefined);
  assert.equal(p0.result.state, 'active');

  // a long poll is waiting for the result when the answer is POSTed
  const waiting = poll(mcpd.port, session, { stream_id: streamId, from_seq: 1, wait_ms: 10000 });
  await sleep(200);
  const a = await request(mcpd.port, {
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id: req.message.id, result: { action: 'accept', content: { username: 'bob', email: 'bob@example.com' } } },
  });
  assert.equal(a.status, 202, a.text);
  const p1 = await waiting;
  assert.ok(p1.ms < 3000, `the waiting poll returned ${p1.ms} ms after it started`);
  assert.equal(p1.result.chunks.length, 1, p1.text);
  const res = p1.result.chunks[0];
  assert.equal(res.seq, 1);
  assert.equal(res.end, true);
  assert.equal(res.message.id, id);
  assert.match(res.message.result.content[0].text, /action=accept/);
  assert.match(res.message.result.content[0].text, /bob@example\.com/);
  assert.equal(p1.result.state, 'finished');
  // answering twice is a 400 (no server request waits for it), and harmless
  const again = await request(mcpd.port, {
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id: req.message.id, result: { action: 'accept', content: {} } },
  });
  assert.equal(again.status, 400, again.text);
  await echo(mcpd.port, session);
});
