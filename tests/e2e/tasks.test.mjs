// 2025-11-25's experimental tasks (issue 11): a tools/call with a "task"
// param answers at once with {task}; tasks/get, tasks/result, tasks/list and
// tasks/cancel follow it, within the session. A task is a request stream
// in the store, so it outlives a SIGKILL: one that finished stays
// completed, one that was running ends failed. Older revisions have no such
// methods. (The 2026-07-28 tasks extension is in stateless.test.mjs and the
// conformance suite.)

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { initSession, newId, responseFor, rpc, tempDb, waitFor, withMcpd } from './lib/mcpd.mjs';

const V = '2025-11-25';

async function call(port, session, method, params, ms = 10000) {
  const id = newId();
  const r = await rpc(port, { jsonrpc: '2.0', id, method, params }, { session, version: V, ms });
  assert.equal(r.status, 200, `${method}: ${r.status} ${r.text}`);
  const m = responseFor(r.messages, id);
  assert.ok(m, `${method}: a response`);
  return m;
}

test('2025-11-25 tasks: create, poll, result, list, cancel; kept across SIGKILL + restart', async () => {
  const { db, dir } = tempDb();
  await withMcpd([], { db, dir }, async (m) => {
    const { session, result: init } = await initSession(m.port, { protocolVersion: V });
    assert.deepEqual(init.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const tools = (await call(m.port, session, 'tools/list', {})).result.tools;
    assert.deepEqual(tools.find((t) => t.name === 'countdown').execution, { taskSupport: 'optional' });
    assert.equal(tools.find((t) => t.name === 'echo').execution, undefined);

    const start = async (n, interval) => {
      const r = await call(m.port, session, 'tools/call', { name: 'countdown', arguments: { n, interval_ms: interval }, task: { ttl: 60000 } });
      const t = r.result.task;
      assert.ok(t && t.taskId, JSON.stringify(r));
      assert.equal(t.status, 'working');
      assert.equal(t.ttl, 60000);
      assert.match(t.createdAt, /^\d{4}-\d{2}-\d{2}T/);
      return t.taskId;
    };
    const get = async (taskId) => (await call(m.port, session, 'tasks/get', { taskId })).result;

    const quick = await start(2, 50);
    const result = await call(m.port, session, 'tasks/result', { taskId: quick });
    assert.equal(result.result.content[0].text, 'countdown finished');
    assert.equal(result.result._meta['io.modelcontextprotocol/related-task'].taskId, quick);
    assert.equal((await get(quick)).status, 'completed');

    const cancelled = await start(1000, 100);
    const c = await call(m.port, session, 'tasks/cancel', { taskId: cancelled });
    assert.equal(c.result.status, 'cancelled', JSON.stringify(c));
    const list = (await call(m.port, session, 'tasks/list', {})).result.tasks;
    assert.deepEqual(list.map((t) => t.taskId).sort(), [quick, cancelled].sort());

    const unknown = await call(m.port, session, 'tasks/get', { taskId: 'f'.repeat(32) });
    assert.equal(unknown.error?.code, -32602);

    // Another session cannot see them.
    const other = await initSession(m.port, { protocolVersion: V });
    const foreign = await call(m.port, other.session, 'tasks/get', { taskId: quick });
    assert.equal(foreign.error?.code, -32602);

    // An older revision has no tasks.
    const old = await initSession(m.port, { protocolVersion: '2025-06-18' });
    const r = await rpc(m.port, { jsonrpc: '2.0', id: 9, method: 'tasks/get', params: { taskId: quick } }, { session: old.session, version: '2025-06-18' });
    assert.equal(responseFor(r.messages, 9).error.code, -32601);

    const running = await start(1000, 100);
    assert.equal((await get(running)).status, 'working');
    m.kill('SIGKILL');
    await waitFor(() => m.exit !== null && m.exit !== undefined, 5000, 'mcpd to die');
    await m.restart();
    assert.equal((await get(quick)).status, 'completed');
    const after = await get(running);
    assert.equal(after.status, 'failed', JSON.stringify(after));
    assert.match(after.statusMessage, /interrupted by server restart/);
  });
});
