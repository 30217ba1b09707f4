// mcp-admin, bearer tokens and the request log (issue 8), against a real
// mcpd on a real SQLite file, driven by the official SDK client:
//   - tokens: 401 without one, the SDK client with one, 404 across
//     principals (POST, GET, Last-Event-ID, poll), revocation within 1 s
//     (the open stream ends), an expired token, WebSocket with the
//     subprotocol token;
//   - mcp-admin's table and --json output for sessions, session show,
//     streams, chunks, logs, stats, tokens, check;
//   - session kill ends an open SSE GET and a WebSocket within 1 s and the
//     next POST gets 404;
//   - logs --follow sees a new request within 1 s; backup under load passes
//     check;
//   - missing, corrupt and newer-schema databases: one line, exit 1, the
//     file untouched.
// Every process this file signals is one it started.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DatabaseSync } from 'node:sqlite';

import {
  ACCEPT_BOTH,
  MCPD_BIN,
  ON_POSTGRES,
  dbArg,
  getStream,
  initSession,
  mcpHeaders,
  newId,
  procChildren,
  request,
  sleep,
  tempDb,
  waitFor,
  withMcpd,
  withTimeout,
  ADMIN_BIN,
  mcpAdmin,
  queryStore,
  sqliteOnly,
} from './lib/mcpd.mjs';

const admin = mcpAdmin;

function addToken(db, name, ...extra) {
  const r = admin(db, 'tokens', 'add', name, ...extra);
  assert.equal(r.status, 0, r.stderr);
  const token = r.stdout.trim();
  assert.match(token, /^mcpd_[A-Za-z0-9_-]{43}$/);
  return token;
}

const bearer = (token) => ({ Authorization: `Bearer ${token}` });

async function initWith(port, token) {
  const r = await request(port, {
    headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token) },
    body: { jsonrpc: '2.0', id: newId(), method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'admin-e2e', version: '1.2.3' } } },
  });
  assert.equal(r.status, 200, r.text);
  const session = r.headers['mcp-session-id'];
  const n = await request(port, {
    headers: { ...mcpHeaders({ session }), 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token) },
    body: { jsonrpc: '2.0', method: 'notifications/initialized' },
  });
  assert.equal(n.status, 202);
  return session;
}

function post(port, session, token, body, timeout = 10000) {
  return request(port, {
    headers: { ...mcpHeaders({ session }), 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...(token ? bearer(token) : {}) },
    body,
    timeout,
  });
}

