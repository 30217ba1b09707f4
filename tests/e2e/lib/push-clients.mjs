// Minimal clients for mcpd's push transports, for the abuse tests and the
// ping-flood benchmark: they count and match replies without keeping every
// message, so 100,000 requests on one connection cost the client nothing.
//
// - WsClient: Node's own WebSocket on /mcp/ws (subprotocol "mcp").
// - StdioClient: `mcpd --stdio` as a child, NDJSON framing.
// Both offer send(msg), request(msg, ms) → the response, and onMessage hooks.
// pingFlood(client, n, window) keeps `window` pings in flight until n are
// answered. procSample(pid) reads threads, RSS and mappings from /proc.

import { spawn } from 'node:child_process';
import fs from 'node:fs';

import { LATEST, MCPD_BIN, withTimeout } from './mcpd.mjs';

class Replies {
  constructor() {
    this.pending = new Map();
    this.listeners = [];
  }

  deliver(msg) {
    for (const f of this.listeners) f(msg);
    if (msg && msg.id !== undefined && ('result' in msg || 'error' in msg)) {
      const w = this.pending.get(msg.id);
      if (w) {
        this.pending.delete(msg.id);
        w(msg);
      }
    }
  }

  wait(id, ms, what) {
    return withTimeout(new Promise((resolve) => this.pending.set(id, resolve)), ms, what).finally(() =>
      this.pending.delete(id),
    );
  }

  fail(err) {
    for (const [, w] of this.pending) w({ error: { code: 0, message: String(err) } });
    this.pending.clear();
  }
}

const initParams = (name) => ({
  protocolVersion: LATEST,
  capabilities: {},
  clientInfo: { name, version: '0.0.0' },
});

export class WsClient {
  static async open(port, { query = '', ms = 10000 } = {}) {
    const c = new WsClient();
    c.ws = new WebSocket(`ws://127.0.0.1:${port}/mcp/ws${query}`, 'mcp');
    c.replies = new Replies();
    c.closed = new Promise((resolve) => {
      c.ws.addEventListener('close', (ev) => {
        c.closeCode = ev.code;
        c.replies.fail(`closed ${ev.code}`);
        resolve(ev.code);
      });
    });
    c.ws.addEventListener('message', (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch {
        return;
      }
      c.replies.deliver(msg);
    });
    await withTimeout(
      new Promise((resolve, reject) => {
        c.ws.addEventListener('open', resolve, { once: true });
        c.ws.addEventListener('error', () => reject(new Error('WebSocket failed to open')), { once: true });
      }),
      ms,
      'WebSocket open',
    );
    return c;
  }

  send(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  request(msg, ms = 10000) {
    const p = this.replies.wait(msg.id, ms, `ws reply to ${msg.method} ${msg.id}`);
    this.send(msg);
    return p;
  }

  async init() {
    const r = await this.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: initParams('abuse-ws') });
    if (!r.result) throw new Error(`initialize failed: ${JSON.stringify(r)}`);
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    this.session = r.result._meta?.['mcpd/session-id'];
    return r;
  }

  async close() {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close(1000);
    await withTimeout(this.closed, 5000, 'WebSocket close').catch(() => {});
  }
}

export class StdioClient {
  constructor({ args = [], env } = {}) {
    this.proc = spawn(MCPD_BIN, ['--stdio', ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: env || process.env });
    this.replies = new Replies();
    this.stderr = '';
    this.buf = '';
    this.proc.stdout.setEncoding('utf8');
    this.proc.stdout.on('data', (d) => {
      this.buf += d;
      let nl;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        if (!line) continue;
        try {
          this.replies.deliver(JSON.parse(line));
        } catch {
          /* not JSON: the tests check stdout carries only JSON-RPC elsewhere */
        }
      }
    });
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-20000);
    });
    this.proc.stdin.on('error', () => {});
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid() {
    return this.proc.pid;
  }

  send(msg) {
    this.proc.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  request(msg, ms = 10000) {
    const p = this.replies.wait(msg.id, ms, `stdio reply to ${msg.method} ${msg.id}`);
    this.send(msg);
    return p;
  }

  async init() {
    const r = await this.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: initParams('abuse-stdio') });
    if (!r.result) throw new Error(`initialize failed: ${JSON.stringify(r)}\n${this.stderr}`);
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r;
  }

  async close() {
    this.proc.stdin.end();
    try {
      return await withTimeout(this.exited, 10000, 'mcpd --stdio exit at EOF');
    } catch (e) {
      this.proc.kill('SIGKILL');
      await this.exited;
      throw e;
    }
  }
}

/**
 * Sends n pings on one connection, `window` in flight at a time, and checks
 * every one is answered with a result. `onProgress(done)` runs every
 * `every` answers. Resolves {n, ms}.
 */
export async function pingFlood(client, n, { window = 128, ms = 600000, every = 0, onProgress, prefix = 'p' } = {}) {
  const started = Date.now();
  let sent = 0;
  let done = 0;
  let bad = null;
  await withTimeout(
    new Promise((resolve, reject) => {
      const pump = () => {
        while (sent < n && sent - done < window) {
          const id = `${prefix}${sent++}`;
          client.request({ jsonrpc: '2.0', id, method: 'ping' }, ms).then(
            (r) => {
              if (!r.result && !bad) bad = new Error(`ping ${id}: ${JSON.stringify(r)}`);
              done++;
              if (every && onProgress && done % every === 0) onProgress(done);
              if (bad) reject(bad);
              else if (done === n) resolve();
              else pump();
            },
            (e) => reject(e),
          );
        }
      };
      pump();
    }),
    ms,
    `${n} pings`,
  );
  return { n, ms: Date.now() - started };
}

/** {threads, rssKb, maps, fds} of a live process, from /proc. */
export function procSample(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const num = (re) => Number((re.exec(status) || [])[1]);
  const maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n').length - 1;
  return {
    threads: num(/^Threads:\s+(\d+)/m),
    rssKb: num(/^VmRSS:\s+(\d+)/m),
    maps,
    fds: fs.readdirSync(`/proc/${pid}/fd`).length,
  };
}

/** ASAN_OPTIONS with a small quarantine, so RSS measures mcpd and not ASan's freed-memory cache. */
export function smallQuarantineEnv() {
  const base = process.env.ASAN_OPTIONS ? `${process.env.ASAN_OPTIONS}:` : '';
  return { ...process.env, ASAN_OPTIONS: `${base}quarantine_size_mb=4:thread_local_quarantine_size_kb=64` };
}
