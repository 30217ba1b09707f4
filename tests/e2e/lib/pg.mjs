// A throwaway PostgreSQL server for the end-to-end tests (node:test).
//
// What it is for: the tests that run mcpd on PostgreSQL (MCPD_TEST_DB=postgres,
// the replica tests) need a real server. This module starts one per test
// process, lazily, the first time a database is asked for: tests/pg/pg-server.sh
// (Debian's postgresql-15, initdb in a temporary folder, loopback only) on a
// free loopback port. freshDatabase() then creates a new empty database on it
// (CREATE DATABASE through psql) and returns its URL; every test gets its own,
// so nothing leaks between tests and mcpd applies its migrations on an empty
// database as it would in production.
//
// How it works: everything is synchronous (spawnSync), so that a test helper
// that is not async (mcpAdmin, a token seeded before mcpd starts) can ask for
// a database too. The server is stopped and its folder removed when the
// process exits, also after an uncaught failure, and on SIGINT/SIGTERM/SIGHUP
// (then the process exits with 128+signal, unless the program handles that
// signal itself). stopServer(), startServer() and
// killServer() are for fault tests: the same data folder and the same port,
// so the URLs handed out stay valid across a restart.
//
// MCPD_TEST_PG_URL=postgres://… uses a server that is already running
// instead (its user must be allowed to CREATE DATABASE); the fault helpers
// refuse then, since the server is not ours to stop.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const PG_SERVER = path.resolve(here, '..', '..', 'pg', 'pg-server.sh');

const external = process.env.MCPD_TEST_PG_URL || '';

let server = null; // {dir, port, url} once started by us
let running = false;
let seq = 0;
let hooked = false;

/** A port free on 127.0.0.1 (../../free-port.mjs: below the ephemeral range), asked of a short child to stay synchronous. */
function freePortSync() {
  const r = spawnSync(process.execPath, [new URL('../../free-port.mjs', import.meta.url).pathname], {
    encoding: 'utf8',
    timeout: 10000,
  });
  const port = Number(r.stdout);
  if (!port) throw new Error(`pg: no free port: ${r.stderr}`);
  return port;
}

function script(...args) {
  const r = spawnSync('bash', [PG_SERVER, ...args], { encoding: 'utf8', timeout: 60000 });
  return { status: r.status, stdout: (r.stdout || '').trim(), stderr: r.stderr || String(r.error || '') };
}

function cleanupAtExit() {
  if (!server) return;
  thawServer();
  if (running) script('stop', server.dir);
  running = false;
  fs.rmSync(server.dir, { recursive: true, force: true });
  server = null;
}

function hookExit() {
  if (hooked) return;
  hooked = true;
  process.on('exit', cleanupAtExit);
  for (const [sig, n] of [['SIGINT', 2], ['SIGTERM', 15], ['SIGHUP', 1]]) {
    // A program that handles the signal itself (cluster-serve.mjs stops
    // its replicas first) exits in its own time; the exit hook then stops
    // the server. Otherwise the signal ends the process here.
    process.on(sig, () => {
      if (process.listenerCount(sig) > 1) return;
      cleanupAtExit();
      process.exit(128 + n);
    });
  }
}

/** Start (first call: initdb) the server; no-op if it is running. Returns its admin URL. */
export function startServer() {
  if (external) return external;
  if (!server) {
    hookExit();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpd-pg-'));
    server = { dir, port: freePortSync(), url: null };
  }
  if (running) return server.url;
  // After a SIGKILL the old backends may hold the shared memory for a
  // moment: pg_ctl start then fails; try again for up to 10 s.
  const deadline = Date.now() + 10000;
  for (;;) {
    const r = script('start', server.dir, String(server.port));
    if (r.status === 0) {
      server.url = r.stdout.split('\n').pop();
      running = true;
      return server.url;
    }
    if (Date.now() > deadline) throw new Error(`pg: server did not start:\n${r.stderr}`);
    spawnSync('sleep', ['0.2']);
  }
}

/** Fast shutdown (pg_ctl stop -m fast): clients are disconnected, nothing committed is lost. */
export function stopServer() {
  if (external) throw new Error('pg: MCPD_TEST_PG_URL names a server that is not ours to stop');
  if (!server || !running) return;
  const r = script('stop', server.dir);
  if (r.status !== 0) throw new Error(`pg: stop failed:\n${r.stderr}`);
  running = false;
}

/** SIGKILL the postmaster (a crash); startServer() brings it back with crash recovery. */
export function killServer() {
  if (external) throw new Error('pg: MCPD_TEST_PG_URL names a server that is not ours to kill');
  if (!server || !running) return;
  const r = script('kill', server.dir);
  if (r.status !== 0) throw new Error(`pg: kill failed:\n${r.stderr}`);
  running = false;
}

/** The postmaster and its children (every backend), as pids. */
function serverPids() {
  const head = Number(fs.readFileSync(path.join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const pids = [head];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces, so after its ')'.
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === head) pids.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return pids;
}

let frozen = [];

/**
 * SIGSTOP the postmaster and every backend: the server stops answering
 * without closing a connection (the kernel still accepts and acknowledges),
 * as a frozen host does. thawServer() lets it go on.
 */
export function freezeServer() {
  if (external) throw new Error('pg: MCPD_TEST_PG_URL names a server that is not ours to freeze');
  if (!server || !running) return;
  frozen = serverPids();
  for (const pid of frozen) process.kill(pid, 'SIGSTOP');
}

/** SIGCONT what freezeServer() stopped. */
export function thawServer() {
  for (const pid of frozen) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      /* gone */
    }
  }
  frozen = [];
}

/** The server's admin URL (postgres://mcpd@127.0.0.1:PORT/postgres), starting it if needed. */
export function serverUrl() {
  return startServer();
}

/** {dir, port} of our server (undefined with MCPD_TEST_PG_URL). */
export function serverInfo() {
  return server ? { dir: server.dir, port: server.port, running } : undefined;
}

/** The URL `base` with its database name replaced by `name`. */
function withDatabase(base, name) {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

/** psql on `url` running `sql`; throws with psql's stderr on failure. Returns stdout (unaligned, tuples only). */
export function psql(url, sql) {
  const r = spawnSync('psql', [url, '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql], {
    encoding: 'utf8',
    timeout: 30000,
  });
  if (r.status !== 0) throw new Error(`psql ${sql}: ${r.stderr || r.error}`);
  return r.stdout.trim();
}

/** A new empty database on the server (started if needed): its connection URL. */
export function freshDatabase(prefix = 't') {
  const admin = startServer();
  const name = `${prefix}_${process.pid}_${Date.now().toString(36)}_${++seq}`;
  psql(admin, `CREATE DATABASE "${name}"`);
  return withDatabase(admin, name);
}

/** A node:test skip reason when Debian's PostgreSQL is not installed here, else false. */
export const PG_SKIP = (() => {
  if (external) return false;
  try {
    return fs.readdirSync('/usr/lib/postgresql').some((v) => fs.existsSync(`/usr/lib/postgresql/${v}/bin/postgres`))
      ? false
      : 'PostgreSQL (postgresql-15) is not installed';
  } catch {
    return 'PostgreSQL (postgresql-15) is not installed';
  }
})();
