// Task status notifications (the tasks extension, SEP-2663; issue 34):
// subscriptions/listen with notifications.taskIds follows tasks, and each
// followed task arrives as notifications/tasks on that stream, its params
// the task as tasks/get shows it (less resultType), tagged with the
// subscription id: once at once, then on each change of status (and, while
// input_required, of the requests asked), ending with its terminal status.
//   - slow_compute: working, then completed with the result inlined;
//   - confirm_delete: input_required with its inputRequests; tasks/update
//     answers it and the task completes;
//   - multi_input: a partial tasks/update leaves one request asked, which
//     the stream says;
//   - tasks/cancel: cancelled;
//   - acknowledged only for tasks of the listener's own principal, on a
//     request that declares the extension; unknown ids left out.
// With MCPD_TEST_CLUSTER=3 (round robin over replicas on PostgreSQL) the
// task runs on one replica and is followed from another.
// Raw HTTP: the wire is the point (the conformance suite skips this
// scenario, and the SDK v2 client has no tasks runtime). No timing
// assertions beyond the bounds the waits need.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { ACCEPT_BOTH, ADMIN_BIN, CLUSTER_N, dbArg, openStream, request, tempDb, withMcpd } from './lib/mcpd.mjs';

// input_required is known to the replica that runs the task (its pending
// requests live there): a subscription on another replica sees working
// until the task moves on (listen.h). The rest holds across replicas.
const ONE_PROCESS = CLUSTER_N > 1 ? 'input_required is seen on the replica that runs the task only (listen.h)' : false;

const V = '2026-07-28';
const SUB = 'io.modelcontextprotocol/subscriptionId';
const TASKS = 'io.modelcontextprotocol/tasks';
let nextId = 1;

const meta = (extensions = { [TASKS]: {} }) => ({
  'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions },
  'io.modelcontextprotocol/clientInfo': { name: 'task-notifications-e2e', version: '0' },
});

