// Upstream gateway (`mcpd --upstream 'CMD ARGS...'`): a stdio MCP server run
// as a child process and served over mcpd's HTTP transport.
//
// (1) A real third-party server, @modelcontextprotocol/server-everything in
//     stdio mode, behind mcpd, driven by the official SDK client: tools
//     (echo, get-sum, the long-running one with progress), a resource, a
//     prompt; one child per session, gone after DELETE.
// (2) Fault tests against fixtures/fault-server.mjs (an SDK stdio server with
//     crash/hang/slow tools): the child killed mid-call (by itself and by
//     SIGKILL from outside), mcpd SIGKILLed and restarted on the same db, a
//     child that hangs at initialize or on a call, DELETE and idle expiry,
//     --upstream-max, stderr tagging.
// (3) Leaks, counted from /proc: no zombie children of mcpd, no children left
//     after DELETE/expiry/shutdown, mcpd's descriptor count back to its
//     baseline after 20 crash/respawn cycles; SIGTERM → exit 0, no child.
// (4) Shared mode (--upstream-mode shared --upstream-pool 1): two sessions on
//     one child, concurrent calls with the same JSON-RPC id and progress
//     token on both sessions, each gets its own result and progress; a
//     notification of the child's (tools/list_changed) reaches both.
//
// Children are found as /proc/<mcpd>/task/*/children; every process this
// file signals is one it started or a child of the mcpd it started.

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import {
  NODE22,
  REPO_ROOT,
  callTool,
  freePort,
  getStream,
  initSession,
  mcpHeaders,
  newId,
  openStream,
  procAlive,
  procChildren,
  procFdCount,
  procStat,
  procThreads,
  request,
  responseFor,
  rpc,
  sleep,
  startMcpd,
  waitFor,
  withMcpd,
} from './lib/mcpd.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const FAULT_SERVER = path.join(here, 'fixtures', 'fault-server.mjs');
const EVERYTHING = path.join(
  REPO_ROOT,
  'tests',
  'node_modules',
  '@modelcontextprotocol',
  'server-everything',
  'dist',
  'index.js',
);
const FAULT_CMD = `${NODE22} ${FAULT_SERVER}`;
const EVERYTHING_CMD = `${NODE22} ${EVERYTHING} stdio`;

/** mcpd fronting `upstream` (default: the fault server), with extra args. */
function startGateway(extra = [], { upstream = FAULT_CMD, db, dir } = {}) {
  return startMcpd({ args: ['--upstream', upstream, ...extra], db, dir });
}

/** Text of a tools/call result, or throw with everything mcpd said. */
async function toolText(m, session, name, args = {}, opts = {}) {
  const r = await callTool(m.port, session, name, args, opts);
  const t = r.response?.result?.content?.[0]?.text;
  if (r.status !== 200 || typeof t !== 'string') {
    throw new Error(`${name}: HTTP ${r.status} ${r.text || ''} ${JSON.stringify(r.messages)}`);
  }
  return t;
}

const whoami = async (m, session) => JSON.parse(await toolText(m, session, 'whoami'));

/** No child of mcpd is a zombie (or dead-but-unreaped). */
function assertNoZombies(m, what = '') {
  const bad = procChildren(m.pid)
    .map((p) => procStat(p))
    .filter((s) => s && (s.state === 'Z' || s.state === 'X'));
  assert.deepEqual(bad, [], `zombie children of mcpd ${what}`);
}

/** The initialize request sent raw, so that a failure can be inspected. */
function initBody(id) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mcpd-e2e', version: '0.0.0' } },
  };
}

/** Run fn(m) on a fresh gateway; then SIGTERM it: exit 0 (no ASan report), no child left. */
async function withGateway(args, { upstream = FAULT_CMD, db, dir } = {}, fn) {
  await withMcpd(['--upstream', upstream, ...args], { db, dir }, fn);
}

// ---------------------------------------------------------------- (1) server-everything

