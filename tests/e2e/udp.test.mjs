// The UDP transport (--udp-listen, issue 33), against a real mcpd on
// loopback with real UDP sockets (README "UDP wire rules"), through a
// client that implements the rules (lib/udp-client.mjs):
//   1. initialize, tools/list, tools/call; a message larger than a
//      datagram goes in fragments both ways; no datagram from mcpd is
//      larger than --udp-max-datagram; event ids in _meta;
//   2. through a relay that drops 10% of the datagrams each way,
//      duplicates and reorders some: the same answers, and a countdown's
//      progress exactly once, in order;
//   3. bad input: a datagram that is not JSON, or whose envelope is
//      malformed, is answered with an error (id null) and the peer goes
//      on; a message over --max-body is refused with an error naming the
//      limit and none of it is taken;
//   4. --auth token: a request before mcpd/connect is refused and the peer
//      dropped; a good token is served;
//   5. a client on a new address (a new socket) resumes with mcpd/connect
//      {sessionId, lastEventId}: the rest of a countdown exactly once;
//   6. SIGKILL, restart on the same --db: the client is told to reset,
//      reconnects, resumes: nothing lost;
//   7. anti-amplification: an address that never echoes its cookie (a
//      spoofed source) gets at most 3x the bytes it sent, a tiny datagram
//      nothing, a forged cookie nothing more;
//   8. a flood from one address is cut by --udp-rate-per-ip while another
//      client is still answered;
//   9. a client that never acknowledges gets at most the send window;
//  10. 200 peers add no threads; an idle peer is dropped after
//      --udp-idle-ms with a goodbye; SIGTERM says goodbye, exit 0.

import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { test } from 'node:test';

import { freePort, sleep, startMcpd, tempDb, waitFor } from './lib/mcpd.mjs';
import {
  admin,
  call,
  manyClientsAddNoThreads,
  newId,
  progressNotes,
  refusedWithoutAuth,
  seqOf,
  withListener,
} from './lib/raw-tests.mjs';
import { eventIdOf } from './lib/tcp-client.mjs';
import { LossyRelay, UdpClient } from './lib/udp-client.mjs';

const progressOf = (msgs) => msgs.filter((x) => x.method === 'notifications/progress').map((x) => x.params.progress);

/** Everything that arrives within ms. */
async function collect(c, ms) {
  const got = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return got;
    try {
      got.push(await c.next(left));
    } catch (e) {
      if (/no message/.test(e.message)) return got;
      throw e;
    }
  }
}

/** A plain socket (not a client of the rules) that counts what it gets. */
async function rawSocket(bind = '127.0.0.1') {
  const s = dgram.createSocket('udp4');
  s.got = [];
  s.bytesIn = 0;
  s.on('message', (b) => {
    s.bytesIn += b.length;
    s.got.push(b.toString('utf8'));
  });
  await new Promise((resolve) => s.bind(0, bind, resolve));
  return s;
}

async function sendAll(s, port, datagrams) {
  let bytes = 0;
  for (const d of datagrams) {
    const b = Buffer.from(d);
    bytes += b.length;
    await new Promise((resolve) => s.send(b, port, '127.0.0.1', resolve));
  }
  return bytes;
}

/** What a session over c does in every run: the answers it gets. */
async function exercise(c) {
  const out = {};
  out.sid = await c.init();
  const list = await c.request({ jsonrpc: '2.0', id: newId(), method: 'tools/list' });
  out.tools = list.result.tools.map((t) => t.name).sort();
  out.echo = (await c.request(call('echo', { message: 'über udp' }))).result.content[0].text;
  // 20,000 characters (multi-byte): fragments both ways
  const big = 'ü'.repeat(10000) + 'x'.repeat(10000);
  out.big = (await c.request(call('echo', { message: big }))).result.content[0].text === big;
  const cd = call('countdown', { n: 30, interval_ms: 10 }, { _meta: { progressToken: 'p' } });
  c.send(cd);
  const msgs = await c.until(cd.id, 30000);
  out.progress = progressOf(msgs);
  out.final = msgs.at(-1).result.content[0].text;
  out.eventIds = msgs.map(eventIdOf).filter(Boolean).map(seqOf);
  return out;
}

// ---------------------------------------------------------------- 1. the basics

