// mcp-admin against PostgreSQL (issue 30): `--db postgres://…` (or
// MCPD_DB) and every command, on a real PostgreSQL server this file starts
// (tests/pg/pg-server.sh, Debian's postgresql-15, port $ADMIN_PG_PORT or a
// free one), a database per test with the schema of migrations/postgres/.
//   - The same rows in an SQLite file and in a PostgreSQL database (hostile
//     client names, bidi overrides, C1 controls, non-ASCII): every reading
//     command, with every filter, prints the same bytes on both, table and
//     --json alike (stats less the sizes, which are the engines' own).
//   - logs --follow and chunks --follow see new rows on both, and chunks
//     --follow ends with its stream; tokens add/revoke and session kill
//     write the same columns (revoked_ms; deleted_ms + kill_reason).
//   - backup FILE from PostgreSQL: a new SQLite file, 0600, of mcpd's schema
//     at the same version, that mcp-admin reads as it reads PostgreSQL and
//     mcpd serves from; taken while another client commits session, stream
//     and chunk together in a loop, it holds as many of each (one snapshot).
//   - with an mcpd that keeps its store on PostgreSQL (skipped otherwise):
//     its sessions and logs listed, session kill and tokens revoke ending
//     open streams within 1 s.
//   - vacuum, health and check; gc refused (no file made of the URL); an
//     unreachable server, a wrong database, a database without mcpd's
//     schema or of a newer schema version: one line on stderr, exit 1, at
//     once; a password in the URL is never printed.
// Skipped, with the reason, where PostgreSQL is not installed. Every
// process this file signals is one it started.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DatabaseSync } from 'node:sqlite';

import {
  ACCEPT_BOTH,
  ADMIN_BIN,
  freePort,
  MCPD_BIN,
  REPO_ROOT,
  getStream,
  initSession,
  mcpAdmin as admin,
  mcpHeaders,
  request,
  sleep,
  waitFor,
  withMcpd,
  withTimeout,
} from './lib/mcpd.mjs';

const PG_SERVER = path.join(REPO_ROOT, 'tests', 'pg', 'pg-server.sh');
// A free port unless told: run.sh's lanes run this file on two builds at
// once, and a fixed port made the second's server fail to start.
let PORT = Number(process.env.ADMIN_PG_PORT || 0);

function whyNoPostgres() {
  const root = '/usr/lib/postgresql';
  const bins = fs.existsSync(root) ? fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, 'bin', 'postgres'))) : [];
  if (!bins.length) return 'PostgreSQL is not installed (postgresql-15: deploy/install-deps.sh --test)';
  if (spawnSync('psql', ['--version']).status !== 0) return 'psql is not installed (postgresql-client)';
  return null;
}
const SKIP = whyNoPostgres();

/** Whether this mcpd keeps its store on PostgreSQL (its --db help says so). */
function whyNoPgMcpd() {
  const r = spawnSync(MCPD_BIN, ['--help'], { encoding: 'utf8', timeout: 10000 });
  const db = `${r.stdout}${r.stderr}`.split('\n').find((l) => /^\s*--db\b/.test(l)) || '';
  return /postgres/i.test(db) ? null : 'this mcpd keeps no store on PostgreSQL (its --help names none for --db)';
}

let pgDir;
let serverUrl;
let dbCount = 0;

function psql(url, sql) {
  const r = spawnSync('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-At', url], { input: sql, timeout: 30000 });
  assert.equal(r.status, 0, `psql: ${r.stderr}`);
  return r.stdout.toString('utf8').trim();
}

function migrations(dir) {
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), sql: fs.readFileSync(path.join(dir, f), 'utf8') }));
}
const LITE_MIGRATIONS = migrations(path.join(REPO_ROOT, 'migrations'));
const PG_MIGRATIONS = migrations(path.join(REPO_ROOT, 'migrations', 'postgres'));
const LATEST = Math.max(...LITE_MIGRATIONS.map((m) => m.version));

