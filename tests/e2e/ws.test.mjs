// MCP over WebSocket (/mcp/ws, subprotocol "mcp"):
//   1. the official SDK's WebSocketClientTransport: initialize, tools/list,
//      echo, countdown with progress;
//   2. bad input on a raw socket: binary frame → 1003, oversized message
//      (header checked before the payload is sent) → 1009, invalid UTF-8 →
//      1007, unmasked frame → 1002, a bad handshake → an HTTP error, and a
//      client that never reads while countdown floods it; after each the
//      server still serves other clients;
//   3. reconnect mid-countdown with the session id and the last event id:
//      the rest arrives exactly once, in order;
//   4. SIGKILL mid-countdown, restart on the same db, reconnect: the stored
//      messages after the last id, then the "interrupted by server restart"
//      error, exactly once;
//   5. 2026-07-28 without initialize (lib/stateless-push.mjs), beside 2025.
//
// The raw client (RawWs) speaks RFC 6455 on a net.Socket so that it can
// send frames no WebSocket library would, and read close codes exactly.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';

import { freePort, request, sleep, startMcpd, withTimeout } from './lib/mcpd.mjs';
import { WsClient } from './lib/push-clients.mjs';
import { legacyClient, openSubscription, statelessThenInitialize } from './lib/stateless-push.mjs';

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const OP = { cont: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 };

// ---------------------------------------------------------------- raw client

/** A client frame (masked unless mask === false). */
function frame(op, payload = Buffer.alloc(0), { fin = true, mask = true, rsv = 0, lengthOverride } = {}) {
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const len = lengthOverride ?? BigInt(data.length);
  const head = [(fin ? 0x80 : 0) | ((rsv & 7) << 4) | op];
  const m = mask ? 0x80 : 0;
  let ext = Buffer.alloc(0);
  if (len < 126n) {
    head.push(m | Number(len));
  } else if (len <= 0xffffn) {
    head.push(m | 126);
    ext = Buffer.alloc(2);
    ext.writeUInt16BE(Number(len));
  } else {
    head.push(m | 127);
    ext = Buffer.alloc(8);
    ext.writeBigUInt64BE(len);
  }
  const key = mask ? crypto.randomBytes(4) : Buffer.alloc(0);
  const body = Buffer.from(data);
  if (mask) for (let i = 0; i < body.length; i++) body[i] ^= key[i & 3];
  return Buffer.concat([Buffer.from(head), ext, key, body]);
}

