// The legacy HTTP+SSE transport (2024-11-05): GET /sse announces the
// endpoint, POST /messages?sessionId=… carries client messages, replies come
// on the /sse stream. (a) the official SDK's SSEClientTransport with Client;
// (b) a dropped /sse resumed with Last-Event-ID gets everything it missed
// exactly once, including a reply to a request POSTed while it was down;
// (c) a reconnect before initialize finds its reservation again; (d)
// refusals as on /mcp (404, 400 -32700, 415, …); (e) SIGKILL + restart on the
// same db: the session and its stream go on; (f) the same bearer tokens as
// /mcp, and another principal's session does not exist; (g) a client that
// speaks only 2024-11-05 is answered in 2024-11-05; (h) a resume with many
// messages ready is written in blocks of events, not a chunk per event.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

import {
  LATEST,
  MCPD_BIN,
  dbArg,
  chunkedResponse,
  newId,
  openStream,
  parseEventId,
  rawExchange,
  request,
  sleep,
  startMcpd,
  tempDb,
  withMcpd,
} from './lib/mcpd.mjs';

let mcpd;
before(async () => {
  mcpd = await startMcpd();
});
after(async () => {
  // A clean exit: no sanitizer report, no leak, the relay stopped.
  const exit = await mcpd?.stop('SIGTERM');
  await mcpd?.cleanup();
  assert.deepEqual(exit, { code: 0, signal: null }, mcpd?.stderr);
});

/** GET /sse (optionally resuming); resolves the open stream and its endpoint event. */
async function openSse(port, { lastEventId } = {}) {
  const headers = { Accept: 'text/event-stream' };
  if (lastEventId !== undefined) headers['Last-Event-ID'] = lastEventId;
  const s = await openStream(port, { method: 'GET', path: '/sse', headers });
  if (s.status !== 200) return { s };
  const ev = await s.sse.next(5000);
  assert.equal(ev.event, 'endpoint', `first event is the endpoint: ${JSON.stringify(ev)}`);
  const m = /^\/messages\?sessionId=([0-9a-f]{32})$/.exec(ev.data);
  assert.ok(m, `endpoint data is a relative URL: ${ev.data}`);
  return { s, endpoint: ev, session: m[1] };
}

/** POST one message to /messages; resolves the raw response. */
function post(port, session, body, { headers = {} } = {}) {
  return request(port, {
    path: `/messages?sessionId=${session}`,
    headers: { 'Content-Type': 'application/json', ...headers },
    body,
  });
}

/** The next message event on an /sse stream: {ev, msg}. */
async function nextMessage(sse, ms = 5000) {
  const m = await sse.nextMessage(ms);
  assert.notEqual(m, null, '/sse stream ended');
  assert.equal(m.ev.event, 'message', `a message event: ${JSON.stringify(m.ev)}`);
  assert.ok(m.ev.id, 'every message event carries an id');
  return m;
}

/** initialize + notifications/initialized over /messages; the result arrives on sse. */
async function initialize(port, sse, session) {
  const id = newId();
  const r = await post(port, session, {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'legacy-e2e', version: '0' } },
  });
  assert.equal(r.status, 202, `initialize POST: ${r.status} ${r.text}`);
  const { msg } = await nextMessage(sse);
  assert.equal(msg.id, id);
  assert.equal(msg.result.protocolVersion, LATEST);
  const n = await post(port, session, { jsonrpc: '2.0', method: 'notifications/initialized' });
  assert.equal(n.status, 202);
}

