// MCP lifecycle over raw HTTP: version negotiation, ping, logging levels,
// JSON-RPC errors, cancellation of a running call, batches on a 2025-03-26
// session, and a graceful exit on SIGTERM.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  LATEST,
  callTool,
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

test('batch on a 2025-03-26 session: progress of a batched call is delivered (SSE) before its response', async () => {
  const { session } = await initSession(mcpd.port, { protocolVersion: '2025-03-26' });
  const r = await rpc(
    mcpd.port,
    [
      { jsonrpc: '2.0', id: 'p1', method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 10 }, _meta: { progressToken: 'batched' } } },
      { jsonrpc: '2.0', id: 'p2', method: 'ping' },
    ],
    { session, version: null },
  );
  assert.equal(r.status, 200);
  const kinds = r.messages.map((m) => m.method ?? m.id);
  assert.deepEqual(
    r.messages.filter((m) => m.method === 'notifications/progress').map((m) => [m.params.progressToken, m.params.progress]),
    [
      ['batched', 1],
      ['batched', 2],
    ],
    `progress requested with a progressToken must reach the client (${r.headers['content-type']}): ${JSON.stringify(r.messages)}`,
  );
  assert.ok(kinds.indexOf('p1') > kinds.lastIndexOf('notifications/progress'), 'progress before the response');
  assert.ok(responseFor(r.messages, 'p2'), 'ping answered');
});

test('batch on a 2025-03-26 session: a reply ready at once, then one that is not → each response once, on the SSE reply', async () => {
  const { session } = await initSession(mcpd.port, { protocolVersion: '2025-03-26' });
  const r = await rpc(
    mcpd.port,
    [
      { jsonrpc: '2.0', id: 'q1', method: 'tools/call', params: { name: 'echo', arguments: { message: 'first' } } },
      { jsonrpc: '2.0', id: 'q2', method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 100 } } },
    ],
    { session, version: null },
  );
  assert.equal(r.status, 200, r.text);
  assert.match(r.headers['content-type'], /text\/event-stream/);
  for (const id of ['q1', 'q2'])
    assert.equal(r.messages.filter((m) => m.id === id).length, 1, `${id} answered once: ${JSON.stringify(r.messages)}`);
  assert.equal(responseFor(r.messages, 'q1')?.result?.content?.[0]?.text, 'first');
});

test('batch on a 2025-03-26 session: a server→client request (elicitation) reaches the client, no hang', async () => {
  const { session } = await initSession(mcpd.port, { protocolVersion: '2025-03-26', capabilities: { elicitation: {} } });
  const s = await openStream(mcpd.port, {
    method: 'POST',
    headers: mcpHeaders({ session, version: null }),
    body: [
      { jsonrpc: '2.0', id: 'e1', method: 'tools/call', params: { name: 'test_elicitation', arguments: { message: 'batched?' } } },
      { jsonrpc: '2.0', id: 'e2', method: 'ping' },
    ],
    timeout: 5000,
  }).catch((e) => {
    throw new Error(`batched elicitation: no reply headers within 5 s (${e.message})`);
  });
  try {
    assert.equal(s.status, 200);
    assert.ok(s.sse, `a batch whose call asks the client something must be answered with SSE (${s.headers['content-type']})`);
    let req;
    for (;;) {
      const m = await s.sse.nextMessage(5000);
      assert.ok(m, 'stream ended before the elicitation request');
      if (m.msg.method === 'elicitation/create') {
        req = m.msg;
        break;
      }
    }
    const a = await request(mcpd.port, {
      headers: mcpHeaders({ session, version: null }),
      body: { jsonrpc: '2.0', id: req.id, result: { action: 'accept', content: { username: 'b', email: 'b@c.d' } } },
    });
    assert.equal(a.status, 202);
    const rest = (await s.sse.rest(5000)).map((m) => m.msg);
    assert.ok(responseFor(rest, 'e1')?.result, JSON.stringify(rest));
  } finally {
    s.close();
  }
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

test('concurrent calls on one session: each stream carries only its own messages', async () => {
  const { session } = await initSession(mcpd.port);
  const calls = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      callTool(mcpd.port, session, 'countdown', { n: 5, interval_ms: 20 }, { progressToken: `iso-${i}`, ms: 15000 }),
    ),
  );
  const allIds = new Set();
  calls.forEach((r, i) => {
    assert.equal(r.status, 200);
    const tokens = r.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progressToken);
    assert.deepEqual(tokens, Array(5).fill(`iso-${i}`), `stream ${i} carries only its own progress`);
    assert.equal(r.messages.filter((m) => 'result' in m || 'error' in m).length, 1, `stream ${i}: one response`);
    assert.equal(r.response?.result?.content?.[0]?.text, 'countdown finished');
    for (const ev of r.events) {
      if (!ev.id || ev.data === '') continue;
      assert.ok(!allIds.has(ev.id), `event id ${ev.id} used on two streams`);
      allIds.add(ev.id);
    }
  });
  const echoes = await Promise.all(
    Array.from({ length: 40 }, (_, i) => callTool(mcpd.port, session, 'echo', { message: `m${i}` })),
  );
  echoes.forEach((r, i) => assert.equal(r.response?.result?.content?.[0]?.text, `m${i}`));
});

