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
  request,
  rpc,
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

    const firstId = s.sse.all.find((e) => e.data !== '').id; // progress 1
    await sleep(250); // let a few more events go out, then kill mid-flow
    mcpd.kill('SIGKILL');
    const ex = await mcpd.exited;
    assert.equal(ex.signal, 'SIGKILL');
    // everything the client received before the kill
    const received = [];
    for (;;) {
      const m = await s.sse.nextMessage(3000).catch(() => null);
      if (!m) break;
      received.push(m.msg);
    }
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

    // nothing the client had received is lost: resuming from progress 1
    // replays progress 2, 3 and everything received after them, in order
    const g3 = await getStream(mcpd.port, session, { lastEventId: firstId });
    let replay;
    try {
      replay = (await g3.sse.rest(8000)).map((m) => m.msg);
    } finally {
      g3.close();
    }
    const expectPrefix = [2, 3, ...received.map((m) => m.params?.progress)];
    assert.deepEqual(
      replay.slice(0, expectPrefix.length).map((m) => m.params?.progress),
      expectPrefix,
      `replay from progress 1 holds every message received before the kill (received after 3: ${expectPrefix.slice(2)})`,
    );

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

test('(c) SSE polling (--sse-poll-ms): 2025-11-25 client reconnects with Last-Event-ID until the result; 2025-03-26 is never cut', async () => {
  const mcpd = await startMcpd({ args: ['--sse-poll-ms', '300', '--sse-retry-ms', '100'] });
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const token = 'poll-c';
    const { id, s } = await startCountdown(mcpd.port, session, 10, 100, token);
    const t0 = Date.now();
    const first = await s.sse.rest(3000).catch((e) => {
      throw new Error(`POST connection not closed by --sse-poll-ms 300: ${e.message}`);
    });
    assert.ok(Date.now() - t0 < 2000, 'POST connection closed after about 300 ms');
    assert.ok(s.sse.all.some((e) => typeof e.retry === 'number'), 'retry: sent before the close');
    const all = first.map((m) => m.msg);
    assert.equal(responseIn(all, id), undefined, 'the response did not fit in the first 300 ms');
    let lastId = lastIdOf(s.sse.all);
    s.close();

    let polls = 0;
    while (!responseIn(all, id)) {
      assert.ok(polls++ < 40, `no response after ${polls} polls: ${JSON.stringify(all)}`);
      const g = await getStream(mcpd.port, session, { lastEventId: lastId });
      assert.equal(g.status, 200, `poll ${polls}: status`);
      try {
        const got = await g.sse.rest(3000);
        all.push(...got.map((m) => m.msg));
        lastId = lastIdOf(g.sse.all) ?? lastId;
      } finally {
        g.close();
      }
      await sleep(100); // honour retry:
    }
    const progress = all.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    assert.deepEqual(progress, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'every progress exactly once, in order, across polls');
    assert.equal(all[all.length - 1].id, id, 'the response comes last');
    assert.equal(all.filter((m) => m.id === id).length, 1, 'the response exactly once');
    assert.ok(polls >= 2, `several polls were needed (${polls})`);

    // a 2025-03-26 session never gets its connection cut: the response
    // arrives on the POST stream itself
    const old = await initSession(mcpd.port, { protocolVersion: '2025-03-26' });
    const r = await callTool(mcpd.port, old.session, 'countdown', { n: 6, interval_ms: 100 }, { version: null, progressToken: 'old', ms: 5000 });
    assert.equal(r.status, 200);
    assert.ok(r.response?.result, `2025-03-26: response on the POST stream: ${JSON.stringify(r.messages)}`);
    assert.equal(r.messages.filter((m) => m.method === 'notifications/progress').length, 6);
    assert.equal(r.events.filter((e) => e.data === '').length, 0, 'no priming events for 2025-03-26');
  } finally {
    await mcpd.cleanup();
  }
});