test('initialize, tools/list, tools/call; fragments both ways; no datagram over --udp-max-datagram', async () => {
  await withListener('udp', [], {}, async (m, uport) => {
    const c = await UdpClient.open(uport);
    const r = await exercise(c);
    assert.match(r.sid ?? '', /^[0-9a-f]{32}$/, 'initialize tells the session id in _meta');
    for (const n of ['echo', 'countdown']) assert.ok(r.tools.includes(n), `tools/list lacks ${n}`);
    assert.equal(r.echo, 'über udp');
    assert.ok(r.big, 'a 30,000-byte echo came back whole');
    assert.ok(c.fragmentedIn >= 1, 'the big reply came in fragments');
    assert.deepEqual(r.progress, Array.from({ length: 30 }, (_, i) => i + 1));
    assert.equal(r.final, 'countdown finished');
    assert.ok(r.eventIds.length >= 30, 'event ids in _meta');
    assert.equal(c.error, null, `the client saw nothing against the rules: ${c.error}`);
    await waitFor(() => c.idle, 3000, 'everything acknowledged');
    c.close();
  });
});

test('--udp-max-datagram 300: every datagram from mcpd fits, replies are reassembled', async () => {
  await withListener('udp', ['--udp-max-datagram', '300'], {}, async (m, uport) => {
    const c = await UdpClient.open(uport, { maxDatagram: 300 });
    await c.init();
    const text = 'y'.repeat(3000);
    assert.equal((await c.request(call('echo', { message: text }))).result.content[0].text, text);
    assert.equal(c.error, null, `${c.error}`);
    c.close();
  });
});

// ---------------------------------------------------------------- 2. loss

test('through a relay that drops 10%, duplicates and reorders: the same answers, progress exactly once in order', { timeout: 120000 }, async () => {
  await withListener('udp', [], {}, async (m, uport) => {
    const direct = await UdpClient.open(uport);
    const want = await exercise(direct);
    direct.close();
    const relay = await LossyRelay.start(uport, { drop: 0.1, dup: 0.05, reorder: 0.1, seed: 33 });
    try {
      const c = await UdpClient.open(relay.port, { ms: 10000 });
      const got = await exercise(c);
      assert.equal(c.error, null, `${c.error}`);
      delete want.sid;
      delete got.sid;
      delete want.eventIds;
      const ids = got.eventIds;
      delete got.eventIds;
      assert.deepEqual(got, want, 'the same answers as without loss');
      assert.deepEqual(ids, [...ids].sort((a, b) => a - b), 'event ids in order');
      assert.equal(new Set(ids).size, ids.length, 'no event twice');
      assert.ok(relay.stats.dropped > 0 && relay.stats.duplicated > 0 && relay.stats.reordered > 0, JSON.stringify(relay.stats));
      assert.ok(c.retransmits > 0, 'the client retransmitted');
      c.close();
    } finally {
      relay.close();
    }
  });
});

// ---------------------------------------------------------------- 3. bad input

test('malformed datagrams are answered and the peer goes on; a message over --max-body is refused naming the limit', async () => {
  await withListener('udp', ['--max-body', '4096'], {}, async (m, uport) => {
    const c = await UdpClient.open(uport);
    await c.init();
    // not JSON: answered outside the sequence, id null
    c.sendRaw(`{"jsonrpc":"2.0", this is not json ${'.'.repeat(40)}`);
    const e1 = await c.next();
    assert.equal(e1.id, null);
    assert.equal(e1.error.code, -32700);
    assert.equal(e1.error.data.transport, 'udp');
    // a malformed envelope
    c.sendRaw(JSON.stringify({ _udp_cookie: c.cookie, _udp_seq: 'one', jsonrpc: '2.0', id: 1, method: 'ping' }));
    const e2 = await c.next();
    assert.equal(e2.error.code, -32700);
    assert.match(e2.error.message, /_udp_seq/);
    // a sequenced message that is not JSON-RPC: answered in sequence
    c.send('this is not json', { forceFragments: true });
    const e3 = await c.next();
    assert.equal(e3.id, null);
    assert.equal(e3.error.code, -32700);
    assert.equal((await c.request(call('echo', { message: 'after junk' }))).result.content[0].text, 'after junk');

    // 10,000 bytes of a request that would echo its text: refused whole
    c.send(call('echo', { message: 'x'.repeat(10000) }));
    const e4 = await c.next();
    assert.equal(e4.id, null);
    assert.equal(e4.error.code, -32600);
    assert.match(e4.error.message, /4096/, 'the error names the limit');
    const after = await c.request(call('echo', { message: 'after big' }));
    assert.equal(after.result.content[0].text, 'after big', 'nothing of the big message was taken for one');
    await sleep(300);
    assert.equal(c.queue.length, 0, 'nothing else came');
    // a datagram as large as UDP allows, from the peer: refused, not truncated
    c.sendRaw(Buffer.alloc(60000, 0x61));
    const e5 = await c.next();
    assert.equal(e5.error.code, -32700);
    assert.equal((await c.request(call('echo', { message: 'still here' }))).result.content[0].text, 'still here');
    assert.equal(c.error, null, `${c.error}`);
    c.close();
  });
});