class RawWs {
  /**
   * Opens a WebSocket to /mcp/ws. Resolves a RawWs after a 101, or
   * {status, headers, json, text} when the server refused the handshake.
   */
  static open(port, { path = '/mcp/ws', headers = {}, protocol = 'mcp', ms = 5000, early, http = 'HTTP/1.1', lines = '' } = {}) {
    return new Promise((resolve, reject) => {
      const sock = net.connect(port, '127.0.0.1');
      const key = crypto.randomBytes(16).toString('base64');
      let buf = Buffer.alloc(0);
      let done = false;
      const timer = setTimeout(() => {
        if (done) return;
        done = true;
        sock.destroy();
        reject(new Error(`timeout after ${ms} ms: WebSocket handshake ${path}`));
      }, ms);
      const h = {
        Host: `127.0.0.1:${port}`,
        Upgrade: 'websocket',
        Connection: 'Upgrade',
        'Sec-WebSocket-Key': key,
        'Sec-WebSocket-Version': '13',
        ...(protocol ? { 'Sec-WebSocket-Protocol': protocol } : {}),
        ...headers,
      };
      let req = `GET ${path} ${http}\r\n`;
      for (const [k, v] of Object.entries(h)) if (v !== undefined && v !== null) req += `${k}: ${v}\r\n`;
      req += lines; // raw header lines, e.g. a field repeated
      // `early`: frames sent in the same write as the handshake, before the 101.
      sock.write(early ? Buffer.concat([Buffer.from(req + '\r\n', 'latin1'), early]) : req + '\r\n');
      const onData = (d) => {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
        const status = Number(lines[0].split(' ')[1]);
        const hdrs = {};
        for (const l of lines.slice(1)) {
          const c = l.indexOf(':');
          hdrs[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
        }
        const rest = buf.subarray(end + 4);
        if (status === 101) {
          sock.off('data', onData);
          done = true;
          clearTimeout(timer);
          const want = crypto.createHash('sha1').update(key + WS_GUID).digest('base64');
          resolve(new RawWs(sock, hdrs, rest, want));
          return;
        }
        const clen = Number(hdrs['content-length'] ?? -1);
        if (clen >= 0 && rest.length < clen) return;
        sock.off('data', onData);
        done = true;
        clearTimeout(timer);
        sock.destroy();
        const text = rest.subarray(0, clen >= 0 ? clen : rest.length).toString('utf8');
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status, headers: hdrs, text, json });
      };
      sock.on('data', onData);
      sock.on('error', (e) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  constructor(sock, headers, rest, wantAccept) {
    this.sock = sock;
    this.status = 101;
    this.headers = headers;
    this.acceptOk = headers['sec-websocket-accept'] === wantAccept;
    this.buf = Buffer.alloc(0);
    this.frames = [];
    this.waiters = [];
    this.ended = false;
    this.closeFrame = null; // {code, reason} once the server's close arrives
    this.autoPong = true;
    this.frag = null;
    this.pings = 0;
    this.closedPromise = new Promise((r) => {
      this._closed = r;
    });
    sock.on('data', (d) => this._data(d));
    const end = () => {
      this.ended = true;
      this._closed();
      this._wake();
    };
    sock.on('close', end);
    sock.on('end', end);
    sock.on('error', end);
    if (rest.length) this._data(rest);
  }

  _wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  _data(d) {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0];
      const b1 = this.buf[1];
      if (b1 & 0x80) throw new Error('server frame is masked');
      let len = b1 & 0x7f;
      let at = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        at = 10;
      }
      if (this.buf.length < at + len) return;
      const payload = this.buf.subarray(at, at + len);
      this.buf = this.buf.subarray(at + len);
      const op = b0 & 0x0f;
      const fin = (b0 & 0x80) !== 0;
      if (op === OP.ping) {
        this.pings++;
        if (this.autoPong && !this.sock.destroyed) this.sock.write(frame(OP.pong, payload));
        continue;
      }
      if (op === OP.close) {
        this.closeFrame = {
          code: payload.length >= 2 ? payload.readUInt16BE(0) : 1005,
          reason: payload.subarray(2).toString('utf8'),
        };
        this.frames.push({ op, payload });
        this._wake();
        continue;
      }
      if (op === OP.text && !fin) {
        this.frag = [payload];
        continue;
      }
      if (op === OP.cont) {
        this.frag.push(payload);
        if (!fin) continue;
        this.frames.push({ op: OP.text, payload: Buffer.concat(this.frag) });
        this.frag = null;
        this._wake();
        continue;
      }
      this.frames.push({ op, payload });
      this._wake();
    }
  }

  send(buf) {
    this.sock.write(buf);
  }

  sendJson(msg) {
    this.sock.write(frame(OP.text, JSON.stringify(msg)));
  }

