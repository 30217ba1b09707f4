// Issue 31, defects 4 to 6: what mcp-admin prints, what --bootstrap-token-file
// may change, and who may read the files mcpd and mcp-admin write.
//   - escapes: a session whose clientInfo, capabilities, request id and
//     messages hold terminal controls (ESC sequences, BEL, C1 CSI, DEL, a
//     bidi override), and requests whose Mcp-Session-Id header holds them,
//     or is cut mid-character by the request log; every mcp-admin command
//     that shows them prints no byte a terminal acts on, and its --json
//     parses back to the exact strings;
//   - bootstrap: a revoked bootstrap token stays revoked across restarts
//     with the same file, a `bootstrap` token made with mcp-admin is not
//     replaced, a changed file is not applied, each with a warning line
//     that does not hold the token;
//   - modes: under umask 022 the database, its -wal and -shm, a new data
//     folder and a backup are owner-only; a database left 0644 by an older
//     mcpd is narrowed, with a warning.
// Every process this file signals is one it started.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';

import {
  ACCEPT_BOTH,
  LATEST,
  initSession,
  mcpHeaders,
  request,
  rpc,
  sleep,
  startMcpd,
  tempDb,
  waitFor,
  withMcpd,
  mcpAdmin,
  sqliteOnly,
} from './lib/mcpd.mjs';

const admin = mcpAdmin;

/**
 * The bytes in out a terminal would act on, as "offset: hex" strings: C0
 * controls but \n (and \t where the format uses it), DEL, C1 (C2 80..C2
 * 9F), bidi embeddings, overrides, isolates and marks, line and paragraph
 * separators, and bytes that are not UTF-8.
 */
function terminalHazards(out, { tab = false } = {}) {
  const bad = [];
  for (let i = 0; i < out.length; i++) {
    const b = out[i];
    if ((b < 0x20 && b !== 0x0a && !(tab && b === 0x09)) || b === 0x7f) bad.push(`${i}: ${b.toString(16)}`);
    if (b === 0xc2 && out[i + 1] >= 0x80 && out[i + 1] <= 0x9f) bad.push(`${i}: c2${out[i + 1].toString(16)}`);
  }
  const text = out.toString('utf8');
  if (Buffer.compare(Buffer.from(text, 'utf8'), out) !== 0) bad.push('not UTF-8');
  const m = text.match(/[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu);
  if (m) bad.push(...m.map((c) => `U+${c.codePointAt(0).toString(16)}`));
  return bad;
}

function assertSafe(r, what, opts) {
  assert.equal(r.status, 0, `${what}: ${r.stderr}`);
  const bad = terminalHazards(r.out, opts);
  assert.deepEqual(bad, [], `${what} printed terminal controls: ${JSON.stringify(r.out.toString('latin1'))}`);
  assert.deepEqual(terminalHazards(Buffer.from(r.stderr)), [], `${what} stderr`);
}

// Terminal controls a client can send: set the window title, clear the
// screen, BEL, C1 CSI (U+009B), DEL, a right-to-left override.
const NAME = '\u001b]0;pwned\u0007\u001b[2J';
const VERSION = '1.0\u009b31m\u007f\u202egnp.exe';
const CAP_KEY = 'x\u001b[5m\u2066';
const REQUEST_ID = 'id\u001b[1A\u009b2K';
const MESSAGE = 'hello\u001b[8m\u202e\u0085';
// Header values are bytes: these are a title sequence, BEL, C1 CSI, DEL and
// an RLO, all valid UTF-8 so that --json can give them back exactly; and a
// value of 40 two-byte characters, which the request log cuts mid-character.
const HEADER_SID = '\u001b]0;hdr\u0007\u009b2J\u007f\u202e';
const CUT_SID = 'é'.repeat(40);

/** One POST on a raw socket, so that the header can carry any byte. */
function rawPost(port, sid, body) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    const t = setTimeout(() => s.destroy(new Error('raw POST timed out')), 10000);
    s.setEncoding('latin1');
    s.on('data', (d) => (text += d));
    s.on('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
    s.on('close', () => {
      clearTimeout(t);
      resolve(text);
    });
    const payload = Buffer.from(JSON.stringify(body));
    s.write(
      Buffer.concat([
        Buffer.from(
          `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAccept: ${ACCEPT_BOTH}\r\n` +
            `MCP-Protocol-Version: ${LATEST}\r\nMcp-Session-Id: `,
        ),
        Buffer.from(sid, 'utf8'),
        Buffer.from(`\r\nContent-Length: ${payload.length}\r\nConnection: close\r\n\r\n`),
        payload,
      ]),
    );
  });
}