test('(d) SIGTERM + restart on the same db: the session and an ended stream are still there', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const c = await callTool(mcpd.port, session, 'countdown', { n: 3, interval_ms: 10 }, { progressToken: 'd' });
    assert.equal(c.status, 200);
    const withData = c.events.filter((e) => e.data !== '');
    assert.equal(withData.length, 4);
    const ex = await mcpd.stop('SIGTERM', 10000);
    assert.deepEqual(ex, { code: 0, signal: null });
    await mcpd.restart({ port: mcpd.port }); // same port
    const e = await callTool(mcpd.port, session, 'echo', { message: 'after-term' });
    assert.equal(e.status, 200, `echo after SIGTERM restart: ${e.status} ${e.text || ''}`);
    assert.equal(e.response?.result?.content?.[0]?.text, 'after-term');
    const g = await getStream(mcpd.port, session, { lastEventId: withData[0].id });
    assert.equal(g.status, 200);
    try {
      const rest = await g.sse.rest(5000);
      assert.deepEqual(
        rest.map((m) => m.msg),
        withData.slice(1).map((ev) => JSON.parse(ev.data)),
      );
    } finally {
      g.close();
    }
    // new event ids after the restart do not collide with the stored ones
    const c2 = await callTool(mcpd.port, session, 'countdown', { n: 2, interval_ms: 10 }, { progressToken: 'd2' });
    const before = new Set(c.events.map((ev) => ev.id));
    for (const ev of c2.events) assert.ok(!before.has(ev.id), `event id ${ev.id} reused after restart`);
  } finally {
    await mcpd.cleanup();
  }
});

test('(d2) after a restart, 32 concurrent first requests on each of 4 stored sessions: all answered, each session revived once', async () => {
  const mcpd = await startMcpd();
  try {
    const sessions = [];
    for (let i = 0; i < 4; i++) sessions.push((await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session);
    await mcpd.stop('SIGKILL');
    await mcpd.restart({ port: mcpd.port });
    const revived = new Map(); // session id -> revivals logged
    let partial = '';
    mcpd.proc.stderr.on('data', (d) => {
      const lines = (partial + d).split('\n');
      partial = lines.pop();
      for (const l of lines) {
        const m = / session=([0-9a-f]+) event=session_revived /.exec(l);
        if (m) revived.set(m[1], (revived.get(m[1]) || 0) + 1);
      }
    });
    // Every session is revived from the store by whichever request comes
    // first; the others must wait for that revival, not miss the session.
    const calls = [];
    for (const session of sessions)
      for (let j = 0; j < 32; j++) calls.push(callTool(mcpd.port, session, 'echo', { message: `r${j}` }).then((r) => ({ r, j })));
    for (const { r, j } of await Promise.all(calls)) {
      assert.equal(r.status, 200, `echo after restart: ${r.status} ${r.text || ''}`);
      assert.equal(r.response?.result?.content?.[0]?.text, `r${j}`);
    }
    // ...and each is revived once: a second revival would put a second
    // copy in the registry, splitting its in-flight requests and counts.
    await mcpd.stop('SIGTERM'); // flushes the log
    for (const session of sessions) assert.equal(revived.get(session), 1, `session ${session} revived ${revived.get(session)} times`);
  } finally {
    await mcpd.cleanup();
  }
});

test('(e) SIGKILL while an elicitation waits for the client: restart ends the call with an error; the late answer → 400', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25', capabilities: { elicitation: {} } });
    const id = newId();
    const s = await openStream(mcpd.port, {
      method: 'POST',
      headers: mcpHeaders({ session, version: LATEST }),
      body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_elicitation', arguments: { message: 'x' } } },
    });
    assert.equal(s.status, 200);
    const req = await s.sse.nextMessage(5000);
    assert.equal(req?.msg.method, 'elicitation/create');
    mcpd.kill('SIGKILL');
    await mcpd.exited;
    s.close();
    await mcpd.restart({ port: await freePort() });

    const late = await request(mcpd.port, {
      headers: mcpHeaders({ session, version: LATEST }),
      body: { jsonrpc: '2.0', id: req.msg.id, result: { action: 'decline' } },
    });
    assert.equal(late.status, 400, `answer to a request from before the restart: ${late.status} ${late.text}`);
    assert.equal(late.json?.error?.code, -32600);

    const g = await getStream(mcpd.port, session, { lastEventId: req.ev.id });
    assert.equal(g.status, 200);
    try {
      const msgs = await g.sse.rest(8000);
      assert.equal(msgs.length, 1, JSON.stringify(msgs.map((m) => m.msg)));
      assert.equal(msgs[0].msg.id, id);
      assert.equal(msgs[0].msg.error?.code, -32603);
      assert.match(msgs[0].msg.error?.message ?? '', /interrupted by server restart/);
    } finally {
      g.close();
    }
  } finally {
    await mcpd.cleanup();
  }
});