function wsOpen(port, protocols) {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/mcp/ws`, protocols);
    ws.addEventListener('open', () => resolve({ ws, open: true }), { once: true });
    ws.addEventListener('error', () => resolve({ ws, open: false }), { once: true });
  });
}

test('tokens: 401 without, the SDK client with one, 404 across principals, expiry, revocation within 1 s', async () => {
  const { db, dir } = tempDb();
  // The schema exists once mcpd has run; tokens are added while it runs.
  await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
    const a = addToken(db, 'alice', '--note', 'laptop');
    const b = addToken(db, 'bob');
    // No token, or a wrong one: 401 with WWW-Authenticate.
    const none = await post(m.port, undefined, undefined, { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.equal(none.status, 401);
    assert.equal(none.headers['www-authenticate'], 'Bearer');
    assert.equal(none.json.error.code, -32000);
    assert.equal((await post(m.port, undefined, 'mcpd_wrong', { jsonrpc: '2.0', id: 1, method: 'ping' })).status, 401);

    // The official SDK client with the header.
    const client = new Client({ name: 'sdk-with-token', version: '9.9.9' });
    const transport = new StreamableHTTPClientTransport(new URL(m.url), { requestInit: { headers: bearer(a) } });
    await client.connect(transport);
    const echoed = await client.callTool({ name: 'echo', arguments: { message: 'authorized' } });
    assert.equal(echoed.content[0].text, 'authorized');
    const aliceSession = transport.sessionId;

    // Bob cannot see Alice's session: POST, GET, Last-Event-ID, poll.
    assert.equal((await post(m.port, aliceSession, b, { jsonrpc: '2.0', id: 2, method: 'ping' })).status, 404);
    const get = await getStream(m.port, aliceSession, { headers: bearer(b) });
    assert.equal(get.status, 404);
    const resumed = await getStream(m.port, aliceSession, { headers: bearer(b), lastEventId: `${'0'.repeat(32)}:0` });
    assert.equal(resumed.status, 404);
    const poll = await post(m.port, aliceSession, b, { jsonrpc: '2.0', id: 3, method: 'mcpd/poll', params: { stream_id: 'x', from_seq: 0 } });
    assert.equal(poll.status, 404);

    // An expired token.
    const short = addToken(db, 'short', '--expires', '1s');
    assert.equal((await post(m.port, undefined, short, { jsonrpc: '2.0', id: 4, method: 'ping' })).status, 400); // admitted (no session)
    await sleep(1300);
    const expired = await post(m.port, undefined, short, { jsonrpc: '2.0', id: 5, method: 'ping' });
    assert.equal(expired.status, 401);
    assert.match(expired.json.error.message, /expired/);

    // WebSocket: the token as a second subprotocol; without it, refused.
    const refused = await wsOpen(m.port, ['mcp']);
    assert.equal(refused.open, false);
    const ok = await wsOpen(m.port, ['mcp', `bearer.${b}`]);
    assert.equal(ok.open, true);
    assert.equal(ok.ws.protocol, 'mcp');
    ok.ws.close();

    // Revocation: an open GET ends, and the next request is 401, within 1 s.
    await client.close().catch(() => {}); // its own GET stream would be the session's one
    const rawSession = await initWith(m.port, a);
    const stream = await getStream(m.port, rawSession, { headers: bearer(a) });
    assert.equal(stream.status, 200);
    const ended = new Promise((resolve) => stream.res.on('close', resolve));
    const t0 = Date.now();
    assert.equal(admin(db, 'tokens', 'revoke', 'alice').status, 0);
    await withTimeout(ended, 3000, 'the revoked principal\'s stream to end');
    await waitFor(async () => (await post(m.port, undefined, a, { jsonrpc: '2.0', id: 6, method: 'ping' })).status === 401, 3000, '401 after revoke');
    assert.ok(Date.now() - t0 < 2000, `revocation took ${Date.now() - t0} ms`);

    const list = admin(db, '--json', 'tokens', 'list');
    assert.equal(list.status, 0, list.stderr);
    const byName = Object.fromEntries(list.json.map((t) => [t.name, t]));
    assert.ok(byName.alice.revoked_ms > 0);
    assert.equal(byName.alice.note, 'laptop');
    assert.ok(byName.bob.last_used_ms > 0);
    assert.equal(byName.bob.revoked_ms, null);
    const table = admin(db, 'tokens', 'list');
    assert.match(table.stdout, /^NAME\s+CREATED\s+EXPIRES\s+LAST USED\s+SESSIONS\s+STATE\s+NOTE/m);
    assert.match(table.stdout, /^alice\s.*revoked\s+laptop$/m);
    assert.match(table.stdout, /^short\s.*expired/m);
  });
});

test('mcp-admin: sessions, session show, streams, chunks, stats, logs and check, as tables and --json', async () => {
  await withMcpd([], {}, async (m) => {
    const client = new Client({ name: 'admin-sdk', version: '4.5.6' });
    const transport = new StreamableHTTPClientTransport(new URL(m.url));
    await client.connect(transport);
    const progress = [];
    await client.callTool({ name: 'countdown', arguments: { n: 3, interval_ms: 10 } }, undefined, { onprogress: (p) => progress.push(p) });
    const sid = transport.sessionId;
    await sleep(300); // log rows are committed asynchronously

    const sessions = admin(m.db, '--json', 'sessions');
    assert.equal(sessions.status, 0, sessions.stderr);
    const mine = sessions.json.find((s) => s.id === sid);
    assert.ok(mine, JSON.stringify(sessions.json));
    assert.equal(mine.client_name, 'admin-sdk');
    assert.equal(mine.client_version, '4.5.6');
    assert.equal(mine.protocol, '2025-11-25');
    assert.equal(mine.transport, 'http');
    assert.ok(mine.stored_bytes > 0);
    const table = admin(m.db, 'sessions');
    assert.match(table.stdout, /^SESSION\s+PRINCIPAL\s+CLIENT\s+PROTOCOL\s+TRANSPORT\s+CREATED\s+ACTIVE\s+STREAMS\s+STORED\s+STATE/m);
    assert.match(table.stdout, new RegExp(`^${sid}\\s+-\\s+admin-sdk 4\\.5\\.6\\s+2025-11-25\\s+http\\s+(just now|\\d+s ago)`, 'm'));

    const show = admin(m.db, '--json', 'session', 'show', sid);
    assert.equal(show.status, 0, show.stderr);
    assert.equal(show.json.init_params.clientInfo.name, 'admin-sdk');
    assert.ok(Array.isArray(show.json.streams) && show.json.streams.length >= 2);
    const request = show.json.streams.find((s) => s.kind === 'request' && s.chunks >= 4);
    assert.ok(request, JSON.stringify(show.json.streams));
    assert.ok(show.json.last_messages.length > 0);
    assert.match(admin(m.db, 'session', 'show', sid).stdout, /^capabilities /m);
    assert.equal(admin(m.db, 'session', 'show', 'no-such-session').status, 3);

    const streams = admin(m.db, '--json', 'streams', sid);
    assert.equal(streams.json.length, show.json.streams.length);
    const chunks = admin(m.db, '--json', 'chunks', request.id);
    assert.equal(chunks.status, 0);
    const lines = chunks.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((c) => c.seq), [0, 1, 2, 3]);
    assert.equal(lines.at(-1).is_end, 1);
    assert.match(admin(m.db, 'chunks', request.id, '--from', '3').stdout, /^3\t.*\t\(end\)$/m);

    const stats = admin(m.db, '--json', 'stats');
    assert.equal(stats.status, 0, stats.stderr);
    assert.ok(stats.json.sessions_live >= 1 && stats.json.chunks >= 4 && stats.json.database_bytes > 0);
    assert.ok(stats.json.requests_per_minute.reduce((n, r) => n + r.requests, 0) >= 3);
    assert.match(admin(m.db, 'stats').stdout, /^requests\s+\d+ in the last hour/m);

    const logs = admin(m.db, '--json', 'logs', '--session', sid);
    assert.ok(logs.json.some((l) => /^request POST \/mcp status=200 .*mcp=tools\/call tool=countdown/.test(l.event)), JSON.stringify(logs.json));
    assert.ok(logs.json.some((l) => l.event.startsWith('session_created')));
    assert.equal(admin(m.db, '--json', 'logs', '--level', 'error', '--session', sid).json.length, 0);
    assert.ok(admin(m.db, 'logs', '--grep', 'tool=countdown').stdout.includes('tool=countdown'));

    const check = admin(m.db, '--json', 'check');
    assert.equal(check.status, 0, check.stderr);
    assert.equal(check.json.integrity, 'ok');
    assert.equal(check.json.schema_version, check.json.latest_version);
    await client.close();
  });
});

test('session kill: an open SSE GET and a WebSocket end within 1 s; the next POST gets 404', async () => {
  await withMcpd([], {}, async (m) => {
    const { session } = await initSession(m.port);
    const stream = await getStream(m.port, session);
    assert.equal(stream.status, 200);
    let raw = '';
    stream.res.on('data', (d) => (raw += d));
    const getEnded = new Promise((resolve) => stream.res.on('close', resolve));
    const ws = new WebSocket(`ws://127.0.0.1:${m.port}/mcp/ws?session=${session}`, 'mcp');
    await new Promise((resolve) => ws.addEventListener('open', resolve, { once: true }));
    const wsClosed = new Promise((resolve) => ws.addEventListener('close', resolve, { once: true }));

    const t0 = Date.now();
    const kill = admin(m.db, 'session', 'kill', session, '--reason', 'operator test');
    assert.equal(kill.status, 0, kill.stderr);
    await withTimeout(getEnded, 2000, 'the GET stream to end');
    assert.match(raw, /^: session ended$/m, `the SSE reader is told why: ${raw}`);
    await withTimeout(wsClosed, 2000, 'the WebSocket to close');
    assert.ok(Date.now() - t0 < 1500, `kill took ${Date.now() - t0} ms`);
    const after = await post(m.port, session, undefined, { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.equal(after.status, 404);
    await sleep(300);
    const logs = admin(m.db, '--json', 'logs', '--session', session, '--grep', 'session_killed');
    assert.equal(logs.json.length, 1);
    assert.match(logs.json[0].event, /operator test/);
    assert.equal(admin(m.db, 'session', 'kill', session).status, 3);
  });
});