// ---------------------------------------------------------------- 4. auth

test('--auth token: nothing before mcpd/connect; a good token is served', async () => {
  const { dir, db } = tempDb();
  await withListener('udp', ['--auth', 'token'], { db, dir }, async (m, uport) => {
    const token = admin(db, 'tokens', 'add', 'alice');
    const a = await UdpClient.open(uport);
    a.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    const ra = await a.next();
    assert.equal(ra.id, 1);
    assert.equal(ra.error.code, -32001);
    assert.deepEqual(ra.error.data, { transport: 'udp', reason: 'unauthorized' });
    // the peer is gone: what it sends next is answered with a reset
    await sleep(2000);
    a.send({ jsonrpc: '2.0', id: 2, method: 'ping' });
    await waitFor(() => a.resetSeen, 5000, 'a reset');
    a.close();

    const b = await UdpClient.open(uport);
    const rb = await b.connect({ token: 'mcpd_not-a-real-token' });
    assert.equal(rb.error.code, -32001);
    b.close();

    const g = await UdpClient.open(uport);
    const ok = await g.connect({ token });
    assert.deepEqual(ok.result, { transport: 'udp', sessionId: null });
    const sid = await g.init();
    assert.match(sid, /^[0-9a-f]{32}$/);
    assert.equal((await g.request(call('echo', { message: 'authed' }))).result.content[0].text, 'authed');
    g.close();
  });
});

test('--udp-listen on a non-loopback address without --auth token is refused at start', () => refusedWithoutAuth('udp'));

// ---------------------------------------------------------------- 5. resume

test('a new address resumes with mcpd/connect {sessionId, lastEventId}: the rest of a countdown exactly once', async () => {
  await withListener('udp', [], {}, async (m, uport) => {
    const c = await UdpClient.open(uport);
    const sid = await c.init();
    const cd = call('countdown', { n: 10, interval_ms: 100 }, { _meta: { progressToken: 'r' } });
    c.send(cd);
    const got = await progressNotes(c, 3);
    const last = eventIdOf(got[2]);
    assert.match(last ?? '', /^[0-9a-f]+:\d+$/);
    c.close();

    await sleep(150);
    const c2 = await UdpClient.open(uport);
    c2.send({ jsonrpc: '2.0', id: 'resume', method: 'mcpd/connect', params: { sessionId: sid, lastEventId: last } });
    const first = await c2.next();
    assert.deepEqual(first, { jsonrpc: '2.0', id: 'resume', result: { transport: 'udp', sessionId: sid } }, 'the answer comes first');
    const rest = await c2.until(cd.id);
    rest.push(...(await collect(c2, 400)));
    assert.deepEqual(progressOf(rest), [4, 5, 6, 7, 8, 9, 10], JSON.stringify(rest));
    assert.equal(rest.filter((x) => x.id === cd.id).length, 1);
    const seqs = rest.map(eventIdOf).filter(Boolean).map(seqOf);
    assert.equal(seqs[0], seqOf(last) + 1, 'starts right after the last event id');
    assert.equal((await c2.request(call('echo', { message: 'resumed' }))).result.content[0].text, 'resumed');
    c2.close();
  });
});

// ---------------------------------------------------------------- 6. SIGKILL