test('DELETE while a call is running: 200, the POST stream ends, the id is gone', async () => {
  const { session } = await initSession(mcpd.port);
  const s = await openStream(mcpd.port, {
    method: 'POST',
    headers: mcpHeaders({ session }),
    body: {
      jsonrpc: '2.0',
      id: newId(),
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 1000, interval_ms: 50 }, _meta: { progressToken: 'del' } },
    },
  });
  try {
    assert.equal(s.status, 200);
    await s.sse.nextMessage(5000);
    const d = await request(mcpd.port, {
      method: 'DELETE',
      headers: { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': LATEST },
    });
    assert.equal(d.status, 200, `DELETE: ${d.status} ${d.text}`);
    assert.ok(await s.sse.waitEnd(5000), 'the running call\'s stream ends after DELETE');
  } finally {
    s.close();
  }
  const r = await request(mcpd.port, {
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id: 1, method: 'ping' },
  });
  assert.equal(r.status, 404);
  assert.equal(r.json?.error?.code, -32001);
  const again = await request(mcpd.port, {
    method: 'DELETE',
    headers: { 'Mcp-Session-Id': session, 'MCP-Protocol-Version': LATEST },
  });
  assert.equal(again.status, 404, 'a second DELETE of the same id → 404');
});

test('--session-idle-ms: an idle session expires (404), an active one does not', async () => {
  const m = await startMcpd({ args: ['--session-idle-ms', '1000'] });
  try {
    const idle = (await initSession(m.port)).session;
    const busy = (await initSession(m.port)).session;
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      await echo(m.port, busy, 'keep-me'); // activity every 200 ms
      await sleep(200);
    }
    await echo(m.port, busy, 'still-here');
    const r = await request(m.port, {
      headers: mcpHeaders({ session: idle }),
      body: { jsonrpc: '2.0', id: 1, method: 'ping' },
    });
    assert.equal(r.status, 404, `idle for 3 s with --session-idle-ms 1000: ${r.status} ${r.text}`);
    assert.equal(r.json?.error?.code, -32001);
  } finally {
    await m.cleanup();
  }
});

test('request ids: 0, 2^53-1 and unicode strings are echoed exactly', async () => {
  const { session } = await initSession(mcpd.port);
  for (const [raw, id] of [
    ['0', 0],
    ['9007199254740991', 9007199254740991],
    ['-7', -7],
    ['"é🙂"', 'é🙂'],
    ['""', ''],
  ]) {
    const r = await request(mcpd.port, {
      headers: mcpHeaders({ session }),
      body: `{"jsonrpc":"2.0","id":${raw},"method":"ping"}`,
    });
    assert.equal(r.status, 200, `id ${raw}: ${r.text}`);
    assert.ok(r.text.includes(`"id":${raw}`) || r.json?.id === id, `id ${raw} echoed: ${r.text}`);
    assert.deepEqual(r.json?.result, {});
  }
});