test('server-everything behind mcpd: SDK client calls tools (progress too), reads a resource, gets a prompt', async () => {
  await withGateway([], { upstream: EVERYTHING_CMD }, async (m) => {
    const client = new Client({ name: 'mcpd-upstream-e2e', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(m.url));
    await client.connect(transport);
    try {
      assert.match(transport.sessionId ?? '', /^[0-9a-f]{32}$/);
      assert.equal(client.getServerVersion()?.name, 'mcp-servers/everything', 'serverInfo is the child’s');
      assert.ok(client.getServerCapabilities()?.tools, 'the child’s capabilities are relayed');
      const kids = procChildren(m.pid);
      assert.equal(kids.length, 1, `one child for the session: ${kids}`);

      const names = (await client.listTools()).tools.map((t) => t.name);
      for (const n of ['echo', 'get-sum', 'trigger-long-running-operation']) {
        assert.ok(names.includes(n), `tools/list has ${n}: ${names}`);
      }

      const e = await client.callTool({ name: 'echo', arguments: { message: 'through the gateway' } });
      assert.equal(e.content[0].text, 'Echo: through the gateway');
      const s = await client.callTool({ name: 'get-sum', arguments: { a: 19, b: 23 } });
      assert.match(s.content[0].text, /\b42\b/);

      // long-running with progress: each step must arrive when the child sends
      // it (not buffered until the end)
      const t0 = Date.now();
      const progress = [];
      const lr = await client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 2, steps: 4 } },
        undefined,
        { onprogress: (p) => progress.push({ ...p, at: Date.now() - t0 }) },
      );
      assert.match(lr.content[0].text, /Long running operation completed/);
      assert.deepEqual(
        progress.map((p) => [p.progress, p.total]),
        [
          [1, 4],
          [2, 4],
          [3, 4],
          [4, 4],
        ],
        `progress: ${JSON.stringify(progress)}`,
      );
      assert.ok(progress[3].at - progress[0].at >= 1000, `progress arrives as it happens: ${JSON.stringify(progress)}`);

      const res = await client.readResource({ uri: 'demo://resource/static/document/architecture.md' });
      assert.equal(res.contents[0].uri, 'demo://resource/static/document/architecture.md');
      assert.match(res.contents[0].text, /Architecture/);

      const pr = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris' } });
      assert.match(pr.messages[0].content.text, /Paris/);

      // a second session gets its own child
      const client2 = new Client({ name: 'mcpd-upstream-e2e-2', version: '1.0.0' });
      const transport2 = new StreamableHTTPClientTransport(new URL(m.url));
      await client2.connect(transport2);
      const s2 = await client2.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
      assert.match(s2.content[0].text, /\b3\b/);
      assert.equal(procChildren(m.pid).length, 2, 'one child per session');
      await transport2.terminateSession();
      await client2.close();
      await waitFor(() => procChildren(m.pid).length === 1, 5000, 'the second child to go after DELETE');
      assert.deepEqual(procChildren(m.pid), kids, 'the first session’s child is untouched');

      await transport.terminateSession();
      await waitFor(() => procChildren(m.pid).length === 0, 5000, 'the child to go after DELETE');
      assert.equal(procAlive(kids[0]), false);
    } finally {
      await client.close();
    }
  });
});

// A Python upstream started without -u: its stdout is block-buffered unless
// mcpd sets PYTHONUNBUFFERED for it (the "Buffering" point).
const PYTHON = (() => {
  const r = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
})();

test('a Python upstream without -u: its progress arrives when written, not with the result', { skip: !PYTHON && 'no python3' }, async () => {
  // mcpd must not rely on the caller's environment for this
  const saved = process.env.PYTHONUNBUFFERED;
  delete process.env.PYTHONUNBUFFERED;
  let m;
  try {
    m = await startGateway([], { upstream: `${PYTHON} ${path.join(here, 'fixtures', 'buffered-server.py')}` });
  } finally {
    if (saved !== undefined) process.env.PYTHONUNBUFFERED = saved;
  }
  try {
    const { session } = await initSession(m.port);
    const id = newId();
    const s = await openStream(m.port, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'tick', arguments: {}, _meta: { progressToken: 'py' } } },
    });
    assert.equal(s.status, 200);
    const t0 = Date.now();
    const first = await s.sse.nextMessage(5000);
    const tProgress = Date.now() - t0;
    assert.equal(first?.msg?.method, 'notifications/progress', JSON.stringify(first?.msg));
    const last = await s.sse.nextMessage(5000);
    const tResult = Date.now() - t0;
    s.close();
    assert.equal(last?.msg?.result?.content?.[0]?.text, 'tock');
    assert.ok(tResult - tProgress >= 700, `progress at ${tProgress} ms, result at ${tResult} ms: the progress was held back`);
  } catch (e) {
    e.message += `\n--- mcpd stderr (tail) ---\n${m.stderr.slice(-4000)}`;
    throw e;
  } finally {
    await m.cleanup();
  }
});

// ---------------------------------------------------------------- (2) faults