function headersFor(method, params, token) {
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  const name = params?.name ?? params?.uri ?? params?.taskId;
  if (name !== undefined) h['Mcp-Name'] = name;
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function call(port, method, params, token) {
  const body = { jsonrpc: '2.0', id: nextId++, method, params: { _meta: meta(), ...params } };
  const r = await request(port, { headers: headersFor(method, body.params, token), body });
  assert.equal(r.status, 200, `${method}: ${r.text}`);
  return r.json.result;
}

async function startTask(port, name, args, token) {
  const r = await call(port, 'tools/call', { name, arguments: args }, token);
  assert.equal(r.resultType, 'task', JSON.stringify(r));
  return r.taskId;
}

async function listen(port, id, notifications, { token, extensions } = {}) {
  const params = { notifications, _meta: meta(extensions) };
  const s = await openStream(port, {
    method: 'POST',
    headers: headersFor('subscriptions/listen', params, token),
    body: { jsonrpc: '2.0', id, method: 'subscriptions/listen', params },
  });
  assert.equal(s.status, 200);
  const ack = await s.sse.nextMessage(5000);
  assert.equal(ack?.msg.method, 'notifications/subscriptions/acknowledged', JSON.stringify(ack?.msg));
  return { s, ack: ack.msg };
}

/** The task notifications on s until taskId reaches a terminal status. */
async function untilTerminal(s, subId, taskId, seen = []) {
  for (;;) {
    const n = await s.sse.nextMessage(15000);
    assert.ok(n, `a notification for ${taskId} (seen: ${seen.map((p) => p.status)})`);
    assert.equal(n.msg.method, 'notifications/tasks', JSON.stringify(n.msg));
    assert.strictEqual(n.msg.params._meta[SUB], subId);
    assert.equal(n.msg.params.taskId, taskId);
    assert.equal(n.msg.params.resultType, undefined, 'the task, not a result');
    seen.push(n.msg.params);
    if (['completed', 'failed', 'cancelled'].includes(n.msg.params.status)) return seen;
  }
}

/** The next message on s within ms, or null when none comes. */
async function quiet(s, ms) {
  try {
    return await s.sse.nextMessage(ms);
  } catch (e) {
    if (/timeout/.test(e.message)) return null;
    throw e;
  }
}

function addToken(db, name) {
  const r = spawnSync(ADMIN_BIN, ['--db', dbArg(db), 'tokens', 'add', name], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

test('slow_compute: acknowledged, working at once, then completed with the result inlined', async () => {
  await withMcpd([], {}, async (m) => {
    const taskId = await startTask(m.port, 'slow_compute', { seconds: 1, label: 'n1' });
    const { s, ack } = await listen(m.port, 'tasks-1', { taskIds: [taskId, 'no-such-task'] });
    try {
      assert.deepEqual(ack.params.notifications, { taskIds: [taskId] }, 'the unknown id is left out');
      const seen = await untilTerminal(s, 'tasks-1', taskId);
      assert.equal(seen[0].status, 'working');
      const last = seen.at(-1);
      assert.equal(last.status, 'completed');
      assert.match(last.result.content[0].text, /computed n1/);
      assert.ok(last.createdAt && last.lastUpdatedAt && Number.isInteger(last.ttlMs), JSON.stringify(last));
      // The same task as tasks/get shows it.
      const { _meta, ...told } = last;
      const { resultType, ...got } = await call(m.port, 'tasks/get', { taskId });
      assert.equal(resultType, 'complete');
      assert.deepEqual(told, { ...got, lastUpdatedAt: told.lastUpdatedAt });
      // Each status once: no repeats.
      const statuses = seen.map((p) => p.status);
      assert.deepEqual(statuses, [...new Set(statuses)], statuses.join(' '));
    } finally {
      s.close();
    }
  });
});

test('confirm_delete: input_required with its request, answered by tasks/update, then completed', { skip: ONE_PROCESS }, async () => {
  await withMcpd([], {}, async (m) => {
    const taskId = await startTask(m.port, 'confirm_delete', { filename: 'a.txt' });
    const { s } = await listen(m.port, 7, { taskIds: [taskId] });
    try {
      const seen = [];
      let asked;
      while (!asked) {
        const n = await s.sse.nextMessage(15000);
        assert.ok(n, `input_required (seen: ${seen.map((p) => p.status)})`);
        assert.strictEqual(n.msg.params._meta[SUB], 7);
        seen.push(n.msg.params);
        if (n.msg.params.status === 'input_required') asked = n.msg.params.inputRequests;
      }
      const keys = Object.keys(asked);
      assert.equal(keys.length, 1, JSON.stringify(asked));
      assert.equal(asked[keys[0]].method, 'elicitation/create');
      const ack = await call(m.port, 'tasks/update', { taskId, inputResponses: { [keys[0]]: { action: 'accept', content: { confirm: true } } } });
      assert.equal(ack.resultType, 'complete');
      await untilTerminal(s, 7, taskId, seen);
      assert.equal(seen.at(-1).status, 'completed', JSON.stringify(seen.at(-1)));
    } finally {
      s.close();
    }
  });
});

test('multi_input: a partial tasks/update leaves one request asked, and the stream says so', { skip: ONE_PROCESS }, async () => {
  await withMcpd([], {}, async (m) => {
    const taskId = await startTask(m.port, 'multi_input', {});
    const { s } = await listen(m.port, 'multi', { taskIds: [taskId] });
    try {
      let asked = {};
      while (Object.keys(asked).length < 2) {
        const n = await s.sse.nextMessage(15000);
        assert.ok(n, 'two requests asked');
        asked = n.msg.params.inputRequests ?? {};
      }
      const [first, second] = Object.keys(asked);
      await call(m.port, 'tasks/update', { taskId, inputResponses: { [first]: { action: 'accept', content: { name: 'p1', confirm: true } } } });
      const n = await s.sse.nextMessage(15000);
      assert.equal(n.msg.params.status, 'input_required', JSON.stringify(n.msg));
      assert.deepEqual(Object.keys(n.msg.params.inputRequests), [second]);
      await call(m.port, 'tasks/update', { taskId, inputResponses: { [second]: { action: 'accept', content: { name: 'p2', confirm: true } } } });
      const seen = await untilTerminal(s, 'multi', taskId);
      assert.equal(seen.at(-1).status, 'completed');
    } finally {
      s.close();
    }
  });
});

test('tasks/cancel: the follower hears cancelled, and nothing after it', async () => {
  await withMcpd([], {}, async (m) => {
    const taskId = await startTask(m.port, 'slow_compute', { seconds: 60, label: 'long' });
    const { s } = await listen(m.port, 'c', { taskIds: [taskId] });
    try {
      const first = await s.sse.nextMessage(5000);
      assert.equal(first.msg.params.status, 'working');
      assert.equal((await call(m.port, 'tasks/cancel', { taskId })).resultType, 'complete');
      const seen = await untilTerminal(s, 'c', taskId);
      assert.equal(seen.at(-1).status, 'cancelled');
      assert.equal(await quiet(s, 500), null, 'nothing after the terminal status');
    } finally {
      s.close();
    }
  });
});

test('only the listener\'s own tasks, and only with the extension declared on the listen request', async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
    const alice = addToken(db, 'alice');
    const bob = addToken(db, 'bob');
    const mine = await startTask(m.port, 'slow_compute', { seconds: 60, label: 'a' }, alice);
    const { s: other, ack: otherAck } = await listen(m.port, 'b', { taskIds: [mine] }, { token: bob });
    assert.deepEqual(otherAck.params.notifications, { taskIds: [] }, 'another principal\'s task is not followed');
    const { s: plain, ack: plainAck } = await listen(m.port, 'p', { taskIds: [mine], toolsListChanged: true }, { token: alice, extensions: {} });
    assert.deepEqual(plainAck.params.notifications, { toolsListChanged: true }, 'no taskIds without the extension');
    const { s: own, ack: ownAck } = await listen(m.port, 'a', { taskIds: [mine] }, { token: alice });
    assert.deepEqual(ownAck.params.notifications, { taskIds: [mine] });
    try {
      assert.equal((await own.sse.nextMessage(5000)).msg.params.status, 'working');
      await call(m.port, 'tasks/cancel', { taskId: mine }, alice);
      assert.equal((await own.sse.nextMessage(5000)).msg.params.status, 'cancelled');
      assert.equal(await quiet(other, 300), null, 'bob hears nothing');
      assert.equal(await quiet(plain, 300), null, 'the listener without the extension hears nothing');
    } finally {
      for (const s of [other, plain, own]) s.close();
    }
  });
});