test('progressToken 0 (falsy) still gets progress notifications', async () => {
  const { session } = await initSession(mcpd.port);
  const r = await callTool(mcpd.port, session, 'countdown', { n: 3, interval_ms: 5 }, { progressToken: 0 });
  const p = r.messages.filter((m) => m.method === 'notifications/progress');
  assert.deepEqual(
    p.map((m) => [m.params.progressToken, m.params.progress, m.params.total]),
    [
      [0, 1, 3],
      [0, 2, 3],
      [0, 3, 3],
    ],
  );
});

for (const [what, message] of [
  ['an escaped NUL (U+0000)', 'a\u0000b'],
  ['non-BMP and line separators', '🙂 é \u2028 \u2029'],
  ['JSON escapes', '"\\/\b\f\n\r\t'],
  ['1 MiB', 'x'.repeat(1 << 20)],
]) {
  test(`echo round-trips a valid JSON string: ${what}`, async () => {
    const { session } = await initSession(mcpd.port);
    const r = await callTool(mcpd.port, session, 'echo', { message });
    assert.equal(r.status, 200, `HTTP ${r.status} ${(r.text || '').slice(0, 200)}`);
    assert.equal(r.response?.result?.content?.[0]?.text, message);
  });
}

test('elicitation: the client answers on POST (202); a duplicate or foreign answer → 400 -32600', async () => {
  const { session } = await initSession(mcpd.port, { capabilities: { elicitation: {} } });
  const other = (await initSession(mcpd.port, { capabilities: { elicitation: {} } })).session;
  const id = newId();
  const s = await openStream(mcpd.port, {
    method: 'POST',
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_elicitation', arguments: { message: 'who?' } } },
  });
  try {
    assert.equal(s.status, 200);
    assert.ok(s.sse, 'elicitation → SSE reply');
    const req = await s.sse.nextMessage(5000);
    assert.equal(req?.msg.method, 'elicitation/create', JSON.stringify(req?.msg));
    const answer = { jsonrpc: '2.0', id: req.msg.id, result: { action: 'accept', content: { username: 'ann', email: 'a@b.c' } } };
    // the same id from another session must not be accepted
    const foreign = await request(mcpd.port, { headers: mcpHeaders({ session: other }), body: answer });
    assert.equal(foreign.status, 400, `answer from another session: ${foreign.status} ${foreign.text}`);
    assert.equal(foreign.json?.error?.code, -32600);
    const ok = await request(mcpd.port, { headers: mcpHeaders({ session }), body: answer });
    assert.equal(ok.status, 202, `answer: ${ok.status} ${ok.text}`);
    assert.equal(ok.body.length, 0);
    const rest = await s.sse.rest(5000);
    const resp = rest.find((m) => m.msg.id === id)?.msg;
    assert.ok(resp?.result, JSON.stringify(rest.map((m) => m.msg)));
    assert.match(resp.result.content[0].text, /ann/);
    const dup = await request(mcpd.port, { headers: mcpHeaders({ session }), body: answer });
    assert.equal(dup.status, 400, `duplicate answer: ${dup.status} ${dup.text}`);
    assert.equal(dup.json?.error?.code, -32600);
  } finally {
    s.close();
  }
});

test('notifications/cancelled from another session does not cancel (ids are per session)', async () => {
  const { session } = await initSession(mcpd.port);
  const other = (await initSession(mcpd.port)).session;
  const id = newId();
  const p = rpc(
    mcpd.port,
    { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n: 5, interval_ms: 60 }, _meta: { progressToken: 'x' } } },
    { session },
  );
  await sleep(120);
  const c = await request(mcpd.port, {
    headers: mcpHeaders({ session: other }),
    body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } },
  });
  assert.equal(c.status, 202);
  const r = await p;
  assert.equal(responseFor(r.messages, id)?.result?.content?.[0]?.text, 'countdown finished');
});