test('child crashes mid-call: the call fails naming the exit status; the next call respawns it and replays initialize', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const w1 = await whoami(m, session);
    assert.deepEqual(procChildren(m.pid), [w1.pid]);
    assert.equal(w1.clientInfo.name, 'mcpd-e2e');
    assert.equal(w1.initialized, true);

    const r = await callTool(m.port, session, 'crash', { code: 3 }, { progressToken: 'crash-token' });
    assert.equal(r.status, 200);
    const prog = r.messages.filter((x) => x.method === 'notifications/progress');
    assert.equal(prog.length, 1, `the progress sent before the crash is relayed: ${JSON.stringify(r.messages)}`);
    assert.equal(prog[0].params.progressToken, 'crash-token', 'progress carries the client’s own token');
    const err = r.response?.error;
    assert.ok(err, `a JSON-RPC error: ${JSON.stringify(r.messages)}`);
    assert.equal(err.code, -32603);
    assert.match(err.message, /exited with status 3/);
    assert.match(JSON.stringify(err.data ?? {}), /exited with status 3/);
    await waitFor(() => procStat(w1.pid) === null, 3000, 'the crashed child to be reaped');

    const w2 = await whoami(m, session);
    assert.notEqual(w2.pid, w1.pid, 'a new child');
    assert.deepEqual(w2.clientInfo, w1.clientInfo, 'initialize replayed with the client’s own params');
    assert.deepEqual(w2.capabilities, w1.capabilities);
    assert.equal(w2.initialized, true, 'notifications/initialized replayed');
    assert.deepEqual(procChildren(m.pid), [w2.pid]);

    // killed by a signal (its own)
    const k = await callTool(m.port, session, 'crash', { signal: 'SIGKILL' });
    assert.match(k.response?.error?.message ?? '', /killed by signal 9/, JSON.stringify(k.messages));
    assert.equal(await toolText(m, session, 'echo', { message: 'after the second crash' }), 'after the second crash');
    assertNoZombies(m);
  });
});

test('child SIGKILLed from outside mid-call: the call fails naming the signal; the next call works', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const w1 = await whoami(m, session);
    const [child] = procChildren(m.pid);
    assert.equal(child, w1.pid, 'the child found in /proc is the server that answers');

    const id = newId();
    const pending = rpc(
      m.port,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'hang', arguments: {} } },
      { session, ms: 10000 },
    );
    await sleep(300); // the call is at the child
    process.kill(child, 'SIGKILL');
    const t0 = Date.now();
    const r = await pending;
    assert.ok(Date.now() - t0 < 3000, 'the pending call ends promptly');
    assert.equal(r.status, 200);
    const err = responseFor(r.messages, id)?.error;
    assert.ok(err, `a JSON-RPC error: ${JSON.stringify(r.messages)}`);
    assert.equal(err.code, -32603);
    assert.match(err.message, /killed by signal 9/);
    await waitFor(() => procStat(child) === null, 3000, 'the killed child to be reaped');

    const w2 = await whoami(m, session);
    assert.notEqual(w2.pid, child);
    assert.equal(w2.initialized, true);
    assert.deepEqual(procChildren(m.pid), [w2.pid]);
    assertNoZombies(m);
  });
});

test('mcpd SIGKILLed mid-session and restarted on the same db: the session keeps working without initialize', async () => {
  const m = await startGateway();
  try {
    const { session } = await initSession(m.port);
    const w1 = await whoami(m, session);

    // a call in flight when mcpd dies
    const id = newId();
    const s = await openStream(m.port, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: {
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'slow', arguments: { ms: 20000 }, _meta: { progressToken: 'restart-token' } },
      },
    });
    assert.equal(s.status, 200);
    let lastId;
    for (let i = 0; i < 2; i++) {
      const msg = await s.sse.nextMessage(5000);
      assert.equal(msg?.msg?.method, 'notifications/progress', JSON.stringify(msg?.msg));
      lastId = msg.ev.id;
    }
    m.kill('SIGKILL');
    assert.equal((await m.exited).signal, 'SIGKILL');
    s.close();
    // PR_SET_PDEATHSIG: the child does not outlive mcpd
    await waitFor(() => !procAlive(w1.pid), 3000, `the child ${w1.pid} to die with mcpd`);

    await m.restart({ port: await freePort() });
    assert.deepEqual(procChildren(m.pid), [], 'no child before the session’s first request');
    const w2 = await whoami(m, session);
    assert.notEqual(w2.pid, w1.pid, 'a new child');
    assert.deepEqual(w2.clientInfo, w1.clientInfo, 'initialized from the stored initialize');
    assert.equal(w2.initialized, true);
    assert.deepEqual(procChildren(m.pid), [w2.pid]);

    // the interrupted call's stream ends with the restart error
    const g = await getStream(m.port, session, { lastEventId: lastId });
    assert.equal(g.status, 200);
    let msgs;
    try {
      msgs = await g.sse.rest(8000);
    } finally {
      g.close();
    }
    const last = msgs[msgs.length - 1]?.msg;
    assert.equal(last?.id, id, JSON.stringify(msgs.map((x) => x.msg)));
    assert.equal(last.error?.code, -32603);
    assert.match(last.error?.message ?? '', /interrupted by server restart/);
    assertNoZombies(m);
  } catch (e) {
    e.message += `\n--- mcpd stderr (tail) ---\n${m.stderr.slice(-4000)}`;
    throw e;
  } finally {
    await m.cleanup();
  }
});