test('(f) Last-Event-ID = the priming id (<stream>:-1) replays the whole stream', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const c = await callTool(mcpd.port, session, 'countdown', { n: 3, interval_ms: 5 }, { progressToken: 'f' });
    const prime = c.events[0];
    assert.equal(prime.data, '');
    const g = await getStream(mcpd.port, session, { lastEventId: prime.id });
    assert.equal(g.status, 200);
    try {
      const msgs = await g.sse.rest(5000);
      assert.deepEqual(
        msgs.map((m) => m.msg),
        c.messages,
      );
    } finally {
      g.close();
    }
  } finally {
    await mcpd.cleanup();
  }
});

test('(g) resuming a stream whose POST connection is still open: every message is delivered once across the two', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const { id, s } = await startCountdown(mcpd.port, session, 10, 100, 'g');
    const { lastId } = await readProgress(s.sse, 3, 'g');
    const g = await getStream(mcpd.port, session, { lastEventId: lastId });
    try {
      assert.equal(g.status, 200);
      const [onGet, onPost] = await Promise.all([g.sse.rest(8000), s.sse.rest(8000)]);
      const tag = (m) => (m.msg.method === 'notifications/progress' ? m.msg.params.progress : m.msg.id === id ? 'R' : JSON.stringify(m.msg));
      const all = [...onGet.map(tag), ...onPost.map(tag)].sort((a, b) => String(a).localeCompare(String(b), 'en', { numeric: true }));
      assert.deepEqual(all, [4, 5, 6, 7, 8, 9, 10, 'R'], `GET: ${onGet.map(tag)} POST: ${onPost.map(tag)}`);
    } finally {
      g.close();
      s.close();
    }
  } finally {
    await mcpd.cleanup();
  }
});