test('logs --follow sees a new request within 1 s; backup during load passes check', { skip: sqliteOnly('mcp-admin backup copies the SQLite file, checked with check') }, async () => {
  await withMcpd([], {}, async (m) => {
    const follow = spawn(ADMIN_BIN, ['--db', dbArg(m.db), 'logs', '--follow', '--grep', 'follow-me'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    follow.stdout.on('data', (d) => (out += d));
    try {
      await sleep(500);
      const { session } = await initSession(m.port);
      const t0 = Date.now();
      await post(m.port, session, undefined, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'follow-me', arguments: {} } });
      await waitFor(() => out.includes('tool=follow-me'), 3000, 'the request in logs --follow');
      assert.ok(Date.now() - t0 < 1500, `--follow took ${Date.now() - t0} ms`);
    } finally {
      follow.kill('SIGINT');
    }
    // A backup while clients keep writing: a store of several MB (a copy
    // in steps of 256 pages started over at every write and never ended),
    // and the backup runs beside the load, not with the event loop stopped.
    const big = 'x'.repeat(16000);
    const { session: filler } = await initSession(m.port);
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 40; i++) await post(m.port, filler, undefined, { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'echo', arguments: { message: big } } });
    }));
    let loading = true;
    let during = 0;
    let backingUp = false;
    const load = Promise.all(Array.from({ length: 4 }, async () => {
      const { session } = await initSession(m.port);
      while (loading) {
        await post(m.port, session, undefined, { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'echo', arguments: { message: 'x'.repeat(500) } } });
        if (backingUp) during++;
      }
    }));
    await sleep(300);
    const copy = path.join(path.dirname(m.db), 'backup.db');
    backingUp = true;
    const b = await new Promise((resolve) => {
      const p = spawn(ADMIN_BIN, ['--db', m.db, 'backup', copy], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      p.stderr.on('data', (d) => (stderr += d));
      const timer = setTimeout(() => p.kill('SIGKILL'), 20000);
      p.on('exit', (status, signal) => { clearTimeout(timer); resolve({ status, signal, stderr }); });
    });
    backingUp = false;
    loading = false;
    await load;
    assert.equal(b.status, 0, `the backup ends under load (${b.signal || b.stderr})`);
    assert.ok(during > 0, 'clients kept writing during the backup');
    const check = admin(copy, '--json', 'check');
    assert.equal(check.status, 0, check.stderr);
    assert.equal(check.json.integrity, 'ok');
    assert.equal(admin(m.db, 'backup', copy).status, 1, 'a backup never overwrites');
  });
});

