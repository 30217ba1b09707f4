// MCP 2026-07-28 on the same /mcp (issue 11): stateless requests with their
// revision, capabilities and client info in params._meta and the Mcp-*
// headers; input-required results whose requestState is sealed (tampering,
// replay by another principal, and a state from before a SIGKILL + restart)
// and bound to its call's arguments and questions and used once;
// subscriptions/listen; a client that closes its response stream cancels
// the request. The conformance suite 0.2.0-alpha.12 covers the scenario
// list (tests/conformance.sh); this file covers what it does not.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { ACCEPT_BOTH, MCPD_BIN, dbArg, openStream, request, tempDb, waitFor, withMcpd, ADMIN_BIN } from './lib/mcpd.mjs';

const V = '2026-07-28';
let nextId = 1;

function meta(extra = {}) {
  return {
    'io.modelcontextprotocol/protocolVersion': V,
    'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, sampling: {} },
    'io.modelcontextprotocol/clientInfo': { name: 'stateless-e2e', version: '0' },
    ...extra,
  };
}

/** A stateless request with the headers a 2026-07-28 client sends. */
function headersFor(method, params, token) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  const name = params?.name ?? params?.uri;
  if (name !== undefined) h['Mcp-Name'] = name;
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function call(port, method, params = {}, { token, headers } = {}) {
  const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: params._meta ?? meta() } };
  return request(port, { headers: headers ?? headersFor(method, body.params, token), body });
}

function addToken(db, name) {
  const r = spawnSync(ADMIN_BIN, ['--db', dbArg(db), 'tokens', 'add', name], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

test('discover, a tool call, refusals: the 2026-07-28 wire on /mcp, beside the 2025 one', async () => {
  await withMcpd([], {}, async (m) => {
    const d = await call(m.port, 'server/discover');
    assert.equal(d.status, 200, d.text);
    assert.ok(d.json.result.supportedVersions.includes(V));
    assert.ok(d.json.result.supportedVersions.includes('2025-11-25'));
    assert.equal(d.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'mcpd');
    assert.equal(d.json.result.resultType, 'complete');

    const e = await call(m.port, 'tools/call', { name: 'echo', arguments: { message: 'no session' } });
    assert.equal(e.status, 200, e.text);
    assert.equal(e.headers['mcp-session-id'], undefined, 'no session id is handed out');
    assert.equal(e.json.result.content[0].text, 'no session');
    assert.equal(e.json.result.resultType, 'complete');

    // Refusals, each answering its own request id.
    const noMeta = await request(m.port, {
      headers: headersFor('tools/list', {}),
      body: { jsonrpc: '2.0', id: 77, method: 'tools/list', params: {} },
    });
    assert.equal(noMeta.status, 400);
    assert.deepEqual([noMeta.json.id, noMeta.json.error.code], [77, -32602]);
    const old = await call(m.port, 'tools/list', { _meta: meta({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }) }, {
      headers: { ...headersFor('tools/list', {}), 'MCP-Protocol-Version': '2099-01-01' },
    });
    assert.equal(old.status, 400);
    assert.equal(old.json.error.code, -32022);
    assert.deepEqual(old.json.error.data.requested, '2099-01-01');
    assert.ok(old.json.error.data.supported.includes(V));
    const wrongName = await call(m.port, 'tools/call', { name: 'echo', arguments: { message: 'x' } }, {
      headers: { ...headersFor('tools/call', { name: 'echo' }), 'Mcp-Name': 'countdown' },
    });
    assert.equal(wrongName.status, 400);
    assert.equal(wrongName.json.error.code, -32020);
    for (const gone of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'no/such']) {
      const r = await call(m.port, gone);
      assert.equal(r.status, 404, `${gone}: ${r.text}`);
      assert.equal(r.json.error.code, -32601);
    }
    const needs = await call(m.port, 'tools/call', { name: 'test_missing_capability', arguments: {}, _meta: meta({ 'io.modelcontextprotocol/clientCapabilities': {} }) });
    assert.equal(needs.status, 400);
    assert.equal(needs.json.error.code, -32021);
    assert.deepEqual(needs.json.error.data.requiredCapabilities, { sampling: {} });
    for (const method of ['GET', 'DELETE']) {
      const r = await request(m.port, { method, headers: { Accept: 'text/event-stream', 'MCP-Protocol-Version': V } });
      assert.equal(r.status, 405, method);
    }

    // The 2025 wire goes on as before on the same URL.
    const init = await request(m.port, {
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH },
      body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'old', version: '1' } } },
    });
    assert.equal(init.status, 200);
    assert.ok(init.headers['mcp-session-id']);
    const list = await request(m.port, {
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Mcp-Session-Id': init.headers['mcp-session-id'], 'MCP-Protocol-Version': '2025-11-25' },
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    });
    const names = list.json.result.tools.map((t) => t.name);
    assert.ok(names.includes('echo'));
    assert.ok(!names.includes('test_input_required_result_elicitation'), '2026-only tools stay out of 2025 lists');
    assert.equal(list.json.result.resultType, undefined, 'no 2026 fields on 2025 results');
  });
});