test('(a) SDK SSEClientTransport: connect, listTools, echo, countdown with progress', async () => {
  const transport = new SSEClientTransport(new URL(`${mcpd.base}/sse`));
  const client = new Client({ name: 'mcpd-e2e-legacy', version: '0.0.0' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('echo') && names.includes('countdown'), names.join(','));

    const r = await client.callTool({ name: 'echo', arguments: { message: 'hi over /sse' } });
    assert.deepEqual(r.content, [{ type: 'text', text: 'hi over /sse' }]);

    const progress = [];
    const c = await client.callTool({ name: 'countdown', arguments: { n: 5, interval_ms: 20 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      timeout: 10000,
    });
    assert.equal(c.content[0].text, 'countdown finished');
    // The SDK runs notification handlers a microtask later but drops a
    // request's progress handler at once when its response arrives: when
    // the last progress and the response come in one read (they are sent
    // back to back), it loses that progress, and under load the ones before
    // it too. (b) checks on the wire that every progress is sent, once,
    // before the result.
    assert.ok(progress.length >= 1, `progress ${progress}`);
    assert.deepEqual(progress, [1, 2, 3, 4, 5].slice(0, progress.length));

    // Several requests at once: each answered once, on the one stream.
    const many = await Promise.all(
      [1, 2, 3, 4, 5, 6, 7, 8].map((i) => client.callTool({ name: 'echo', arguments: { message: `m${i}` } })),
    );
    assert.deepEqual(
      many.map((x) => x.content[0].text),
      ['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8'],
    );
  } finally {
    await client.close();
  }
});

test('(b) drop /sse mid-countdown, POST while down, resume with Last-Event-ID: everything once', async () => {
  const { s, session, endpoint } = await openSse(mcpd.port);
  assert.equal(endpoint.id, session, 'the endpoint event carries the session id as its id');
  await initialize(mcpd.port, s.sse, session);

  const cid = newId();
  const token = 'legacy-b';
  const p = await post(mcpd.port, session, {
    jsonrpc: '2.0',
    id: cid,
    method: 'tools/call',
    params: { name: 'countdown', arguments: { n: 10, interval_ms: 80 }, _meta: { progressToken: token } },
  });
  assert.equal(p.status, 202);
  assert.equal(p.text, 'Accepted');

  const seen = [];
  let lastId;
  const ids = [];
  while (seen.length < 3) {
    const { ev, msg } = await nextMessage(s.sse);
    assert.equal(msg.method, 'notifications/progress', JSON.stringify(msg));
    seen.push(msg.params.progress);
    ids.push(ev.id);
    lastId = ev.id;
  }
  s.close(); // drop the /sse connection mid-call

  // A request while no /sse is open: its reply must wait in the stream.
  const eid = newId();
  const e = await post(mcpd.port, session, {
    jsonrpc: '2.0',
    id: eid,
    method: 'tools/call',
    params: { name: 'echo', arguments: { message: 'while-down' } },
  });
  assert.equal(e.status, 202);
  await sleep(1200); // the countdown finishes meanwhile

  const r = await openSse(mcpd.port, { lastEventId: lastId });
  assert.equal(r.s.status, 200);
  assert.equal(r.session, session, 'the same session goes on');
  assert.equal(r.endpoint.id, undefined, 'a resumed endpoint event keeps the client’s last id');
  const got = [];
  let result, echoed;
  while (!result || !echoed) {
    const { ev, msg } = await nextMessage(r.s.sse);
    ids.push(ev.id);
    if (msg.method === 'notifications/progress') got.push(msg.params.progress);
    else if (msg.id === cid) result = msg;
    else if (msg.id === eid) echoed = msg;
    else assert.fail(`unexpected message ${JSON.stringify(msg)}`);
  }
  assert.deepEqual([...seen, ...got], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'every progress exactly once');
  assert.equal(result.result.content[0].text, 'countdown finished');
  assert.equal(echoed.result.content[0].text, 'while-down');
  // One stream, strictly increasing positions.
  const parsed = ids.map(parseEventId);
  assert.ok(parsed.every((x) => x.stream === parsed[0].stream), 'one stream');
  for (let i = 1; i < parsed.length; i++) assert.ok(parsed[i].seq > parsed[i - 1].seq, 'ids increase');
  await sleep(200);
  assert.deepEqual(r.s.sse.drainMessages(), [], 'nothing sent twice');

  // The resumed stream carries new work too.
  const nid = newId();
  assert.equal(
    (await post(mcpd.port, session, { jsonrpc: '2.0', id: nid, method: 'ping' })).status,
    202,
  );
  const { msg } = await nextMessage(r.s.sse);
  assert.equal(msg.id, nid);
  assert.deepEqual(msg.result, {});

  // A second /sse for the same session while this one is alive: 409.
  const dup = await openStream(mcpd.port, {
    method: 'GET',
    path: '/sse',
    headers: { Accept: 'text/event-stream', 'Last-Event-ID': lastId },
  });
  assert.equal(dup.status, 409);
  dup.close();
  r.s.close();
});

test('(c) a reconnect before initialize (Last-Event-ID = the endpoint id) keeps the session id', async () => {
  const a = await openSse(mcpd.port);
  a.s.close();
  await sleep(100);
  const b = await openSse(mcpd.port, { lastEventId: a.endpoint.id });
  assert.equal(b.s.status, 200);
  assert.equal(b.session, a.session);
  await initialize(mcpd.port, b.s.sse, b.session);
  b.s.close();
});

test('(d) refusals: unknown session 404, bad JSON 400, wrong type 415, and more', async () => {
  const port = mcpd.port;
  const unknown = 'ffffffffffffffffffffffffffffffff';
  let r = await post(port, unknown, { jsonrpc: '2.0', id: 1, method: 'ping' });
  assert.equal(r.status, 404);
  assert.equal(r.json.error.code, -32001);
  r = await post(port, 'nonsense', { jsonrpc: '2.0', id: 1, method: 'ping' });
  assert.equal(r.status, 404);
  r = await request(port, { path: '/messages', headers: { 'Content-Type': 'application/json' }, body: '{}' });
  assert.equal(r.status, 400, 'no sessionId');

  const { s, session } = await openSse(port);
  r = await post(port, session, { jsonrpc: '2.0', id: 1, method: 'ping' });
  assert.equal(r.status, 400, 'before initialize');
  await initialize(port, s.sse, session);
  r = await post(port, session, '{"jsonrpc":"2.0","id":1,"method":');
  assert.equal(r.status, 400);
  assert.equal(r.json.error.code, -32700);
  r = await post(port, session, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { headers: { 'Content-Type': 'text/plain' } });
  assert.equal(r.status, 415);
  r = await post(port, session, { jsonrpc: '2.0', id: 7, method: 'initialize', params: { protocolVersion: LATEST } });
  assert.equal(r.status, 400, 'a second initialize');
  r = await post(port, session, [{ jsonrpc: '2.0', id: 8, method: 'ping' }]);
  assert.equal(r.status, 400, 'no batches on a 2025-11-25 session');
  r = await post(port, session, { jsonrpc: '2.0', id: 9, method: 'ping' }, { headers: { 'MCP-Protocol-Version': '1999-01-01' } });
  assert.equal(r.status, 400, 'unsupported MCP-Protocol-Version');
  r = await post(port, session, { jsonrpc: '2.0', id: 10, method: 'ping' }, { headers: { Host: 'evil.example' } });
  assert.equal(r.status, 403, 'Host check as on /mcp');
  s.close();

  r = await request(port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream', 'Last-Event-ID': unknown } });
  assert.equal(r.status, 404, 'resume of an unknown session');
  r = await request(port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream', 'Last-Event-ID': 'x:y' } });
  assert.equal(r.status, 400, 'malformed Last-Event-ID');
  r = await request(port, { method: 'GET', path: '/sse', headers: { Accept: 'application/json' } });
  assert.equal(r.status, 406);
  // A 405 names what the path allows, however the path is spelled; other
  // paths are 404.
  for (const [method, p, allow] of [['PUT', '/sse', 'GET'], ['PUT', '/sse/', 'GET'], ['GET', '/messages', 'POST'],
    ['DELETE', '//messages', 'POST'], ['PUT', '/mcp', 'GET, POST, DELETE'], ['PATCH', '/mcp/', 'GET, POST, DELETE'],
    ['POST', '/healthz', 'GET, HEAD'], ['DELETE', '/metrics', 'GET, HEAD']]) {
    r = await request(port, { method, path: p, headers: {}, body: '' });
    assert.equal(r.status, 405, `${method} ${p}`);
    assert.equal(r.headers.allow, allow, `${method} ${p}`);
    assert.equal(r.json.error.code, -32000);
  }
  for (const [method, p] of [['POST', '/healthzx'], ['GET', '/mcpx'], ['GET', '/mcp/x'], ['PUT', '/']]) {
    r = await request(port, { method, path: p, headers: {}, body: '' });
    assert.equal(r.status, 404, `${method} ${p}`);
  }
});

test('(e) SIGKILL and restart on the same db: resume /sse, same session, nothing lost or repeated', async () => {
  const m = await startMcpd();
  try {
    const { s, session } = await openSse(m.port);
    await initialize(m.port, s.sse, session);
    const id1 = newId();
    await post(m.port, session, {
      jsonrpc: '2.0',
      id: id1,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'before-kill' } },
    });
    const first = await nextMessage(s.sse);
    assert.equal(first.msg.id, id1);
    s.close();
    // Answered while no /sse is open, then the process dies.
    const id2 = newId();
    await post(m.port, session, {
      jsonrpc: '2.0',
      id: id2,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'unread-at-kill' } },
    });
    await sleep(300);
    await m.stop('SIGKILL');
    await m.start();

    const r = await openSse(m.port, { lastEventId: first.ev.id });
    assert.equal(r.s.status, 200, 'resume after restart');
    assert.equal(r.session, session);
    const missed = await nextMessage(r.s.sse);
    assert.equal(missed.msg.id, id2);
    assert.equal(missed.msg.result.content[0].text, 'unread-at-kill');
    const id3 = newId();
    const p = await post(m.port, session, {
      jsonrpc: '2.0',
      id: id3,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'after-restart' } },
    });
    assert.equal(p.status, 202);
    const next = await nextMessage(r.s.sse);
    assert.equal(next.msg.id, id3, 'nothing repeated before the new reply');
    assert.equal(next.msg.result.content[0].text, 'after-restart');
    assert.ok(parseEventId(next.ev.id).seq > parseEventId(missed.ev.id).seq);
    r.s.close();
    assert.deepEqual(await m.stop('SIGTERM'), { code: 0, signal: null }, m.stderr);
  } finally {
    await m.cleanup();
  }
});