test('child hangs at initialize: initialize fails within --upstream-start-timeout-ms, no child left', async () => {
  await withGateway(
    ['--upstream-start-timeout-ms', '800', '--upstream-env', 'FAULT_HANG_INIT=1'],
    {},
    async (m) => {
      const id = newId();
      const t0 = Date.now();
      const r = await rpc(m.port, initBody(id), { version: null, ms: 10000 });
      const dt = Date.now() - t0;
      const err = responseFor(r.messages, id)?.error;
      assert.ok(err, `initialize fails: HTTP ${r.status} ${JSON.stringify(r.messages)}`);
      assert.match(err.message, /did not answer initialize in time/);
      assert.ok(dt >= 700 && dt < 3000, `initialize failed after ${dt} ms (timeout 800)`);
      assert.equal(r.headers['mcp-session-id'], undefined, 'no session for a failed initialize');
      assert.deepEqual(procChildren(m.pid), [], 'the hung child is stopped');
      // and again: the limit holds every time, nothing accumulates
      const r2 = await rpc(m.port, initBody(id + 1), { version: null, ms: 10000 });
      assert.match(responseFor(r2.messages, id + 1)?.error?.message ?? '', /did not answer initialize in time/);
      assert.deepEqual(procChildren(m.pid), []);
    },
  );
});

test('child exits at start: initialize fails with a clear error, nothing left running', async () => {
  await withGateway(['--upstream-env', 'FAULT_EXIT_AT_START=5'], {}, async (m) => {
    const id = newId();
    const r = await rpc(m.port, initBody(id), { version: null, ms: 10000 });
    const err = responseFor(r.messages, id)?.error;
    assert.ok(err, `initialize fails: HTTP ${r.status} ${JSON.stringify(r.messages)}`);
    assert.match(err.message, /Upstream server (exited|closed)/);
    assert.equal(r.headers['mcp-session-id'], undefined);
    assert.deepEqual(procChildren(m.pid), []);
  });
});

test('child hangs on a call: notifications/cancelled ends it promptly and reaches the child in its own id', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const w1 = await whoami(m, session);
    const id = newId();
    const pending = rpc(
      m.port,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'hang', arguments: {} } },
      { session, ms: 10000 },
    );
    await sleep(300);
    const n = await request(m.port, {
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } },
    });
    assert.equal(n.status, 202);
    const t0 = Date.now();
    const r = await pending;
    assert.ok(Date.now() - t0 < 2000, `the cancelled call ended after ${Date.now() - t0} ms`);
    assert.equal(responseFor(r.messages, id)?.result, undefined, 'no result for a cancelled call');
    // the fault server logs "cancelled <its request id>" on stderr: mcpd's id, not the client's
    const line = await waitFor(
      () => m.stderr.split('\n').find((l) => l.includes('event=upstream_stderr') && l.includes('cancelled ')),
      3000,
      'the child to see the cancellation',
    );
    assert.ok(line.includes(`session=${session}`), line);
    assert.ok(!new RegExp(`cancelled ${id}\\b`).test(line), `the child saw mcpd's id, not the client's: ${line}`);
    // the same child goes on serving
    assert.equal(await toolText(m, session, 'echo', { message: 'after cancel' }), 'after cancel');
    assert.deepEqual(procChildren(m.pid), [w1.pid], 'cancellation does not restart the child');
  });
});

test('DELETE of a session with a hung call kills its child; idle expiry does too', async () => {
  await withGateway(['--session-idle-ms', '1500'], {}, async (m) => {
    const a = await initSession(m.port);
    const b = await initSession(m.port);
    const wa = await whoami(m, a.session);
    const wb = await whoami(m, b.session);
    assert.deepEqual(procChildren(m.pid), [wa.pid, wb.pid].sort((x, y) => x - y));

    const id = newId();
    const pending = rpc(
      m.port,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'hang', arguments: {} } },
      { session: a.session, ms: 10000 },
    );
    await sleep(300);
    const d = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session: a.session }) });
    assert.equal(d.status, 200);
    await waitFor(() => !procAlive(wa.pid), 4000, 'the deleted session’s child to be stopped');
    const r = await pending; // ends (its stream closes), whatever it carries
    assert.equal(responseFor(r.messages, id)?.result, undefined);
    await waitFor(() => procStat(wa.pid) === null, 2000, 'the child to be reaped, not left a zombie');

    // b: keep idle; the reaper expires it and its child is stopped
    await waitFor(() => !procAlive(wb.pid), 6000, 'the idle session’s child to be stopped');
    await waitFor(() => procChildren(m.pid).length === 0, 2000, 'the expired session’s child to be reaped');
    // (a request racing the expiry itself is the DELETE-race test's subject)
    await sleep(500);
    const gone = await callTool(m.port, b.session, 'echo', { message: 'x' });
    assert.equal(gone.status, 404, 'the expired session is gone');
  });
});