/** A new database on the test server with mcpd's schema: its URL. */
function pgDatabase(version = LATEST) {
  const name = `admin_pg_${process.pid}_${++dbCount}`;
  psql(serverUrl, `CREATE DATABASE ${name}`);
  const url = serverUrl.replace(/\/postgres$/, `/${name}`);
  psql(url, PG_MIGRATIONS.map((m) => m.sql).join('\n;\n'));
  psql(url, `CREATE TABLE mcpd_schema(version INTEGER NOT NULL); INSERT INTO mcpd_schema VALUES (${version});`);
  return url;
}

/** A new SQLite file with mcpd's schema, as mcpd's migrations make it. */
function liteDatabase(dir) {
  const file = path.join(dir, `lite-${++dbCount}.db`);
  const db = new DatabaseSync(file);
  for (const m of LITE_MIGRATIONS) db.exec(m.sql);
  db.exec(`PRAGMA user_version = ${LATEST}`);
  db.close();
  return file;
}

function liteExec(file, sql) {
  const db = new DatabaseSync(file);
  db.exec('PRAGMA busy_timeout = 5000');
  db.exec(sql);
  db.close();
}

// ------------------------------------------------------------ the rows

const T0 = Date.now();
const NAME = '\u001b]0;pwned\u0007\u001b[2J';
const VERSION = '1.0\u009b31m\u007f\u202egnp.exe';
const CAP_KEY = 'x\u001b[5m\u2066';
const MESSAGE = 'hello\u001b[8m\u202e\u0085 héllo ✓';
const q = (s) => (s === null ? 'NULL' : typeof s === 'number' ? String(s) : `'${String(s).replace(/'/g, "''")}'`);
const params = (name, version, caps = {}) => JSON.stringify({ protocolVersion: '2025-11-25', capabilities: caps, clientInfo: { name, version } });

