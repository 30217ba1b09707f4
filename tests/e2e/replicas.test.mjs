// Several mcpd replicas on one PostgreSQL database behind a round-robin
// balancer with no stickiness (issue 30, "Any replica serves any request").
//
// Each test starts its own cluster (lib/cluster.mjs: a fresh database on this
// process's PostgreSQL server, three replicas started at once, the balancer
// of lib/balancer.mjs in front) and talks to the balancer only, except where
// a test pins a request to a replica with balancer.setNext(i) so that "the
// initialize went to A, the tools/call to B, the GET to C" holds by
// construction; the balancer's log then confirms which replica served what.
//
// Needs Debian's postgresql-15 (tests/pg/pg-server.sh); skipped without it.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { startCluster } from './lib/cluster.mjs';
import { PG_SKIP } from './lib/pg.mjs';
import {
  ACCEPT_BOTH,
  LATEST,
  callTool,
  echo,
  MCPD_BIN,
  getStream,
  initSession,
  mcpAdmin,
  mcpHeaders,
  newId,
  openStream,
  parseEventId,
  procChildren,
  queryStore,
  request,
  sleep,
  waitFor,
  withTimeout,
} from './lib/mcpd.mjs';

const SKIP = PG_SKIP;

/**
 * Run fn(cluster) on a fresh 3-replica cluster started with `args`; stop it
 * and require every replica that was not killed by the test to exit 0 after
 * SIGTERM (no sanitizer report). Failures carry the replicas' stderr tails.
 */
async function withCluster(args, fn, { n = 3 } = {}) {
  const c = await startCluster({ n, args });
  let failure;
  try {
    await fn(c);
  } catch (e) {
    failure = e;
  }
  const killed = new Set(c.replicas.map((r, i) => (r.exit?.signal === 'SIGKILL' ? i : -1)));
  await c.stop();
  if (!failure) {
    c.replicas.forEach((r, i) => {
      if (killed.has(i)) return;
      if (r.exit?.code !== 0) failure = new Error(`replica ${i} exit after SIGTERM: ${JSON.stringify(r.exit)}`);
    });
  }
  if (failure) {
    failure.message += `\n${c.stderr(2500)}`;
    throw failure;
  }
}

/** The balancer's log entry of the last request with JSON-RPC method `rpc` (or matching pred). */
function served(c, pred) {
  const f = typeof pred === 'string' ? (e) => e.rpc === pred : pred;
  const hits = c.log.filter(f);
  assert.ok(hits.length, 'no such request in the balancer log');
  return hits.at(-1);
}

/** The last request matching `pred` (see served) went to replica `i` (modulo the cluster's size). */
function assertServed(c, pred, i) {
  const e = served(c, pred);
  assert.equal(e.replica, i % c.n, `request ${e.n} (${e.method} ${e.path} ${e.rpc ?? ''}) went to replica ${e.replica}, not ${i % c.n}`);
}

/** POST a tools/call of countdown with a progress token: {id, s} (the open SSE reply). */
async function startCountdown(port, session, n, interval_ms, progressToken) {
  const id = newId();
  const s = await openStream(port, {
    method: 'POST',
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n, interval_ms }, _meta: { progressToken } } },
  });
  assert.equal(s.status, 200, 'countdown POST status');
  assert.ok(s.sse, 'countdown with progress replies with SSE');
  return { id, s };
}

/** Read `count` progress notifications from an SSE reader; returns their progress values. */
async function readProgress(sse, count) {
  const seen = [];
  while (seen.length < count) {
    const m = await sse.nextMessage(5000);
    assert.notEqual(m, null, `stream ended after ${seen.length} progress events`);
    assert.equal(m.msg.method, 'notifications/progress', JSON.stringify(m.msg));
    seen.push(m.msg.params.progress);
  }
  return seen;
}

/** Event ids of a list of {ev} strictly increase within one stream. */
function assertIncreasing(events, from) {
  let prev = from === undefined ? -Infinity : parseEventId(from).seq;
  for (const { ev } of events) {
    const seq = parseEventId(ev.id).seq;
    assert.ok(seq > prev, `event ids not increasing: ${events.map((m) => m.ev.id).join(' ')}`);
    prev = seq;
  }
}