test('requestState: tampered, replayed by another principal, and kept across SIGKILL + restart', async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
    const alice = addToken(db, 'alice');
    const bob = addToken(db, 'bob');
    const tool = 'test_input_required_result_request_state';
    const first = await call(m.port, 'tools/call', { name: tool, arguments: {} }, { token: alice });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json.result.resultType, 'input_required');
    const state = first.json.result.requestState;
    assert.ok(state);
    const answer = { confirm: { action: 'accept', content: { ok: true } } };
    const retry = (token, requestState) =>
      call(m.port, 'tools/call', { name: tool, arguments: {}, inputResponses: answer, requestState }, { token });

    const ok = await retry(alice, state);
    assert.equal(ok.json.result.resultType, 'complete');
    assert.match(ok.json.result.content[0].text, /state-ok/);
    const tampered = await retry(alice, state.slice(0, -2) + (state.endsWith('AA') ? 'BB' : 'AA'));
    assert.equal(tampered.json.error?.code, -32602, tampered.text);
    const replayed = await retry(bob, state);
    assert.equal(replayed.json.error?.code, -32602, replayed.text);
    assert.match(replayed.json.error.message, /another request/);
    // The same state for another tool is refused too.
    const elsewhere = await call(m.port, 'tools/call', { name: 'test_input_required_result_tampered_state', arguments: {}, inputResponses: answer, requestState: state }, { token: alice });
    assert.equal(elsewhere.json.error?.code, -32602);

    m.kill('SIGKILL');
    await waitFor(() => m.exit !== null && m.exit !== undefined, 5000, 'mcpd to die');
    await m.restart();
    const after = await retry(alice, state);
    assert.equal(after.json.result?.resultType, 'complete', after.text);
    assert.match(after.json.result.content[0].text, /state-ok/);
  });
});