  /** Next data or close frame; null once the socket ended. */
  async nextFrame(ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.frames.length) return this.frames.shift();
      if (this.ended) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timeout after ${ms} ms waiting for a frame`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Next JSON-RPC message (text frame); null at close or end. */
  async next(ms = 5000) {
    for (;;) {
      const f = await this.nextFrame(ms);
      if (!f || f.op === OP.close) return null;
      if (f.op === OP.text) return JSON.parse(f.payload.toString('utf8'));
    }
  }

  /** Messages until the response to `id` (inclusive). */
  async until(id, ms = 10000) {
    const out = [];
    const deadline = Date.now() + ms;
    for (;;) {
      const m = await this.next(Math.max(1, deadline - Date.now()));
      if (m === null) throw new Error(`connection closed before the response to ${id}: ${JSON.stringify(out)}`);
      out.push(m);
      if (m.id === id && ('result' in m || 'error' in m)) return out;
    }
  }

  /** Waits for the server's close frame and the end of the socket. */
  async closed(ms = 5000) {
    await withTimeout(this.closedPromise, ms, 'server closing the WebSocket');
    return this.closeFrame;
  }

  destroy() {
    this.sock.destroy();
  }
}

let nextId = 1;

/** initialize + notifications/initialized on a raw connection. */
async function wsInit(ws, protocolVersion = '2025-06-18') {
  const id = nextId++;
  ws.sendJson({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'mcpd-e2e-ws', version: '0.0.0' } },
  });
  const msgs = await ws.until(id);
  const r = msgs[msgs.length - 1];
  assert.ok(r.result, `initialize failed: ${JSON.stringify(r)}`);
  ws.sendJson({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return r.result;
}

const createdRe = /session=([0-9a-f]{32}) event=session_created/g;

/**
 * initialize on ws and return its session id: from the initialize result's
 * _meta "mcpd/session-id" when the server puts it there, else from the
 * session_created log line that the initialize produced (stderr arrives
 * asynchronously, so wait for it).
 */
async function wsInitSession(ws, mcpd) {
  const before = [...mcpd.stderr.matchAll(createdRe)].length;
  const result = await wsInit(ws);
  const fromMeta = result?._meta?.['mcpd/session-id'];
  if (fromMeta) return fromMeta;
  const deadline = Date.now() + 5000;
  for (;;) {
    const all = [...mcpd.stderr.matchAll(createdRe)];
    if (all.length > before) return all[all.length - 1][1];
    assert.ok(Date.now() < deadline, 'no session id in the initialize result or the log');
    await sleep(20);
  }
}

async function wsCall(ws, name, args, { progressToken, ms = 10000 } = {}) {
  const id = nextId++;
  const params = { name, arguments: args };
  if (progressToken !== undefined) params._meta = { progressToken };
  ws.sendJson({ jsonrpc: '2.0', id, method: 'tools/call', params });
  const msgs = await ws.until(id, ms);
  return { id, msgs, response: msgs[msgs.length - 1] };
}

/** A fresh connection initializes and echoes: the server still serves. */
async function stillServes(mcpd, message = 'still-alive') {
  const h = await request(mcpd.port, { method: 'GET', path: '/healthz' });
  assert.equal(h.status, 200);
  const ws = await RawWs.open(mcpd.port);
  assert.equal(ws.status, 101);
  try {
    await wsInit(ws);
    const { response } = await wsCall(ws, 'echo', { message });
    assert.equal(response.result?.content?.[0]?.text, message);
  } finally {
    ws.destroy();
  }
}

const eventId = (m) => (m.params ?? m.result)?._meta?.['mcpd/event-id'];
const seqOf = (id) => Number(String(id).slice(String(id).lastIndexOf(':') + 1));

// ---------------------------------------------------------------- 1. SDK

test('SDK WebSocketClientTransport: initialize, tools/list, echo, countdown with progress', async () => {
  const mcpd = await startMcpd();
  try {
    const client = new Client({ name: 'mcpd-e2e-ws-sdk', version: '0.0.0' });
    await withTimeout(
      client.connect(new WebSocketClientTransport(new URL(`ws://127.0.0.1:${mcpd.port}/mcp/ws`))),
      5000,
      'SDK connect over WebSocket',
    );
    try {
      assert.ok(client.getServerVersion(), 'server info after initialize');
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      for (const n of ['echo', 'countdown']) assert.ok(names.includes(n), `tools/list lacks ${n}`);

      const r = await client.callTool({ name: 'echo', arguments: { message: 'hi over ws' } });
      assert.deepEqual(r.content, [{ type: 'text', text: 'hi over ws' }]);

      const progress = [];
      const c = await client.callTool({ name: 'countdown', arguments: { n: 5, interval_ms: 50 } }, undefined, {
        onprogress: (p) => progress.push(p),
        timeout: 10000,
      });
      assert.deepEqual(c.content, [{ type: 'text', text: 'countdown finished' }]);
      // The SDK runs notification handlers in a microtask but responses at
      // once, and undici fires every frame of one TCP read in one task: a
      // progress notification that shares a read with the response reaches
      // the SDK after its handler is gone. So the last few may be missing
      // here (the raw-socket tests check that all of them are sent).
      assert.ok(progress.length >= 1, 'progress reached the SDK');
      assert.deepEqual(
        progress.map((p) => [p.progress, p.total]),
        progress.map((_, i) => [i + 1, 5]),
      );
    } finally {
      await client.close();
    }
  } finally {
    await mcpd.cleanup();
  }
});