// ---------------------------------------------------------------- the basic path

test('the harness: three replicas start at once on one fresh database; the balancer takes turns and skips a dead replica', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const health = async () => (await request(c.port, { method: 'GET', path: '/healthz' })).status;
    for (let i = 0; i < 6; i++) assert.equal(await health(), 200);
    assert.deepEqual(c.balancer.counts, [2, 2, 2], 'round robin, no stickiness');
    assert.deepEqual(c.log.slice(-6).map((e) => e.replica), [0, 1, 2, 0, 1, 2]);
    await c.kill(1);
    for (let i = 0; i < 6; i++) assert.equal(await health(), 200, 'served while replica 1 is dead');
    assert.ok(c.log.slice(-6).every((e) => e.replica !== 1));
    assert.ok(c.log.slice(-6).some((e) => e.refused.includes(1)), 'replica 1 refused and the next one served');
    await c.restart(1);
    for (let i = 0; i < 3; i++) assert.equal(await health(), 200);
    assert.deepEqual(new Set(c.log.slice(-3).map((e) => e.replica)), new Set([0, 1, 2]), 'replica 1 is back in turn');
  });
});


test('initialize on A, tools/call on B, GET with Last-Event-ID on C: the rest of the stream once, in order', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    c.balancer.setNext(0);
    const { session } = await initSession(c.port); // initialize → 0, notifications/initialized → 1
    assertServed(c, 'initialize', 0);
    assertServed(c, 'notifications/initialized', 1);

    c.balancer.setNext(1);
    const { id, s } = await startCountdown(c.port, session, 8, 100, 'abc');
    assertServed(c, 'tools/call', 1);
    assert.deepEqual(await readProgress(s.sse, 3), [1, 2, 3]);
    const last = s.sse.lastEventId;
    s.close();

    c.balancer.setNext(2);
    const g = await getStream(c.port, session, { lastEventId: last });
    assertServed(c, (e) => e.method === 'GET' && e.path === '/mcp', 2);
    assert.equal(g.status, 200, `resume GET on another replica: ${g.status}`);
    let rest;
    try {
      rest = await g.sse.rest(15000);
    } finally {
      g.close();
    }
    const progress = rest.filter((m) => m.msg.method === 'notifications/progress').map((m) => m.msg.params.progress);
    assert.deepEqual(progress, [4, 5, 6, 7, 8], 'the rest of the progress, each once');
    const finals = rest.filter((m) => m.msg.id === id);
    assert.equal(finals.length, 1, 'exactly one response');
    assert.equal(finals[0].msg.result?.content?.[0]?.text, 'countdown finished');
    assertIncreasing(rest, last);
    assert.equal(parseEventId(rest[0].ev.id).stream, parseEventId(last).stream, 'the same stream');
  });
});

test('the official SDK client through the balancer: tools, echo, countdown with progress, DELETE', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const transport = new StreamableHTTPClientTransport(new URL(c.url));
    const client = new Client({ name: 'mcpd-replicas-sdk', version: '0.0.0' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === 'countdown'));
      for (let i = 0; i < 6; i++) {
        const r = await client.callTool({ name: 'echo', arguments: { message: `hi-${i}` } });
        assert.deepEqual(r.content, [{ type: 'text', text: `hi-${i}` }]);
      }
      const progress = [];
      const r = await client.callTool({ name: 'countdown', arguments: { n: 5, interval_ms: 50 } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        timeout: 15000,
      });
      assert.equal(r.content?.[0]?.text, 'countdown finished');
      assert.deepEqual(progress, [1, 2, 3, 4, 5]);
      const calls = c.log.filter((e) => e.session === transport.sessionId && e.rpc === 'tools/call');
      assert.equal(new Set(calls.map((e) => e.replica)).size, c.n, 'calls were served by every replica');
      await transport.terminateSession();
    } finally {
      await client.close().catch(() => {});
    }
  });
});