test('mcp-admin: client-supplied text reaches the terminal escaped in every command; --json gives it back exactly', { skip: sqliteOnly('it writes hostile rows into the SQLite file with node:sqlite') }, async () => {
  await withMcpd([], {}, async (m) => {
    const init = await rpc(
      m.port,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: LATEST, capabilities: { experimental: { [CAP_KEY]: { v: NAME } } }, clientInfo: { name: NAME, version: VERSION } },
      },
      { version: null },
    );
    assert.equal(init.status, 200);
    const sid = init.headers['mcp-session-id'];
    const note = await request(m.port, { headers: mcpHeaders({ session: sid }), body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
    assert.equal(note.status, 202);
    const call = await rpc(m.port, { jsonrpc: '2.0', id: REQUEST_ID, method: 'tools/call', params: { name: 'echo', arguments: { message: MESSAGE } } }, { session: sid });
    assert.equal(call.status, 200);
    assert.equal(call.messages.at(-1).result.content[0].text, MESSAGE);
    for (const hostile of [HEADER_SID, CUT_SID]) {
      const reply = await rawPost(m.port, hostile, { jsonrpc: '2.0', id: 2, method: 'ping' });
      assert.match(reply, /^HTTP\/1\.1 404 /, reply);
    }
    await sleep(300); // log rows are committed asynchronously

    // --json: the exact strings, and nothing a terminal acts on either.
    const sessions = admin(m.db, '--json', 'sessions', '--all');
    assertSafe(sessions, 'sessions --json');
    const mine = sessions.json.find((s) => s.id === sid);
    assert.equal(mine.client_name, NAME);
    assert.equal(mine.client_version, VERSION);
    const show = admin(m.db, '--json', 'session', 'show', sid);
    assertSafe(show, 'session show --json');
    assert.deepEqual(show.json.init_params.clientInfo, { name: NAME, version: VERSION });
    assert.deepEqual(show.json.capabilities.experimental, { [CAP_KEY]: { v: NAME } });
    const streams = admin(m.db, '--json', 'streams', sid);
    assertSafe(streams, 'streams --json');
    const req = streams.json.find((s) => s.kind === 'request' && s.request_id !== '1');
    assert.ok(req, streams.stdout);
    assert.equal(JSON.parse(req.request_id), REQUEST_ID, 'the stored id is the JSON-RPC id as JSON');
    const chunks = admin(m.db, '--json', 'chunks', req.id);
    assertSafe(chunks, 'chunks --json');
    const last = JSON.parse(chunks.stdout.trim().split('\n').at(-1));
    assert.equal(JSON.parse(last.message).result.content[0].text, MESSAGE);
    // Rows as the database holds them, read beside mcpd: the header
    // values, and rows written here with hostile text and with bytes that
    // are not UTF-8 (the request log keeps 63 bytes of a header, so a
    // value can end mid-character).
    const raw = new DatabaseSync(m.db);
    raw.exec('PRAGMA busy_timeout = 5000');
    raw.prepare('INSERT INTO logs(ts_ms, level, session_id, event) VALUES(?, ?, ?, ?)').run(Date.now(), 'warn', HEADER_SID, `upstream_stderr ${NAME}${VERSION}`);
    raw.exec(`INSERT INTO logs(ts_ms, level, session_id, event) VALUES(${Date.now()}, 'warn', CAST(X'c3a9c3' AS TEXT), CAST(X'6869ff1b5b324a' AS TEXT))`);
    const stored = new Map(raw.prepare('SELECT id, session_id, event FROM logs').all().map((r) => [r.id, r]));
    raw.close();
    const logs = admin(m.db, '--json', 'logs');
    assertSafe(logs, 'logs --json');
    const listed = new Map(logs.json.map((l) => [l.id, l]));
    for (const [id, row] of stored) {
      // Not UTF-8: each stray byte as U+FFFD (as node:sqlite reads it),
      // not a row without its column.
      assert.ok(listed.has(id), `row ${id} is listed`);
      assert.equal(listed.get(id).session_id, row.session_id, `row ${id}`);
      assert.equal(listed.get(id).event, row.event, `row ${id}`);
    }
    assert.ok(logs.json.some((l) => l.session_id === 'é\ufffd' && l.event === 'hi\ufffd\u001b[2J'), logs.stdout);
    assert.ok(logs.json.some((l) => l.session_id === HEADER_SID), logs.stdout);
    assertSafe(admin(m.db, '--json', 'logs', '--session', HEADER_SID), 'logs --session --json');
    assertSafe(admin(m.db, '--json', 'stats'), 'stats --json');

    // Human output: escaped, and still readable.
    const table = admin(m.db, 'sessions', '--all');
    assertSafe(table, 'sessions');
    assert.ok(table.stdout.includes('\\x1b]0;pwned\\x07\\x1b[2J'), table.stdout);
    const text = admin(m.db, 'session', 'show', sid);
    assertSafe(text, 'session show');
    assert.ok(text.stdout.includes('client      \\x1b]0;pwned\\x07\\x1b[2J 1.0\\u009b31m\\x7f\\u202egnp.exe\n'), text.stdout);
    assertSafe(admin(m.db, 'streams', sid), 'streams');
    assertSafe(admin(m.db, 'chunks', req.id), 'chunks', { tab: true });
    const lines = admin(m.db, 'logs');
    assertSafe(lines, 'logs');
    assert.ok(lines.stdout.includes('\\x1b]0;hdr\\x07\\u009b2J\\x7f\\u202e upstream_stderr \\x1b]0;pwned'), lines.stdout);
    assertSafe(admin(m.db, 'logs', '--session', HEADER_SID), 'logs --session');
    assertSafe(admin(m.db, 'stats'), 'stats');
    // An unknown session named by the operator's own argument: the error.
    const missing = admin(m.db, 'session', 'show', 'nope');
    assert.equal(missing.status, 3);
  });
});