// ---------------------------------------------------------------- 2. bad input

test('handshake: Host/Origin, Upgrade, version, key and subprotocol are checked before upgrading', async () => {
  const mcpd = await startMcpd();
  try {
    const cases = [
      [{ headers: { Host: 'evil.example' } }, 403, -32000],
      [{ headers: { Origin: 'http://evil.example' } }, 403, -32000],
      [{ headers: { Upgrade: null, Connection: null } }, 426, -32000],
      [{ headers: { 'Sec-WebSocket-Version': '8' } }, 426, -32000],
      [{ headers: { 'Sec-WebSocket-Key': 'short' } }, 400, -32000],
      [{ protocol: null }, 400, -32000],
      [{ protocol: 'graphql-ws' }, 400, -32000],
      [{ path: '/mcp/ws?session=0123456789abcdef0123456789abcdef' }, 404, -32001],
    ];
    for (const [opts, status, code] of cases) {
      const r = await RawWs.open(mcpd.port, opts);
      assert.equal(r.status, status, `${JSON.stringify(opts)} → ${r.status} ${r.text ?? ''}`);
      assert.equal(r.json?.error?.code, code, `${JSON.stringify(opts)} body ${r.text}`);
      assert.equal(r.json?.jsonrpc, '2.0');
    }
    // A handshake needs HTTP/1.1 (RFC 6455 4.1): an answer, not a silent close.
    const old = await RawWs.open(mcpd.port, { http: 'HTTP/1.0' });
    assert.equal(old.status, 400, `HTTP/1.0 → ${old.status} ${old.text ?? ''}`);
    assert.match(old.json?.error?.message ?? '', /HTTP\/1\.1/);
    for (const opts of [{ protocol: 'foo, mcp' }, { protocol: 'foo', lines: 'Sec-WebSocket-Protocol: mcp\r\n' }]) {
      // One list, on one line or on several (RFC 6455 11.3.4, RFC 9110 5.3).
      const ok = await RawWs.open(mcpd.port, opts);
      assert.equal(ok.status, 101, `${JSON.stringify(opts)} → ${ok.status} ${ok.text ?? ''}`);
      assert.ok(ok.acceptOk, 'Sec-WebSocket-Accept is right');
      assert.equal(ok.headers['sec-websocket-protocol'], 'mcp');
      ok.destroy();
    }
    await stillServes(mcpd);
  } finally {
    await mcpd.cleanup();
  }
});