/** The same INSERTs for both engines (standard SQL, literal values). */
function fixtureSql() {
  const rows = [];
  const session = (id, principal, transport, init, created, active, deleted, reason) =>
    rows.push(
      `INSERT INTO sessions(id, protocol_version, init_params, log_level, initialized, created_ms, last_active_ms, deleted_ms, principal, transport, kill_reason) VALUES (${[id, '2025-11-25', init, 'info', 1, created, active, deleted, principal, transport, reason].map(q).join(', ')});`,
    );
  session('s-alice-1', 'alice', 'http', params(NAME, VERSION, { [CAP_KEY]: {}, sampling: {} }), T0 - 7200000, T0 - 600000, null, null);
  session('s-bob-1', 'bob', 'ws', params('bob-cli', '2.0'), T0 - 5 * 3600000, T0 - 3 * 3600000, null, null);
  session('s-alice-2', 'alice', 'sse', params('alice-cli', '0.9'), T0 - 4000000, T0 - 1900000, T0 - 1800000, 'operator\u001b[2J says bye');
  session('s-carol', 'carol', 'stdio', '{"clientInfo":{"name":42}}', T0 - 3 * 86400000, T0 - 2 * 86400000, T0 - 2 * 86400000 + 5000, null);
  session('s-anon', null, 'http', params('anon ✓', '1'), T0 - 300000, T0 - 120000, null, null);
  const stream = (id, sid, kind, req, state, created, ended) =>
    rows.push(`INSERT INTO streams(id, session_id, kind, request_id, state, created_ms, ended_ms) VALUES (${[id, sid, kind, req, state, created, ended].map(q).join(', ')});`);
  stream('st-1a', 's-alice-1', 'request', JSON.stringify('id\u001b[1A\u009b2K'), 'active', T0 - 7000000, null);
  stream('st-1b', 's-alice-1', 'standalone', null, 'ended', T0 - 6900000, T0 - 6000000);
  stream('st-2a', 's-bob-1', 'request', '7', 'ended', T0 - 4 * 3600000, T0 - 4 * 3600000 + 10);
  stream('st-3a', 's-alice-2', 'request', '"x"', 'active', T0 - 3000000, null);
  const chunk = (sid, seq, msg, end, at) => rows.push(`INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) VALUES (${[sid, seq, msg, end, at].map(q).join(', ')});`);
  const reply = (id, text) => JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } });
  chunk('st-1a', 0, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1, message: MESSAGE } }), 0, T0 - 6990000);
  chunk('st-1a', 1, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: NAME } }), 0, T0 - 6980000);
  chunk('st-1a', 2, reply(1, MESSAGE), 1, T0 - 6970000);
  chunk('st-1b', 0, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }), 0, T0 - 6950000);
  chunk('st-2a', 0, reply(7, 'bob ✓'), 1, T0 - 4 * 3600000 + 5);
  chunk('st-3a', 0, reply('x', "it's\ttabbed\r\nand\u2028separated"), 0, T0 - 2999000);
  const log = (ts, level, sid, event) => rows.push(`INSERT INTO logs(ts_ms, level, session_id, event) VALUES (${[ts, level, sid, event].map(q).join(', ')});`);
  log(T0 - 2 * 86400000, 'info', 's-carol', 'session_start transport=stdio');
  log(T0 - 3000000, 'debug', 's-alice-2', 'stream_open st-3a');
  // Requests in the middle of minutes, so the per-minute buckets do not
  // move between two runs a moment apart.
  for (let k = 0; k < 5; k++) log(T0 - 30000 - k * 60000 - 7 * 60000, 'info', k % 2 ? 's-bob-1' : 's-alice-1', `request POST /mcp 200 ${k}`);
  log(T0 - 900000, 'warn', 's-alice-1', `upstream_stderr ${NAME}${VERSION}`);
  log(T0 - 800000, 'warn', null, 'refused rate_limit 127.0.0.1');
  log(T0 - 700000, 'warn', 's-bob-1', 'refused rate_limit 127.0.0.2');
  log(T0 - 650000, 'error', 's-anon', 'store_error disk full');
  log(T0 - 640000, 'warn', 's-anon', ' leading space');
  log(T0 - 630000, 'info', '\u001b]0;hdr\u0007\u009b2J\u007f\u202e', 'request GET /mcp 404');
  const token = (name, hash, note, created, expires, revoked, used) =>
    rows.push(`INSERT INTO tokens(name, hash, note, created_ms, expires_ms, revoked_ms, last_used_ms) VALUES (${[name, hash, note, created, expires, revoked, used].map(q).join(', ')});`);
  token('alice', 'h-alice', `laptop ${NAME}`, T0 - 10 * 86400000, null, null, T0 - 600000);
  token('bob', 'h-bob', null, T0 - 9 * 86400000, T0 - 1000, null, null);
  token('carol', 'h-carol', 'gone', T0 - 8 * 86400000, null, T0 - 86400000, T0 - 2 * 86400000);
  return rows.join('\n');
}

/** An SQLite file and a PostgreSQL database holding the same rows. */
function pair(dir) {
  const lite = liteDatabase(dir);
  const pg = pgDatabase();
  const sql = fixtureSql();
  liteExec(lite, sql);
  psql(pg, sql);
  return { lite, pg };
}

/** The statistics less the sizes, which each engine has of its own. */
function withoutSizes(r, json) {
  if (json) {
    const v = JSON.parse(r.stdout);
    delete v.database_bytes;
    delete v.wal_bytes;
    return JSON.stringify(v, null, 2);
  }
  return r.stdout.replace(/^database .*$/m, 'database (size)');
}

function same(a, b, args, shape = (r) => r.stdout) {
  let x = admin(a, ...args);
  const y = admin(b, ...args);
  // Ages are printed to the second ("9s ago"): when the clock ticks between
  // the two runs, a run of a just after b reads the same second as b did.
  if (shape(y) !== shape(x)) x = admin(a, ...args);
  assert.equal(y.status, x.status, `${args.join(' ')}: status (stderr ${y.stderr})`);
  assert.equal(y.stderr, x.stderr, `${args.join(' ')}: stderr`);
  assert.equal(shape(y), shape(x), `${args.join(' ')}: output`);
  return x;
}

/** Every terminal-moving character escaped in human output. */
function assertSafe(r, what) {
  // eslint-disable-next-line no-control-regex
  assert.doesNotMatch(r.stdout, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u, `${what}: raw control`);
}

