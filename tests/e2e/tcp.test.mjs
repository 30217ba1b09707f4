// The raw TCP transport (--tcp-listen, issue 33), against a real mcpd on
// loopback with real sockets (README "TCP wire rules"):
//   1. initialize, tools/list and tools/call over NDJSON and over
//      Content-Length framing, answered in the client's framing, with
//      event ids in _meta;
//   2. a malformed line is answered -32700 and the connection goes on; an
//      oversized line is answered with an error naming the limit, and none
//      of it is taken for a message;
//   3. --auth token: a request before mcpd/connect is refused and the
//      connection closed; a bad token too; a good one is served; revoking
//      it (mcp-admin tokens revoke) ends the connection, saying why;
//   4. a dropped connection resumes with mcpd/connect {sessionId,
//      lastEventId}: the rest of a countdown exactly once, in order;
//   5. SIGKILL mid-countdown, restart on the same --db, resume: what was
//      stored, once, in order, then the restart error;
//   6. a connection that sends nothing (or half a line) is closed after
//      --tcp-handshake-ms; one idle after its session began (nothing in
//      flight, no complete message: a trickle of bytes is idle too), after
//      --tcp-idle-ms;
//   7. --max-connections-per-ip is enforced on TCP;
//   8. 200 open TCP connections add no threads;
//   9. SIGTERM says goodbye on open connections and mcpd exits 0.

import assert from 'node:assert/strict';
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
import { TcpClient, eventIdOf } from './lib/tcp-client.mjs';

/** Reads to the end: every message left, then the close. */
async function drain(c, ms = 5000) {
  const got = [];
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      got.push(await c.next(Math.max(1, deadline - Date.now())));
    } catch (e) {
      if (c.ended) return got;
      throw e;
    }
  }
}

// ---------------------------------------------------------------- 1. the basics

for (const framing of ['ndjson', 'content-length']) {
  test(`${framing}: initialize, tools/list, tools/call, answered in the same framing`, async () => {
    await withListener('tcp', [], {}, async (m, tport) => {
      const c = await TcpClient.open(tport, { framing });
      const sid = await c.init();
      assert.match(sid ?? '', /^[0-9a-f]{32}$/, 'initialize tells the session id in _meta');
      const list = await c.request({ jsonrpc: '2.0', id: newId(), method: 'tools/list' });
      const names = list.result.tools.map((t) => t.name);
      for (const n of ['echo', 'countdown']) assert.ok(names.includes(n), `tools/list lacks ${n}`);
      const r = await c.request(call('echo', { message: 'über tcp' }));
      assert.equal(r.result.content[0].text, 'über tcp');
      assert.match(eventIdOf(r) ?? '', /^[0-9a-f]+:\d+$/, 'event id on the reply');
      // a countdown's progress comes as it happens, on the same connection
      const cd = call('countdown', { n: 3, interval_ms: 20 }, { _meta: { progressToken: 'p' } });
      c.send(cd);
      const msgs = await c.until(cd.id);
      const progress = msgs.filter((x) => x.method === 'notifications/progress').map((x) => x.params.progress);
      assert.deepEqual(progress, [1, 2, 3]);
      assert.equal(msgs.at(-1).result.content[0].text, 'countdown finished');
      c.end();
      await c.closed;
      assert.equal(c.buf.length, 0, 'no partial frame');
    });
  });
}

// ---------------------------------------------------------------- 2. bad input

test('a malformed line is answered -32700 and the connection goes on; an oversized one names the limit', async () => {
  await withListener('tcp', ['--max-body', '4096'], {}, async (m, tport) => {
    const c = await TcpClient.open(tport);
    await c.init();
    c.sendRaw('{"jsonrpc":"2.0", this is not json\n');
    const e1 = await c.next();
    assert.equal(e1.id, null);
    assert.equal(e1.error.code, -32700);
    assert.equal((await c.request(call('echo', { message: 'after junk' }))).result.content[0].text, 'after junk');

    // 10,000 bytes of a request that would echo its text: refused whole
    const big = JSON.stringify(call('echo', { message: 'x'.repeat(10000) }));
    c.sendRaw(`${big}\n`);
    const e2 = await c.next();
    assert.equal(e2.id, null);
    assert.equal(e2.error.code, -32600);
    assert.match(e2.error.message, /4096/, 'the error names the limit');
    const after = await c.request(call('echo', { message: 'after big' }));
    assert.equal(after.result.content[0].text, 'after big', 'nothing of the big line was taken for a message');
    assert.equal(c.queue.length, 0, 'nothing else came');

    // the same over Content-Length: a frame too long is skipped, not parsed
    const cl = await TcpClient.open(tport, { framing: 'content-length' });
    await cl.init();
    cl.sendRaw(cl.frame(big));
    const e3 = await cl.next();
    assert.equal(e3.error.code, -32600);
    assert.match(e3.error.message, /4096/);
    assert.equal((await cl.request(call('echo', { message: 'cl after big' }))).result.content[0].text, 'cl after big');
    c.destroy();
    cl.destroy();
  });
});