// A replica that has not seen a session revives it from the store, one
// revival at a time. That turn was a pthread mutex held across a park:
// while the session's standalone stream is not committed yet (its creator
// commits it just after the row) the reviver sleeps a moment, as a fiber.
// With more revivals waiting than pool threads, the waiters blocked every
// thread, the holder could never be resumed, and the replica hung for good
// (found in a conformance run through three replicas). Here the rows have
// no standalone stream at all, so every revival takes that sleep.
test('revivals that wait for a stream, more at once than pool threads: every one answered', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const now = Date.now();
    const params = JSON.stringify({ protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'revive', version: '1' } });
    const ids = Array.from({ length: 6 }, () => crypto.randomBytes(16).toString('hex'));
    for (const id of ids)
      queryStore(
        c.db,
        'INSERT INTO sessions (id, protocol_version, init_params, initialized, created_ms, last_active_ms) VALUES (?, ?, ?, 1, ?, ?) RETURNING id',
        id, LATEST, params, now, now,
      );
    const port = c.replicas[0].port;
    const answers = await Promise.all(ids.map((id, i) => callTool(port, id, 'echo', { message: `revived ${i}` }, { ms: 20000 })));
    answers.forEach((r, i) => assert.equal(r.response?.result?.content?.[0]?.text, `revived ${i}`, `session ${i}: ${r.status} ${r.text || ''}`));
  });
});

test('DELETE on one replica ends the session on every replica', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    c.balancer.setNext(0);
    const { session } = await initSession(c.port);
    c.balancer.setNext(2);
    const del = await request(c.port, { method: 'DELETE', headers: mcpHeaders({ session }) });
    assert.equal(del.status, 200, del.text);
    for (let i = 0; i < 3; i++) {
      c.balancer.setNext(i);
      const r = await request(c.port, { headers: mcpHeaders({ session }), body: { jsonrpc: '2.0', id: newId(), method: 'ping' } });
      assert.equal(r.status, 404, `replica ${i} after DELETE: ${r.status} ${r.text}`);
    }
  });
});

test('long-polls: stream:true on A, mcpd/poll on every replica in turn: every chunk once, in order', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port);
    const id = newId();
    const ack = await request(c.port, {
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n: 6, interval_ms: 100 }, stream: true, _meta: { progressToken: 'lp' } } },
    });
    assert.equal(ack.status, 200, ack.text);
    const streamId = ack.json?.result?.stream_id;
    assert.ok(streamId, `ack: ${ack.text}`);
    const owner = served(c, 'tools/call').replica;
    const chunks = [];
    const pollers = new Set();
    let from = 0;
    const deadline = Date.now() + 20000;
    while (!chunks.at(-1)?.end) {
      assert.ok(Date.now() < deadline, `the stream did not end: ${JSON.stringify(chunks)}`);
      const p = await request(c.port, {
        headers: mcpHeaders({ session }),
        body: { jsonrpc: '2.0', id: newId(), method: 'mcpd/poll', params: { stream_id: streamId, from_seq: from, wait_ms: 5000, max_chunks: 2 } },
      });
      pollers.add(served(c, 'mcpd/poll').replica);
      assert.equal(p.status, 200, p.text);
      assert.ok(p.json?.result, `poll: ${p.text}`);
      for (const ch of p.json.result.chunks) {
        assert.equal(ch.seq, from, `chunks in order without gaps: ${p.text}`);
        from++;
        chunks.push(ch);
      }
    }
    assert.deepEqual(
      chunks.filter((ch) => ch.message?.method === 'notifications/progress').map((ch) => ch.message.params.progress),
      [1, 2, 3, 4, 5, 6],
    );
    assert.equal(chunks.at(-1).message.id, id);
    assert.equal(chunks.at(-1).message.result?.content?.[0]?.text, 'countdown finished');
    assert.ok(c.n === 1 || [...pollers].some((r) => r !== owner), `polls were served by other replicas than the call's (${owner}): ${[...pollers]}`);
  });
});

// ---------------------------------------------------------------- WebSocket and legacy SSE