describe('mcp-admin on PostgreSQL', { skip: SKIP ? `skipped: ${SKIP}` : false }, () => {
  let tmp;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'admin-pg-files-'));
    // Its own folder, which pg-server.sh hands to the postgres user.
    pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'admin-pg-server-'));
    if (!PORT) PORT = await freePort();
    const r = spawnSync('bash', [PG_SERVER, 'start', pgDir, String(PORT)], { timeout: 60000 });
    assert.equal(r.status, 0, `pg-server start: ${r.stderr}`);
    serverUrl = r.stdout.toString().trim();
  });
  after(() => {
    if (pgDir) spawnSync('bash', [PG_SERVER, 'stop', pgDir], { timeout: 60000 });
    for (const d of [tmp, pgDir]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  test('every reading command prints the same on SQLite and PostgreSQL, table and --json', () => {
    const { lite, pg } = pair(tmp);
    const reads = [
      ['sessions'],
      ['sessions', '--all'],
      ['sessions', '--ended'],
      ['sessions', '--active'],
      ['sessions', '--all', '--principal', 'alice'],
      ['sessions', '--all', '--since', '1h'],
      ['sessions', '--all', '--limit', '2'],
      ['sessions', '--principal', 'nobody'],
      ['session', 'show', 's-alice-1'],
      ['session', 'show', 's-alice-2'],
      ['session', 'show', 's-carol'],
      ['session', 'show', 'nope'],
      ['streams', 's-alice-1'],
      ['streams', 's-bob-1'],
      ['streams', 'nope'],
      ['chunks', 'st-1a'],
      ['chunks', 'st-1a', '--from', '1'],
      ['chunks', 'st-3a'],
      ['logs'],
      ['logs', '--level', 'warn'],
      ['logs', '--level', 'error'],
      ['logs', '--session', 's-alice-1'],
      ['logs', '--principal', 'alice'],
      ['logs', '--grep', 'rate_limit'],
      ['logs', '--since', '10m'],
      ['logs', '--limit', '3'],
      ['logs', '--level', 'info', '--principal', 'bob', '--grep', 'request', '--since', '1h'],
      ['tokens', 'list'],
      ['check'],
    ];
    for (const args of reads) {
      for (const json of [false, true]) {
        const r = same(lite, pg, json ? ['--json', ...args] : args);
        if (!json) assertSafe(r, args.join(' '));
      }
    }
    // The rows are there (not two empty outputs alike).
    const sessions = admin(pg, '--json', 'sessions', '--all').json;
    assert.equal(sessions.length, 5);
    const s1 = sessions.find((s) => s.id === 's-alice-1');
    assert.equal(s1.client_name, NAME);
    assert.equal(s1.client_version, VERSION);
    assert.equal(s1.open_streams, 1);
    assert.equal(s1.stored_bytes, admin(lite, '--json', 'sessions', '--all').json.find((s) => s.id === 's-alice-1').stored_bytes);
    assert.equal(sessions.find((s) => s.id === 's-carol').client_name, 42);
    const show = admin(pg, 'session', 'show', 's-alice-1');
    assert.ok(show.stdout.includes('client      \\x1b]0;pwned\\x07\\x1b[2J 1.0\\u009b31m\\x7f\\u202egnp.exe\n'), show.stdout);
    assert.equal(admin(pg, 'session', 'show', 'nope').status, 3);
    assert.equal(admin(pg, '--json', 'logs', '--level', 'warn').json.length, 5);
    const check = admin(pg, '--json', 'check').json;
    assert.equal(check.integrity, 'ok');
    assert.deepEqual(check.problems, []);
    assert.deepEqual(check.sanity, { chunks_without_stream: 0, streams_without_session: 0 });
    assert.equal(check.schema_version, LATEST);
    assert.ok(check.migrations.every((m) => m.applied));
    // stats: the same but for the engines' own sizes.
    for (const json of [false, true]) same(lite, pg, json ? ['--json', 'stats'] : ['stats'], (r) => withoutSizes(r, json));
    const stats = admin(pg, '--json', 'stats').json;
    assert.equal(stats.wal_bytes, null, 'PostgreSQL has no WAL of its own database');
    assert.ok(stats.database_bytes > 0);
    assert.equal(stats.requests_per_minute.reduce((n, m) => n + m.requests, 0), 6);
    assert.deepEqual(stats.warnings_last_hour.map((w) => [w.reason, w.n]), [['refused', 2], ['', 1], ['store_error', 1], ['upstream_stderr', 1]]);
    // MCPD_DB names the database as --db does.
    const env = spawnSync(ADMIN_BIN, ['--json', 'tokens', 'list'], { env: { ...process.env, MCPD_DB: pg }, timeout: 30000 });
    assert.equal(env.status, 0, env.stderr.toString());
    assert.equal(env.stdout.toString(), admin(lite, '--json', 'tokens', 'list').stdout);
  });

  test('writes: tokens add and revoke, session kill, the same columns and outputs on both', () => {
    const { lite, pg } = pair(tmp);
    for (const db of [lite, pg]) {
      const added = admin(db, '--json', 'tokens', 'add', 'dave', '--note', 'ci', '--expires', '30d');
      assert.equal(added.status, 0, added.stderr);
      assert.match(added.json.token, /^mcpd_[A-Za-z0-9_-]{43}$/);
      const taken = admin(db, 'tokens', 'add', 'alice');
      assert.equal(taken.status, 1);
      assert.equal(taken.stderr, 'mcp-admin: a token named alice exists\n');
    }
    const stamps = (r) => r.stdout.replace(/("(?:created|expires|revoked|ended)_ms": )\d+/g, '$1T');
    same(lite, pg, ['--json', 'tokens', 'list'], stamps);
    same(lite, pg, ['tokens', 'revoke', 'alice']);
    same(lite, pg, ['tokens', 'revoke', 'alice']); // not active any more: 3
    same(lite, pg, ['--json', 'tokens', 'revoke', 'nobody']);
    same(lite, pg, ['session', 'kill', 's-alice-1', '--reason', 'rotating keys']);
    same(lite, pg, ['--json', 'session', 'kill', 's-bob-1']);
    same(lite, pg, ['session', 'kill', 's-alice-1']); // already ended: 3
    same(lite, pg, ['session', 'kill', 'nope']);
    same(lite, pg, ['--json', 'sessions', '--all'], stamps);
    same(lite, pg, ['--json', 'tokens', 'list'], stamps);
    // The columns a running mcpd's kill_watch reads, stamped now.
    const [revoked, ended, reason] = psql(pg, "SELECT (SELECT revoked_ms FROM tokens WHERE name = 'alice'), deleted_ms, kill_reason FROM sessions WHERE id = 's-alice-1'").split('|');
    assert.ok(Math.abs(Number(revoked) - Date.now()) < 60000, revoked);
    assert.ok(Math.abs(Number(ended) - Date.now()) < 60000, ended);
    assert.equal(reason, 'rotating keys');
    assert.equal(psql(pg, "SELECT kill_reason FROM sessions WHERE id = 's-bob-1'"), 'killed by mcp-admin');
    assert.equal(admin(pg, '--json', 'sessions').json.length, 1, 'only s-anon is live');
  });

  test('logs --follow prints a row committed after it started, on both', async () => {
    const { lite, pg } = pair(tmp);
    const outputs = [];
    for (const [db, insert] of [
      [lite, (sql) => liteExec(lite, sql)],
      [pg, (sql) => psql(pg, sql)],
    ]) {
      const proc = spawn(ADMIN_BIN, ['--db', db, 'logs', '--follow', '--level', 'warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      proc.stdout.setEncoding('utf8');
      proc.stdout.on('data', (d) => (out += d));
      const exited = new Promise((r) => proc.on('exit', (code) => r(code)));
      try {
        await waitFor(() => out.split('\n').length > 5, 10000, 'the first rows');
        insert(`INSERT INTO logs(ts_ms, level, session_id, event) VALUES (${T0 + 1000}, 'error', 's-bob-1', 'late \u001b[2J arrival');`);
        await waitFor(() => out.includes('late \\x1b[2J arrival'), 10000, 'the new row');
      } finally {
        proc.kill('SIGINT');
      }
      assert.equal(await exited, 0);
      outputs.push(out);
    }
    assert.equal(outputs[1], outputs[0]);
  });

  test('chunks --follow prints chunks committed after it started and ends with the stream, on both', async () => {
    const { lite, pg } = pair(tmp);
    const outputs = [];
    for (const [db, insert] of [
      [lite, (sql) => liteExec(lite, sql)],
      [pg, (sql) => psql(pg, sql)],
    ]) {
      const proc = spawn(ADMIN_BIN, ['--db', db, '--json', 'chunks', 'st-3a', '--follow'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      proc.stdout.setEncoding('utf8');
      proc.stdout.on('data', (d) => (out += d));
      const exited = new Promise((r) => proc.on('exit', (code) => r(code)));
      try {
        await waitFor(() => out.includes('"seq":0'), 10000, 'the first chunk');
        insert(`INSERT INTO chunks(stream_id, seq, message, is_end, created_ms) VALUES ('st-3a', 1, '{"late":"\u001b"}', 0, ${T0}), ('st-3a', 2, '{}', 1, ${T0});`);
        // The end chunk ends the follow by itself.
        assert.equal(await exited, 0);
      } finally {
        proc.kill('SIGINT');
      }
      assert.equal(out.trim().split('\n').length, 3, out);
      outputs.push(out);
    }
    assert.equal(outputs[1], outputs[0]);
  });

  test('backup from PostgreSQL: an SQLite file, 0600, one snapshot, that mcp-admin and mcpd open', async () => {
    const { lite, pg } = pair(tmp);
    // A writer that commits a session, its stream and a chunk together,
    // over and over, while the backup reads.
    psql(
      pg,
      `CREATE PROCEDURE churn(n int) LANGUAGE plpgsql AS $$
       BEGIN
         FOR i IN 1..n LOOP
           INSERT INTO sessions(id, protocol_version, init_params, created_ms, last_active_ms) VALUES ('churn-' || i, '2025-11-25', '{}', 1, 1);
           INSERT INTO streams(id, session_id, kind, created_ms) VALUES ('churn-' || i, 'churn-' || i, 'request', 1);
           INSERT INTO chunks(stream_id, seq, message, created_ms) VALUES ('churn-' || i, 0, repeat('x', 2000), 1);
           COMMIT;
         END LOOP;
       END $$;`,
    );
    const writer = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', pg, '-c', 'CALL churn(20000)'], { stdio: 'ignore' });
    const writerDone = new Promise((r) => writer.on('exit', (code) => r(code)));
    const file = path.join(tmp, `backup-${dbCount}.db`);
    let r;
    try {
      await waitFor(() => Number(psql(pg, "SELECT COUNT(*) FROM sessions WHERE id LIKE 'churn-%'")) >= 200, 20000, 'the writer under way');
      r = admin(pg, '--json', 'backup', file);
    } finally {
      writer.kill('SIGINT');
      await writerDone;
    }
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.json.backup, file);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const db = new DatabaseSync(file, { readOnly: true });
    const n = (sql) => db.prepare(sql).get().n;
    assert.equal(n('SELECT user_version AS n FROM pragma_user_version'), LATEST);
    const churned = n("SELECT COUNT(*) AS n FROM sessions WHERE id LIKE 'churn-%'");
    assert.ok(churned >= 200, `${churned} churned sessions copied`);
    assert.equal(n("SELECT COUNT(*) AS n FROM streams WHERE id LIKE 'churn-%'"), churned, 'streams of the same snapshot');
    assert.equal(n("SELECT COUNT(*) AS n FROM chunks WHERE stream_id LIKE 'churn-%'"), churned, 'chunks of the same snapshot');
    // The schema is mcpd's SQLite schema, table for table, index for index.
    const schema = (d) => d.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").all();
    const ref = new DatabaseSync(lite, { readOnly: true });
    assert.deepEqual(schema(db), schema(ref));
    ref.close();
    db.close();
    // mcp-admin reads the copy as it reads the original.
    psql(pg, "DELETE FROM sessions WHERE id LIKE 'churn-%'");
    const churnedCopy = path.join(tmp, `copy-${dbCount}.db`);
    fs.copyFileSync(file, churnedCopy);
    liteExec(churnedCopy, "DELETE FROM sessions WHERE id LIKE 'churn-%'");
    for (const args of [['--json', 'sessions', '--all'], ['session', 'show', 's-alice-1'], ['--json', 'logs'], ['--json', 'tokens', 'list'], ['--json', 'check'], ['chunks', 'st-1a']])
      same(pg, churnedCopy, args);
    assert.equal(admin(file, '--json', 'check').json.integrity, 'ok');
    // A backup never overwrites.
    const again = admin(pg, 'backup', file);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /exists: a backup never overwrites a file\n$/);
    // mcpd serves from the copy.
    const served = path.join(tmp, `served-${dbCount}.db`);
    fs.copyFileSync(churnedCopy, served);
    await withMcpd([], { db: served, dir: fs.mkdtempSync(path.join(tmp, 'mcpd-')) }, async (m) => {
      await initSession(m.port);
      assert.equal(admin(served, '--json', 'sessions', '--all').json.length, 6);
    });
  });

  test('a running mcpd on PostgreSQL: sessions, logs, session kill and tokens revoke within 1 s', { skip: whyNoPgMcpd() || false }, async () => {
    // An empty database: mcpd makes the schema.
    const name = `admin_pg_${process.pid}_${++dbCount}`;
    psql(serverUrl, `CREATE DATABASE ${name}`);
    const url = serverUrl.replace(/\/postgres$/, `/${name}`);
    const bearer = (token) => ({ Authorization: `Bearer ${token}` });
    const post = (port, session, token, body) =>
      request(port, { headers: { ...mcpHeaders({ session }), 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token) }, body });
    async function initWith(port, token) {
      const r = await post(port, undefined, token, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: NAME, version: '1.2.3' } } });
      assert.equal(r.status, 200, r.text);
      const session = r.headers['mcp-session-id'];
      assert.equal((await post(port, session, token, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
      return session;
    }
    await withMcpd(['--auth', 'token'], { db: url, dir: fs.mkdtempSync(path.join(tmp, 'mcpd-')) }, async (m) => {
      const add = (who) => {
        const r = admin(url, 'tokens', 'add', who);
        assert.equal(r.status, 0, r.stderr);
        return r.stdout.trim();
      };
      const alice = add('alice');
      const bob = add('bob');
      const killed = await initWith(m.port, alice);
      const listed = admin(url, '--json', 'sessions').json;
      assert.deepEqual(listed.map((s) => [s.id, s.principal, s.client_name]), [[killed, 'alice', NAME]]);
      assert.ok(admin(url, 'session', 'show', killed).stdout.includes('\\x1b]0;pwned'));

      // session kill: the open GET ends within 1 s, the next POST gets 404.
      let stream = await getStream(m.port, killed, { headers: bearer(alice) });
      assert.equal(stream.status, 200);
      let ended = new Promise((resolve) => stream.res.on('close', resolve));
      let t0 = Date.now();
      assert.equal(admin(url, 'session', 'kill', killed, '--reason', 'operator test').status, 0);
      await withTimeout(ended, 3000, 'the killed session\'s stream to end');
      assert.ok(Date.now() - t0 < 1500, `kill took ${Date.now() - t0} ms`);
      assert.equal((await post(m.port, killed, alice, { jsonrpc: '2.0', id: 2, method: 'ping' })).status, 404);
      await sleep(300);
      const logs = admin(url, '--json', 'logs', '--session', killed, '--grep', 'session_killed');
      assert.equal(logs.json.length, 1, logs.stdout);

      // tokens revoke: bob's open GET ends and bob gets 401, within 1 s.
      const session = await initWith(m.port, bob);
      stream = await getStream(m.port, session, { headers: bearer(bob) });
      assert.equal(stream.status, 200);
      ended = new Promise((resolve) => stream.res.on('close', resolve));
      t0 = Date.now();
      assert.equal(admin(url, 'tokens', 'revoke', 'bob').status, 0);
      await withTimeout(ended, 3000, 'the revoked principal\'s stream to end');
      await waitFor(async () => (await post(m.port, undefined, bob, { jsonrpc: '2.0', id: 3, method: 'ping' })).status === 401, 3000, '401 after revoke');
      assert.ok(Date.now() - t0 < 2000, `revocation took ${Date.now() - t0} ms`);
      assert.equal(admin(url, '--json', 'check').json.integrity, 'ok');
    });
  });

  test('vacuum: VACUUM (ANALYZE) of mcpd\'s tables', () => {
    const { pg } = pair(tmp);
    psql(pg, "SELECT pg_stat_reset()");
    const r = admin(pg, 'vacuum');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^vacuumed PostgreSQL database admin_pg_\d+_\d+ at 127\.0\.0\.1:\d+\n$/);
    assert.deepEqual(admin(pg, '--json', 'vacuum').json, { vacuumed: true });
    // health: the database takes writes (not a standby).
    const health = admin(pg, 'health');
    assert.equal(health.status, 0, health.stderr);
    assert.equal(health.stdout, 'healthy\n');
    // Statistics arrive at the collector within moments.
    const analyzed = () => psql(pg, "SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname IN ('sessions', 'streams', 'chunks', 'logs', 'tokens') AND last_analyze IS NOT NULL AND last_vacuum IS NOT NULL");
    return waitFor(() => analyzed() === '5', 5000, 'vacuumed and analyzed');
  });

  test('refusals: unreachable, wrong database, no schema, newer schema: one line, exit 1, at once', () => {
    const bad = [
      ['postgres://mcpd:s3cret-pw@127.0.0.1:1/mcpd', /^mcp-admin: cannot connect to PostgreSQL: .*Connection refused.*\n$/],
      [serverUrl.replace('mcpd@', 'mcpd:s3cret-pw@').replace(/\/postgres$/, '/no_such_db'), /^mcp-admin: cannot connect to PostgreSQL: .*database "no_such_db" does not exist\n$/],
      [`host=127.0.0.1 port=${PORT} user=mcpd dbname=postgres password=s3cret-pw`, /^mcp-admin: PostgreSQL database postgres at 127\.0\.0\.1:\d+ has no mcpd schema \(start mcpd on it once\)\n$/],
      [pgDatabase(LATEST + 1), new RegExp(`^mcp-admin: PostgreSQL database \\S+ at 127\\.0\\.0\\.1:\\d+ has schema version ${LATEST + 1}; this mcp-admin knows up to ${LATEST} \\(upgrade it\\)\\n$`)],
      ['postgres://[nope', /^mcp-admin: cannot connect to PostgreSQL: .*\n$/],
    ];
    for (const [url, want] of bad) {
      for (const args of [['sessions'], ['tokens', 'revoke', 'alice'], ['backup', path.join(tmp, 'never.db')]]) {
        const started = Date.now();
        const r = admin(url, ...args);
        assert.equal(r.status, 1, `${url} ${args[0]}: ${r.stderr}`);
        assert.match(r.stderr, want);
        assert.equal(r.stderr.split('\n').length, 2, 'one line');
        assert.doesNotMatch(r.stderr + r.stdout, /s3cret-pw/);
        assert.ok(Date.now() - started < 10000, `${url}: ${Date.now() - started} ms`);
        assert.ok(!fs.existsSync(path.join(tmp, 'never.db')));
      }
    }
    // gc is the runtime store's purge, which opens SQLite files only: it
    // is refused, and creates no file named after the URL.
    const cwd = fs.mkdtempSync(path.join(tmp, 'gc-'));
    const gc = spawnSync(ADMIN_BIN, ['--db', `${serverUrl}`, 'gc'], { cwd, timeout: 30000 });
    assert.equal(gc.status, 1);
    assert.equal(gc.stderr.toString(), "mcp-admin: gc works on SQLite only; on PostgreSQL mcpd's reaper purges\n");
    assert.deepEqual(fs.readdirSync(cwd), []);
    // An older schema: read, but never written to.
    const older = pgDatabase(LATEST - 1);
    assert.equal(admin(older, 'sessions').status, 0);
    const w = admin(older, 'tokens', 'add', 'x');
    assert.equal(w.status, 1);
    assert.match(w.stderr, /older than this mcp-admin's/);
  });
});