// ---------------------------------------------------------------- 3. auth

test('--auth token: nothing before mcpd/connect, no bad token; a good one is served until it is revoked', async () => {
  const { dir, db } = tempDb();
  await withListener('tcp', ['--auth', 'token'], { db, dir }, async (m, tport) => {
    const token = admin(db, 'tokens', 'add', 'alice');

    // a request first: refused, closed
    const a = await TcpClient.open(tport);
    a.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
    const ra = await drain(a);
    assert.equal(ra.length, 1, JSON.stringify(ra));
    assert.equal(ra[0].id, 1);
    assert.equal(ra[0].error.code, -32001);
    assert.equal(ra[0].error.data.reason, 'unauthorized');
    assert.equal(ra[0].error.data.transport, 'tcp');
    assert.match(ra[0].error.message, /mcpd\/connect/);

    // junk first: refused, closed
    const j = await TcpClient.open(tport);
    j.sendRaw('not json at all\n');
    const rj = await drain(j);
    assert.equal(rj.length, 1);
    assert.equal(rj[0].error.code, -32001);
    assert.equal(rj[0].error.data.reason, 'unauthorized');

    // a connect without a token, then with a bad one
    for (const params of [{}, { token: 'mcpd_not-a-real-token' }]) {
      const b = await TcpClient.open(tport);
      b.send({ jsonrpc: '2.0', id: 'c', method: 'mcpd/connect', params });
      const rb = await drain(b);
      assert.equal(rb.length, 1, JSON.stringify(rb));
      assert.equal(rb[0].id, 'c');
      assert.equal(rb[0].error.code, -32001);
      assert.deepEqual(rb[0].error.data, { transport: 'tcp', reason: 'unauthorized' });
      assert.match(rb[0].error.message, /Unauthorized/);
    }

    // a malformed connect (a token that is not a string): refused, closed
    const bad = await TcpClient.open(tport);
    bad.send({ jsonrpc: '2.0', id: 'c', method: 'mcpd/connect', params: { token: 5 } });
    const rbad = await drain(bad);
    assert.equal(rbad.length, 1, JSON.stringify(rbad));
    assert.equal(rbad[0].error.code, -32602);
    assert.equal(rbad[0].error.data.reason, 'bad connect');
    assert.ok(bad.ended, 'closed after a bad connect with --auth token');

    // the good token
    const g = await TcpClient.open(tport);
    const ok = await g.request({ jsonrpc: '2.0', id: 'c', method: 'mcpd/connect', params: { token } });
    assert.deepEqual(ok.result, { transport: 'tcp', sessionId: null });
    const sid = await g.init();
    assert.match(sid, /^[0-9a-f]{32}$/);
    assert.equal((await g.request(call('echo', { message: 'authed' }))).result.content[0].text, 'authed');
    // a long call in flight when the token goes
    g.send(call('countdown', { n: 100, interval_ms: 200 }));

    admin(db, 'tokens', 'revoke', 'alice');
    const t0 = Date.now();
    const rest = await drain(g, 10000);
    assert.ok(g.ended, 'the connection was closed');
    const bye = rest.filter((x) => x.id === null && x.error);
    assert.equal(bye.length, 1, `one goodbye: ${JSON.stringify(rest)}`);
    assert.match(bye[0].error.message, /token revoked/);
    assert.equal(bye[0].error.data.reason, 'unauthorized');
    assert.ok(Date.now() - t0 < 5000, 'ended within a few seconds of the revocation');

    // and the token no longer opens a connection
    const h = await TcpClient.open(tport);
    h.send({ jsonrpc: '2.0', id: 'c', method: 'mcpd/connect', params: { token } });
    const rh = await drain(h);
    assert.equal(rh[0].error.code, -32001);
    assert.match(rh[0].error.message, /revoked/);
  });
});

test('--tcp-listen on a non-loopback address without --auth token is refused at start', () => refusedWithoutAuth('tcp'));

// ---------------------------------------------------------------- 4. resume