test('bad frames close with the right code, and the server goes on serving', async () => {
  const mcpd = await startMcpd({ args: ['--ws-max-message', '4096'] });
  try {
    const cases = [
      ['binary frame', [frame(OP.binary, Buffer.from([1, 2, 3]))], 1003],
      ['unmasked text frame', [frame(OP.text, '{}', { mask: false })], 1002],
      ['reserved bit', [frame(OP.text, '{}', { rsv: 4 })], 1002],
      ['reserved opcode', [frame(3, 'x')], 1002],
      ['continuation without a start', [frame(OP.cont, 'x')], 1002],
      ['fragmented ping', [frame(OP.ping, 'x', { fin: false })], 1002],
      ['invalid UTF-8 (overlong)', [frame(OP.text, Buffer.from([0x7b, 0xc0, 0xaf, 0x7d]))], 1007],
      ['invalid UTF-8 (surrogate)', [frame(OP.text, Buffer.from([0xed, 0xa0, 0x80]))], 1007],
      [
        'invalid UTF-8 split over fragments',
        [frame(OP.text, Buffer.from([0x22, 0xe2]), { fin: false }), frame(OP.cont, Buffer.from([0x28, 0xa1]))],
        1007,
      ],
      ['oversized message', [frame(OP.text, 'x'.repeat(5000))], 1009],
      [
        'oversized over fragments',
        [frame(OP.text, 'x'.repeat(3000), { fin: false }), frame(OP.cont, 'y'.repeat(3000))],
        1009,
      ],
      // only the header: the length alone decides, no payload is sent
      ['header claiming 2^62 bytes', [frame(OP.text, '', { lengthOverride: 1n << 62n })], 1009],
    ];
    for (const [what, frames, code] of cases) {
      const ws = await RawWs.open(mcpd.port);
      assert.equal(ws.status, 101, what);
      await wsInit(ws);
      for (const f of frames) ws.send(f);
      const close = await ws.closed(5000).catch((e) => assert.fail(`${what}: ${e.message}`));
      assert.ok(close, `${what}: no close frame`);
      assert.equal(close.code, code, `${what}: close ${JSON.stringify(close)}`);
      await stillServes(mcpd, `after ${what}`);
    }

    // a message exactly at the limit is fine
    const ws = await RawWs.open(mcpd.port);
    await wsInit(ws);
    const msg = 'z'.repeat(4096 - 120);
    const body = JSON.stringify({ jsonrpc: '2.0', id: 777, method: 'tools/call', params: { name: 'echo', arguments: { message: msg } } });
    assert.ok(Buffer.byteLength(body) <= 4096);
    ws.send(frame(OP.text, body));
    const r = await ws.until(777);
    assert.equal(r[r.length - 1].result?.content?.[0]?.text, msg);
    // a close from the client is echoed
    ws.send(frame(OP.close, Buffer.from([0x03, 0xe8, 0x62, 0x79, 0x65])));
    const close = await ws.closed(5000);
    assert.equal(close.code, 1000);
    // not JSON: a JSON-RPC error on the connection, which stays open
    const ws2 = await RawWs.open(mcpd.port);
    ws2.send(frame(OP.text, '{not json'));
    const err = await ws2.next();
    assert.equal(err.error?.code, -32700);
    await wsInit(ws2);
    ws2.destroy();
  } finally {
    await mcpd.cleanup();
  }
});

test('a client that never reads does not stop the server; it is closed in the end', async () => {
  const mcpd = await startMcpd({ args: ['--ws-ping-ms', '500'] });
  try {
    const stuck = await RawWs.open(mcpd.port);
    const sid = await wsInitSession(stuck, mcpd);
    stuck.autoPong = false;
    stuck.sock.pause(); // stop reading: the server's writes back up
    const big = 'x'.repeat(60000);
    stuck.sendJson({
      jsonrpc: '2.0',
      id: nextId++,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 30000, interval_ms: 0 }, _meta: { progressToken: 'flood' } },
    });
    for (let i = 0; i < 100; i++) {
      stuck.sendJson({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'echo', arguments: { message: big } } });
    }
    await sleep(500);
    // others are served meanwhile, promptly
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      await stillServes(mcpd, `other client ${i}`);
      assert.ok(Date.now() - t0 < 3000, 'another client is served within 3 s');
    }
    // the stuck connection is given up (write timeout or ping timeout)
    const deadline = Date.now() + 20000;
    const closedRe = new RegExp(`session=${sid} event=ws_closed`);
    while (!closedRe.test(mcpd.stderr)) {
      assert.ok(Date.now() < deadline, `stuck connection still open after 20 s:\n${mcpd.stderr.slice(-2000)}`);
      await sleep(200);
    }
    assert.match(mcpd.stderr, new RegExp(`session=${sid} event=ws_(write|ping)_timeout`));
    // The line says how long the connection lived: more than the 500 ms above.
    const lived = Number(new RegExp(`session=${sid} event=ws_closed msg="[^"]* after (\\d+) ms"`).exec(mcpd.stderr)?.[1]);
    assert.ok(lived >= 500, `ws_closed says how long the connection lived: ${lived}`);
    stuck.destroy();
    await stillServes(mcpd, 'after the stuck client');
  } finally {
    await mcpd.cleanup();
  }
});