test('missing, corrupt and newer-schema databases: one clear line, exit 1, the file untouched', { skip: sqliteOnly('it damages and inspects SQLite files') }, async () => {
  const { dir } = tempDb();
  const hash = (f) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
  try {
    const missing = admin(path.join(dir, 'none.db'), 'sessions');
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /^mcp-admin: no database at .*none\.db/);
    assert.equal(fs.existsSync(path.join(dir, 'none.db')), false, 'nothing created');

    const corrupt = path.join(dir, 'corrupt.db');
    fs.writeFileSync(corrupt, Buffer.alloc(8192, 0x5a));
    const before = hash(corrupt);
    for (const cmd of [['sessions'], ['tokens', 'add', 'x'], ['check']]) {
      const r = admin(corrupt, ...cmd);
      assert.equal(r.status, 1, `${cmd}: ${r.stderr}`);
      assert.match(r.stderr, /^mcp-admin: .*not an mcpd database/);
      assert.equal(r.stderr.trim().split('\n').length, 1);
    }
    assert.equal(hash(corrupt), before);

    const newer = path.join(dir, 'newer.db');
    const d = new DatabaseSync(newer);
    d.exec('CREATE TABLE t(x); PRAGMA user_version = 999;');
    d.close();
    const before2 = hash(newer);
    const r = admin(newer, 'tokens', 'add', 'x');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /schema version 999; this mcp-admin knows up to \d+/);
    assert.equal(hash(newer), before2);
    assert.equal(admin(newer, 'bogus-command').status, 2);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('--max-sessions-per-principal: a token past its share gets 429; other tokens are not affected', async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token', '--max-sessions-per-principal', '2'], { db, dir }, async (m) => {
    const a = addToken(db, 'hog');
    const b = addToken(db, 'other');
    const s1 = await initWith(m.port, a);
    await initWith(m.port, a);
    const third = await request(m.port, {
      headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(a) },
      body: { jsonrpc: '2.0', id: 7, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } } },
    });
    assert.equal(third.status, 429, third.text);
    assert.equal(third.json.error.code, -32010);
    assert.match(third.json.error.message, /--max-sessions-per-principal/);
    await initWith(m.port, b); // another token still gets a session
    const del = await request(m.port, { method: 'DELETE', headers: { ...mcpHeaders({ session: s1 }), ...bearer(a) } });
    assert.equal(del.status, 200);
    await initWith(m.port, a); // a place freed
  });
});