test('reconnect with mcpd/connect {sessionId, lastEventId}: the rest of a countdown exactly once, in order', async () => {
  await withListener('tcp', [], {}, async (m, tport) => {
    const c = await TcpClient.open(tport);
    const sid = await c.init();
    const cd = call('countdown', { n: 10, interval_ms: 100 }, { _meta: { progressToken: 'r' } });
    c.send(cd);
    const got = await progressNotes(c, 3);
    assert.deepEqual(got.map((x) => x.params.progress), [1, 2, 3]);
    const last = eventIdOf(got[2]);
    assert.match(last ?? '', /^[0-9a-f]+:\d+$/);
    c.destroy();

    await sleep(150);
    const c2 = await TcpClient.open(tport);
    c2.send({ jsonrpc: '2.0', id: 'resume', method: 'mcpd/connect', params: { sessionId: sid, lastEventId: last } });
    const first = await c2.next();
    assert.deepEqual(first, { jsonrpc: '2.0', id: 'resume', result: { transport: 'tcp', sessionId: sid } }, 'the answer comes first');
    const rest = await c2.until(cd.id);
    await sleep(400); // a duplicate would come now
    rest.push(...c2.queue.splice(0));
    const progress = rest.filter((x) => x.method === 'notifications/progress').map((x) => x.params.progress);
    assert.deepEqual(progress, [4, 5, 6, 7, 8, 9, 10], JSON.stringify(rest));
    const finals = rest.filter((x) => x.id === cd.id);
    assert.equal(finals.length, 1);
    assert.equal(finals[0].result.content[0].text, 'countdown finished');
    const seqs = rest.map(eventIdOf).filter(Boolean).map(seqOf);
    assert.equal(seqs[0], seqOf(last) + 1, 'starts right after the last event id');
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
    // the session goes on over the new connection
    assert.equal((await c2.request(call('echo', { message: 'resumed' }))).result.content[0].text, 'resumed');
    c2.destroy();

    // an unknown session: -32001 Session not found, and the connection is still usable
    const c3 = await TcpClient.open(tport);
    const nf = await c3.request({ jsonrpc: '2.0', id: 'r', method: 'mcpd/connect', params: { sessionId: 'f'.repeat(32) } });
    assert.equal(nf.error.code, -32001);
    assert.match(nf.error.message, /Session not found/);
    await c3.init();
    assert.equal((await c3.request(call('echo', { message: 'fresh' }))).result.content[0].text, 'fresh');
    c3.destroy();
  });
});

// ---------------------------------------------------------------- 5. SIGKILL

test('SIGKILL mid-countdown, restart on the same db, resume: stored messages once, in order, then the restart error', async () => {
  const tport = await freePort();
  const mcpd = await startMcpd({ args: ['--tcp-listen', `127.0.0.1:${tport}`] });
  try {
    const c = await TcpClient.open(tport);
    const sid = await c.init();
    const cd = call('countdown', { n: 50, interval_ms: 100 }, { _meta: { progressToken: 'k' } });
    c.send(cd);
    const got = await progressNotes(c, 3);
    const last = eventIdOf(got[2]);
    await sleep(250);
    mcpd.kill('SIGKILL');
    await mcpd.exited;
    const before = (await drain(c, 3000)).filter((x) => x.method === 'notifications/progress').map((x) => x.params.progress);

    const tport2 = await freePort();
    mcpd.args = ['--tcp-listen', `127.0.0.1:${tport2}`];
    await mcpd.restart({ port: await freePort() });
    const c2 = await TcpClient.open(tport2);
    c2.send({ jsonrpc: '2.0', id: 'resume', method: 'mcpd/connect', params: { sessionId: sid, lastEventId: last } });
    assert.deepEqual((await c2.next()).result, { transport: 'tcp', sessionId: sid });
    const msgs = await c2.until(cd.id);
    await sleep(400);
    msgs.push(...c2.queue.splice(0));
    const final = msgs.filter((x) => x.id === cd.id);
    assert.equal(final.length, 1, `exactly one final message: ${JSON.stringify(msgs)}`);
    assert.equal(final[0].error?.code, -32603);
    assert.match(final[0].error?.message ?? '', /interrupted by server restart/);
    assert.equal(msgs.at(-1).id, cd.id, 'the error comes last');
    const progress = msgs.filter((x) => x.method === 'notifications/progress').map((x) => x.params.progress);
    progress.forEach((p, i) => assert.equal(p, 4 + i, `stored progress in order, once: ${progress}`));
    const seen = got.map((x) => x.params.progress).concat(before);
    assert.deepEqual(progress.slice(0, seen.length - 3), seen.slice(3), 'what came before the kill was stored');
    assert.ok(progress.length < 47, 'the countdown cannot have finished');
    assert.equal((await c2.request(call('echo', { message: 'after restart' }))).result.content[0].text, 'after restart');
    c2.destroy();
  } finally {
    await mcpd.cleanup();
  }
});

// ---------------------------------------------------------------- 6. timeouts