// A session stuck on a client that never reads (its writes wait for the
// socket, up to the 10 s write timeout) must not outlive the HTTP server:
// shutdown cuts its socket after the close-frame grace, the session ends
// and hands its socket back to libmicrohttpd first, and mcpd exits 0 (no
// sanitizer report: nothing touches the stopped daemon).
test('SIGTERM while a client never reads: the stuck session ends before the server, exit 0', async () => {
  const mcpd = await startMcpd({ args: ['--ws-ping-ms', '60000', '--shutdown-grace-ms', '500'] });
  try {
    const stuck = await RawWs.open(mcpd.port);
    await wsInitSession(stuck, mcpd);
    stuck.autoPong = false;
    stuck.sock.pause(); // stop reading: the server's writes back up
    const big = 'x'.repeat(60000);
    for (let i = 0; i < 100; i++) {
      stuck.sendJson({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'echo', arguments: { message: big } } });
    }
    await sleep(500);
    const ex = await mcpd.stop('SIGTERM', 15000);
    assert.equal(ex.code, 0, `exit ${JSON.stringify(ex)}:\n${mcpd.stderr.slice(-3000)}`);
    stuck.destroy();
  } finally {
    await mcpd.cleanup();
  }
});

test('keepalive: the server pings; a client that answers stays, one that does not is closed with 1001', async () => {
  const mcpd = await startMcpd({ args: ['--ws-ping-ms', '300'] });
  try {
    const good = await RawWs.open(mcpd.port);
    await wsInit(good);
    const quiet = await RawWs.open(mcpd.port);
    await wsInit(quiet);
    quiet.autoPong = false; // reads, but never answers a ping
    const close = await quiet.closed(5000);
    assert.ok(quiet.pings >= 1, 'pings arrived');
    assert.equal(close?.code, 1001, `close ${JSON.stringify(close)}`);
    assert.ok(good.pings >= 2, `the answering client was pinged too (${good.pings})`);
    assert.equal(good.ended, false, 'the answering client is still connected');
    const { response } = await wsCall(good, 'echo', { message: 'kept alive' });
    assert.equal(response.result?.content?.[0]?.text, 'kept alive');
    // the server also answers the client's pings with the same payload
    good.send(frame(OP.ping, 'abc'));
    let f;
    do f = await good.nextFrame(2000);
    while (f && f.op !== OP.pong);
    assert.equal(f?.payload.toString(), 'abc', 'pong echoes the ping payload');
    good.destroy();
  } finally {
    await mcpd.cleanup();
  }
});

// ---------------------------------------------------------------- 3. resume

test('reconnect mid-countdown with session id and last event id: the rest exactly once, in order', async () => {
  const mcpd = await startMcpd();
  try {
    const ws = await RawWs.open(mcpd.port);
    const sid = await wsInitSession(ws, mcpd);
    const id = nextId++;
    ws.sendJson({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 10, interval_ms: 100 }, _meta: { progressToken: 'r' } },
    });
    const got = [];
    while (got.length < 3) {
      const m = await ws.next(5000);
      assert.ok(m, 'connection open');
      if (m.method === 'notifications/progress') got.push(m);
    }
    assert.deepEqual(got.map((m) => m.params.progress), [1, 2, 3]);
    const last = eventId(got[2]);
    assert.match(last ?? '', /^[0-9a-f]+:\d+$/, `event id on messages: ${JSON.stringify(got[2])}`);
    ws.destroy(); // drop it, without a close frame

    await sleep(150);
    const q = `?session=${sid}&last_event_id=${encodeURIComponent(last)}`;
    const ws2 = await RawWs.open(mcpd.port, { path: `/mcp/ws${q}` });
    assert.equal(ws2.status, 101, `resume handshake: ${ws2.status} ${ws2.text ?? ''}`);
    const rest = await ws2.until(id, 10000);
    await sleep(400); // anything duplicated would arrive now
    while (ws2.frames.length) {
      const m = await ws2.next(100);
      if (m) rest.push(m);
    }
    const progress = rest.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    assert.deepEqual(progress, [4, 5, 6, 7, 8, 9, 10], `replayed progress: ${JSON.stringify(rest)}`);
    const finals = rest.filter((m) => m.id === id);
    assert.equal(finals.length, 1, 'exactly one response');
    assert.equal(finals[0].result?.content?.[0]?.text, 'countdown finished');
    const seqs = rest.map(eventId).filter(Boolean).map(seqOf);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'event ids increase');
    assert.equal(seqs[0], seqOf(last) + 1, 'starts right after the last event id');

    // the session still works on the new connection
    const { response } = await wsCall(ws2, 'echo', { message: 'resumed' });
    assert.equal(response.result?.content?.[0]?.text, 'resumed');
    ws2.destroy();

    // the same with headers instead of query parameters
    const ws3 = await RawWs.open(mcpd.port, { headers: { 'Mcp-Session-Id': sid, 'Last-Event-ID': last } });
    assert.equal(ws3.status, 101);
    assert.equal(ws3.headers['mcp-session-id'], sid);
    const again = await ws3.until(id, 10000);
    assert.deepEqual(
      again.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress),
      [4, 5, 6, 7, 8, 9, 10],
      'a stored stream replays the same way twice',
    );
    ws3.destroy();

    // a bad event id is refused before the upgrade
    const bad = await RawWs.open(mcpd.port, { path: `/mcp/ws?session=${sid}&last_event_id=nope:3` });
    assert.equal(bad.status, 400);
  } finally {
    await mcpd.cleanup();
  }
});