test('SIGKILL mid-countdown, restart on the same db: reset, reconnect, resume; stored messages once, in order', async () => {
  const uport = await freePort();
  const mcpd = await startMcpd({ args: ['--udp-listen', `127.0.0.1:${uport}`] });
  try {
    const c = await UdpClient.open(uport);
    const sid = await c.init();
    const cd = call('countdown', { n: 50, interval_ms: 100 }, { _meta: { progressToken: 'k' } });
    c.send(cd);
    const got = await progressNotes(c, 3);
    await sleep(250);
    mcpd.kill('SIGKILL');
    await mcpd.exited;
    got.push(...(await collect(c, 300)));
    const lastSeen = got.filter(eventIdOf).at(-1);
    const last = eventIdOf(lastSeen);

    await mcpd.restart({ port: await freePort() });
    // the old cookie means nothing to the new process: it says reset
    c.send({ jsonrpc: '2.0', id: 'hello-again', method: 'ping' });
    await waitFor(() => c.resetSeen, 5000, 'a reset');
    await c.reconnect();
    c.send({ jsonrpc: '2.0', id: 'resume', method: 'mcpd/connect', params: { sessionId: sid, lastEventId: last } });
    assert.deepEqual((await c.next()).result, { transport: 'udp', sessionId: sid });
    const msgs = await c.until(cd.id);
    msgs.push(...(await collect(c, 400)));
    const final = msgs.filter((x) => x.id === cd.id);
    assert.equal(final.length, 1, `exactly one final message: ${JSON.stringify(msgs)}`);
    assert.match(final[0].error?.message ?? '', /interrupted by server restart/);
    const before = progressOf(got);
    const after = progressOf(msgs);
    const all = before.concat(after);
    assert.deepEqual(all, Array.from({ length: all.length }, (_, i) => i + 1), `every stored progress once, in order: ${all}`);
    assert.equal((await c.request(call('echo', { message: 'after restart' }))).result.content[0].text, 'after restart');
    c.close();
  } finally {
    await mcpd.cleanup();
  }
});

// ---------------------------------------------------------------- 7. amplification

test('a spoofed source (never echoes its cookie) gets at most 3x what it sent; a tiny datagram nothing; no peer is made', async () => {
  await withListener('udp', [], {}, async (m, uport) => {
    const s = await rawSocket();
    const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'victim', version: '1' } } });
    const forged = JSON.stringify({ _udp_cookie: '0123456789abcdef', _udp_seq: 1, jsonrpc: '2.0', id: 2, method: 'initialize', params: {} });
    const sent = await sendAll(s, uport, [...Array(50).fill(init), ...Array(50).fill(forged), ...Array(50).fill('hi')]);
    await sleep(1000);
    assert.ok(s.bytesIn <= 3 * sent, `sent ${sent}, got ${s.bytesIn}`);
    // what came is cookies, nothing else; the tiny datagrams got nothing
    assert.ok(s.got.length <= 100, `${s.got.length} answers to 100 datagrams that could be answered`);
    for (const g of s.got) assert.match(g, /^\{"_udp_cookie":"[0-9a-f]{16}"(,"_udp_reset":true)?\}$/);
    // one datagram of each kind, with its own bound
    const t = await rawSocket();
    await sendAll(t, uport, ['x'.repeat(10)]);
    await sleep(300);
    assert.equal(t.bytesIn, 0, '10 bytes cannot be answered within 3x');
    s.close();
    t.close();
    assert.doesNotMatch(m.stderr, /udp_connected|session_created/, 'nothing was created');
  });
});

// ---------------------------------------------------------------- 8. flood

test('a flood from one address is cut by --udp-rate-per-ip while another client is still answered', { timeout: 60000 }, async () => {
  await withListener('udp', ['--udp-rate-per-ip', '500'], {}, async (m, uport) => {
    const c = await UdpClient.open(uport);
    await c.init();
    // the flood comes from 127.0.0.2, the client from 127.0.0.1
    const f = await rawSocket('127.0.0.2');
    const junk = Buffer.from(JSON.stringify({ _udp_hello: 'flood', pad: 'z'.repeat(100) }));
    let sent = 0;
    let stop = false;
    const flood = (async () => {
      const t0 = Date.now();
      while (!stop && Date.now() - t0 < 4000 && sent < 200000) {
        for (let i = 0; i < 200; i++) f.send(junk, uport, '127.0.0.1');
        sent += 200;
        await new Promise((r) => setImmediate(r));
      }
    })();
    const t0 = Date.now();
    for (let i = 0; i < 20; i++) {
      const r = await c.request(call('echo', { message: `during flood ${i}` }), 10000);
      assert.equal(r.result.content[0].text, `during flood ${i}`);
    }
    const took = Date.now() - t0;
    stop = true;
    await flood;
    await sleep(500);
    // at most 500 a second (+ the burst) were answered, each with a cookie
    const seconds = 6;
    assert.ok(f.got.length <= 500 * (seconds + 1), `${f.got.length} answers to ${sent} datagrams`);
    assert.ok(f.got.length < sent / 2, `most of the ${sent} were dropped (${f.got.length} answered)`);
    assert.ok(took < 30000, `the other client took ${took} ms`);
    await waitFor(() => /event=udp_rate_limited/.test(m.stderr), 15000, 'the drops are logged');
    f.close();
    c.close();
  });
});

