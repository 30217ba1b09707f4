// Resource limits a single hostile client must not get past (issue 7,
// defects 5 and 12): a request body over --max-body is refused from its
// headers (declared length) or as soon as it passes the limit (chunked),
// without the server reading the rest; sessions past --max-sessions and
// initialize params past --max-init-params are refused with their own status
// and JSON-RPC code, atomically, losing nothing stored. After each case
// another client is served and the database passes PRAGMA integrity_check.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { test } from 'node:test';

import {
  ON_POSTGRES,
  queryStore,
  ACCEPT_BOTH,
  echo,
  initSession,
  mcpHeaders,
  request,
  rpc,
  sleep,
  startMcpd,
  waitFor,
  withTimeout,
  refusals,
} from './lib/mcpd.mjs';

const TOO_MANY_SESSIONS = -32010;
const INIT_PARAMS_TOO_LARGE = -32011;

/** PRAGMA integrity_check through Debian's sqlite3 CLI. */
function assertIntact(db) {
  if (ON_POSTGRES) return; // SQLite's own check; the PostgreSQL run has no file to check
  const r = spawnSync('sqlite3', [db, 'PRAGMA integrity_check;'], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 0, `sqlite3 failed: ${r.stderr}`);
  assert.equal(r.stdout.trim(), 'ok', `integrity_check: ${r.stdout}`);
}

/** A fresh client gets a session and an answer. */
async function anotherClientServed(port) {
  const { session } = await initSession(port);
  assert.equal(await echo(port, session, 'other-client'), 'other-client');
}

