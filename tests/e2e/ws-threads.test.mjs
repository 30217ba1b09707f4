// WebSocket connections cost no thread: every session's reader and its push
// writer are fibers on mcpd's fixed pool of event-loop threads
// (--loop-threads). 300 initialized WebSocket sessions, opened on loopback
// in bounded batches, leave mcpd's thread count (/proc/PID/status) where
// it was with none open, within a small constant slack; every session
// still answers a tools/call; once all are closed, mcpd's descriptors come
// back to what they were before, and no wait blocked a loop thread (the
// blocking_wait warning). Before the loop, each session had a
// thread of its own and one for its writer (300 sessions: +600 threads).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { procFdCount, procThreads, sleep, waitFor, withMcpd } from './lib/mcpd.mjs';
import { WsClient } from './lib/push-clients.mjs';

const SESSIONS = 300;
const BATCH = 10;
// Threads that may come and go on their own (a worker finishing, the
// store's housekeeping): a constant, far below one per connection.
const SLACK = 8;

async function inBatches(items, fn) {
  for (let i = 0; i < items.length; i += BATCH) await Promise.all(items.slice(i, i + BATCH).map(fn));
}

async function openSessions(port, n) {
  const clients = [];
  await inBatches([...Array(n).keys()], async () => {
    const c = await WsClient.open(port);
    clients.push(c);
    await c.init();
  });
  return clients;
}

async function callEach(clients) {
  let answered = 0;
  await inBatches([...clients.keys()], async (i) => {
    const id = `call-${i}`;
    const r = await clients[i].request({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: id } },
    });
    assert.equal(r.result?.content?.[0]?.text, id, JSON.stringify(r));
    answered++;
  });
  return answered;
}

test('300 WebSocket sessions add no threads, all answer, and their descriptors are returned', { timeout: 240000 }, async () => {
  await withMcpd(['--max-workers', '8', '--max-connections-per-ip', '0', '--log-level', 'warn'], {}, async (m) => {
    // Warm up the same way (batches of BATCH), so the worker pool and the
    // store's threads have what they will have.
    const warm = await openSessions(m.port, 2 * BATCH);
    await callEach(warm);
    await Promise.all(warm.map((c) => c.close()));
    await sleep(300);
    const fds0 = procFdCount(m.pid);
    const threads0 = procThreads(m.pid);

    const clients = await openSessions(m.port, SESSIONS);
    assert.equal(clients.length, SESSIONS);
    const threadsOpen = procThreads(m.pid);
    assert.ok(
      threadsOpen <= threads0 + SLACK,
      `threads grew with connections: ${threads0} idle, ${threadsOpen} with ${SESSIONS} sessions open`,
    );
    assert.ok(procFdCount(m.pid) >= fds0 + SESSIONS, 'every session holds its socket');

    assert.equal(await callEach(clients), SESSIONS);
    const threadsBusy = procThreads(m.pid);
    assert.ok(
      threadsBusy <= threads0 + SLACK,
      `threads grew with connections: ${threads0} idle, ${threadsBusy} after a call on each of ${SESSIONS} sessions`,
    );

    await Promise.all(clients.map((c) => c.close()));
    await waitFor(() => procFdCount(m.pid) <= fds0, 15000, `descriptors back to ${fds0} (now ${procFdCount(m.pid)})`);
    assert.ok(procThreads(m.pid) <= threads0 + SLACK);
    // No wait on a loop thread blocked it (fiber_warn_if_blocking).
    assert.doesNotMatch(m.stderr, /event=blocking_wait/);
  });
});