test('SIGKILL mid-countdown, restart on the same db, reconnect: stored messages then the restart error, once', async () => {
  const mcpd = await startMcpd();
  try {
    const ws = await RawWs.open(mcpd.port);
    const sid = await wsInitSession(ws, mcpd);
    const id = nextId++;
    ws.sendJson({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 50, interval_ms: 100 }, _meta: { progressToken: 'k' } },
    });
    const got = [];
    while (got.length < 3) {
      const m = await ws.next(5000);
      if (m.method === 'notifications/progress') got.push(m);
    }
    const last = eventId(got[2]);
    await sleep(250);
    mcpd.kill('SIGKILL');
    await mcpd.exited;
    const received = [];
    for (;;) {
      const m = await ws.next(2000).catch(() => null);
      if (!m) break;
      received.push(m);
    }
    ws.destroy();

    await mcpd.restart({ port: await freePort() });
    const q = `?session=${sid}&last_event_id=${encodeURIComponent(last)}`;
    const ws2 = await RawWs.open(mcpd.port, { path: `/mcp/ws${q}` });
    assert.equal(ws2.status, 101, `resume after restart: ${ws2.status} ${ws2.text ?? ''}`);
    const msgs = await ws2.until(id, 10000);
    await sleep(400);
    while (ws2.frames.length) {
      const m = await ws2.next(100);
      if (m) msgs.push(m);
    }
    const final = msgs.filter((m) => m.id === id);
    assert.equal(final.length, 1, `exactly one final message: ${JSON.stringify(msgs)}`);
    assert.equal(final[0].error?.code, -32603);
    assert.match(final[0].error?.message ?? '', /interrupted by server restart/);
    assert.equal(msgs[msgs.length - 1].id, id, 'the error comes last');
    const progress = msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    progress.forEach((p, i) => assert.equal(p, 4 + i, `stored progress in order, once: ${progress}`));
    // everything received before the kill is among what was stored
    const before = received.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    assert.deepEqual(progress.slice(0, before.length), before);
    assert.ok(progress.length < 47, 'the countdown cannot have finished');

    const { response } = await wsCall(ws2, 'echo', { message: 'after restart' });
    assert.equal(response.result?.content?.[0]?.text, 'after restart');
    ws2.destroy();
  } finally {
    await mcpd.cleanup();
  }
});

test('SIGTERM: open WebSocket sessions are closed with 1001 and mcpd exits 0', async () => {
  const mcpd = await startMcpd();
  try {
    const ws = new WebSocket(`ws://127.0.0.1:${mcpd.port}/mcp/ws`, 'mcp');
    await withTimeout(new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = () => reject(new Error('WebSocket did not open'));
    }), 5000, 'WebSocket open');
    const closed = new Promise((resolve) => {
      ws.onclose = (e) => resolve({ code: e.code, reason: e.reason });
    });
    mcpd.kill('SIGTERM');
    const close = await withTimeout(closed, 10000, 'close frame after SIGTERM');
    assert.equal(close.code, 1001, JSON.stringify(close));
    assert.match(close.reason, /shutting down/);
    const exit = await withTimeout(mcpd.exited, 10000, 'mcpd exit');
    assert.equal(exit.code, 0, JSON.stringify(exit));
  } finally {
    await mcpd.cleanup();
  }
});

