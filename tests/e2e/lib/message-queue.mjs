// The receiving side the raw-transport test clients (TcpClient, UdpClient)
// share: a queue of messages from mcpd, the promises waiting for the next
// one, and the JSON-RPC conveniences on top (until, request, init). A subclass pushes what it decodes with _push, records a failure
// in this.error and calls _wake, implements send(msg), and may override
// _take to decide what an error or a close means next to queued messages.

import { LATEST } from './mcpd.mjs';

export class MessageQueue {
  constructor(clientName) {
    this.clientName = clientName; // clientInfo.name in initialize
    this.queue = [];
    this.waiters = [];
    this.error = null;
  }

  _push(msg) {
    this.queue.push(msg);
    this._wake();
  }

  _wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** A queued message, undefined when none; throws when none will come. */
  _take() {
    if (this.queue.length) return this.queue.shift();
    if (this.error) throw this.error;
    return undefined;
  }

  /** The next message; throws on timeout, or as _take says. */
  async next(ms = 5000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = this._take();
      if (m !== undefined) return m;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no message from mcpd within ${ms} ms`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Messages up to and including the response with id. */
  async until(id, ms = 10000) {
    const deadline = Date.now() + ms;
    const got = [];
    for (;;) {
      const m = await this.next(Math.max(1, deadline - Date.now()));
      got.push(m);
      if (m.id === id && ('result' in m || 'error' in m)) return got;
    }
  }

  async request(msg, ms = 10000) {
    this.send(msg);
    const got = await this.until(msg.id, ms);
    return got[got.length - 1];
  }

  /** initialize and notifications/initialized; resolves to the session id. */
  async init(id = 'init', { protocolVersion = LATEST } = {}) {
    const r = await this.request({
      jsonrpc: '2.0',
      id,
      method: 'initialize',
      params: { protocolVersion, capabilities: {}, clientInfo: { name: this.clientName, version: '0.0.0' } },
    });
    if (!r.result) throw new Error(`initialize failed: ${JSON.stringify(r)}`);
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return r.result._meta?.['mcpd/session-id'];
  }
}
