// MCP lifecycle over raw HTTP: version negotiation, ping, logging levels,
// JSON-RPC errors, cancellation of a running call, batches on a 2025-03-26
// session, and a graceful exit on SIGTERM.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  LATEST,
  echo,
  getStream,
  initSession,
  mcpHeaders,
  newId,
  openStream,
  request,
  responseFor,
  rpc,
  sleep,
  startMcpd,
} from './lib/mcpd.mjs';

let mcpd;
before(async () => {
  mcpd = await startMcpd();
});
after(async () => {
  await mcpd?.cleanup();
});

/** One request on a session; returns its response message. */
async function call(session, method, params = {}, version = LATEST) {
  const id = newId();
  const r = await rpc(mcpd.port, { jsonrpc: '2.0', id, method, params }, { session, version });
  assert.equal(r.status, 200, `${method}: HTTP ${r.status} ${r.text || ''}`);
  const resp = responseFor(r.messages, id);
  assert.ok(resp, `${method}: no response among ${JSON.stringify(r.messages)}`);
  return { resp, messages: r.messages };
}

for (const v of ['2025-03-26', '2025-06-18', '2025-11-25']) {
  test(`initialize with ${v} is echoed`, async () => {
    const { session, result, headers } = await initSession(mcpd.port, { protocolVersion: v });
    assert.equal(result.protocolVersion, v);
    assert.match(session, /^[0-9a-f]{32}$/);
    assert.ok(result.serverInfo?.name, 'serverInfo.name');
    assert.ok(result.capabilities?.tools, 'tools capability');
    assert.ok(result.capabilities?.logging, 'logging capability');
    assert.ok(headers['mcp-session-id']);
  });
}

test('initialize with an unknown version gets the latest (2025-11-25)', async () => {
  const { result } = await initSession(mcpd.port, { protocolVersion: '2099-01-01' });
  assert.equal(result.protocolVersion, LATEST);
});

test('two initializes give different session ids', async () => {
  const a = await initSession(mcpd.port);
  const b = await initSession(mcpd.port);
  assert.notEqual(a.session, b.session);
});

test('ping → {}', async () => {
  const { session } = await initSession(mcpd.port);
  const { resp } = await call(session, 'ping');
  assert.deepEqual(resp.result, {});
});

/**
 * Call test_tool_with_logging; count log messages on the POST reply and on
 * the session's open GET stream `g` (wherever the server sends them).
 */
async function logMessagesFromTool(session, g) {
  const { messages } = await call(session, 'tools/call', { name: 'test_tool_with_logging', arguments: {} });
  await sleep(300); // conformance allows messages up to 200 ms after the result
  const onGet = g.sse.drainMessages().map((m) => m.msg);
  return [...messages, ...onGet].filter((m) => m.method === 'notifications/message');
}

test('logging/setLevel warning hides info logs; debug shows 3', async () => {
  const { session } = await initSession(mcpd.port);
  // one standalone GET stream for the whole test (a second one would get 409
  // until the server notices the first one closed)
  const g = await getStream(mcpd.port, session);
  assert.equal(g.status, 200);
  try {
    let { resp } = await call(session, 'logging/setLevel', { level: 'warning' });
    assert.deepEqual(resp.result, {});
    const quiet = await logMessagesFromTool(session, g);
    assert.deepEqual(quiet, [], `no info messages at level warning: ${JSON.stringify(quiet)}`);

    ({ resp } = await call(session, 'logging/setLevel', { level: 'debug' }));
    assert.deepEqual(resp.result, {});
    const loud = await logMessagesFromTool(session, g);
    assert.equal(loud.length, 3, `3 messages at level debug: ${JSON.stringify(loud)}`);
    for (const m of loud) {
      assert.equal(m.params.level, 'info');
      assert.ok(m.params.data !== undefined);
    }
  } finally {
    g.close();
  }
});

test('logging/setLevel with a bad level → -32602', async () => {
  const { session } = await initSession(mcpd.port);
  const { resp } = await call(session, 'logging/setLevel', { level: 'verbose' });
  assert.equal(resp.error?.code, -32602, JSON.stringify(resp));
});

test('unknown method → -32601', async () => {
  const { session } = await initSession(mcpd.port);
  const { resp } = await call(session, 'no/such/method');
  assert.equal(resp.error?.code, -32601, JSON.stringify(resp));
});

test('tools/call of an unknown tool → JSON-RPC error (or isError)', async () => {
  const { session } = await initSession(mcpd.port);
  const { resp } = await call(session, 'tools/call', { name: 'no_such_tool', arguments: {} });
  assert.ok(resp.error?.code === -32602 || resp.result?.isError === true, JSON.stringify(resp));
});

