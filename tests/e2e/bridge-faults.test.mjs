// mcp-bridge under faults. Each test ends with a normal call that works:
// the bridge recovers by itself or fails one request clearly, and never
// hangs. A fault-injecting proxy (fixtures/bridge-fault-proxy.mjs) sits
// between the bridge and a real mcpd where the fault is in HTTP; mcpd itself
// is SIGKILLed and restarted for the restart cases.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Mcpd, freePort, sleep, startMcpd, tempDb } from './lib/mcpd.mjs';
import { BridgeProc, toolCall } from './fixtures/bridge-proc.mjs';
import { FaultProxy } from './fixtures/bridge-fault-proxy.mjs';

const echoOk = async (b, id, message = `ok-${id}`) => {
  b.send(toolCall(id, 'echo', { message }));
  const r = await b.response(id, 30000);
  assert.equal(r.result?.content?.[0]?.text, message, JSON.stringify(r));
};

async function withProxy(fn, bridgeArgs = []) {
  const m = await startMcpd();
  const p = await new FaultProxy(m.port).listen();
  const b = new BridgeProc([p.url, ...bridgeArgs]);
  try {
    await b.init();
    await fn({ m, p, b });
  } finally {
    await b.cleanup();
    await p.close();
    await m.cleanup();
  }
}

test('a server that accepts and never answers: a clear error after --response-timeout-ms', async () => {
  await withProxy(
    async ({ p, b }) => {
      p.arm('hang');
      const t0 = Date.now();
      b.send(toolCall(2, 'echo', { message: 'lost' }));
      const r = await b.response(2, 20000);
      assert.match(r.error.message, /accepted the request but sent no response within 1500 ms.*--response-timeout-ms/);
      assert.ok(Date.now() - t0 >= 1400);
      await echoOk(b, 3);
    },
    ['--response-timeout-ms', '1500'],
  );
});

test('HTTP 500, a body that is not JSON, bytes that are not HTTP: one clear error each', async () => {
  await withProxy(async ({ p, b }) => {
    p.arm('status500');
    b.send(toolCall(2, 'echo', { message: 'x' }));
    const e500 = await b.response(2);
    assert.match(e500.error.message, /answered HTTP 500.*server's logs.*internal explosion/);
    p.arm('garbage');
    b.send(toolCall(3, 'echo', { message: 'x' }));
    assert.match((await b.response(3)).error.message, /not JSON.*MCP endpoint/);
    p.arm('rawjunk');
    b.send(toolCall(4, 'echo', { message: 'x' }));
    assert.match((await b.response(4)).error.message, /^mcp-bridge: /);
    await echoOk(b, 5);
    for (const id of [2, 3, 4, 5]) assert.equal(b.repliesTo(id).length, 1);
  });
});

test('a response stream cut mid-call is resumed with Last-Event-ID: the client never notices', async () => {
  await withProxy(async ({ p, b }) => {
    p.arm('cut');
    b.send(toolCall(2, 'countdown', { n: 4, interval_ms: 150 }, { progressToken: 'cut' }));
    const r = await b.response(2, 30000);
    assert.equal(r.result?.content?.[0]?.text, 'countdown finished', JSON.stringify(r));
    const resumes = p.log.filter((x) => x.method === 'GET' && x.headers['last-event-id']);
    assert.ok(resumes.length >= 1, 'the bridge resumed with Last-Event-ID');
    const prog = b.msgs.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'cut');
    assert.deepEqual(prog.map((m) => m.params.progress), [1, 2, 3, 4], 'no progress lost or repeated');
    assert.match(b.stderr, /event=stream_dropped/);
    await echoOk(b, 3);
  });
});

test('a stream cut without event ids: a clear error, then normal calls', async () => {
  await withProxy(async ({ p, b }) => {
    p.arm('cutnoid');
    b.send(toolCall(2, 'echo', { message: 'x' }));
    const r = await b.response(2, 20000);
    assert.match(r.error.message, /closed the response stream before answering, without event ids/);
    await echoOk(b, 3);
  });
});