function postHead(port, extra) {
  return (
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: ${ACCEPT_BOTH}\r\n` +
    `Content-Type: application/json\r\n${extra}\r\n`
  );
}

/** The JSON body of a raw HTTP response (after the blank line), if whole. */
function rawJson(text) {
  const at = text.indexOf('\r\n\r\n');
  try {
    return at < 0 ? undefined : JSON.parse(text.slice(at + 4));
  } catch {
    return undefined;
  }
}

function assertTooLarge(text, maxBody) {
  assert.match(text, /^HTTP\/1\.1 413 /, `status line: ${text.slice(0, 200)}`);
  assert.match(text, /\r\ncontent-type: application\/json/i, text.slice(0, 300));
  const json = rawJson(text);
  assert.ok(json, `JSON-RPC error body expected: ${text.slice(0, 300)}`);
  assert.equal(json.jsonrpc, '2.0');
  assert.equal(json.id, null);
  assert.equal(json.error.code, -32000);
  assert.equal(json.error.message, `Payload Too Large: the limit is ${maxBody} bytes`);
}

test('a POST declaring 64 MiB gets 413 from its headers alone, and the connection is closed', async () => {
  const maxBody = 1048576;
  const mcpd = await startMcpd({ args: ['--max-body', String(maxBody)] });
  try {
    const before = await refusals(mcpd.port, 'body_too_large');
    const sock = net.connect(mcpd.port, '127.0.0.1');
    let text = '';
    const t0 = Date.now();
    let answeredMs = null;
    const closed = new Promise((resolve) => sock.on('close', resolve));
    sock.on('error', () => {});
    sock.setEncoding('latin1');
    sock.on('data', (d) => {
      text += d;
      if (answeredMs === null && rawJson(text)) answeredMs = Date.now() - t0;
    });
    // Only the headers: a server that waits for the body never answers.
    sock.write(postHead(mcpd.port, 'Content-Length: 67108864\r\n'));
    try {
      await withTimeout(closed, 5000, 'the server closing the connection after its 413');
    } finally {
      sock.destroy();
    }
    assertTooLarge(text, maxBody);
    assert.ok(answeredMs !== null && answeredMs < 2000, `413 after ${answeredMs} ms`);
    assert.match(text, /\r\nconnection: close/i, 'the 413 says the connection closes');
    assert.equal(await refusals(mcpd.port, 'body_too_large'), before + 1);
    await anotherClientServed(mcpd.port);
    assertIntact(mcpd.db);
  } finally {
    await mcpd.cleanup();
  }
});

test('a chunked body is cut off with 413 as soon as it passes --max-body', async () => {
  const maxBody = 262144;
  const cap = 32 * 1048576; // what a server reading to the end would take in
  const mcpd = await startMcpd({ args: ['--max-body', String(maxBody)] });
  try {
    const sock = net.connect(mcpd.port, '127.0.0.1');
    await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
    let text = '';
    let sent = 0;
    let sentAtAnswer = null;
    let gone = false;
    sock.setEncoding('latin1');
    sock.on('data', (d) => {
      text += d;
      if (sentAtAnswer === null && rawJson(text)) sentAtAnswer = sent;
    });
    sock.on('error', () => (gone = true));
    sock.on('close', () => (gone = true));
    const piece = 'x'.repeat(65536);
    const chunk = `${piece.length.toString(16)}\r\n${piece}\r\n`;
    sock.write(postHead(mcpd.port, 'Transfer-Encoding: chunked\r\n'));
    // Never the final 0-chunk: only a refusal mid-body can answer this.
    const deadline = Date.now() + 20000;
    while (sentAtAnswer === null && !gone && sent < cap && Date.now() < deadline) {
      sent += piece.length;
      if (!sock.write(chunk)) {
        await Promise.race([new Promise((r) => sock.once('drain', r)), sleep(200)]);
      } else {
        // The kernel took it all at once (as it does while mcpd drains the
        // refused connection): yield, or the 413 is read only after the loop.
        await new Promise(setImmediate);
      }
    }
    await waitFor(() => gone || rawJson(text), 5000, 'the 413').catch(() => {});
    sock.destroy();
    assert.ok(rawJson(text), `no answer after sending ${sent} bytes of a chunked body: ${text.slice(0, 200)}`);
    assertTooLarge(text, maxBody);
    assert.ok(sentAtAnswer < cap, `413 only after ${sentAtAnswer} bytes`);
    assert.ok(await refusals(mcpd.port, 'body_too_large') >= 1);
    await anotherClientServed(mcpd.port);
    assertIntact(mcpd.db);
  } finally {
    await mcpd.cleanup();
  }
});

function initBody(id, extraParams = {}) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'abuse', version: '1' }, ...extraParams },
  };
}

function initialize(port, id, extraParams) {
  return request(port, { headers: mcpHeaders({ version: null }), body: initBody(id, extraParams), timeout: 10000 });
}

function assertSessionCap(r) {
  assert.equal(r.status, 503, `status ${r.status}: ${r.text}`);
  assert.ok(Number(r.headers['retry-after']) > 0, `Retry-After: ${r.headers['retry-after']}`);
  assert.equal(r.headers['mcp-session-id'], undefined);
  assert.equal(r.json?.error?.code, TOO_MANY_SESSIONS, r.text);
  assert.match(r.json.error.message, /Too many sessions/);
}

test('sessions past --max-sessions are refused atomically; existing ones keep working, across a restart', async () => {
  const mcpd = await startMcpd({ args: ['--max-sessions', '3'] });
  try {
    // Concurrent initializes, as on one keep-alive connection in a loop:
    // exactly the cap succeed.
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => initialize(mcpd.port, i + 1)));
    const ok = replies.filter((r) => r.status === 200);
    assert.equal(ok.length, 3, `statuses: ${replies.map((r) => r.status)}; ${replies.map((r) => r.json?.error?.message ?? 'ok').join(' | ')}`);
    for (const r of replies.filter((x) => x.status !== 200)) assertSessionCap(r);
    assert.equal(await refusals(mcpd.port, 'session_cap'), 7);
    const sessions = ok.map((r) => r.headers['mcp-session-id']);
    for (const s of sessions) assert.equal(await echo(mcpd.port, s, `kept-${s}`), `kept-${s}`);

    // Still capped after a restart: the stored sessions count before they
    // are used again, and they resume.
    await mcpd.restart();
    assertSessionCap(await initialize(mcpd.port, 20));
    assert.equal(await echo(mcpd.port, sessions[0], 'after-restart'), 'after-restart');
    assertSessionCap(await initialize(mcpd.port, 21));

    // A DELETE frees a place for another client.
    const del = await request(mcpd.port, { method: 'DELETE', headers: mcpHeaders({ session: sessions[1] }) });
    assert.equal(del.status, 200);
    await anotherClientServed(mcpd.port);
    assertSessionCap(await initialize(mcpd.port, 22));
    for (const s of [sessions[0], sessions[2]]) assert.equal(await echo(mcpd.port, s), 'still-alive');
    assertIntact(mcpd.db);
  } finally {
    await mcpd.cleanup();
  }
});

test('initialize params over --max-init-params are refused with 413 and store nothing', async () => {
  const mcpd = await startMcpd({ args: ['--max-init-params', '4096', '--max-sessions', '2'] });
  try {
    const { session } = await initSession(mcpd.port);
    for (let i = 0; i < 5; i++) {
      const r = await initialize(mcpd.port, 100 + i, { pad: 'p'.repeat(100000) });
      assert.equal(r.status, 413, `status ${r.status}: ${r.text}`);
      assert.equal(r.headers['mcp-session-id'], undefined);
      assert.equal(r.json?.error?.code, INIT_PARAMS_TOO_LARGE, r.text);
      assert.equal(r.json.error.message, 'initialize params too large: the limit is 4096 bytes');
    }
    assert.equal(await refusals(mcpd.port, 'init_params_too_large'), 5);
    // The refusals took no place: one more session still fits the cap of 2.
    const small = await rpc(mcpd.port, initBody(200, { pad: 'p'.repeat(1000) }), { version: null });
    assert.equal(small.status, 200);
    assert.equal(await echo(mcpd.port, session, 'first-kept'), 'first-kept');
    const [{ count, longest }] = queryStore(mcpd.db, 'SELECT count(*) AS count, max(length(init_params)) AS longest FROM sessions');
    assert.equal(Number(count), 2, `${count} sessions stored`);
    assert.ok(longest <= 4096, `stored init params of ${longest} bytes`);
    assertIntact(mcpd.db);
  } finally {
    await mcpd.cleanup();
  }
});