test('--bootstrap-token-file: a revoked bootstrap token stays revoked across restarts; an existing one is never replaced', async () => {
  const { db, dir } = tempDb();
  const file = path.join(dir, 'bootstrap.token');
  const first = 'bootstrap-secret-0123456789abcdef';
  fs.writeFileSync(file, `${first}\n`);
  // A ping without a session: 400 once the token is admitted, else 401.
  const ping = async (m, token) =>
    (await request(m.port, { headers: { ...mcpHeaders(), Authorization: `Bearer ${token}` }, body: { jsonrpc: '2.0', id: 1, method: 'ping' } })).status;
  const ADMITTED = 400;
  const m = await startMcpd({ args: ['--auth', 'token', '--bootstrap-token-file', file], db, dir });
  try {
    assert.equal(await ping(m, first), ADMITTED);
    await waitFor(() => /event=bootstrap_token_created/.test(m.stderr), 3000, 'the creation logged');

    // A plain restart: the same token, created once, no warning.
    await m.restart();
    assert.equal(await ping(m, first), ADMITTED);
    assert.doesNotMatch(m.stderr, /event=bootstrap_token_/);

    // The file's content changes: not applied, the stored token is kept.
    const second = 'another-secret-fedcba9876543210';
    fs.writeFileSync(file, second);
    await m.restart();
    assert.equal(await ping(m, second), 401);
    assert.equal(await ping(m, first), ADMITTED);
    await waitFor(() => /level=warn .*event=bootstrap_token_differs .*not applied/.test(m.stderr), 3000, 'the warning');
    assert.ok(!m.stderr.includes(second) && !m.stderr.includes(first), 'the warning does not hold a token');

    // Revoked: refused now, and after every restart with the file.
    fs.writeFileSync(file, first);
    const revoke = admin(db, 'tokens', 'revoke', 'bootstrap');
    assert.equal(revoke.status, 0, revoke.stderr);
    await waitFor(async () => (await ping(m, first)) === 401, 3000, '401 after revoke');
    for (let i = 0; i < 2; i++) {
      await m.restart();
      assert.equal(await ping(m, first), 401, `restart ${i + 1} brought the revoked token back`);
      await waitFor(() => /level=warn .*event=bootstrap_token_revoked .*stays revoked/.test(m.stderr), 3000, 'the warning');
      assert.ok(!m.stderr.includes(first), 'the warning does not hold the token');
    }
    const list = admin(db, '--json', 'tokens', 'list');
    const boot = list.json.find((t) => t.name === 'bootstrap');
    assert.ok(boot.revoked_ms > 0, list.stdout);
  } finally {
    await m.cleanup();
  }

  // A token an operator made under the name bootstrap, before mcpd ever
  // read the file: the file does not replace it.
  const other = tempDb();
  const otherFile = path.join(other.dir, 'bootstrap.token');
  fs.writeFileSync(otherFile, first);
  const m2 = await startMcpd({ args: ['--auth', 'token'], db: other.db, dir: other.dir });
  try {
    const made = admin(other.db, 'tokens', 'add', 'bootstrap');
    assert.equal(made.status, 0, made.stderr);
    const operators = made.stdout.trim();
    m2.args = ['--auth', 'token', '--bootstrap-token-file', otherFile];
    await m2.restart();
    assert.equal(await ping(m2, operators), ADMITTED);
    assert.equal(await ping(m2, first), 401);
    await waitFor(() => /level=warn .*event=bootstrap_token_differs/.test(m2.stderr), 3000, 'the warning');
    assert.ok(!m2.stderr.includes(first) && !m2.stderr.includes(operators));
  } finally {
    await m2.cleanup();
  }
});