test('frames sent in the same packet as the handshake are read, not dropped', async () => {
  const mcpd = await startMcpd();
  try {
    const init = {
      jsonrpc: '2.0',
      id: 'early-1',
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'early', version: '0' } },
    };
    const early = Buffer.concat([
      frame(OP.text, JSON.stringify(init)),
      frame(OP.text, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })),
      frame(OP.text, JSON.stringify({ jsonrpc: '2.0', id: 'early-2', method: 'ping' })),
    ]);
    const ws = await RawWs.open(mcpd.port, { early });
    assert.ok(ws instanceof RawWs, `handshake refused: ${JSON.stringify(ws)}`);
    const first = await ws.until('early-1');
    assert.ok(first.at(-1).result?.serverInfo, JSON.stringify(first));
    const second = await ws.until('early-2');
    assert.ok(second.at(-1).result && !second.at(-1).error, JSON.stringify(second));
    ws.destroy();
  } finally {
    await mcpd.stop('SIGTERM', 10000);
    await mcpd.cleanup();
  }
});

// ---------------------------------------------------------------- 2026-07-28

test('2026-07-28 without initialize: server/discover, calls with _meta, input-required, a subscription until cancelled; then initialize picks 2025', async () => {
  const mcpd = await startMcpd();
  try {
    const c = await WsClient.open(mcpd.port);
    try {
      await statelessThenInitialize(c);
    } finally {
      await c.close();
    }
    // A 2025 client, which opens with initialize, on a fresh connection.
    const legacy = await WsClient.open(mcpd.port);
    try {
      await legacyClient(legacy);
    } finally {
      await legacy.close();
    }
    // A subscription left open when its connection closes ends with it.
    const sub = await WsClient.open(mcpd.port);
    await openSubscription(sub);
    await sub.close();
    const loaded = async () => Number(/^mcpd_sessions_loaded (\d+)$/m.exec((await request(mcpd.port, { method: 'GET', path: '/metrics' })).text)[1]);
    const deadline = Date.now() + 5000;
    while ((await loaded()) > 2 && Date.now() < deadline) await sleep(50);
    assert.equal(await loaded(), 2, 'only the two initialized sessions are left');
  } finally {
    const exit = await mcpd.stop('SIGTERM', 10000);
    const stderr = mcpd.stderr;
    await mcpd.cleanup();
    assert.equal(exit?.code, 0, stderr);
    assert.doesNotMatch(stderr, /Sanitizer|runtime error:/);
  }
});

test('a WebSocket session holds its place under --max-connections-per-ip after the upgrade, and gives it back when it closes', async () => {
  // mcpd closes libmicrohttpd's connection right after the 101 (its 32 KiB
  // are freed) and goes on with a duplicate of the socket: the socket must
  // still count, and stop counting when the session ends.
  const mcpd = await startMcpd({ args: ['--max-connections-per-ip', '2', '--request-timeout-ms', '0'] });
  const socks = [];
  try {
    for (let i = 0; i < 2; i++) {
      const c = await WsClient.open(mcpd.port);
      await c.init();
      socks.push(c);
    }
    const over = await request(mcpd.port, { method: 'GET', path: '/healthz' });
    assert.equal(over.status, 429, over.text);
    // both sessions still answer (their sockets outlived libmicrohttpd's connections)
    for (const c of socks) {
      const r = await c.request({ jsonrpc: '2.0', id: 'p', method: 'ping' });
      assert.ok(r.result, JSON.stringify(r));
    }
    await socks.pop().close();
    let ok;
    const deadline = Date.now() + 5000;
    while ((ok = await request(mcpd.port, { method: 'GET', path: '/healthz' })).status !== 200 && Date.now() < deadline)
      await sleep(50);
    assert.equal(ok.status, 200, 'the closed session gave its place back');
    // the place is counted once: with one session open, one more fits, not
    // two (the probe's own connection may still be counted for a moment)
    let c;
    while (!c && Date.now() < deadline + 5000) c = await WsClient.open(mcpd.port).catch(() => sleep(50));
    assert.ok(c, 'a second session fits again');
    await c.init();
    socks.push(c);
    assert.equal((await request(mcpd.port, { method: 'GET', path: '/healthz' })).status, 429);
  } finally {
    for (const c of socks) await c.close();
    await mcpd.stop();
    await mcpd.cleanup();
  }
});