test('--upstream-max 2: a third session’s initialize fails with a clear error', async () => {
  await withGateway(['--upstream-max', '2'], {}, async (m) => {
    const a = await initSession(m.port);
    await initSession(m.port);
    const id = newId();
    const r = await rpc(m.port, initBody(id), { version: null });
    const err = responseFor(r.messages, id)?.error;
    assert.ok(err, `third initialize fails: HTTP ${r.status} ${JSON.stringify(r.messages)}`);
    assert.match(err.message, /Too many upstream servers running \(--upstream-max 2\)/);
    assert.equal(r.headers['mcp-session-id'], undefined);
    assert.equal(procChildren(m.pid).length, 2);
    // a slot frees when a session ends
    const d = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session: a.session }) });
    assert.equal(d.status, 200);
    await waitFor(() => procChildren(m.pid).length === 1, 4000, 'the deleted session’s child to go');
    const c = await initSession(m.port);
    assert.equal(await toolText(m, c.session, 'echo', { message: 'third' }), 'third');
  });
});

test('the child’s stderr shows up in mcpd’s log, tagged with the session id', async () => {
  await withGateway(['--upstream-env', 'FAULT_STDERR=fault-stderr-marker-7f3a'], {}, async (m) => {
    const { session } = await initSession(m.port);
    const line = await waitFor(
      () => m.stderr.split('\n').find((l) => l.includes('fault-stderr-marker-7f3a')),
      3000,
      'the stderr line in mcpd’s log',
    );
    assert.match(line, new RegExp(`session=${session} event=upstream_stderr msg="fault-stderr-marker-7f3a"`));
  });
});

/** An SDK client that answers sampling and roots, and records log notifications. */
async function sdkClient(url, name = 'mcpd-upstream-relay') {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: { sampling: {}, roots: { listChanged: true } } });
  const logs = [];
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    role: 'assistant',
    model: 'test-model',
    content: { type: 'text', text: `sampled: ${req.params.messages[0].content.text} (${name})` },
  }));
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: [{ uri: 'file:///tmp/mcpd-root', name: name }],
  }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport, logs };
}

test('server→client requests (sampling, roots) and logging are relayed through the gateway', async () => {
  await withGateway([], {}, async (m) => {
    const { client, transport, logs } = await sdkClient(m.url);
    try {
      const w = JSON.parse((await client.callTool({ name: 'whoami', arguments: {} })).content[0].text);
      assert.deepEqual(w.capabilities, { sampling: {}, roots: { listChanged: true } }, 'the client’s capabilities reach the child');
      const s = await client.callTool({ name: 'sample', arguments: { prompt: 'hello' } });
      assert.equal(s.content[0].text, 'sampled: hello (mcpd-upstream-relay)');
      const r = await client.callTool({ name: 'roots', arguments: {} });
      assert.deepEqual(JSON.parse(r.content[0].text), [{ uri: 'file:///tmp/mcpd-root', name: 'mcpd-upstream-relay' }]);
      await client.setLoggingLevel('info');
      await client.callTool({ name: 'log', arguments: { level: 'debug', data: 'filtered-out' } });
      await client.callTool({ name: 'log', arguments: { level: 'warning', data: 'relayed-log' } });
      await waitFor(() => logs.some((l) => l.data === 'relayed-log'), 3000, 'the log notification');
      assert.equal(logs.filter((l) => l.data === 'filtered-out').length, 0, 'logging/setLevel filters child logs');
      assert.equal(logs.find((l) => l.data === 'relayed-log').level, 'warning');
      // 16 concurrent calls on one session, one child
      const many = await Promise.all(
        Array.from({ length: 16 }, (_, i) => client.callTool({ name: 'echo', arguments: { message: `m${i}` } })),
      );
      assert.deepEqual(
        many.map((x) => x.content[0].text),
        Array.from({ length: 16 }, (_, i) => `m${i}`),
      );
      await transport.terminateSession();
    } finally {
      await client.close();
    }
  });
});

test('a child writing a non-JSON line on stdout: logged, and the session goes on', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const w1 = await whoami(m, session);
    assert.equal(await toolText(m, session, 'garbage'), 'ok');
    assert.equal(await toolText(m, session, 'echo', { message: 'after garbage' }), 'after garbage');
    assert.equal((await whoami(m, session)).pid, w1.pid);
    assert.match(m.stderr, /event=upstream_bad_message/);
  });
});

test('the child inherits none of mcpd’s descriptors (sockets, database)', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const { pid } = await whoami(m, session);
    const links = (p) =>
      fs
        .readdirSync(`/proc/${p}/fd`)
        .map((f) => {
          try {
            return fs.readlinkSync(`/proc/${p}/fd/${f}`);
          } catch {
            return null;
          }
        })
        .filter(Boolean);
    const mine = new Set(
      links(m.pid).filter((l) => l.startsWith('socket:') || (l.startsWith('/') && l !== '/dev/null')),
    );
    const theirs = links(pid);
    const shared = theirs.filter((l) => mine.has(l));
    assert.deepEqual(shared, [], `descriptors shared by mcpd and its child: ${shared}`);
    assert.ok(!theirs.some((l) => l.startsWith(m.db)), 'the child does not hold the database');
  });
});

