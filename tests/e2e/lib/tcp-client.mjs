// A raw TCP client for mcpd's --tcp-listen transport (README "TCP wire
// rules"): NDJSON or Content-Length framing, checked strictly on the way
// in (every frame mcpd sends must be one JSON message in the client's
// framing), with a queue of received messages.
//
//   const c = await TcpClient.open(port, { framing: 'ndjson' });
//   c.send(msg); c.sendRaw('text');
//   const m = await c.next(ms);          // throws on timeout or close
//   const r = await c.request(msg, ms);  // the response to msg.id
//   const rest = await c.until(id, ms);  // everything up to that response
//   await c.closed;                      // resolves when mcpd closes
//   c.destroy();

import net from 'node:net';

import { MessageQueue } from './message-queue.mjs';
import { withTimeout } from './mcpd.mjs';

export class TcpClient extends MessageQueue {
  static open(port, { framing = 'ndjson', host = '127.0.0.1', ms = 5000 } = {}) {
    const c = new TcpClient(framing);
    return withTimeout(
      new Promise((resolve, reject) => {
        const s = net.connect({ host, port });
        c.sock = s;
        s.once('connect', () => resolve(c));
        s.once('error', reject);
        c._wire();
      }),
      ms,
      `TCP connect to ${port}`,
    );
  }

  constructor(framing) {
    super('tcp-test');
    this.framing = framing;
    this.buf = Buffer.alloc(0);
    this.ended = false;
    this.bytesIn = 0;
  }

  _wire() {
    this.closed = new Promise((resolve) => {
      this.sock.on('close', () => {
        this.ended = true;
        this._wake();
        resolve();
      });
    });
    this.sock.on('error', () => {});
    this.sock.on('data', (d) => {
      this.bytesIn += d.length;
      this.buf = Buffer.concat([this.buf, d]);
      try {
        this._parse();
      } catch (e) {
        this.error = e;
        this._wake();
      }
    });
  }

  _parse() {
    for (;;) {
      if (this.framing === 'ndjson') {
        const nl = this.buf.indexOf(0x0a);
        if (nl < 0) return;
        const line = this.buf.subarray(0, nl).toString('utf8');
        this.buf = this.buf.subarray(nl + 1);
        if (line.trim() === '') throw new Error('an empty line from mcpd');
        this._push(JSON.parse(line));
      } else {
        const end = this.buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (this.buf.length && this.buf[0] === 0x7b) throw new Error('mcpd did not answer in Content-Length framing');
          return;
        }
        const head = this.buf.subarray(0, end).toString('latin1');
        const m = /^content-length:\s*(\d+)\s*$/im.exec(head);
        if (!m) throw new Error(`a frame header without Content-Length: ${head}`);
        const n = Number(m[1]);
        if (this.buf.length < end + 4 + n) return;
        const body = this.buf.subarray(end + 4, end + 4 + n).toString('utf8');
        this.buf = this.buf.subarray(end + 4 + n);
        this._push(JSON.parse(body));
      }
    }
  }

  frame(msg) {
    const text = typeof msg === 'string' ? msg : JSON.stringify(msg);
    return this.framing === 'ndjson' ? `${text}\n` : `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
  }

  send(msg) {
    this.sock.write(this.frame(msg));
  }

  sendRaw(data) {
    this.sock.write(data);
  }

  /** next() throws on bad framing, or when closed with nothing left. */
  _take() {
    if (this.error) throw this.error;
    if (this.queue.length) return this.queue.shift();
    if (this.ended) throw new Error('connection closed by mcpd');
    return undefined;
  }

  destroy() {
    this.sock.destroy();
  }

  end() {
    this.sock.end();
  }
}

/** The event id mcpd put in a message's _meta, or undefined. */
export function eventIdOf(m) {
  return (m?.params ?? m?.result)?._meta?.['mcpd/event-id'];
}