test('(e2) SIGKILL while a request runs: after the restart its progress so far and the restart\'s error come on the resumed /sse, each once', async () => {
  const m = await startMcpd();
  try {
    const { s, session } = await openSse(m.port);
    await initialize(m.port, s.sse, session);
    const id = newId();
    const r0 = await post(m.port, session, {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 50, interval_ms: 100 }, _meta: { progressToken: 'k' } },
    });
    assert.equal(r0.status, 202);
    // Some progress reaches the client; the request is still running.
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push(await nextMessage(s.sse));
    assert.ok(seen.every((x) => x.msg.method === 'notifications/progress'), JSON.stringify(seen.map((x) => x.msg)));
    s.close();
    await sleep(350); // more progress, written while no /sse is open
    await m.stop('SIGKILL');
    await m.start();

    const r = await openSse(m.port, { lastEventId: seen[2].ev.id });
    assert.equal(r.s.status, 200, 'resume after restart');
    const after = [];
    for (;;) {
      const x = await nextMessage(r.s.sse, 5000);
      after.push(x);
      if (x.msg.id === id) break;
    }
    const final = after.at(-1).msg;
    assert.equal(final.error?.code, -32603, `the request ends with the restart's error: ${JSON.stringify(final)}`);
    assert.match(final.error.message, /restart/);
    const progress = [...seen, ...after].filter((x) => x.msg.method === 'notifications/progress').map((x) => x.msg.params.progress);
    assert.ok(progress.length > 3, `the progress written while no /sse was open follows: ${progress}`);
    assert.deepEqual(progress, [...new Set(progress)].sort((a, b) => a - b), `in order, each once: ${progress}`);
    // The session goes on.
    const id2 = newId();
    await post(m.port, session, { jsonrpc: '2.0', id: id2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'after' } } });
    assert.equal((await nextMessage(r.s.sse)).msg.id, id2, 'nothing repeated before the new reply');
    r.s.close();
    // A second resume of the same point repeats what the first got, from the stream, and adds nothing.
    const again = await openSse(m.port, { lastEventId: seen[2].ev.id });
    const replay = [];
    for (;;) {
      const x = await nextMessage(again.s.sse, 5000);
      replay.push(x.msg);
      if (x.msg.id === id2) break;
    }
    assert.equal(replay.filter((x) => x.id === id).length, 1, 'the error once');
    again.s.close();
    assert.deepEqual(await m.stop('SIGTERM'), { code: 0, signal: null }, m.stderr);
  } finally {
    await m.cleanup();
  }
});