test('a child that closes its stdout but keeps running: the pending call fails and the child is replaced', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const w1 = await whoami(m, session);
    const id = newId();
    const t0 = Date.now();
    const r = await rpc(
      m.port,
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'closeout', arguments: {} } },
      { session, ms: 15000 },
    ).catch((e) => ({ timeout: e.message }));
    assert.equal(r.timeout, undefined, `the call never ended: ${r.timeout}`);
    const err = responseFor(r.messages, id)?.error;
    assert.ok(err, `a JSON-RPC error: ${JSON.stringify(r.messages)}`);
    assert.ok(Date.now() - t0 < 5000, `ended after ${Date.now() - t0} ms`);
    await waitFor(() => !procAlive(w1.pid), 5000, 'the deaf child to be stopped');
    const w2 = await whoami(m, session);
    assert.notEqual(w2.pid, w1.pid);
  });
});

test('a child that ignores SIGTERM is SIGKILLed after the grace, on DELETE and on shutdown', async () => {
  await withGateway([], {}, async (m) => {
    const a = await initSession(m.port);
    const wa = await whoami(m, a.session);
    assert.equal(await toolText(m, a.session, 'stubborn'), 'stubborn');
    const t0 = Date.now();
    const d = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session: a.session }), timeout: 10000 });
    assert.equal(d.status, 200);
    await waitFor(() => !procAlive(wa.pid), 6000, 'the stubborn child to be killed');
    assert.ok(Date.now() - t0 < 6000, `stopped after ${Date.now() - t0} ms`);

    const b = await initSession(m.port);
    const wb = await whoami(m, b.session);
    assert.equal(await toolText(m, b.session, 'stubborn'), 'stubborn');
    const t1 = Date.now();
    const ex = await m.stop('SIGTERM', 10000);
    assert.equal(ex.code, 0);
    assert.ok(Date.now() - t1 < 6000, `shutdown took ${Date.now() - t1} ms`);
    await waitFor(() => !procAlive(wb.pid), 2000, 'the stubborn child to die with mcpd');
  });
});

test('a request that races a DELETE (child slow to stop) does not leave a new child behind', async () => {
  await withGateway([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const w = await whoami(m, session);
    // the child ignores SIGTERM, so stopping it takes the 2 s grace: a wide window
    assert.equal(await toolText(m, session, 'stubborn'), 'stubborn');
    const del = request(m.port, { method: 'DELETE', headers: mcpHeaders({ session }), timeout: 10000 });
    await sleep(300);
    const r = await callTool(m.port, session, 'whoami', {}, { ms: 10000 });
    assert.equal((await del).status, 200);
    await waitFor(() => !procAlive(w.pid), 5000, 'the session’s child to be stopped');
    const text = r.response?.result?.content?.[0]?.text;
    const left = await waitFor(() => procChildren(m.pid).length === 0, 3000, 'no child').catch(() => procChildren(m.pid));
    assert.equal(
      left,
      true,
      `children left after the session was deleted: ${JSON.stringify(left)}; the racing request got HTTP ${r.status} ${text ?? JSON.stringify(r.messages)}`,
    );
    const after = await callTool(m.port, session, 'echo', { message: 'x' });
    assert.equal(after.status, 404);
  });
});

test('requests racing a DELETE: each gets 200 or 404 (never 202), no child left, mcpd exits 0', async () => {
  await withGateway([], {}, async (m) => {
    const statuses = {};
    const odd = new Set();
    for (let i = 0; i < 8; i++) {
      const { session } = await initSession(m.port);
      const calls = Array.from({ length: 20 }, (_, j) =>
        callTool(m.port, session, 'echo', { message: `r${i}-${j}` }, { ms: 15000 }).then((r) => {
          if (r.status !== 200 && r.status !== 404) odd.add(`${r.status} ${r.text ?? JSON.stringify(r.messages)}`);
          return r.status;
        }),
      );
      await sleep(5 + (i % 4) * 20);
      const d = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session }) });
      assert.equal(d.status, 200);
      for (const st of await Promise.all(calls)) statuses[st] = (statuses[st] || 0) + 1;
    }
    assert.deepEqual(
      Object.keys(statuses).filter((k) => k !== '200' && k !== '404'),
      [],
      `HTTP statuses of 160 tools/call requests racing DELETE: ${JSON.stringify(statuses)}; bodies: ${[...odd]}`,
    );
    await waitFor(() => procChildren(m.pid).length === 0, 5000, 'every deleted session’s child to go');
    assert.doesNotMatch(m.stderr, /store_write_failed|stream_append_failed/, 'no store errors');
  });
});