/** A WebSocket client on the balancer: messages queued; next(ms) → message or null at close. */
function wsOpen(port, query = '') {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/mcp/ws${query}`, 'mcp');
  const queue = [];
  const waiters = [];
  let closed = false;
  const wake = () => waiters.splice(0).forEach((f) => f());
  ws.addEventListener('message', (ev) => {
    queue.push(JSON.parse(ev.data));
    wake();
  });
  ws.addEventListener('close', () => {
    closed = true;
    wake();
  });
  const api = {
    ws,
    send: (m) => ws.send(JSON.stringify(m)),
    async next(ms = 5000) {
      const deadline = Date.now() + ms;
      while (!queue.length) {
        if (closed) return null;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timeout after ${ms} ms waiting for a WebSocket message`);
        await new Promise((r) => {
          const t = setTimeout(r, left);
          waiters.push(() => {
            clearTimeout(t);
            r();
          });
        });
      }
      return queue.shift();
    },
    async until(id, ms = 10000) {
      const out = [];
      const deadline = Date.now() + ms;
      for (;;) {
        const m = await api.next(Math.max(1, deadline - Date.now()));
        if (m === null) return out;
        out.push(m);
        if (m.id === id && ('result' in m || 'error' in m)) return out;
      }
    },
  };
  return withTimeout(
    new Promise((resolve, reject) => {
      ws.addEventListener('open', () => resolve(api), { once: true });
      ws.addEventListener('error', () => reject(new Error('WebSocket failed to open')), { once: true });
    }),
    5000,
    'WebSocket open',
  );
}

const wsEventId = (m) => (m.params ?? m.result)?._meta?.['mcpd/event-id'];

test('WebSocket: a countdown on one replica, reconnect through the balancer with last_event_id: the rest once', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const a = await wsOpen(c.port);
    const init = await (async () => {
      a.send({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'ws-replicas', version: '0' } } });
      return a.until('i');
    })();
    const session = init.at(-1).result?._meta?.['mcpd/session-id'];
    assert.ok(session, `initialize result: ${JSON.stringify(init)}`);
    a.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const id = newId();
    a.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n: 8, interval_ms: 100 }, _meta: { progressToken: 'w' } } });
    const got = [];
    while (got.length < 3) {
      const m = await a.next(5000);
      assert.ok(m, 'connection open');
      if (m.method === 'notifications/progress') got.push(m);
    }
    const last = wsEventId(got[2]);
    assert.ok(last, `event id on messages: ${JSON.stringify(got[2])}`);
    const first = served(c, (e) => e.kind === 'ws').replica;
    a.ws.close();

    const b = await wsOpen(c.port, `?session=${session}&last_event_id=${encodeURIComponent(last)}`);
    const second = served(c, (e) => e.kind === 'ws').replica;
    if (c.n > 1) assert.notEqual(second, first, 'the reconnect went to another replica');
    const rest = await b.until(id, 15000);
    await sleep(300); // a duplicate would arrive now
    for (let m; (m = await b.next(50).catch(() => null)); ) rest.push(m);
    assert.deepEqual(
      rest.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress),
      [4, 5, 6, 7, 8],
      `replayed: ${JSON.stringify(rest)}`,
    );
    assert.equal(rest.filter((m) => m.id === id).length, 1, 'exactly one response');
    b.send({ jsonrpc: '2.0', id: 'e', method: 'tools/call', params: { name: 'echo', arguments: { message: 'ws-again' } } });
    const e = await b.until('e');
    assert.equal(e.at(-1).result?.content?.[0]?.text, 'ws-again');
    b.ws.close();
  });
});

test('legacy /sse on A, POST /messages on B and C: the replies arrive on the /sse stream', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    c.balancer.setNext(0);
    const s = await openStream(c.port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
    try {
      assert.equal(s.status, 200);
      const ev = await s.sse.next(5000);
      assert.equal(ev.event, 'endpoint');
      const session = /sessionId=([0-9a-f]+)/.exec(ev.data)[1];
      const post = (body) => request(c.port, { path: `/messages?sessionId=${session}`, headers: { 'Content-Type': 'application/json' }, body });
      c.balancer.setNext(1);
      const id = newId();
      const r = await post({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'legacy-replicas', version: '0' } } });
      assert.equal(r.status, 202, r.text);
      assertServed(c, 'initialize', 1);
      const m1 = await s.sse.nextMessage(5000);
      assert.equal(m1.msg.id, id, JSON.stringify(m1.msg));
      assert.ok(m1.msg.result?.protocolVersion);
      c.balancer.setNext(2);
      assert.equal((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
      const eid = newId();
      assert.equal((await post({ jsonrpc: '2.0', id: eid, method: 'tools/call', params: { name: 'echo', arguments: { message: 'legacy' } } })).status, 202);
      const m2 = await s.sse.nextMessage(5000);
      assert.equal(m2.msg.id, eid);
      assert.equal(m2.msg.result?.content?.[0]?.text, 'legacy');
      assert.equal(new Set(c.log.map((e) => e.replica)).size, c.n);
    } finally {
      s.close();
    }
  });
});

