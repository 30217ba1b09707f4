// A round-robin reverse proxy on loopback, for the replica tests.
//
// What it is for: mcpd replicas must serve any request of any session, so
// the tests put them behind a balancer that has NO stickiness: every new
// HTTP request and every WebSocket upgrade goes to the next replica in turn,
// whatever its session. It records which replica served what, so that a
// test can assert "initialize went to A, tools/call to B, the GET to C".
//
// How it works:
//  - HTTP: the request line and headers (less the hop-by-hop ones) go to the
//    chosen replica on a new TCP connection (no upstream keep-alive, so a
//    killed replica never leaves a stale pooled socket behind). The request
//    body is piped only once that connection is up, so a refused connection
//    (a dead replica) consumed nothing and the request is sent to the next
//    replica instead, as a proxy with health checks would. The response is
//    piped back as it comes (SSE events are flushed at once; chunked bodies
//    stay chunked). If the replica dies mid-response the client's connection
//    is destroyed, as a real proxy does, so the client sees a broken stream
//    and resumes.
//  - WebSocket: the upgrade request is written raw to the replica and the two
//    sockets are piped both ways until either closes.
//  - markDown(i) takes a replica out of the rotation (an active health
//    check's verdict); markUp(i) puts it back. setNext(i) makes replica i the
//    next one chosen, for tests that want a precise order.
//
// log[] holds one entry per request: {n, replica, kind ('http'|'ws'), method,
// path, session (Mcp-Session-Id or ?sessionId=), rpc (the JSON-RPC method(s)
// of a POST body, once read), status, refused (replicas tried first), at}.
// counts[i] is the number of requests replica i served.

import http from 'node:http';
import net from 'node:net';

const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
]);

/** The JSON-RPC method(s) of a body, as a string ("a,b" for a batch), or undefined. */
function rpcMethods(buf) {
  try {
    const j = JSON.parse(buf.toString('utf8'));
    const arr = Array.isArray(j) ? j : [j];
    const ms = arr.map((m) => m?.method ?? (m && ('result' in m || 'error' in m) ? 'response' : undefined));
    return ms.filter(Boolean).join(',') || undefined;
  } catch {
    return undefined;
  }
}

function sessionOf(req) {
  const h = req.headers['mcp-session-id'];
  if (h) return String(h);
  const m = /[?&]sessionId=([^&]+)/.exec(req.url || '');
  return m ? decodeURIComponent(m[1]) : undefined;
}