test('notifications/cancelled ends a running countdown without a response', async () => {
  const { session } = await initSession(mcpd.port);
  const id = newId();
  const s = await openStream(mcpd.port, {
    method: 'POST',
    headers: mcpHeaders({ session }),
    body: {
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 100, interval_ms: 50 }, _meta: { progressToken: 'cancel-me' } },
    },
  });
  try {
    assert.equal(s.status, 200);
    assert.ok(s.sse, 'countdown with progress replies with SSE');
    const m1 = await s.sse.nextMessage(5000);
    assert.equal(m1?.msg.method, 'notifications/progress');
    const t0 = Date.now();
    const c = await request(mcpd.port, {
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } },
    });
    assert.equal(c.status, 202, `cancel notification: ${c.status} ${c.text}`);
    const rest = await s.sse.rest(4000).catch((e) => {
      throw new Error(`POST stream did not end within 4 s of the cancel: ${e.message}`);
    });
    const elapsed = Date.now() - t0;
    assert.ok(elapsed < 2000, `stream ended ${elapsed} ms after cancel (should be quick)`);
    const resp = rest.find((m) => m.msg.id === id);
    assert.equal(resp, undefined, `no response after cancel: ${JSON.stringify(resp?.msg)}`);
    const progress = rest.filter((m) => m.msg.method === 'notifications/progress');
    assert.ok(progress.length < 60, `work stopped: ${progress.length} more progress events`);
  } finally {
    s.close();
  }
  await echo(mcpd.port, session, 'after-cancel');
});

test('batch of two requests on a 2025-03-26 session → both responses', async () => {
  const { session, version } = await initSession(mcpd.port, { protocolVersion: '2025-03-26' });
  assert.equal(version, null);
  const r = await rpc(
    mcpd.port,
    [
      { jsonrpc: '2.0', id: 'b1', method: 'ping' },
      { jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'echo', arguments: { message: 'batched' } } },
    ],
    { session, version: null },
  );
  assert.equal(r.status, 200, r.text);
  const a = responseFor(r.messages, 'b1');
  const b = responseFor(r.messages, 'b2');
  assert.deepEqual(a?.result, {}, JSON.stringify(r.messages));
  assert.equal(b?.result?.content?.[0]?.text, 'batched', JSON.stringify(r.messages));
  assert.equal(r.messages.filter((m) => 'result' in m || 'error' in m).length, 2);
});

test('batch of notifications only on a 2025-03-26 session → 202', async () => {
  const { session } = await initSession(mcpd.port, { protocolVersion: '2025-03-26' });
  const r = await request(mcpd.port, {
    headers: mcpHeaders({ session, version: null }),
    body: [
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed' },
    ],
  });
  assert.equal(r.status, 202, r.text);
  assert.equal(r.body.length, 0);
});

test('SSE priming event only for 2025-11-25 sessions', async () => {
  for (const v of ['2025-03-26', '2025-11-25']) {
    const { session, version } = await initSession(mcpd.port, { protocolVersion: v });
    const id = newId();
    const r = await rpc(
      mcpd.port,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 10 }, _meta: { progressToken: 1 } } },
      { session, version },
    );
    assert.equal(r.status, 200);
    assert.ok(r.sse, `${v}: progress before the result → SSE`);
    const empty = r.events.filter((e) => e.data === '');
    if (v === '2025-11-25') {
      assert.equal(empty.length, 1, `${v}: one priming event: ${JSON.stringify(r.events)}`);
      assert.equal(r.events[0].data, '', `${v}: priming event first`);
    } else {
      assert.equal(empty.length, 0, `${v}: no empty-data events: ${JSON.stringify(r.events)}`);
    }
    assert.deepEqual(
      r.messages.map((m) => m.method ?? m.id),
      ['notifications/progress', 'notifications/progress', id],
    );
    const ids = r.events.map((e) => e.id);
    assert.equal(new Set(ids).size, ids.length, 'event ids unique');
  }
});

test('echo without progress replies with plain JSON (reply-mode auto)', async () => {
  const { session } = await initSession(mcpd.port);
  const id = newId();
  const r = await rpc(
    mcpd.port,
    { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { message: 'j' } } },
    { session },
  );
  assert.equal(r.status, 200);
  assert.match(String(r.headers['content-type']), /^application\/json/);
  assert.equal(r.json?.result?.content?.[0]?.text, 'j');
});

test('SIGTERM → exit code 0', async () => {
  const m = await startMcpd();
  try {
    const { session } = await initSession(m.port);
    await echo(m.port, session, 'before-term');
    const ex = await m.stop('SIGTERM', 10000);
    assert.deepEqual(ex, { code: 0, signal: null }, `exit after SIGTERM; stderr tail:\n${m.stderr.slice(-2000)}`);
  } finally {
    await m.cleanup();
  }
});

test('SIGTERM with an open GET stream and a running call → exit code 0, promptly', async () => {
  const m = await startMcpd();
  try {
    const { session } = await initSession(m.port);
    const g = await getStream(m.port, session);
    assert.equal(g.status, 200);
    const s = await openStream(m.port, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: {
        jsonrpc: '2.0',
        id: newId(),
        method: 'tools/call',
        params: { name: 'countdown', arguments: { n: 1000, interval_ms: 50 }, _meta: { progressToken: 't' } },
      },
    });
    assert.equal(s.status, 200);
    await s.sse.nextMessage(5000);
    const t0 = Date.now();
    const ex = await m.stop('SIGTERM', 10000);
    assert.deepEqual(ex, { code: 0, signal: null }, `exit after SIGTERM; stderr tail:\n${m.stderr.slice(-2000)}`);
    assert.ok(Date.now() - t0 < 10000);
    assert.ok(await g.sse.waitEnd(2000), 'GET stream closed by the exit');
    g.close();
    s.close();
  } finally {
    await m.cleanup();
  }
});