test('(f) --auth token: 401 without a token, the SDK with one, 404 across principals', async () => {
  const { db, dir } = tempDb();
  const admin = process.env.MCP_ADMIN_BIN || path.join(path.dirname(MCPD_BIN), 'mcp-admin');
  const addToken = (name) => {
    const r = spawnSync(admin, ['--db', dbArg(db), 'tokens', 'add', name], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  };
  await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
    const alice = { Authorization: `Bearer ${addToken('alice')}` };
    const bob = { Authorization: `Bearer ${addToken('bob')}` };
    const none = await request(m.port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
    assert.equal(none.status, 401);
    assert.equal(none.headers['www-authenticate'], 'Bearer');

    const transport = new SSEClientTransport(new URL(`${m.base}/sse`), { requestInit: { headers: alice } });
    const client = new Client({ name: 'legacy-with-token', version: '0' });
    await client.connect(transport);
    try {
      const r = await client.callTool({ name: 'echo', arguments: { message: 'authorized' } });
      assert.equal(r.content[0].text, 'authorized');
      const session = new URL(transport._endpoint).searchParams.get('sessionId');
      assert.match(session, /^[0-9a-f]{32}$/);
      // Bob: no such session, by POST or by resuming its /sse.
      const p = await post(m.port, session, { jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: bob });
      assert.equal(p.status, 404);
      const g = await request(m.port, {
        method: 'GET',
        path: '/sse',
        headers: { Accept: 'text/event-stream', 'Last-Event-ID': session, ...bob },
      });
      assert.equal(g.status, 404);
      // Nor may Bob initialize a reservation Alice holds.
      const a = await openStream(m.port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream', ...alice } });
      const ev = await a.sse.next(5000);
      const reserved = /sessionId=([0-9a-f]{32})/.exec(ev.data)[1];
      const i = await post(
        m.port,
        reserved,
        { jsonrpc: '2.0', id: 2, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {} } },
        { headers: bob },
      );
      assert.equal(i.status, 404);
      a.close();
    } finally {
      await client.close();
    }
  });
});