test('mcpd SIGKILLed and restarted mid-call on the same database: result or clear error, then calls work', async () => {
  const m = await startMcpd();
  const b = new BridgeProc([m.url, '--response-timeout-ms', '20000']);
  try {
    await b.init();
    b.send(toolCall(2, 'countdown', { n: 8, interval_ms: 250 }, { progressToken: 'k' }));
    await b.waitFor((x) => x.method === 'notifications/progress' && x.params.progressToken === 'k', 15000, 'first progress');
    m.kill('SIGKILL');
    await m.exited;
    await sleep(300);
    await m.start(); // same port, same db
    const r = await b.response(2, 40000);
    // mcpd itself says "interrupted by server restart" on the resumed stream;
    // anything else must be the bridge's own clear error
    if (r.error) assert.match(r.error.message, /restart|^mcp-bridge: /);
    else assert.equal(r.result.content[0].text, 'countdown finished');
    assert.equal(b.repliesTo(2).length, 1);
    await echoOk(b, 3);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

for (const transport of ['http', 'ws']) {
  test(`mcpd restarted on an empty database: the bridge re-initializes by itself (${transport})`, async () => {
    const m = await startMcpd();
    // over ws the 404 comes to the handshake of the next connection
    const b = new BridgeProc(
      transport === 'ws' ? ['--transport', 'ws', '--response-timeout-ms', '6000', `ws://127.0.0.1:${m.port}/mcp/ws`] : [m.url],
    );
    let m2;
    try {
      await b.init();
      await echoOk(b, 2);
      await m.stop('SIGKILL');
      const { dir, db } = tempDb();
      m2 = new Mcpd({ db, dir, port: m.port });
      await m2.start();
      // the session is gone: 404, replayed initialize, retried request
      await echoOk(b, 3);
      await echoOk(b, 4);
      assert.match(b.stderr, /event=session_reinitialized/);
      assert.equal(b.msgs.filter((x) => x.id === 1).length, 1, 'the replayed initialize is not relayed');
      for (const id of [2, 3, 4]) assert.equal(b.repliesTo(id).length, 1, `one reply to ${id}`);
    } finally {
      await b.cleanup();
      await m2?.cleanup();
      await m.cleanup();
    }
  });
}

test('a session expired on the server: re-initialized on the next call', async () => {
  const m = await startMcpd({ args: ['--session-idle-ms', '1000'] });
  const b = new BridgeProc([m.url]);
  try {
    await b.init();
    await echoOk(b, 2);
    await sleep(3500);
    await echoOk(b, 3);
    assert.match(b.stderr, /event=session_reinitialized/, 'the expired session was rebuilt');
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('the client closes stdin mid-call: the call finishes, the session is deleted, exit 0', async () => {
  await withProxy(async ({ p, b }) => {
    b.send(toolCall(2, 'countdown', { n: 3, interval_ms: 200 }));
    await sleep(100);
    b.end();
    assert.deepEqual(await b.waitExit(15000), { code: 0, signal: null });
    assert.equal(b.repliesTo(2).length, 1);
    assert.equal(b.repliesTo(2)[0].result?.content?.[0]?.text, 'countdown finished');
    assert.ok(p.log.some((x) => x.method === 'DELETE'), 'the session was deleted');
  });
  // a new bridge works as ever
  const m = await startMcpd();
  const b = new BridgeProc([m.url]);
  try {
    await b.init();
    await echoOk(b, 2);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('SIGTERM mid-call: the call is answered (error), the session deleted, exit 0 quickly', async () => {
  await withProxy(async ({ p, b }) => {
    b.send(toolCall(2, 'countdown', { n: 50, interval_ms: 500 }));
    await sleep(300);
    const t0 = Date.now();
    b.kill('SIGTERM');
    assert.deepEqual(await b.waitExit(10000), { code: 0, signal: null });
    assert.ok(Date.now() - t0 < 8000);
    assert.equal(b.repliesTo(2).length, 1);
    assert.match(b.repliesTo(2)[0].error.message, /stopped by a signal/);
    assert.ok(p.log.some((x) => x.method === 'DELETE'), 'the session was deleted');
  });
});

test('several bridges at once share nothing and do not interfere', async () => {
  const m = await startMcpd();
  const bs = Array.from({ length: 4 }, () => new BridgeProc([m.url]));
  try {
    await Promise.all(bs.map((b) => b.init()));
    bs[0].kill('SIGKILL');
    await Promise.all(bs.slice(1).map((b, i) => echoOk(b, 10 + i)));
  } finally {
    for (const b of bs) await b.cleanup();
    await m.cleanup();
  }
});

test('--transport poll: requests go with "stream": true, a failed mcpd/poll is retried', async () => {
  await withProxy(
    async ({ p, b }) => {
      p.arm('status500', 'mcpd/poll');
      b.send(toolCall(2, 'countdown', { n: 3, interval_ms: 100 }, { progressToken: 'q' }));
      const r = await b.response(2, 30000);
      assert.equal(r.result?.content?.[0]?.text, 'countdown finished', JSON.stringify(r));
      const prog = b.msgs.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'q');
      assert.deepEqual(prog.map((m) => m.params.progress), [1, 2, 3]);
      assert.ok(p.log.filter((x) => x.rpcMethod === 'mcpd/poll').length >= 2, 'polled, and polled again after the 500');
      assert.ok(!b.msgs.some((m) => m.result?.stream_id), 'the stream handle is not relayed');
      await echoOk(b, 3);
    },
    ['--transport', 'poll'],
  );
});

test('--transport ws: mcpd SIGKILLed and restarted mid-call; the bridge reconnects and resumes', async () => {
  const m = await startMcpd();
  const b = new BridgeProc(['--transport', 'ws', '--response-timeout-ms', '20000', `ws://127.0.0.1:${m.port}/mcp/ws`]);
  try {
    await b.init();
    await echoOk(b, 2);
    b.send(toolCall(3, 'countdown', { n: 8, interval_ms: 250 }, { progressToken: 'w' }));
    await b.waitFor((x) => x.method === 'notifications/progress' && x.params.progressToken === 'w', 15000, 'first progress');
    m.kill('SIGKILL');
    await m.exited;
    await sleep(300);
    await m.start(); // same port, same db: the session survives
    const r = await b.response(3, 40000);
    // mcpd ends the interrupted call with "interrupted by server restart"
    if (r.error) assert.match(r.error.message, /restart|^mcp-bridge: /);
    else assert.equal(r.result.content[0].text, 'countdown finished');
    assert.equal(b.repliesTo(3).length, 1);
    assert.match(b.stderr, /event=ws_resumed/);
    await echoOk(b, 4);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('--transport ws: an unreachable server gets a clear error, then a working one is used', async () => {
  const port = await freePort();
  const b = new BridgeProc(['--transport', 'ws', '--connect-timeout-ms', '3000', `ws://127.0.0.1:${port}/mcp/ws`]);
  try {
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    assert.match((await b.response(1)).error.message, /cannot connect to 127\.0\.0\.1:\d+/);
    const { dir, db } = tempDb();
    const m = new Mcpd({ db, dir, port });
    await m.start();
    try {
      await b.init();
      await echoOk(b, 2);
    } finally {
      await m.cleanup();
    }
  } finally {
    await b.cleanup();
  }
});