test('a subscription that follows another subscription\'s stream as a task: notifications still flow, nothing hangs', async () => {
  // A subscription's own stream (its id is in its SSE event ids) was a
  // task to tasks/get, so B could follow it. Once mcpd appended a
  // notification to A under the registry's lock, and A's change, followed
  // by B, took that lock again on the same thread: the replica hung on the
  // first list change. Only a request run as a task is a task now, so B
  // does not follow A at all; nothing may hang either way.
  await withMcpd([], {}, async (m) => {
    const a = await listen(m.port, 'a', { toolsListChanged: true });
    const aStream = a.s.sse.lastEventId?.slice(0, a.s.sse.lastEventId.lastIndexOf(':'));
    assert.ok(aStream, `A's stream id from its event ids (${a.s.sse.lastEventId})`);
    const b = await listen(m.port, 'b', { taskIds: [aStream], toolsListChanged: true });
    try {
      const within = (p, ms, what) =>
        Promise.race([p, new Promise((_, no) => setTimeout(() => no(new Error(`${what}: no answer in ${ms} ms`)), ms))]);
      for (let round = 0; round < 3; round++) {
        await within(call(m.port, 'tools/call', { name: 'test_trigger_tool_change', arguments: {} }), 10000, 'the list change');
        for (const [name, s] of [['a', a.s], ['b', b.s]]) {
          let n;
          do n = await s.sse.nextMessage(10000);
          while (n?.msg.method === 'notifications/tasks');
          assert.equal(n?.msg.method, 'notifications/tools/list_changed', `${name}: ${JSON.stringify(n?.msg)}`);
          assert.strictEqual(n.msg.params._meta[SUB], name);
        }
      }
      await within(call(m.port, 'tools/list', {}), 10000, 'tools/list afterwards');
    } finally {
      a.s.close();
      b.s.close();
    }
  });
});