export class Balancer {
  /** targets: [{host?, port}] of the replicas, in order (replica i = targets[i]). */
  constructor(targets) {
    this.targets = targets.map((t) => ({ host: t.host || '127.0.0.1', port: t.port, down: false }));
    this.cursor = 0;
    this.log = [];
    this.counts = this.targets.map(() => 0);
    this.server = null;
    this.port = undefined;
    this.sockets = new Set(); // every socket, client and upstream, to close them all at stop
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  get url() {
    return `${this.base}/mcp`;
  }

  markDown(i) {
    this.targets[i].down = true;
  }

  markUp(i) {
    this.targets[i].down = false;
  }

  setNext(i) {
    this.cursor = i;
  }

  /** Replaces replica i's port (after a restart on another port). */
  setTarget(i, port) {
    this.targets[i].port = port;
  }

  /** The order of replicas to try for one request: the next up one first, then the rest. */
  _order() {
    const n = this.targets.length;
    const up = [];
    for (let k = 0; k < n; k++) {
      const i = (this.cursor + k) % n;
      if (!this.targets[i].down) up.push(i);
    }
    if (up.length) this.cursor = (up[0] + 1) % n;
    return up;
  }

  _track(sock) {
    this.sockets.add(sock);
    sock.on('close', () => this.sockets.delete(sock));
  }

  async start(port = 0) {
    this.server = http.createServer((req, res) => this._http(req, res));
    this.server.on('upgrade', (req, sock, head) => this._upgrade(req, sock, head));
    this.server.on('connection', (s) => this._track(s));
    // a client's malformed request: answer 400 as a proxy would
    this.server.on('clientError', (err, sock) => {
      if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      else sock.destroy();
    });
    this.server.keepAliveTimeout = 5000;
    this.server.headersTimeout = 0;
    this.server.requestTimeout = 0;
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', resolve);
    });
    this.port = this.server.address().port;
    return this;
  }

  async stop() {
    if (!this.server) return;
    const closed = new Promise((r) => this.server.close(r));
    for (const s of this.sockets) s.destroy();
    await closed;
    this.server = null;
  }

  /** Entries of the log that match `pred` (e.g. e => e.rpc === 'tools/call'). */
  find(pred) {
    return this.log.filter(pred);
  }

  _http(req, res) {
    const entry = {
      n: this.log.length,
      kind: 'http',
      method: req.method,
      path: req.url,
      session: sessionOf(req),
      rpc: undefined,
      replica: undefined,
      status: undefined,
      refused: [],
      at: Date.now(),
    };
    this.log.push(entry);
    // keep the start of a POST body to record its JSON-RPC method; read
    // only once a replica accepted the connection (see attempt), since a
    // body read earlier could not be sent to the next replica
    const recordBody = () => {
      if (req.method !== 'POST') return;
      const parts = [];
      let size = 0;
      req.on('data', (c) => {
        if (size < 1 << 20) parts.push(c);
        size += c.length;
      });
      req.on('end', () => {
        entry.rpc = rpcMethods(Buffer.concat(parts));
      });
    };
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
    const order = this._order();
    const attempt = (k) => {
      if (k >= order.length) {
        entry.status = 502;
        if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain', Connection: 'close' });
        res.end('balancer: no replica accepted the connection\n');
        return;
      }
      const i = order[k];
      const t = this.targets[i];
      const up = http.request({ host: t.host, port: t.port, method: req.method, path: req.url, headers, agent: false });
      let connected = false;
      up.on('socket', (s) => {
        this._track(s);
        s.setNoDelay(true);
        s.once('connect', () => {
          connected = true;
          entry.replica = i;
          this.counts[i]++;
          recordBody();
          req.pipe(up);
        });
      });
      up.on('error', (e) => {
        if (!connected && (e.code === 'ECONNREFUSED' || e.code === 'ECONNRESET')) {
          entry.refused.push(i);
          attempt(k + 1);
          return;
        }
        // the replica died or broke mid-request: break the client's connection too
        if (!res.headersSent) {
          entry.status = 502;
          res.writeHead(502, { 'Content-Type': 'text/plain', Connection: 'close' });
          res.end(`balancer: replica ${i}: ${e.code || e.message}\n`);
        } else {
          res.destroy();
        }
      });
      up.on('response', (ur) => {
        entry.status = ur.statusCode;
        const out = {};
        for (const [hk, hv] of Object.entries(ur.headers)) if (!HOP.has(hk) && hk !== 'transfer-encoding') out[hk] = hv;
        res.writeHead(ur.statusCode, ur.statusMessage, out);
        res.flushHeaders();
        ur.on('data', (c) => {
          // write at once: node sends each write as its own chunk, so SSE
          // events reach the client without waiting for more
          if (!res.write(c)) {
            ur.pause();
            res.once('drain', () => ur.resume());
          }
        });
        ur.on('end', () => res.end());
        ur.on('aborted', () => res.destroy());
        ur.on('error', () => res.destroy());
      });
      // the client went away: drop the upstream request too
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
    };
    attempt(0);
  }

  _upgrade(req, sock, head) {
    const entry = {
      n: this.log.length,
      kind: 'ws',
      method: req.method,
      path: req.url,
      session: sessionOf(req),
      rpc: undefined,
      replica: undefined,
      status: undefined,
      refused: [],
      at: Date.now(),
    };
    this.log.push(entry);
    sock.setNoDelay(true);
    const order = this._order();
    let lines = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
    for (let j = 0; j < req.rawHeaders.length; j += 2) lines += `${req.rawHeaders[j]}: ${req.rawHeaders[j + 1]}\r\n`;
    lines += '\r\n';
    const attempt = (k) => {
      if (k >= order.length) {
        entry.status = 502;
        sock.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const i = order[k];
      const t = this.targets[i];
      const up = net.connect(t.port, t.host);
      this._track(up);
      let connected = false;
      up.on('connect', () => {
        connected = true;
        up.setNoDelay(true);
        entry.replica = i;
        this.counts[i]++;
        up.write(lines);
        if (head && head.length) up.write(head);
        up.pipe(sock);
        sock.pipe(up);
        up.once('data', (d) => {
          const m = /^HTTP\/1\.[01] (\d{3})/.exec(d.toString('latin1', 0, 16));
          if (m) entry.status = Number(m[1]);
        });
      });
      up.on('error', () => {
        if (!connected) {
          entry.refused.push(i);
          attempt(k + 1);
          return;
        }
        sock.destroy();
      });
      up.on('close', () => sock.destroy());
      sock.on('error', () => up.destroy());
      sock.on('close', () => up.destroy());
    };
    attempt(0);
  }
}

/** Start a balancer on a free loopback port over replicas at `ports`. */
export async function startBalancer(ports) {
  const b = new Balancer(ports.map((port) => ({ port })));
  return b.start();
}
