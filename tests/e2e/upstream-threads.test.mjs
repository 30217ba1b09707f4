// Upstream children cost no thread: each child's stdout and stderr readers
// are fibers on mcpd's fixed pool of event-loop threads (--loop-threads),
// over non-blocking pipes. A gateway (`mcpd --upstream`, one child per
// session) with 40 sessions open, each with its child alive and answering a
// tools/call, has as many threads (/proc/PID/status) as with none, within a
// small constant slack. After a DELETE of each session every child is gone
// and reaped (no zombie), mcpd's descriptors are back to what they were, and
// no wait blocked a loop thread (the blocking_wait warning). Before the
// loop, each child had two reader threads (40 sessions: +80 threads).
//
// A request of a child's relayed to the client (roots/list) waits for the
// client's answer on a fiber too: with --upstream-max-pending (16) of them
// held, the thread count is where it was; each was a thread before.
//
// Children are found as /proc/<mcpd>/task/*/children; every process this
// file signals is one it started or a child of the mcpd it started.

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  callTool,
  rpc,
  responseFor,
  mcpHeaders,
  procChildren,
  procFdCount,
  procStat,
  procThreads,
  request,
  sleep,
  waitFor,
  withMcpd,
} from './lib/mcpd.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
// A light child (Python, no SDK) that answers echo and can ask the client.
const CHILD_CMD = `python3 ${path.join(here, 'fixtures', 'hostile-upstream.py')}`;

const SESSIONS = 40;
const BATCH = 8;
// Threads that may come and go on their own (a worker finishing, the
// store's housekeeping): a constant, far below one per child.
const SLACK = 8;

async function inBatches(items, fn) {
  for (let i = 0; i < items.length; i += BATCH) await Promise.all(items.slice(i, i + BATCH).map(fn));
}

/** initialize (which starts the session's child) and notifications/initialized. */
async function initSession(port) {
  const id = `init-${Math.random()}`;
  const params = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e', version: '0' } };
  const r = await rpc(port, { jsonrpc: '2.0', id, method: 'initialize', params }, { version: null, ms: 30000 });
  const session = r.headers['mcp-session-id'];
  assert.ok(session && responseFor(r.messages, id)?.result, `initialize: HTTP ${r.status} ${r.text || ''}`);
  const n = await request(port, {
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', method: 'notifications/initialized' },
  });
  assert.equal(n.status, 202);
  return session;
}

/** Opens n sessions, each with its child started and answering a tools/call. */
async function openSessions(port, n) {
  const sessions = [];
  await inBatches([...Array(n).keys()], async (i) => {
    const session = await initSession(port);
    sessions.push(session);
    const msg = `child-${i}`;
    const r = await callTool(port, session, 'echo', { message: msg }, { ms: 30000 });
    assert.equal(r.response?.result?.content?.[0]?.text, msg, JSON.stringify(r.messages));
  });
  return sessions;
}

async function callEach(port, sessions) {
  let answered = 0;
  await inBatches([...sessions.keys()], async (i) => {
    const msg = `again-${i}`;
    const r = await callTool(port, sessions[i], 'echo', { message: msg }, { ms: 30000 });
    assert.equal(r.response?.result?.content?.[0]?.text, msg, JSON.stringify(r.messages));
    answered++;
  });
  return answered;
}

async function deleteEach(port, sessions) {
  await inBatches(sessions, async (session) => {
    const del = await request(port, { method: 'DELETE', headers: mcpHeaders({ session }), timeout: 30000 });
    assert.ok(del.status === 200 || del.status === 204, `DELETE: HTTP ${del.status}`);
  });
}