test('(h) SIGKILL with 12 calls in flight on 4 sessions: after restart every stream resumes to exactly one terminal message', async () => {
  const mcpd = await startMcpd();
  try {
    const sessions = [];
    for (let i = 0; i < 4; i++) sessions.push((await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session);
    const calls = [];
    for (const session of sessions) {
      for (let j = 0; j < 3; j++) {
        const token = `h-${calls.length}`;
        // one of the three finishes before the kill, the others cannot
        const n = j === 0 ? 2 : 200;
        const c = await startCountdown(mcpd.port, session, n, j === 0 ? 10 : 30, token);
        calls.push({ session, token, n, ...c });
      }
    }
    const seen = [];
    for (const c of calls) {
      const first = await c.s.sse.nextMessage(5000);
      assert.equal(first?.msg.method, 'notifications/progress');
      seen.push(first.ev.id);
    }
    await sleep(200);
    mcpd.kill('SIGKILL');
    await mcpd.exited;
    calls.forEach((c) => c.s.close());
    await mcpd.restart({ port: await freePort() });

    for (const [i, c] of calls.entries()) {
      const g = await getStream(mcpd.port, c.session, { lastEventId: seen[i] });
      assert.equal(g.status, 200, `call ${i}: resume status`);
      let msgs;
      try {
        msgs = (await g.sse.rest(8000)).map((m) => m.msg);
      } finally {
        g.close();
      }
      const progress = msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
      progress.forEach((p, k) => assert.equal(p, 2 + k, `call ${i}: progress in order without gaps: ${progress}`));
      const terminal = msgs.filter((m) => m.id === c.id && ('result' in m || 'error' in m));
      assert.equal(terminal.length, 1, `call ${i}: exactly one terminal message: ${JSON.stringify(msgs.slice(-2))}`);
      assert.equal(msgs[msgs.length - 1], terminal[0], `call ${i}: terminal message last`);
      if (c.n === 2) {
        assert.equal(terminal[0].result?.content?.[0]?.text, 'countdown finished', `call ${i} had finished`);
      } else {
        assert.match(terminal[0].error?.message ?? '', /interrupted by server restart/, `call ${i}`);
      }
    }
    for (const session of sessions) await callTool(mcpd.port, session, 'echo', { message: 'x' }).then((r) => assert.equal(r.status, 200));
    const ready = await request(mcpd.port, { method: 'GET', path: '/readyz' });
    assert.equal(ready.status, 200, 'readyz after restart');
  } finally {
    await mcpd.cleanup();
  }
});

test('(i) two crashes in a row: the interrupted stream still ends with exactly one terminal error', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port, { protocolVersion: '2025-11-25' });
    const { id, s } = await startCountdown(mcpd.port, session, 100, 50, 'i');
    const { lastId } = await readProgress(s.sse, 1, 'i');
    for (let k = 0; k < 2; k++) {
      mcpd.kill('SIGKILL');
      await mcpd.exited;
      await mcpd.restart({ port: await freePort() });
    }
    s.close();
    const g = await getStream(mcpd.port, session, { lastEventId: lastId });
    assert.equal(g.status, 200);
    let msgs;
    try {
      msgs = (await g.sse.rest(8000)).map((m) => m.msg);
    } finally {
      g.close();
    }
    const terminal = msgs.filter((m) => m.id === id);
    assert.equal(terminal.length, 1, `one terminal message: ${JSON.stringify(msgs.slice(-3))}`);
    assert.match(terminal[0].error?.message ?? '', /interrupted by server restart/);
    assert.equal(msgs[msgs.length - 1], terminal[0]);
  } finally {
    await mcpd.cleanup();
  }
});

test('(j) session state survives SIGKILL: negotiated version (batches, priming) and log level', async () => {
  const mcpd = await startMcpd();
  try {
    const legacy = (await initSession(mcpd.port, { protocolVersion: '2025-03-26' })).session;
    const modern = (await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session;
    const lv = await rpc(mcpd.port, { jsonrpc: '2.0', id: 1, method: 'logging/setLevel', params: { level: 'error' } }, { session: modern });
    assert.deepEqual(lv.messages[0]?.result, {});
    mcpd.kill('SIGKILL');
    await mcpd.exited;
    await mcpd.restart({ port: await freePort() });

    const b = await rpc(
      mcpd.port,
      [
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'ping' },
      ],
      { session: legacy, version: null },
    );
    assert.equal(b.status, 200, `batch on the 2025-03-26 session after restart: ${b.status} ${JSON.stringify(b.messages)}`);
    assert.equal(b.messages.filter((m) => 'result' in m).length, 2);
    const nb = await rpc(
      mcpd.port,
      [
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'ping' },
      ],
      { session: modern },
    );
    assert.equal(nb.status, 400, 'still no batches on the 2025-11-25 session');

    const c = await callTool(mcpd.port, modern, 'countdown', { n: 1, interval_ms: 5 }, { progressToken: 'j' });
    assert.equal(c.events[0]?.data, '', 'priming event: the session is still 2025-11-25');
    const logs = await callTool(mcpd.port, modern, 'test_tool_with_logging', {});
    assert.equal(logs.status, 200);
    assert.deepEqual(
      logs.messages.filter((m) => m.method === 'notifications/message'),
      [],
      'log level "error" set before the crash still filters info messages',
    );
  } finally {
    await mcpd.cleanup();
  }
});

function responseIn(msgs, id) {
  return msgs.find((m) => m.id === id && ('result' in m || 'error' in m));
}

function lastIdOf(events) {
  for (let i = events.length - 1; i >= 0; i--) if (events[i].id) return events[i].id;
  return undefined;
}