test('file modes: under umask 022 the database, its -wal and -shm, a new data folder and a backup are owner-only', { skip: sqliteOnly('the modes of the SQLite file, its -wal and -shm') }, async () => {
  const before = process.umask(0o022);
  const { dir } = tempDb();
  const data = path.join(dir, 'data');
  const db = path.join(data, 'mcpd.db');
  const mode = (f) => fs.statSync(f).mode & 0o777;
  let m;
  try {
    m = await startMcpd({ db, dir });
    await initSession(m.port);
    // The -wal and -shm exist while mcpd runs.
    assert.equal(mode(data), 0o700, 'the data folder');
    for (const f of [db, `${db}-wal`, `${db}-shm`]) assert.equal(mode(f), 0o600, `${path.basename(f)} is 0${mode(f).toString(8)}`);
    const backup = path.join(dir, 'backup.db');
    const b = admin(db, 'backup', backup);
    assert.equal(b.status, 0, b.stderr);
    assert.equal(mode(backup), 0o600, `the backup is 0${mode(backup).toString(8)}`);
    assert.equal(admin(backup, '--json', 'check').json.integrity, 'ok');
    // An existing file is never overwritten, nor its mode changed.
    const taken = path.join(dir, 'taken.db');
    fs.writeFileSync(taken, 'keep');
    fs.chmodSync(taken, 0o644);
    assert.equal(admin(db, 'backup', taken).status, 1);
    assert.equal(fs.readFileSync(taken, 'utf8'), 'keep');
    assert.equal(mode(taken), 0o644);

    // A database an older mcpd left 0644, with its -wal and -shm (killed,
    // so they stay): narrowed at the next start, with a warning each.
    await m.stop('SIGKILL');
    for (const f of [db, `${db}-wal`, `${db}-shm`]) fs.chmodSync(f, 0o644);
    await m.restart();
    await initSession(m.port);
    for (const f of [db, `${db}-wal`, `${db}-shm`]) assert.equal(mode(f), 0o600, `${path.basename(f)} after restart`);
    await waitFor(() => (m.stderr.match(/level=warn .*event=store_file_mode .*mode 644\); narrowed to 600/g) || []).length === 3, 3000, 'three warnings');
  } finally {
    process.umask(before);
    if (m) await m.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