test(`${SESSIONS} upstream children add no threads, all answer, and are reaped with their descriptors after DELETE`, { timeout: 240000 }, async () => {
  await withMcpd(
    ['--upstream', CHILD_CMD, '--max-workers', '8', '--max-connections-per-ip', '0', '--log-level', 'warn'],
    { stopMs: 15000 },
    async (m) => {
      // Warm up the same way, so the worker pool, the spawner and the
      // store's threads have what they will have.
      const warm = await openSessions(m.port, BATCH);
      await deleteEach(m.port, warm);
      await waitFor(() => procChildren(m.pid).length === 0, 30000, 'the warm-up children to go');
      await sleep(300);
      const fds0 = procFdCount(m.pid);
      const threads0 = procThreads(m.pid);

      const sessions = await openSessions(m.port, SESSIONS);
      assert.equal(procChildren(m.pid).length, SESSIONS, 'one child per session, all alive');
      const threadsOpen = procThreads(m.pid);
      assert.ok(
        threadsOpen <= threads0 + SLACK,
        `threads grew with children: ${threads0} with none, ${threadsOpen} with ${SESSIONS} children`,
      );
      assert.ok(procFdCount(m.pid) >= fds0 + 3 * SESSIONS, 'every child holds its three pipes');

      assert.equal(await callEach(m.port, sessions), SESSIONS);
      const threadsBusy = procThreads(m.pid);
      assert.ok(
        threadsBusy <= threads0 + SLACK,
        `threads grew with children: ${threads0} with none, ${threadsBusy} after a call to each of ${SESSIONS}`,
      );

      await deleteEach(m.port, sessions);
      await waitFor(() => procChildren(m.pid).length === 0, 30000, 'every child to go after DELETE');
      const zombies = procChildren(m.pid)
        .map((p) => procStat(p))
        .filter((s) => s && (s.state === 'Z' || s.state === 'X'));
      assert.deepEqual(zombies, [], 'no child left unreaped');
      await waitFor(() => procFdCount(m.pid) <= fds0, 10000, `descriptors back to ${fds0}`).catch(() => {
        assert.fail(`descriptors not returned: ${fds0} before, ${procFdCount(m.pid)} after`);
      });
      await waitFor(() => procThreads(m.pid) <= threads0 + SLACK, 10000, 'threads back');
      assert.doesNotMatch(m.stderr, /event=blocking_wait/);
    },
  );
});

test('requests relayed from a child to the client wait on fibers: --upstream-max-pending held add no threads', { timeout: 120000 }, async () => {
  const MAX_PENDING = 16; // the default of --upstream-max-pending
  await withMcpd(['--upstream', CHILD_CMD, '--log-level', 'warn'], { stopMs: 15000 }, async (m) => {
    const client = new Client({ name: 'upstream-threads', version: '1.0.0' }, { capabilities: { roots: {} } });
    let asked = 0;
    let release;
    const released = new Promise((r) => (release = r));
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      await released; // every relayed request stays in flight until the count is taken
      return { roots: [] };
    });
    const transport = new StreamableHTTPClientTransport(new URL(m.url));
    await client.connect(transport);
    try {
      // The child runs and has answered once: its threads, if any, exist.
      const warm = await client.callTool({ name: 'echo', arguments: { message: 'warm' } });
      assert.equal(warm.content[0].text, 'warm');
      await sleep(300);
      const threads0 = procThreads(m.pid);
      const flood = client.callTool({ name: 'flood_roots', arguments: { count: MAX_PENDING } }, undefined, {
        timeout: 60000,
      });
      flood.catch(() => {});
      await waitFor(() => asked === MAX_PENDING, 30000, `${MAX_PENDING} roots/list requests to reach the client`);
      await sleep(300);
      const threadsHeld = procThreads(m.pid);
      assert.ok(
        threadsHeld <= threads0 + SLACK,
        `threads grew with relayed requests: ${threads0} before, ${threadsHeld} with ${MAX_PENDING} held`,
      );
      release();
      const tally = JSON.parse((await flood).content[0].text);
      assert.equal(tally.ok, MAX_PENDING, `every answer got back to the child: ${JSON.stringify(tally)}`);
      await transport.terminateSession();
      await waitFor(() => procChildren(m.pid).length === 0, 30000, 'the child to go after DELETE');
      assert.doesNotMatch(m.stderr, /event=blocking_wait/);
    } finally {
      release?.();
      await client.close();
    }
  });
});