// ---------------------------------------------------------------- wake-ups and routing across replicas

test('a chunk committed on one replica wakes its reader on another (delay printed; bound 2 s)', { skip: SKIP }, async (t) => {
  // The reader: a legacy /sse stream on replica 0. The writers: pings POSTed
  // to /messages on replicas 1 and 2, whose replies are chunks of that
  // stream. The delay of one chunk is from the POST's 202 (the reply is
  // committed by then, or very soon after) to its arrival on the /sse
  // stream: an upper bound of commit → delivery across replicas.
  await withCluster([], async (c) => {
    c.balancer.setNext(0);
    const s = await openStream(c.port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
    try {
      assert.equal(s.status, 200);
      const ev = await s.sse.next(5000);
      const session = /sessionId=([0-9a-f]+)/.exec(ev.data)[1];
      const post = (body) => request(c.port, { path: `/messages?sessionId=${session}`, headers: { 'Content-Type': 'application/json' }, body });
      c.balancer.setNext(1);
      const iid = newId();
      assert.equal((await post({ jsonrpc: '2.0', id: iid, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'wake', version: '0' } } })).status, 202);
      assert.equal((await s.sse.nextMessage(5000)).msg.id, iid);
      assert.equal((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
      const delays = [];
      for (let k = 0; k < 20; k++) {
        const id = newId();
        if (c.balancer.cursor === 0) c.balancer.setNext(1); // never the reader's own replica
        const r = await post({ jsonrpc: '2.0', id, method: 'ping' });
        const sent = Date.now();
        assert.equal(r.status, 202, r.text);
        if (c.n > 1) assert.notEqual(c.log.at(-1).replica, 0);
        const m = await s.sse.nextMessage(5000);
        assert.equal(m.msg.id, id, JSON.stringify(m.msg));
        delays.push(Date.now() - sent);
      }
      delays.sort((x, y) => x - y);
      const p50 = delays[Math.floor(delays.length / 2)];
      const max = delays.at(-1);
      t.diagnostic(`cross-replica wake (the writer's 202 -> the event on the reader's replica): p50 ${p50} ms, max ${max} ms over ${delays.length} chunks`);
      assert.ok(max < 2000, `a reader on another replica waited ${max} ms`);
    } finally {
      s.close();
    }
  });
});

test('elicitation: the client\'s answer lands on another replica than the tool\'s and completes the call', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port, { capabilities: { elicitation: {} } });
    c.balancer.setNext(0);
    const id = newId();
    const s = await openStream(c.port, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_elicitation', arguments: { message: 'Your name?' } } },
    });
    try {
      assert.equal(s.status, 200);
      const q = await s.sse.nextMessage(5000);
      assert.equal(q.msg.method, 'elicitation/create', JSON.stringify(q.msg));
      c.balancer.setNext(1);
      const a = await request(c.port, {
        headers: mcpHeaders({ session }),
        body: { jsonrpc: '2.0', id: q.msg.id, result: { action: 'accept', content: { username: 'bob', email: 'bob@example.com' } } },
      });
      assertServed(c, 'response', 1);
      assert.equal(a.status, 202, a.text);
      const rest = await s.sse.rest(5000);
      const final = rest.find((m) => m.msg.id === id);
      assert.ok(final, `the call completed: ${JSON.stringify(rest.map((m) => m.msg))}`);
      assert.match(final.msg.result.content[0].text, /action=accept/);
      assert.match(final.msg.result.content[0].text, /bob@example\.com/);
    } finally {
      s.close();
    }
  });
});

