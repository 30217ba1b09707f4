// A UDP client for mcpd's --udp-listen transport, implementing the README's
// "UDP wire rules" from the client's side: the cookie handshake, one
// message per datagram with "_udp_seq" (fragments for a message larger
// than a datagram), cumulative and selective acknowledgements,
// retransmission with a backed-off timeout, duplicates dropped and order
// restored. It also checks what mcpd sends strictly: every datagram one
// JSON object of at most maxDatagram bytes, every message delivered once.
//
//   const c = await UdpClient.open(port);          // handshake done
//   c.send(msg); c.sendRaw(buf);                   // reliable / raw datagram
//   const m = await c.next(ms);                    // next message (in order)
//   const r = await c.request(msg, ms);            // the response to msg.id
//   await c.reconnect();                           // new socket (new port), new cookie
//   c.close();
//
// Also LossyRelay: a relay between clients and mcpd that drops, duplicates
// and reorders datagrams in both directions (seeded, so reproducible).

import dgram from 'node:dgram';

import { MessageQueue } from './message-queue.mjs';

const WINDOW = 64;
const RTO_INITIAL = 200;
const RTO_MIN = 100;
const RTO_MAX = 4000;
const MAX_TRIES = 10;
const TICK = 20;

export class UdpClient extends MessageQueue {
  /** Opens a socket and gets a cookie. opts: host, bind (local address), maxDatagram, ms. */
  static async open(port, opts = {}) {
    const c = new UdpClient(port, opts);
    await c._handshake(opts.ms ?? 5000);
    return c;
  }

  constructor(port, { host = '127.0.0.1', bind = '127.0.0.1', maxDatagram = 1200, onMessage, noAck = false } = {}) {
    super('udp-test');
    this.noAck = noAck; // the abuse tests: a client that never acknowledges
    this.port = port;
    this.host = host;
    this.bindAddr = bind;
    this.maxDatagram = maxDatagram;
    this.onMessage = onMessage;
    this.resets = 0;
    this.notices = []; // unsequenced messages from mcpd (goodbyes, errors)
    this.bytesIn = 0;
    this.bytesOut = 0;
    this.dgramsIn = 0;
    this.retransmits = 0;
    this.duplicatesIn = 0;
    this._timer = setInterval(() => this._tick(), TICK);
    this._timer.unref?.();
    this._fresh();
  }

  _fresh() {
    this.cookie = null;
    this.sendSeq = 1;
    this.unacked = new Map(); // seq -> {buf, sentAt, due, tries}
    this.pending = []; // datagrams waiting for window space
    this.delivered = 0;
    this.reorder = new Map(); // seq -> parsed datagram
    this.asm = null; // {n, next, parts}
    this.srtt = 0;
    this.rttvar = 0;
    this.rto = RTO_INITIAL;
    this.heard = false; // mcpd acknowledged or sent something since the cookie
  }

  async _open() {
    const s = dgram.createSocket('udp4');
    this.sock = s;
    s.on('error', (e) => this._fail(e));
    s.on('message', (buf) => {
      if (s !== this.sock) return; // an old socket's late datagram
      this._onDatagram(buf);
    });
    await new Promise((resolve) => s.bind(0, this.bindAddr, resolve));
  }

  async _handshake(ms) {
    await this._open();
    const deadline = Date.now() + ms;
    let gotCookie;
    const got = new Promise((resolve) => (gotCookie = resolve));
    this._cookieWaiter = gotCookie;
    // Padded: mcpd answers at most 3x what it received.
    const hello = Buffer.from(JSON.stringify({ _udp_hello: 'mcpd-udp-test-client', _udp_pad: 'x'.repeat(40) }));
    while (!this.cookie) {
      if (Date.now() > deadline) throw new Error(`no cookie from mcpd within ${ms} ms`);
      this._raw(hello);
      await Promise.race([got, new Promise((r) => setTimeout(r, 200))]);
    }
    this._cookieWaiter = null;
  }

  /** A new socket (so a new source port), a new cookie, sequence numbers from 1. */
  async reconnect({ port, ms = 5000 } = {}) {
    const old = this.sock;
    if (port) this.port = port;
    this.resetSeen = false;
    this._fresh();
    this.error = null;
    await this._handshake(ms);
    try {
      old.close();
    } catch {
      /* closed */
    }
  }

  _raw(buf) {
    this.bytesOut += buf.length;
    this.sock.send(buf, this.port, this.host);
  }

  _fail(e) {
    if (!this.error) this.error = e instanceof Error ? e : new Error(String(e));
    this._wake();
  }

  _deliver(msg) {
    if (this.onMessage) this.onMessage(msg);
    else this._push(msg);
  }

