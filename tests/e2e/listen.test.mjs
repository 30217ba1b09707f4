// subscriptions/listen (2026-07-28) as real clients use it (issue 34):
// - the subscription id in _meta["io.modelcontextprotocol/subscriptionId"]
//   is the listen request's JSON-RPC id, verbatim (a string or a number), on
//   the acknowledgement, on every later notification and on the final result
//   at shutdown (basic/patterns/subscriptions);
// - notifications.resourceSubscriptions is acknowledged and honoured: a
//   change to a subscribed resource (test_trigger_resource_update changes
//   test://watched-resource) arrives as notifications/resources/updated on
//   that stream, and not on a stream that did not subscribe to it; a 2025
//   session subscribed with resources/subscribe hears of it too;
// - the official SDK v2 client's listen() (it matches the acknowledgement by
//   that id, and timed out against the stream-id tagging).
// Raw HTTP where the wire itself is the point; no timing assertions beyond
// the generous bounds the waits need.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

import { ACCEPT_BOTH, callTool, getStream, initSession, openStream, request, rpc, startMcpd, tempDb, withMcpd } from './lib/mcpd.mjs';

const V = '2026-07-28';
const SUB = 'io.modelcontextprotocol/subscriptionId';
const WATCHED = 'test://watched-resource';
let nextId = 1000;

const meta = () => ({
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'listen-e2e', version: '0' },
});

function headersFor(method, params) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  const name = params?.name ?? params?.uri;
  if (name !== undefined) h['Mcp-Name'] = name;
  return h;
}

async function call(port, method, params = {}) {
  const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: meta() } };
  const r = await request(port, { headers: headersFor(method, body.params), body });
  assert.equal(r.status, 200, `${method}: ${r.text}`);
  return r.json;
}

const trigger = (port, name) => call(port, 'tools/call', { name, arguments: {} });

/** Opens a listen stream with request id `id`; returns {s, ack}. */
async function listen(port, id, notifications) {
  const params = { notifications, _meta: meta() };
  const s = await openStream(port, {
    method: 'POST',
    headers: headersFor('subscriptions/listen', params),
    body: { jsonrpc: '2.0', id, method: 'subscriptions/listen', params },
  });
  assert.equal(s.status, 200);
  const ack = await s.sse.nextMessage(5000);
  assert.equal(ack?.msg.method, 'notifications/subscriptions/acknowledged', JSON.stringify(ack?.msg));
  return { s, ack: ack.msg };
}

test('the subscription id is the listen request id, verbatim: string and number, ack, notifications, final result', async () => {
  const { db, dir } = tempDb();
  const m = await startMcpd({ db, dir });
  try {
    const ids = ['listen:1', 42, 0];
    const subs = [];
    for (const id of ids) {
      const { s, ack } = await listen(m.port, id, { toolsListChanged: true });
      assert.deepEqual(ack.params.notifications, { toolsListChanged: true });
      assert.strictEqual(ack.params._meta[SUB], id, 'the ack carries the request id, with its type');
      subs.push(s);
    }
    await trigger(m.port, 'test_trigger_tool_change');
    for (const [i, s] of subs.entries()) {
      const n = await s.sse.nextMessage(5000);
      assert.equal(n.msg.method, 'notifications/tools/list_changed');
      assert.strictEqual(n.msg.params._meta[SUB], ids[i]);
    }
    // At shutdown each subscription ends with its result, tagged the same.
    const stopping = m.stop('SIGTERM', 8000);
    for (const [i, s] of subs.entries()) {
      const rest = await s.sse.rest(8000);
      const done = rest.map((x) => x.msg).find((x) => 'result' in x);
      assert.ok(done, `a final result for ${ids[i]}: ${JSON.stringify(rest)}`);
      assert.strictEqual(done.id, ids[i]);
      assert.deepEqual(done.result, { resultType: 'complete', _meta: { [SUB]: ids[i] } });
    }
    assert.equal((await stopping).code, 0);
  } finally {
    await m.cleanup();
  }
});