test('sampling: the client\'s answer lands on another replica than the tool\'s and completes the call', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port, { capabilities: { sampling: {} } });
    c.balancer.setNext(2);
    const id = newId();
    const s = await openStream(c.port, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_sampling', arguments: { prompt: 'say hi' } } },
    });
    try {
      assert.equal(s.status, 200);
      const q = await s.sse.nextMessage(5000);
      assert.equal(q.msg.method, 'sampling/createMessage', JSON.stringify(q.msg));
      c.balancer.setNext(0);
      const a = await request(c.port, {
        headers: mcpHeaders({ session }),
        body: { jsonrpc: '2.0', id: q.msg.id, result: { role: 'assistant', content: { type: 'text', text: 'hi from the model' }, model: 'test-model', stopReason: 'endTurn' } },
      });
      assertServed(c, 'response', 0);
      assert.equal(a.status, 202, a.text);
      const rest = await s.sse.rest(5000);
      const final = rest.find((m) => m.msg.id === id);
      assert.ok(final?.msg.result, `the call completed: ${JSON.stringify(rest.map((m) => m.msg))}`);
      assert.match(JSON.stringify(final.msg.result.content), /hi from the model/);
    } finally {
      s.close();
    }
  });
});

test('notifications/cancelled on another replica ends the call on the replica that runs it', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port);
    c.balancer.setNext(0);
    const { id, s } = await startCountdown(c.port, session, 100, 50, 'cancel');
    try {
      await readProgress(s.sse, 1);
      c.balancer.setNext(1);
      const t0 = Date.now();
      const r = await request(c.port, { headers: mcpHeaders({ session }), body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } } });
      assertServed(c, 'notifications/cancelled', 1);
      assert.equal(r.status, 202, r.text);
      const rest = await s.sse.rest(4000).catch((e) => {
        throw new Error(`the call's stream did not end within 4 s of the cancel: ${e.message}`);
      });
      assert.ok(Date.now() - t0 < 2000, `ended ${Date.now() - t0} ms after the cancel`);
      assert.equal(rest.find((m) => m.msg.id === id), undefined, 'no response after cancel');
      assert.ok(rest.length < 60, `work stopped: ${rest.length} more events`);
    } finally {
      s.close();
    }
    await echo(c.port, session, 'after-cancel');
  });
});

test('one standalone GET per session across replicas: a second GET on another replica gets 409', { skip: SKIP }, async () => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port);
    c.balancer.setNext(0);
    const g1 = await getStream(c.port, session);
    try {
      assert.equal(g1.status, 200);
      c.balancer.setNext(1);
      const g2 = await getStream(c.port, session);
      g2.close();
      assert.equal(g2.status, 409, 'a second standalone GET on another replica');
    } finally {
      g1.close();
    }
    // once the first is gone, another replica may hold it (within a lease)
    await waitFor(
      async () => {
        c.balancer.setNext(2);
        const g3 = await getStream(c.port, session);
        g3.close();
        return g3.status === 200;
      },
      10000,
      'the standalone GET to be free again after the first closed',
      200,
    );
  });
});

test('--max-sessions counts the sessions of every replica', { skip: SKIP }, async () => {
  await withCluster(['--max-sessions', '3'], async (c) => {
    const results = [];
    for (let i = 0; i < 6; i++) {
      const r = await request(c.port, {
        headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH },
        body: { jsonrpc: '2.0', id: i + 1, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'cap', version: '0' } } },
      });
      results.push({ status: r.status, replica: c.log.at(-1).replica });
    }
    const ok = results.filter((r) => r.status === 200);
    assert.equal(ok.length, 3, `statuses: ${JSON.stringify(results)}`);
    for (const r of results.filter((x) => x.status !== 200)) assert.equal(r.status, 503, JSON.stringify(results));
  });
});

// ---------------------------------------------------------------- operators