test('DELETEs racing SSE replies, 3 sessions at a time: every request and every DELETE is answered, mcpd exits 0', async () => {
  // A reply still pending after 30 ms becomes an SSE stream, whose priming
  // event commits the stream's row while the request holds the stream's
  // append lock. A DELETE on the same pool thread stopped the child there,
  // joining its reader thread, and the reader, answering or failing that
  // request, waited for the lock: the pool thread hung with every
  // connection on it (the DELETE too), and mcpd could not exit. Echo and
  // slow calls, and DELETEs at varied delays, keep such replies in flight.
  await withGateway([], {}, async (m) => {
    const statuses = {};
    const odd = [];
    const lane = async (k) => {
      for (let i = 0; i < 8; i++) {
        let session;
        try {
          ({ session } = await initSession(m.port));
        } catch (e) {
          odd.push(`lane ${k} round ${i} initialize: ${e.message}`);
          return;
        }
        const calls = Array.from({ length: 24 }, (_, j) => {
          const [tool, args] = j % 2 ? ['slow', { ms: 10 + ((j * 7) % 90) }] : ['echo', { message: `l${k}r${i}c${j}` }];
          return callTool(m.port, session, tool, args, { ms: 15000 }).then(
            (r) => {
              if (r.status !== 200 && r.status !== 404) odd.push(`${tool} ${r.status} ${r.text ?? JSON.stringify(r.messages)}`);
              return r.status;
            },
            (e) => {
              odd.push(`lane ${k} round ${i} ${tool}: ${e.message}`);
              return 'no answer';
            },
          );
        });
        await sleep(5 + ((i + k) % 5) * 25);
        const d = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session }), timeout: 15000 }).catch(
          (e) => ({ status: e.message }),
        );
        if (d.status !== 200) odd.push(`lane ${k} round ${i} DELETE: ${d.status}`);
        for (const st of await Promise.all(calls)) statuses[st] = (statuses[st] || 0) + 1;
      }
    };
    await Promise.all([0, 1, 2].map(lane));
    assert.deepEqual(odd.slice(0, 10), [], `${odd.length} requests unanswered or odd; statuses ${JSON.stringify(statuses)}`);
    await waitFor(() => procChildren(m.pid).length === 0, 5000, 'every deleted session’s child to go');
  });
});

// ---------------------------------------------------------------- (3) leaks

test('20 crash/respawn cycles: no zombies, descriptors back to baseline; SIGTERM exits 0 with no child left', async () => {
  const m = await startGateway();
  try {
    const { session } = await initSession(m.port);
    // one warm-up cycle so that lazily created state (spawner thread, worker
    // threads, store statements) exists before the baseline
    await callTool(m.port, session, 'crash', { code: 1 });
    await whoami(m, session);
    await sleep(200);
    const fd0 = procFdCount(m.pid);
    const threads0 = procThreads(m.pid);
    const seen = [];
    for (let i = 0; i < 20; i++) {
      const w = await whoami(m, session);
      seen.push(w.pid);
      const r = await callTool(m.port, session, 'crash', { code: i % 4 });
      assert.match(r.response?.error?.message ?? '', new RegExp(`exited with status ${i % 4}`), JSON.stringify(r.messages));
      assertNoZombies(m, `after crash ${i}`);
    }
    const last = await whoami(m, session);
    assert.equal(new Set([...seen, last.pid]).size, 21, '21 distinct children');
    for (const p of seen) assert.equal(procStat(p), null, `child ${p} reaped`);
    assert.deepEqual(procChildren(m.pid), [last.pid]);
    // HTTP connections of the test may take a moment to close on mcpd's side
    let fd1;
    try {
      await waitFor(() => (fd1 = procFdCount(m.pid)) <= fd0, 3000, 'the descriptor count to settle');
    } catch {
      /* asserted below */
    }
    assert.equal(fd1, fd0, `mcpd descriptors: baseline ${fd0}, after 20 cycles ${fd1}`);
    assert.ok(procThreads(m.pid) <= threads0 + 2, `threads: baseline ${threads0}, now ${procThreads(m.pid)}`);

    const ex = await m.stop('SIGTERM', 8000);
    assert.equal(ex.code, 0, `mcpd exit after SIGTERM: ${JSON.stringify(ex)}`);
    assert.equal(procAlive(last.pid), false, 'no child outlives mcpd’s shutdown');
  } catch (e) {
    e.message += `\n--- mcpd stderr (tail) ---\n${m.stderr.slice(-4000)}`;
    throw e;
  } finally {
    await m.cleanup();
  }
});

// ---------------------------------------------------------------- (4) shared mode