// ---------------------------------------------------------------- 9. no acks

test('a client that never acknowledges gets at most the send window of 64 datagrams, then is given up; its session stays', { timeout: 90000 }, async () => {
  await withListener('udp', [], {}, async (m, uport) => {
    const c = await UdpClient.open(uport);
    const sid = await c.init();
    await sleep(200);
    const acked = c.delivered; // the last acknowledgement the client sent
    c.noAck = true;
    c.send(call('countdown', { n: 500, interval_ms: 1 }, { _meta: { progressToken: 'n' } }));
    await sleep(2500);
    // mcpd numbers no datagram more than the window past what was acknowledged
    assert.ok(c.highestSeqIn > acked + 32, `mcpd sent (${c.highestSeqIn} after ${acked})`);
    assert.ok(c.highestSeqIn - acked <= 64, `highest ${c.highestSeqIn}, acknowledged ${acked}`);
    assert.ok(c.duplicatesIn > 0, 'and it retransmitted what was not acknowledged');
    // 8 retransmissions of one datagram (RTO doubling from >= 100 ms, capped
    // at 4 s: some 15 to 25 s), then the peer is dropped
    const t0 = Date.now();
    await waitFor(() => /event=udp_closed msg="peer [^"]*: no acknowledgement/.test(m.stderr), 45000, 'the peer given up', 200);
    const took = Date.now() - t0;
    assert.ok(took < 40000, `given up after ${took} ms`);
    c.close();
    // the session and its streams stay: a new address resumes it
    const c2 = await UdpClient.open(uport);
    assert.deepEqual((await c2.connect({ sessionId: sid })).result, { transport: 'udp', sessionId: sid });
    assert.equal((await c2.request(call('echo', { message: 'after give-up' }))).result.content[0].text, 'after give-up');
    c2.close();
  });
});

// ---------------------------------------------------------------- 10. scale, idle, SIGTERM

test('200 UDP peers add no threads, and each answers', { timeout: 120000 }, async () => {
  await withListener('udp', ['--max-workers', '8', '--max-connections-per-ip', '0', '--log-level', 'warn'], {}, async (m, uport) => {
    await manyClientsAddNoThreads(m, uport, UdpClient, (c) => c.close(), 'peers');
  });
});

test('an idle peer is dropped after --udp-idle-ms with a goodbye; a call in flight is not idleness', async () => {
  await withListener('udp', ['--udp-idle-ms', '500'], {}, async (m, uport) => {
    const c = await UdpClient.open(uport);
    await c.init();
    // 1.5 s of a call with nothing sent by the client meanwhile (but acks)
    const r = await c.request(call('countdown', { n: 3, interval_ms: 500 }), 10000);
    assert.equal(r.result.content[0].text, 'countdown finished');
    const bye = await c.next(5000);
    assert.equal(bye.id, null);
    assert.equal(bye.error.data.reason, 'idle timeout');
    assert.match(bye.error.message, /--udp-idle-ms/);
    c.close();
  });
});

test('SIGTERM: peers get a goodbye, mcpd exits 0, and the session resumes after a restart', async () => {
  const { dir, db } = tempDb();
  const uport = await freePort();
  const mcpd = await startMcpd({ db, dir, args: ['--udp-listen', `127.0.0.1:${uport}`] });
  try {
    const c = await UdpClient.open(uport);
    const sid = await c.init();
    const exit = mcpd.stop('SIGTERM', 10000);
    const bye = await c.next(10000);
    assert.equal(bye.error.data.reason, 'shutting down');
    assert.equal((await exit).code, 0, mcpd.stderr);
    await mcpd.restart();
    const c2 = await UdpClient.open(uport);
    const r = await c2.connect({ sessionId: sid });
    assert.deepEqual(r.result, { transport: 'udp', sessionId: sid });
    assert.equal((await c2.request(call('echo', { message: 'back' }))).result.content[0].text, 'back');
    c.close();
    c2.close();
  } finally {
    await mcpd.cleanup();
  }
});