test('requestState: bound to its arguments and its questions, used once; the same retry again gets the same answer', async () => {
  await withMcpd([], {}, async (m) => {
    const tool = 'test_input_required_result_request_state';
    const first = await call(m.port, 'tools/call', { name: tool, arguments: {} });
    assert.equal(first.json.result?.resultType, 'input_required', first.text);
    const state = first.json.result.requestState;
    const yes = { confirm: { action: 'accept', content: { ok: true } } };
    const no = { confirm: { action: 'accept', content: { ok: false } } };
    const retry = (args, inputResponses, requestState = state) =>
      call(m.port, 'tools/call', { name: tool, arguments: args, inputResponses, requestState });

    // The state continues the call it was issued for: not one with other arguments.
    const otherArgs = await retry({ note: 'not the original call' }, yes);
    assert.equal(otherArgs.json.error?.code, -32602, otherArgs.text);
    assert.match(otherArgs.json.error.message, /another request/);

    const done = await retry({}, yes);
    assert.equal(done.json.result?.resultType, 'complete', done.text);
    assert.equal(done.json.result.content[0].text, 'state-ok: confirmed');
    // A client that lost that answer sends the same retry again (a new id):
    // it gets the same answer.
    const again = await retry({}, yes);
    assert.equal(again.json.id, done.json.id + 1);
    assert.deepEqual(again.json.result, done.json.result);
    // Any other use of the used state is refused.
    const replay = await retry({}, no);
    assert.equal(replay.json.error?.code, -32602, replay.text);
    assert.match(replay.json.error.message, /used already/);

    // A state yields only the answers to what it asked: round 2's state
    // asked for step2, so an answer to step1 sent with it is not taken.
    const multi = 'test_input_required_result_multi_round';
    const step = (inputResponses, requestState) =>
      call(m.port, 'tools/call', { name: multi, arguments: {}, inputResponses, requestState });
    const r1 = await call(m.port, 'tools/call', { name: multi, arguments: {} });
    const answer = (field, value) => ({ action: 'accept', content: { [field]: value } });
    const r2 = await step({ step1: answer('name', 'Alice') }, r1.json.result.requestState);
    assert.deepEqual(Object.keys(r2.json.result?.inputRequests ?? {}), ['step2'], r2.text);
    const r2again = await step({ step1: answer('name', 'Alice') }, r1.json.result.requestState);
    assert.equal(r2again.json.result?.requestState, r2.json.result.requestState, 'the same retry, the same answer');
    const sneaked = await step({ step1: answer('name', 'Mallory') }, r2.json.result.requestState);
    assert.deepEqual(Object.keys(sneaked.json.result?.inputRequests ?? {}), ['step2'], sneaked.text);
    const r3 = await step({ step2: answer('color', 'blue') }, sneaked.json.result.requestState);
    assert.equal(r3.json.result?.content?.[0]?.text, "Alice's favorite color is blue", r3.text);
  });
});

test('subscriptions/listen: acknowledged first, then the notifications asked for, tagged', async () => {
  await withMcpd([], {}, async (m) => {
    const params = { notifications: { toolsListChanged: true }, _meta: meta() };
    const s = await openStream(m.port, {
      method: 'POST',
      headers: headersFor('subscriptions/listen', params),
      body: { jsonrpc: '2.0', id: 'sub', method: 'subscriptions/listen', params },
    });
    assert.equal(s.status, 200);
    const ack = await s.sse.nextMessage(5000);
    assert.equal(ack.msg.method, 'notifications/subscriptions/acknowledged');
    assert.deepEqual(ack.msg.params.notifications, { toolsListChanged: true });
    const sub = ack.msg.params._meta['io.modelcontextprotocol/subscriptionId'];
    assert.ok(sub);
    // A prompts change is not what this stream asked for; a tools change is.
    assert.equal((await call(m.port, 'tools/call', { name: 'test_trigger_prompt_change', arguments: {} })).status, 200);
    assert.equal((await call(m.port, 'tools/call', { name: 'test_trigger_tool_change', arguments: {} })).status, 200);
    const changed = await s.sse.nextMessage(5000);
    assert.equal(changed.msg.method, 'notifications/tools/list_changed');
    assert.equal(changed.msg.params._meta['io.modelcontextprotocol/subscriptionId'], sub);
    s.close();
  });
});

test('closing the response stream cancels the request and ends its session', async () => {
  await withMcpd([], {}, async (m) => {
    const loaded = async () => {
      const r = await request(m.port, { method: 'GET', path: '/metrics' });
      return Number(/^mcpd_sessions_loaded (\d+)$/m.exec(r.text)[1]);
    };
    const params = { name: 'countdown', arguments: { n: 100, interval_ms: 100 }, _meta: meta({ progressToken: 'p' }) };
    const s = await openStream(m.port, {
      method: 'POST',
      headers: headersFor('tools/call', params),
      body: { jsonrpc: '2.0', id: 'long', method: 'tools/call', params },
    });
    assert.equal(s.status, 200);
    const first = await s.sse.nextMessage(5000);
    assert.equal(first.msg.method, 'notifications/progress');
    assert.equal(await loaded(), 1, 'the request has a session of its own while it runs');
    s.close();
    await waitFor(async () => (await loaded()) === 0, 5000, 'the session to end with its stream');
  });
});

