// What the tests of the raw transports (tcp.test, udp.test) share: mcpd
// with one raw listener, JSON-RPC ids and tools/call messages, mcp-admin
// that must succeed, event-id sequence numbers, the refusal of a
// non-loopback listener without auth, and the scale check (many clients
// add no threads). A client class passed in is TcpClient or
// UdpClient: open(port), init(id), request(msg), and close via `close`.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

import { MCPD_BIN, freePort, mcpAdmin, procThreads, sleep, withMcpd } from './mcpd.mjs';

let nextId = 1;

/** A fresh numeric JSON-RPC id (unique within the test process). */
export const newId = () => nextId++;

/** mcpd with --<scheme>-listen on a free loopback port: fn(m, port). */
export async function withListener(scheme, args, opts, fn) {
  const port = await freePort();
  await withMcpd([`--${scheme}-listen`, `127.0.0.1:${port}`, ...args], opts, (m) => fn(m, port));
}

export const call = (name, args, extra = {}) => ({
  jsonrpc: '2.0',
  id: newId(),
  method: 'tools/call',
  params: { name, arguments: args, ...extra },
});

/** mcp-admin on db, which must succeed; its output, trimmed. */
export function admin(db, ...args) {
  const r = mcpAdmin(db, ...args);
  assert.equal(r.status, 0, `mcp-admin ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

/** The sequence number of an event id "<stream>:<seq>". */
export const seqOf = (id) => Number(id.slice(id.lastIndexOf(':') + 1));

/** The first n progress notifications client c receives (other messages
 * are passed over). */
export async function progressNotes(c, n) {
  const got = [];
  while (got.length < n) {
    const x = await c.next();
    if (x.method === 'notifications/progress') got.push(x);
  }
  return got;
}

/** 200 clients (20 at a time) add at most 8 threads to mcpd m, and each
 * answers; `what` names them in the failure message. */
export async function manyClientsAddNoThreads(m, port, Client, close, what) {
  const warm = await Client.open(port);
  await warm.init();
  await warm.request(call('echo', { message: 'warm' }));
  await sleep(300);
  const threads0 = procThreads(m.pid);
  const clients = [];
  for (let i = 0; i < 200; i += 20) {
    const batch = await Promise.all(Array.from({ length: 20 }, () => Client.open(port)));
    await Promise.all(batch.map((c, k) => c.init(`init-${i + k}`)));
    clients.push(...batch);
  }
  const threadsOpen = procThreads(m.pid);
  assert.ok(threadsOpen <= threads0 + 8, `threads grew with ${what}: ${threads0} → ${threadsOpen}`);
  for (let i = 0; i < clients.length; i += 20) {
    await Promise.all(
      clients.slice(i, i + 20).map(async (c, k) => {
        const r = await c.request(call('echo', { message: `m${i + k}` }));
        assert.equal(r.result.content[0].text, `m${i + k}`);
      }),
    );
  }
  assert.ok(procThreads(m.pid) <= threads0 + 8);
  for (const c of clients) close(c);
  close(warm);
  assert.doesNotMatch(m.stderr, /event=blocking_wait/);
}

/** --<scheme>-listen on a non-loopback address without --auth token: mcpd
 * refuses to start (exit 2), saying why. */
export function refusedWithoutAuth(scheme) {
  const r = spawnSync(MCPD_BIN, ['--listen', '127.0.0.1:0', `--${scheme}-listen`, '0.0.0.0:1', '--db', ':memory:'], { timeout: 10000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr.toString(), /non-loopback 0\.0\.0\.0 without authentication/);
}