test('half-open: nothing (or half a line) within --tcp-handshake-ms is closed; an idle session after --tcp-idle-ms', async () => {
  await withListener('tcp', ['--tcp-handshake-ms', '300', '--tcp-idle-ms', '800'], {}, async (m, tport) => {
    const silent = await TcpClient.open(tport);
    const half = await TcpClient.open(tport);
    half.sendRaw('{"jsonrpc":"2.0","id":1,"method":"ping"'); // no newline, ever
    for (const c of [silent, half]) {
      const got = await drain(c, 5000);
      assert.ok(c.ended, 'closed by mcpd');
      assert.equal(got.length, 1, JSON.stringify(got));
      assert.equal(got[0].id, null);
      assert.equal(got[0].error.data.reason, 'handshake timeout');
      assert.match(got[0].error.message, /300 ms/);
    }

    // served, then silent: closed after the idle timeout, not before
    const idle = await TcpClient.open(tport);
    await idle.init();
    const t0 = Date.now();
    // a call in flight longer than the idle timeout is not idleness
    const cd = call('countdown', { n: 3, interval_ms: 500 });
    const msgs = await idle.request(cd, 10000);
    assert.equal(msgs.result.content[0].text, 'countdown finished');
    assert.ok(Date.now() - t0 >= 1000);
    const got = await drain(idle, 5000);
    assert.ok(idle.ended);
    assert.equal(got.at(-1).error.data.reason, 'idle timeout');
    assert.match(got.at(-1).error.message, /800 ms/);

    // slow: bytes of a message that never ends are not activity
    const slow = await TcpClient.open(tport);
    await slow.init();
    const drip = setInterval(() => slow.sendRaw('{'), 100);
    try {
      const g = await drain(slow, 5000);
      assert.ok(slow.ended, 'a trickle does not keep the connection open');
      assert.equal(g.at(-1).error.data.reason, 'idle timeout');
    } finally {
      clearInterval(drip);
    }
  });
});

// ---------------------------------------------------------------- 7. caps

test('--max-connections-per-ip: the connection past the cap is told so and closed; a freed slot is reused', async () => {
  await withListener('tcp', ['--max-connections-per-ip', '3'], {}, async (m, tport) => {
    const open = [];
    for (let i = 0; i < 3; i++) {
      const c = await TcpClient.open(tport);
      await c.init(`i${i}`);
      open.push(c);
    }
    const over = await TcpClient.open(tport);
    const got = await drain(over);
    assert.equal(got.length, 1);
    assert.equal(got[0].error.code, -32014);
    assert.match(got[0].error.message, /--max-connections-per-ip/);
    open[0].destroy();
    await waitFor(async () => {
      const c = await TcpClient.open(tport);
      try {
        await c.init('again');
        open[0] = c;
        return true;
      } catch {
        c.destroy();
        return false;
      }
    }, 5000, 'a slot freed by a closed connection');
    for (const c of open) assert.equal((await c.request(call('echo', { message: 'still' }))).result.content[0].text, 'still');
    for (const c of open) c.destroy();
  });
});

// ---------------------------------------------------------------- 8. threads

test('200 open TCP connections add no threads, and each answers', { timeout: 120000 }, async () => {
  await withListener('tcp', ['--max-workers', '8', '--max-connections-per-ip', '0', '--log-level', 'warn'], {}, async (m, tport) => {
    await manyClientsAddNoThreads(m, tport, TcpClient, (c) => c.destroy(), 'connections');
  });
});

// ---------------------------------------------------------------- 9. SIGTERM

test('SIGTERM: open TCP connections get a goodbye, mcpd exits 0, and the session resumes after a restart', async () => {
  const { dir, db } = tempDb();
  const tport = await freePort();
  const mcpd = await startMcpd({ db, dir, args: ['--tcp-listen', `127.0.0.1:${tport}`] });
  try {
    const c = await TcpClient.open(tport);
    const sid = await c.init();
    const exit = mcpd.stop('SIGTERM', 10000);
    const got = await drain(c, 10000);
    assert.ok(c.ended);
    assert.equal(got.at(-1).error.data.reason, 'shutting down');
    assert.equal((await exit).code, 0, mcpd.stderr);
    await mcpd.restart();
    const c2 = await TcpClient.open(tport);
    const r = await c2.request({ jsonrpc: '2.0', id: 'r', method: 'mcpd/connect', params: { sessionId: sid } });
    assert.deepEqual(r.result, { transport: 'tcp', sessionId: sid });
    assert.equal((await c2.request(call('echo', { message: 'back' }))).result.content[0].text, 'back');
    c2.destroy();
  } finally {
    await mcpd.cleanup();
  }
});