test('mcp-admin session kill: the GET on one replica ends and every replica answers 404 within 1 s', { skip: SKIP }, async (t) => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port);
    c.balancer.setNext(2);
    const g = await getStream(c.port, session);
    assert.equal(g.status, 200);
    const ended = new Promise((r) => g.res.on('close', r));
    const t0 = Date.now();
    const k = mcpAdmin(c.db, 'session', 'kill', session, '--reason', 'replica test');
    assert.equal(k.status, 0, k.stderr);
    await withTimeout(ended, 3000, 'the GET stream on replica 2 to end');
    for (let i = 0; i < 3; i++) {
      await waitFor(
        async () => {
          c.balancer.setNext(i);
          const r = await request(c.port, { headers: mcpHeaders({ session }), body: { jsonrpc: '2.0', id: newId(), method: 'ping' } });
          return r.status === 404;
        },
        3000,
        `404 from replica ${i} after the kill`,
        50,
      );
    }
    const took = Date.now() - t0;
    t.diagnostic(`session kill effective on every replica after ${took} ms`);
    assert.ok(took < 2000, `the kill took ${took} ms to reach every replica`);
  });
});

test('mcp-admin tokens revoke: every replica refuses the token (401) within 1 s', { skip: SKIP }, async (t) => {
  await withCluster(['--auth', 'token'], async (c) => {
    const add = mcpAdmin(c.db, 'tokens', 'add', 'alice');
    assert.equal(add.status, 0, add.stderr);
    const token = add.stdout.trim();
    const auth = { Authorization: `Bearer ${token}` };
    const init = await request(c.port, {
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...auth },
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'rev', version: '0' } } },
    });
    assert.equal(init.status, 200, init.text);
    const session = init.headers['mcp-session-id'];
    for (let i = 0; i < 3; i++) {
      c.balancer.setNext(i);
      const r = await request(c.port, { headers: { ...mcpHeaders({ session }), ...auth }, body: { jsonrpc: '2.0', id: newId(), method: 'ping' } });
      assert.equal(r.status, 200, `replica ${i} before the revoke: ${r.status} ${r.text}`);
    }
    c.balancer.setNext(1);
    const g = await getStream(c.port, session, { headers: auth });
    assert.equal(g.status, 200);
    const ended = new Promise((r) => g.res.on('close', r));
    const t0 = Date.now();
    assert.equal(mcpAdmin(c.db, 'tokens', 'revoke', 'alice').status, 0);
    await withTimeout(ended, 3000, 'the revoked principal\'s GET on replica 1 to end');
    for (let i = 0; i < 3; i++) {
      await waitFor(
        async () => {
          c.balancer.setNext(i);
          const r = await request(c.port, { headers: { ...mcpHeaders({ session }), ...auth }, body: { jsonrpc: '2.0', id: newId(), method: 'ping' } });
          return r.status === 401;
        },
        3000,
        `401 from replica ${i} after the revoke`,
        50,
      );
    }
    const took = Date.now() - t0;
    t.diagnostic(`token revoke effective on every replica after ${took} ms`);
    assert.ok(took < 2000, `the revoke took ${took} ms to reach every replica`);
  });
});

// ---------------------------------------------------------------- a replica dies

test('SIGKILL of the replica running a countdown: the client resumes through the balancer, every event once, then an end', { skip: SKIP }, async (t) => {
  await withCluster([], async (c) => {
    const { session } = await initSession(c.port);
    c.balancer.setNext(1);
    const { id, s } = await startCountdown(c.port, session, 40, 100, 'dead');
    const owner = served(c, 'tools/call').replica;
    assert.equal(owner, 1 % c.n);
    await readProgress(s.sse, 3);
    await sleep(150);
    await c.kill(owner);
    // the client's connection breaks with the replica; take what arrived
    const received = [];
    for (;;) {
      const m = await s.sse.nextMessage(3000).catch(() => null);
      if (!m) break;
      received.push(m);
    }
    s.close();
    const all = s.sse.all.filter((e) => e.data);
    const last = s.sse.lastEventId;
    // resume through the balancer: the dead replica refuses, another serves
    const t0 = Date.now();
    const g = await getStream(c.port, session, { lastEventId: last, timeout: 20000 });
    const resumer = served(c, (e) => e.method === 'GET' && e.path === '/mcp');
    if (c.n > 1) assert.notEqual(resumer.replica, owner);
    assert.equal(g.status, 200, `resume after the owner died: ${g.status}`);
    let rest;
    try {
      rest = await g.sse.rest(30000);
    } finally {
      g.close();
    }
    t.diagnostic(`resumed on replica ${resumer.replica}; stream ended ${Date.now() - t0} ms after the resume began`);
    const seen = [...all.map((e) => JSON.parse(e.data)), ...rest.map((m) => m.msg)];
    const progress = seen.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    progress.forEach((p, i) => assert.equal(p, i + 1, `every progress event once, in order: ${progress}`));
    assertIncreasing(rest, last);
    const finals = seen.filter((m) => m.id === id);
    assert.equal(finals.length, 1, `exactly one terminal message: ${JSON.stringify(finals)}`);
    if (finals[0].error) {
      // the call could not continue: a clear error, never a hang
      assert.match(finals[0].error.message, /replica|restart|interrupted|lost/i, JSON.stringify(finals[0]));
    } else {
      assert.equal(finals[0].result?.content?.[0]?.text, 'countdown finished');
      assert.equal(progress.length, 40);
    }
    // the session lives on
    await echo(c.port, session, 'after-the-kill');
  });
});