  _onDatagram(buf) {
    this.bytesIn += buf.length;
    this.dgramsIn++;
    if (buf.length > this.maxDatagram) return this._fail(new Error(`a datagram of ${buf.length} bytes, over ${this.maxDatagram}`));
    let d;
    try {
      d = JSON.parse(buf.toString('utf8'));
    } catch (e) {
      return this._fail(new Error(`a datagram that is not JSON: ${buf.toString('utf8').slice(0, 200)}`));
    }
    if (typeof d !== 'object' || d === null || Array.isArray(d)) return this._fail(new Error('a datagram that is not an object'));
    if (typeof d._udp_cookie === 'string') {
      if (!this.cookie && this._cookieWaiter) {
        this.cookie = d._udp_cookie;
        this._cookieWaiter();
      } else if (d._udp_reset && this.cookie && this.heard) {
        // (before mcpd acknowledged anything, a reset only means that our
        // seq 1 was lost and a later datagram came first: ignored)
        this.resets++;
        this.resetSeen = true;
        this._wake();
      }
      return;
    }
    this.heard = true;
    if (typeof d._udp_ack === 'number') this._onAck(d);
    if (typeof d._udp_seq === 'number') return this._onData(d);
    if (d.jsonrpc) {
      // outside the sequence: a notice (a refusal, a datagram's error)
      this.notices.push(d);
      this._deliver(d);
    }
  }

  _onAck(d) {
    const now = Date.now();
    const ackOne = (s) => {
      const u = this.unacked.get(s);
      if (!u) return;
      if (!u.tries) this._sample(now - u.sentAt);
      this.unacked.delete(s);
    };
    for (const s of [...this.unacked.keys()]) if (s <= d._udp_ack) ackOne(s);
    let high = 0;
    for (const s of d._udp_sack ?? []) {
      ackOne(s);
      high = Math.max(high, s);
    }
    for (const [s, u] of this.unacked) if (s + 3 <= high && !u.fast) {
      u.fast = true;
      u.due = now;
    }
    this._pump();
  }

  _sample(rtt) {
    if (!this.srtt) {
      this.srtt = Math.max(1, rtt);
      this.rttvar = rtt / 2;
    } else {
      this.rttvar = 0.75 * this.rttvar + 0.25 * Math.abs(this.srtt - rtt);
      this.srtt = 0.875 * this.srtt + 0.125 * rtt;
    }
    this.rto = Math.min(RTO_MAX, Math.max(RTO_MIN, this.srtt + 4 * this.rttvar));
  }

  _onData(d) {
    const s = d._udp_seq;
    this.highestSeqIn = Math.max(this.highestSeqIn ?? 0, s);
    if (s > this.delivered && s <= this.delivered + WINDOW) {
      if (this.reorder.has(s)) this.duplicatesIn++;
      else this.reorder.set(s, d);
    } else if (s <= this.delivered) this.duplicatesIn++;
    while (this.reorder.has(this.delivered + 1)) {
      const n = this.reorder.get(this.delivered + 1);
      this.reorder.delete(this.delivered + 1);
      this.delivered++;
      this._inOrder(n);
    }
    if (this.noAck) return;
    const sack = [...this.reorder.keys()].sort((a, b) => a - b).slice(0, 32);
    const ack = { _udp_cookie: this.cookie, _udp_ack: this.delivered };
    if (sack.length) ack._udp_sack = sack;
    this._raw(Buffer.from(JSON.stringify(ack)));
  }

  _inOrder(d) {
    if (d._udp_frag) {
      const [i, n] = d._udp_frag;
      if (i === 0) this.asm = { n, next: 0, parts: [] };
      if (!this.asm || this.asm.next !== i || this.asm.n !== n) return this._fail(new Error(`fragment ${i}/${n} out of order`));
      this.asm.parts.push(Buffer.from(d._udp_data, 'base64'));
      this.asm.next++;
      if (this.asm.next < n) return;
      const text = Buffer.concat(this.asm.parts).toString('utf8');
      this.asm = null;
      this.fragmentedIn = (this.fragmentedIn ?? 0) + 1;
      return this._deliver(JSON.parse(text));
    }
    const msg = {};
    for (const [k, v] of Object.entries(d)) if (!k.startsWith('_udp_')) msg[k] = v;
    this._deliver(msg);
  }