test('--bootstrap-token-file: the provisioned token works and is listed; a missing file stops mcpd with one line', async () => {
  const { db, dir } = tempDb();
  const file = path.join(dir, 'bootstrap.token');
  fs.writeFileSync(file, '  bootstrap-secret-0123456789abcdef\n');
  await withMcpd(['--auth', 'token', '--bootstrap-token-file', file], { db, dir }, async (m) => {
    const session = await initWith(m.port, 'bootstrap-secret-0123456789abcdef');
    assert.ok(session);
    const list = admin(db, '--json', 'tokens', 'list');
    assert.ok(list.json.some((t) => t.name === 'bootstrap'), list.stdout);
    // the whole file on SQLite; the rows that could hold it on PostgreSQL
    const leaked = ON_POSTGRES
      ? Number(queryStore(db, 'SELECT (SELECT count(*) FROM tokens t WHERE t::text LIKE ?) + (SELECT count(*) FROM logs l WHERE l::text LIKE ?) + (SELECT count(*) FROM sessions s WHERE s::text LIKE ?) AS n', ...Array(3).fill('%bootstrap-secret%'))[0].n) > 0
      : fs.readFileSync(db).includes('bootstrap-secret');
    assert.ok(!leaked, 'only the hash is stored');
  });
  const r = spawnSync(MCPD_BIN, ['--listen', '127.0.0.1:0', '--db', path.join(dir, 'x.db'), '--auth', 'token', '--bootstrap-token-file', path.join(dir, 'none')], { encoding: 'utf8', timeout: 10000 });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /--bootstrap-token-file .*none: No such file/);
});

test('session kill with --upstream: the session\'s child is stopped', async () => {
  const hostile = path.join(path.dirname(new URL(import.meta.url).pathname), 'fixtures', 'hostile-upstream.py');
  await withMcpd(['--upstream', `python3 ${hostile}`], { stopMs: 15000 }, async (m) => {
    const { session } = await initSession(m.port);
    await waitFor(() => procChildren(m.pid).length === 1, 5000, 'the upstream child');
    assert.equal(admin(m.db, 'session', 'kill', session).status, 0);
    await waitFor(() => procChildren(m.pid).length === 0, 5000, 'the child to be stopped');
    assert.equal((await post(m.port, session, undefined, { jsonrpc: '2.0', id: 1, method: 'ping' })).status, 404);
  });
});

test('bad option values exit 2 with one line naming them, and change nothing', async () => {
  await withMcpd([], {}, async (m) => {
    const { session } = await initSession(m.port);
    // atoll read these as 0: gc --log-max-rows x trimmed the logs to 0 rows
    for (const [args, want] of [
      [['gc', '--log-max-rows', 'x'], /--log-max-rows/],
      [['logs', '--limit', 'abc'], /--limit/],
      [['sessions', '--bogus'], /unknown option '--bogus'/],
      [['chunks', session, '--from'], /--from/],
    ]) {
      const r = admin(m.db, ...args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, want);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
    const logs = admin(m.db, '--json', 'logs');
    assert.equal(logs.status, 0, logs.stderr);
    assert.ok(JSON.parse(logs.stdout).length > 0, 'the logs are still there');
  });
});