test('stdio serves a 2026-07-28 request before initialize, as /mcp does (more in stdio.test.mjs)', async () => {
  const { spawn } = await import('node:child_process');
  const p = spawn(MCPD_BIN, ['--stdio', '--db', ':memory:'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => (out += d));
  const params = { _meta: meta() };
  p.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list', params }) + '\n');
  await waitFor(() => out.includes('\n'), 5000, 'an answer on stdout');
  const reply = JSON.parse(out.split('\n')[0]);
  assert.equal(reply.id, 5);
  assert.ok(reply.result.tools.some((t) => t.name === 'echo'), out);
  p.stdin.end();
  const code = await new Promise((r) => p.on('exit', r));
  assert.equal(code, 0);
});

test('tasks: durable across SIGKILL + restart (completed if done, failed if interrupted), bound to their principal', async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
    const alice = addToken(db, 'alice');
    const bob = addToken(db, 'bob');
    const withTasks = meta({
      'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions: { 'io.modelcontextprotocol/tasks': {} } },
    });
    const start = async (seconds) => {
      const r = await call(m.port, 'tools/call', { name: 'slow_compute', arguments: { seconds, label: `s${seconds}` }, _meta: withTasks }, { token: alice });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.result.resultType, 'task');
      assert.equal(r.json.result.status, 'working');
      return r.json.result.taskId;
    };
    const get = (taskId, token = alice, m2 = m) =>
      call(m2.port, 'tasks/get', { taskId, _meta: withTasks }, { token, headers: { ...headersFor('tasks/get', {}, token), 'Mcp-Name': taskId } });

    const quick = await start(1);
    const long = await start(600);
    assert.equal((await get(long)).json.result.status, 'working');
    // Another principal's task does not exist for it.
    const foreign = await get(quick, bob);
    assert.equal(foreign.json.error?.code, -32602, foreign.text);
    // Without the extension in this request: -32021 before any lookup.
    const undeclared = await call(m.port, 'tasks/get', { taskId: quick }, { token: alice, headers: { ...headersFor('tasks/get', {}, alice), 'Mcp-Name': quick } });
    assert.equal(undeclared.json.error?.code, -32021);

    await waitFor(async () => (await get(quick)).json.result?.status === 'completed', 5000, 'the quick task to complete');
    m.kill('SIGKILL');
    await waitFor(() => m.exit !== null && m.exit !== undefined, 5000, 'mcpd to die');
    await m.restart();

    const done = await get(quick);
    assert.equal(done.json.result.status, 'completed', done.text);
    assert.match(done.json.result.result.content[0].text, /computed s1/);
    const cut = await get(long);
    assert.equal(cut.json.result.status, 'failed', cut.text);
    assert.match(cut.json.result.error.message, /interrupted by server restart/);
    assert.equal(cut.json.result.result, undefined);
    // Cancelling a finished task is an idempotent ack.
    const cancel = await call(m.port, 'tasks/cancel', { taskId: long, _meta: withTasks }, { token: alice, headers: { ...headersFor('tasks/cancel', {}, alice), 'Mcp-Name': long } });
    assert.deepEqual(cancel.json.result, { resultType: 'complete' });
  });
});

test('long-polling\'s "stream": true is refused to a stateless request, with a clear error', async () => {
  await withMcpd([], {}, async (m) => {
    const r = await call(m.port, 'tools/call', { name: 'echo', arguments: { message: 'x' }, stream: true });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.code, -32602);
    assert.match(r.json.error.message, /task/);
    const metrics = await request(m.port, { method: 'GET', path: '/metrics' });
    assert.match(metrics.text, /^mcpd_sessions_loaded 0$/m, 'no session left behind');
  });
});