  /** The datagrams of one message (text), numbered from this.sendSeq. */
  _encode(text, { forceFragments = false } = {}) {
    const seq = () => this.sendSeq++;
    const bytes = Buffer.from(text, 'utf8');
    const head = `{"_udp_cookie":"${this.cookie}","_udp_seq":`;
    if (!forceFragments && text.startsWith('{') && bytes.length + head.length + 24 <= this.maxDatagram) {
      const s = seq();
      return [{ seq: s, buf: Buffer.from(`${head}${s}${text.length > 2 ? ',' : ''}${text.slice(1)}`, 'utf8') }];
    }
    const per = Math.floor((this.maxDatagram - 140) / 4) * 3;
    const n = Math.max(1, Math.ceil(bytes.length / per));
    const out = [];
    for (let i = 0; i < n; i++) {
      const part = bytes.subarray(i * per, (i + 1) * per).toString('base64');
      const s = seq();
      out.push({ seq: s, buf: Buffer.from(`${head}${s},"_udp_frag":[${i},${n}],"_udp_data":"${part}"}`) });
    }
    return out;
  }

  /** Sends one message (an object, or text sent as is: fragments when it is not an object). */
  send(msg, opts) {
    const text = typeof msg === 'string' ? msg : JSON.stringify(msg);
    for (const d of this._encode(text, opts)) this.pending.push(d);
    this._pump();
  }

  _pump() {
    while (this.pending.length && this.unacked.size < WINDOW) {
      const { seq, buf } = this.pending.shift();
      const now = Date.now();
      this.unacked.set(seq, { buf, sentAt: now, due: now + this.rto, tries: 0 });
      this._raw(buf);
    }
  }

  _tick() {
    if (!this.sock || !this.cookie) return;
    const now = Date.now();
    for (const [, u] of this.unacked) {
      if (u.due > now) continue;
      if (u.tries >= MAX_TRIES) return this._fail(new Error('mcpd stopped acknowledging (gave up)'));
      u.tries++;
      u.due = now + Math.min(RTO_MAX, this.rto * 2 ** u.tries);
      this.retransmits++;
      this._raw(u.buf);
    }
  }

  /** A raw datagram, outside the rules (the abuse tests). */
  sendRaw(data) {
    this._raw(Buffer.isBuffer(data) ? data : Buffer.from(data));
  }

  /** Whether everything sent was acknowledged. */
  get idle() {
    return this.unacked.size === 0 && this.pending.length === 0;
  }

  /** mcpd/connect with params; resolves to the answer. */
  connect(params = {}, id = 'connect', ms = 10000) {
    return this.request({ jsonrpc: '2.0', id, method: 'mcpd/connect', params }, ms);
  }

  close() {
    clearInterval(this._timer);
    try {
      this.sock?.close();
    } catch {
      /* closed */
    }
  }
}

/** A seeded PRNG (mulberry32). */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Between clients and mcpd (127.0.0.1:target): each client address gets an
 * upstream socket of its own, so mcpd sees one peer per client. Each
 * datagram, either way, is dropped with probability `drop`, else sent
 * twice with `dup`, and delayed by 5..40 ms (so overtaken) with `reorder`.
 */
export class LossyRelay {
  static async start(target, opts = {}) {
    const r = new LossyRelay(target, opts);
    await new Promise((resolve) => r.sock.bind(0, '127.0.0.1', resolve));
    r.port = r.sock.address().port;
    return r;
  }

  constructor(target, { drop = 0.1, dup = 0.05, reorder = 0.1, seed = 1 } = {}) {
    this.target = target;
    this.drop = drop;
    this.dup = dup;
    this.reorder = reorder;
    this.rand = rng(seed);
    this.stats = { up: 0, down: 0, dropped: 0, duplicated: 0, reordered: 0 };
    this.ups = new Map();
    this.timers = new Set();
    this.sock = dgram.createSocket('udp4');
    this.sock.on('error', () => {});
    this.sock.on('message', (buf, rinfo) => this._fromClient(buf, rinfo));
  }

  _forward(buf, send, dir) {
    this.stats[dir]++;
    if (this.rand() < this.drop) {
      this.stats.dropped++;
      return;
    }
    const copies = this.rand() < this.dup ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let i = 0; i < copies; i++) {
      if (this.rand() < this.reorder) {
        this.stats.reordered++;
        const t = setTimeout(() => {
          this.timers.delete(t);
          send(buf);
        }, 5 + Math.floor(this.rand() * 35));
        this.timers.add(t);
      } else send(buf);
    }
  }

  _fromClient(buf, rinfo) {
    const key = `${rinfo.address}:${rinfo.port}`;
    let up = this.ups.get(key);
    if (!up) {
      up = dgram.createSocket('udp4');
      up.on('error', () => {});
      up.on('message', (b) => this._forward(b, (x) => this.sock.send(x, rinfo.port, rinfo.address), 'down'));
      up.bind(0, '127.0.0.1');
      this.ups.set(key, up);
    }
    this._forward(buf, (x) => up.send(x, this.target, '127.0.0.1'), 'up');
  }

  close() {
    for (const t of this.timers) clearTimeout(t);
    for (const up of this.ups.values()) up.close();
    this.sock.close();
  }
}