test('resourceSubscriptions: acknowledged, and a subscribed resource change arrives on that stream only', async () => {
  await withMcpd([], {}, async (m) => {
    const d = await call(m.port, 'server/discover');
    assert.equal(d.result.capabilities.resources.subscribe, true, 'discover promises resource subscriptions');

    const a = await listen(m.port, 'a', { toolsListChanged: true, resourceSubscriptions: [WATCHED, WATCHED] });
    assert.deepEqual(a.ack.params.notifications, { toolsListChanged: true, resourceSubscriptions: [WATCHED] });
    assert.strictEqual(a.ack.params._meta[SUB], 'a');
    const b = await listen(m.port, 7, { toolsListChanged: true, resourceSubscriptions: ['test://static-text'] });
    assert.deepEqual(b.ack.params.notifications, { toolsListChanged: true, resourceSubscriptions: ['test://static-text'] });
    const c = await listen(m.port, 8, { toolsListChanged: true });
    assert.deepEqual(c.ack.params.notifications, { toolsListChanged: true });

    const before = await call(m.port, 'resources/read', { uri: WATCHED });
    await trigger(m.port, 'test_trigger_resource_update');
    // A later tools change marks where the resource change would have been.
    await trigger(m.port, 'test_trigger_tool_change');

    const updated = await a.s.sse.nextMessage(5000);
    assert.deepEqual(updated.msg, {
      jsonrpc: '2.0',
      method: 'notifications/resources/updated',
      params: { uri: WATCHED, _meta: { [SUB]: 'a' } },
    });
    assert.equal((await a.s.sse.nextMessage(5000)).msg.method, 'notifications/tools/list_changed');
    for (const [x, id] of [[b, 7], [c, 8]]) {
      const next = await x.s.sse.nextMessage(5000);
      assert.equal(next.msg.method, 'notifications/tools/list_changed', `stream ${id} hears nothing of ${WATCHED}`);
      assert.strictEqual(next.msg.params._meta[SUB], id);
    }
    const after = await call(m.port, 'resources/read', { uri: WATCHED });
    assert.notEqual(after.result.contents[0].text, before.result.contents[0].text, 'the resource did change');
    for (const x of [a, b, c]) x.s.close();
  });
});

test('a 2025 session subscribed with resources/subscribe hears of the same change on its GET stream', async () => {
  await withMcpd([], {}, async (m) => {
    const { session, version } = await initSession(m.port);
    const sub = await rpc(m.port, { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri: WATCHED } }, { session, version });
    assert.equal(sub.status, 200);
    const g = await getStream(m.port, session, { version });
    assert.equal(g.status, 200);
    await trigger(m.port, 'test_trigger_resource_update');
    const n = await g.sse.nextMessage(5000);
    assert.deepEqual(n.msg, { jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: WATCHED } });
    // The trigger is a 2026-07-28 diagnostic tool, like the list-change ones.
    const legacy = await callTool(m.port, session, 'test_trigger_resource_update', {}, { version });
    assert.ok(legacy.response.error || legacy.response.result.isError, JSON.stringify(legacy.response));
    g.close();
  });
});

test('the official SDK v2 client: listen() is acknowledged and delivers list and resource changes', async () => {
  await withMcpd([], {}, async (m) => {
    const client = new Client({ name: 'listen-e2e-sdk', version: '0' }, { versionNegotiation: { mode: { pin: V } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${m.port}/mcp`)));
    const got = [];
    let wake = () => {};
    for (const method of ['notifications/resources/updated', 'notifications/tools/list_changed']) {
      client.setNotificationHandler(method, (n) => {
        got.push(n);
        wake();
      });
    }
    const sub = await client.listen({ toolsListChanged: true, resourceSubscriptions: [WATCHED] }, { timeout: 10000 });
    assert.deepEqual(sub.honoredFilter, { toolsListChanged: true, resourceSubscriptions: [WATCHED] });
    await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
    await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    const deadline = Date.now() + 10000;
    while (got.length < 2 && Date.now() < deadline) await new Promise((r) => ((wake = r), setTimeout(r, 200)));
    assert.deepEqual(
      got.map((n) => [n.method, n.params?.uri]),
      [
        ['notifications/resources/updated', WATCHED],
        ['notifications/tools/list_changed', undefined],
      ],
    );
    await sub.close();
    assert.equal(await sub.closed, 'local');
    await client.close();
  });
});
