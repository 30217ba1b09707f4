// 2026-07-28 on a push connection (WebSocket, stdio), for stdio.test.mjs and
// ws.test.mjs: the dual-era behaviour a stdio server owes a client that
// probes with server/discover, stateless requests with per-request _meta
// and their replies on the same connection, subscriptions/listen until
// notifications/cancelled, and initialize choosing the legacy era for the
// rest of the connection.
//
// `client` is a WsClient or StdioClient (push-clients.mjs) that has sent
// nothing yet. Asserts with node:assert.

import assert from 'node:assert/strict';

import { sleep } from './mcpd.mjs';

export const V2026 = '2026-07-28';

export const meta2026 = (caps = {}) => ({
  'io.modelcontextprotocol/protocolVersion': V2026,
  'io.modelcontextprotocol/clientCapabilities': caps,
});

const SUB_KEY = 'io.modelcontextprotocol/subscriptionId';

/** Every message the client receives from now on. */
function record(client) {
  const seen = [];
  client.replies.listeners.push((m) => seen.push(m));
  return seen;
}

async function until(pred, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = pred();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * The probe, calls and a subscription without initialize; then initialize
 * on the same connection, after which every message is served in its
 * session.
 */
export async function statelessThenInitialize(client) {
  const seen = record(client);
  const d = await client.request({ jsonrpc: '2.0', id: 'probe', method: 'server/discover', params: { _meta: meta2026() } });
  assert.ok(d.result, `server/discover answered: ${JSON.stringify(d)}`);
  assert.ok(d.result.supportedVersions.includes(V2026));
  assert.ok(d.result.supportedVersions.includes('2025-11-25'));
  assert.equal(d.result._meta['io.modelcontextprotocol/serverInfo'].name, 'mcpd');

  const echo = await client.request({
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/call',
    params: { name: 'echo', arguments: { message: 'no initialize' }, _meta: meta2026() },
  });
  assert.equal(echo.result?.content?.[0]?.text, 'no initialize', JSON.stringify(echo));
  assert.equal(echo.result.resultType, 'complete');
  assert.equal(echo.result._meta, undefined, 'no event id or session id: nothing to resume');

  // input-required: asked by result, answered by a retry with the state
  const multi = (id, extra) =>
    client.request({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'test_input_required_result_multi_round', arguments: {}, ...extra, _meta: meta2026({ elicitation: {} }) },
    });
  const r1 = await multi(3, {});
  assert.equal(r1.result?.resultType, 'input_required', JSON.stringify(r1));
  const r2 = await multi(4, { inputResponses: { step1: { action: 'accept', content: { name: 'Ada' } } }, requestState: r1.result.requestState });
  assert.deepEqual(Object.keys(r2.result?.inputRequests ?? {}), ['step2'], JSON.stringify(r2));

  // a subscription: its acknowledgement, a change, then cancelled
  client.send({ jsonrpc: '2.0', id: 'sub', method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: meta2026() } });
  const ack = await until(() => seen.find((m) => m.method === 'notifications/subscriptions/acknowledged'), 5000, 'the acknowledgement');
  const sub = ack.params._meta[SUB_KEY];
  assert.ok(sub, JSON.stringify(ack));
  const trigger = (id) =>
    client.request({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_trigger_tool_change', arguments: {}, _meta: meta2026() } });
  assert.ok((await trigger(5)).result);
  const changed = await until(() => seen.find((m) => m.method === 'notifications/tools/list_changed'), 5000, 'list_changed');
  assert.equal(changed.params._meta[SUB_KEY], sub);
  client.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'sub' } });
  assert.ok((await trigger(6)).result);
  await sleep(300);
  assert.equal(seen.filter((m) => m.method === 'notifications/tools/list_changed').length, 1, 'nothing more for a cancelled subscription');
  assert.ok(!seen.some((m) => m.id === 'sub'), 'no response to a cancelled subscription');

  // initialize picks the legacy era for the rest of the connection
  const init = await client.init();
  assert.equal(init.result.protocolVersion, '2025-11-25');
  const list = await client.request({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} });
  assert.ok(list.result.tools.some((t) => t.name === 'echo'));
  // From now on every message is served in the session, its _meta ignored
  // as a 2025 server ignores it (the gateway relays a 2026-07-28 client's
  // requests to a 2025 child so).
  const late = await client.request({ jsonrpc: '2.0', id: 8, method: 'tools/list', params: { _meta: meta2026() } });
  assert.ok(late.result?.tools?.some((t) => t.name === 'echo'), JSON.stringify(late));
  assert.equal(late.result.resultType, undefined, 'a 2025 result');
  const probe = await client.request({ jsonrpc: '2.0', id: 9, method: 'server/discover', params: { _meta: meta2026() } });
  assert.equal(probe.error?.code, -32601, 'a 2025 session has no server/discover');
}

/** A 2025 client opens with initialize, as ever. */
export async function legacyClient(client) {
  const init = await client.init();
  assert.equal(init.result.protocolVersion, '2025-11-25');
  const echo = await client.request({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'legacy' } } });
  assert.equal(echo.result?.content?.[0]?.text, 'legacy');
  assert.equal(echo.result.resultType, undefined, 'a 2025 result, not a 2026-07-28 one');
}

/** Opens a subscription and waits for its acknowledgement. */
export async function openSubscription(client) {
  const seen = record(client);
  client.send({ jsonrpc: '2.0', id: 'sub', method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: meta2026() } });
  await until(() => seen.find((m) => m.method === 'notifications/subscriptions/acknowledged'), 5000, 'the acknowledgement');
}