test('a gateway session keeps working after the replica that owns its upstream child is killed', { skip: SKIP }, async (t) => {
  await withCluster(['--upstream', `${MCPD_BIN} --stdio --db :memory:`], async (c) => {
    c.balancer.setNext(0);
    const { session } = await initSession(c.port);
    for (let i = 0; i < 3; i++) assert.equal(await echo(c.port, session, `before-${i}`), `before-${i}`);
    // the owner: the replica that started the child (the initialize's, unless handed over)
    const owner = c.replicas.findIndex((r) => procChildren(r.pid).length > 0);
    assert.ok(owner >= 0, 'one replica runs the upstream child');
    await c.kill(owner);
    const t0 = Date.now();
    await waitFor(
      async () => {
        try {
          return (await echo(c.port, session, 'after-the-kill')) === 'after-the-kill';
        } catch {
          return false;
        }
      },
      30000,
      'the session to be served again after its owner died',
      250,
    );
    t.diagnostic(`gateway session served again ${Date.now() - t0} ms after its owner (replica ${owner}) was killed`);
    for (let i = 0; i < 3; i++) assert.equal(await echo(c.port, session, `after-${i}`), `after-${i}`);
  });
});

test('the SDK client through the balancer: its replica is SIGKILLed mid-countdown; the SDK resumes, each progress once, and the call ends', { skip: SKIP }, async (t) => {
  await withCluster([], async (c) => {
    const transport = new StreamableHTTPClientTransport(new URL(c.url), {
      reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 20 },
    });
    const client = new Client({ name: 'mcpd-replicas-sdk-kill', version: '0.0.0' });
    await client.connect(transport);
    try {
      const progress = [];
      let killed;
      const call = client
        .callTool({ name: 'countdown', arguments: { n: 30, interval_ms: 100 } }, undefined, {
          timeout: 60000,
          onprogress: (p) => {
            progress.push(p.progress);
            if (p.progress === 3 && killed === undefined) {
              killed = served(c, (e) => e.rpc === 'tools/call' && e.session === transport.sessionId).replica;
              c.kill(killed);
            }
          },
        })
        .then(
          (r) => ({ r }),
          (e) => ({ e }),
        );
      const out = await withTimeout(call, 60000, 'the call to end after its replica died');
      t.diagnostic(`replica ${killed} killed after progress 3; the SDK saw ${progress.length} progress events; ${out.e ? `error: ${out.e.message}` : 'result'}`);
      progress.forEach((p, i) => assert.equal(p, i + 1, `each progress once, in order: ${progress}`));
      if (out.e) assert.match(out.e.message, /replica|restart|interrupted|lost/i);
      else {
        assert.equal(out.r.content?.[0]?.text, 'countdown finished');
        assert.equal(progress.length, 30);
      }
      const r = await client.callTool({ name: 'echo', arguments: { message: 'after' } });
      assert.deepEqual(r.content, [{ type: 'text', text: 'after' }]);
    } finally {
      await client.close().catch(() => {});
    }
  });
});