test('(g) a client that speaks only 2024-11-05 gets 2024-11-05, and no batches', async () => {
  const { port } = mcpd;
  const { s, session } = await openSse(port);
  try {
    const r = await post(port, session, {
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'old', version: '1' } },
    });
    assert.equal(r.status, 202, r.text);
    const { msg } = await nextMessage(s.sse);
    assert.equal(msg.id, 'init');
    assert.equal(msg.result.protocolVersion, '2024-11-05', JSON.stringify(msg));
    assert.equal((await post(port, session, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
    const b = await post(port, session, [{ jsonrpc: '2.0', id: 1, method: 'ping' }]);
    assert.equal(b.status, 400, 'batches came with 2025-03-26');
    assert.equal(b.json.error.code, -32600);
    assert.equal((await post(port, session, { jsonrpc: '2.0', id: 'p', method: 'ping' })).status, 202);
    const { msg: pong } = await nextMessage(s.sse);
    assert.deepEqual(pong, { jsonrpc: '2.0', id: 'p', result: {} });
  } finally {
    s.close();
  }
});

test('(h) a resume with many messages ready comes in blocks of events, each message once', async () => {
  const { s, session } = await openSse(mcpd.port);
  const n = 200;
  let from;
  try {
    await initialize(mcpd.port, s.sse, session);
    const pid = newId();
    assert.equal((await post(mcpd.port, session, { jsonrpc: '2.0', id: pid, method: 'ping' })).status, 202);
    from = (await nextMessage(s.sse)).ev.id;
    const cid = newId();
    const p = await post(mcpd.port, session, {
      jsonrpc: '2.0',
      id: cid,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n, interval_ms: 0 }, _meta: { progressToken: 'legacy-h' } },
    });
    assert.equal(p.status, 202);
    for (;;) if ((await nextMessage(s.sse, 20000)).msg.id === cid) break; // all of it stored
  } finally {
    s.close();
  }
  const x = await rawExchange(
    mcpd.port,
    `GET /sse HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nAccept: text/event-stream\r\nLast-Event-ID: ${from}\r\n\r\n`,
    { ms: 10000, until: (t) => t.includes('countdown finished') && t.endsWith('\r\n') },
  );
  const { head, chunks } = chunkedResponse(x.text);
  assert.match(head, /^HTTP\/1\.1 200 /);
  const msgs = chunks
    .join('')
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)));
  assert.deepEqual(
    msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress),
    Array.from({ length: n }, (_, i) => i + 1),
  );
  assert.equal(msgs.length, n + 1, 'each message once');
  // the endpoint event alone, then ~120-byte events in 4-16 KiB blocks
  assert.ok(chunks.length <= n / 10, `${n + 1} messages in ${chunks.length} chunks`);
});