// The child's list_changed goes to every session on the link. Each send is
// a commit that parks the child's reader (a fiber): it must not hold the
// link's lock meanwhile (the ASan build aborts when a fiber parks holding a
// pthread mutex, and in a release build another fiber of that loop thread
// wanting the link would deadlock it).
test('shared mode, pool 1: the child\'s tools/list_changed reaches every session on it', async () => {
  await withGateway(['--upstream-mode', 'shared', '--upstream-pool', '1'], {}, async (m) => {
    const clients = [await sdkClient(m.url, 'changed-a'), await sdkClient(m.url, 'changed-b')];
    const seen = clients.map(() => 0);
    clients.forEach((c, i) => c.client.setNotificationHandler(ToolListChangedNotificationSchema, () => seen[i]++));
    try {
      const pids = await Promise.all(clients.map((c) => c.client.callTool({ name: 'pid', arguments: {} })));
      assert.equal(pids[0].content[0].text, pids[1].content[0].text, 'one child for both sessions');
      const r = await clients[0].client.callTool({ name: 'changed', arguments: {} });
      assert.equal(r.content[0].text, 'sent');
      await waitFor(() => seen.every((n) => n >= 1), 5000, `list_changed on both sessions (seen ${seen})`);
      // The link still serves both.
      for (const c of clients) assert.equal((await c.client.callTool({ name: 'echo', arguments: { message: 'after' } })).content[0].text, 'after');
    } finally {
      for (const c of clients) {
        await c.transport.terminateSession().catch(() => {});
        await c.client.close();
      }
    }
  });
});

test('shared mode, pool 1: two sessions share one child; concurrent calls with the same id and token stay apart', async () => {
  await withGateway(['--upstream-mode', 'shared', '--upstream-pool', '1'], {}, async (m) => {
    const a = await initSession(m.port);
    const b = await initSession(m.port);
    const wa = await whoami(m, a.session);
    const wb = await whoami(m, b.session);
    assert.equal(wa.pid, wb.pid, 'one child for both sessions');
    assert.deepEqual(procChildren(m.pid), [wa.pid]);

    const id = 4242; // the same JSON-RPC id on both sessions, at the same time
    const call = (ms, message) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'slow', arguments: { ms, message }, _meta: { progressToken: 'same-token' } },
    });
    const [ra, rb] = await Promise.all([
      rpc(m.port, call(1000, 'from-A'), { session: a.session }),
      rpc(m.port, call(500, 'from-B'), { session: b.session }),
    ]);
    for (const [r, want] of [
      [ra, 'from-A'],
      [rb, 'from-B'],
    ]) {
      assert.equal(responseFor(r.messages, id)?.result?.content?.[0]?.text, want, JSON.stringify(r.messages));
      const prog = r.messages.filter((x) => x.method === 'notifications/progress');
      assert.ok(prog.every((p) => p.params.progressToken === 'same-token'), 'the client’s own token');
      const vals = prog.map((p) => p.params.progress);
      assert.deepEqual(vals, vals.map((_, i) => i + 1), `${want}: only its own progress, in order: ${vals}`);
      assert.equal(r.messages.filter((x) => x.id === id).length, 1, `${want}: exactly one response`);
    }
    const na = ra.messages.filter((x) => x.method === 'notifications/progress').length;
    const nb = rb.messages.filter((x) => x.method === 'notifications/progress').length;
    assert.ok(na >= 6 && nb >= 2 && nb <= 5, `progress counts A=${na} (1000 ms) B=${nb} (500 ms)`);

    // a server→client request while only one call is in flight goes to that call's client
    const ca = await sdkClient(m.url, 'shared-a');
    try {
      const sres = await ca.client.callTool({ name: 'sample', arguments: { prompt: 'shared' } });
      assert.equal(sres.content[0].text, 'sampled: shared (shared-a)');
    } finally {
      await ca.transport.terminateSession().catch(() => {});
      await ca.client.close();
    }

    // ...but with a call of another session in flight, mcpd cannot tell whose
    // it is: the child's request gets an error (tests/gateway-shared-mode.md)
    const busy = rpc(
      m.port,
      { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'slow', arguments: { ms: 1500 } } },
      { session: a.session, ms: 10000 },
    );
    await sleep(200);
    const amb = await callTool(m.port, b.session, 'sample', { prompt: 'whose?' });
    const ambText = JSON.stringify(amb.messages);
    assert.ok(
      amb.response?.error || amb.response?.result?.isError,
      `sampling with two calls in flight on a shared child must fail: ${ambText}`,
    );
    assert.match(ambText, /cannot tell which client/);
    await busy;

    // ending one session leaves the shared child to the other
    const d = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session: a.session }) });
    assert.equal(d.status, 200);
    assert.equal((await whoami(m, b.session)).pid, wa.pid);
    // a crash fails the calls of every session on that child; the next call respawns
    const r = await callTool(m.port, b.session, 'crash', { code: 7 });
    assert.match(r.response?.error?.message ?? '', /exited with status 7/);
    const w2 = await whoami(m, b.session);
    assert.notEqual(w2.pid, wa.pid);
    assert.deepEqual(procChildren(m.pid), [w2.pid]);
    assertNoZombies(m);
  });
});