test('a request id already in flight on the session is refused; other sessions may use it', async () => {
  const { session } = await initSession(mcpd.port);
  const other = (await initSession(mcpd.port)).session;
  const body = { jsonrpc: '2.0', id: 'dup', method: 'tools/call', params: { name: 'countdown', arguments: { n: 3, interval_ms: 80 }, _meta: { progressToken: 'd' } } };
  const first = rpc(mcpd.port, body, { session });
  await sleep(60);
  const [second, third] = await Promise.all([rpc(mcpd.port, body, { session }), rpc(mcpd.port, body, { session: other })]);
  assert.ok(second.status === 400 || second.messages.some((m) => m.error), `duplicate in-flight id: ${second.status} ${JSON.stringify(second.messages)}`);
  assert.equal(responseFor(third.messages, 'dup')?.result?.content?.[0]?.text, 'countdown finished', 'same id on another session');
  const r = await first;
  assert.equal(responseFor(r.messages, 'dup')?.result?.content?.[0]?.text, 'countdown finished', 'first call unharmed');
  assert.equal(r.messages.filter((m) => m.method === 'notifications/progress').length, 3);
});

test('a quick request (echo, ping, tools/list) with the id of a call in flight is refused too, alone or in a batch', async () => {
  const { session } = await initSession(mcpd.port);
  const slow = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'countdown', arguments: { n: 3, interval_ms: 100 } } };
  const first = rpc(mcpd.port, slow, { session });
  await sleep(80);
  for (const quick of [
    { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { message: 'same id' } } },
    { jsonrpc: '2.0', id: 7, method: 'ping' },
    { jsonrpc: '2.0', id: 7, method: 'tools/list' },
  ]) {
    const r = await rpc(mcpd.port, quick, { session });
    const e = r.messages.find((m) => m.id === 7)?.error;
    assert.equal(e?.code, -32600, `${quick.method} with an id in flight: ${r.status} ${JSON.stringify(r.messages)}`);
    assert.match(e.message, /already in flight/);
  }
  assert.equal(responseFor((await first).messages, 7)?.result?.content?.[0]?.text, 'countdown finished', 'first call unharmed');
  // an id too long to track: the methods the core answers itself still answer it
  const longId = 'x'.repeat(200);
  const lp = await rpc(mcpd.port, { jsonrpc: '2.0', id: longId, method: 'ping' }, { session });
  assert.deepEqual(lp.messages.find((m) => m.id === longId)?.result, {}, JSON.stringify(lp.messages));
  // once it has finished, the id may be used again
  assert.equal(responseFor((await rpc(mcpd.port, { ...slow, params: { name: 'echo', arguments: { message: 'later' } } }, { session })).messages, 7)?.result?.content?.[0]?.text, 'later');

  const legacy = (await initSession(mcpd.port, { protocolVersion: '2025-03-26' })).session;
  const b = await rpc(
    mcpd.port,
    [slow, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { message: 'same id' } } }],
    { session: legacy, version: null },
  );
  const answers = b.messages.filter((m) => m.id === 7);
  assert.equal(answers.length, 2, JSON.stringify(b.messages));
  assert.equal(answers.filter((m) => m.error?.code === -32600).length, 1, `the echo refused: ${JSON.stringify(answers)}`);
  assert.equal(answers.filter((m) => m.result?.content?.[0]?.text === 'countdown finished').length, 1, 'the countdown answered');
});

test('initialize on an existing session or inside a batch is refused without creating a session', async () => {
  const { session } = await initSession(mcpd.port);
  const init = { jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const a = await rpc(mcpd.port, init, { session });
  assert.equal(a.headers['mcp-session-id'], undefined);
  assert.ok(a.status === 400 || a.messages.some((m) => m.error), JSON.stringify(a.messages));
  const legacy = (await initSession(mcpd.port, { protocolVersion: '2025-03-26' })).session;
  const b = await rpc(mcpd.port, [init], { session: legacy, version: null });
  assert.equal(b.headers['mcp-session-id'], undefined);
  assert.ok(b.status === 400 || b.messages.every((m) => m.error), JSON.stringify(b.messages));
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
