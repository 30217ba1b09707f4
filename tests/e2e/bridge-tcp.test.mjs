// mcp-bridge tcp://HOST:PORT: a desktop client's stdio relayed to mcpd's
// raw TCP transport (--tcp-listen), with the token of --token-env sent in
// mcpd/connect:
//   - initialize, tools/list, a countdown with progress, through the bridge;
//   - mcpd SIGKILLed mid-countdown and restarted on the same database and
//     ports: the bridge reconnects, resumes with the last event id it saw,
//     and the call gets exactly one reply, its progress once, in order;
//   - a bad token: the client's request gets one error saying the server
//     refused the token;
//   - plain tcp:// to a host that is not loopback is refused (no TLS).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { freePort, mcpAdmin, sleep, startMcpd, tempDb } from './lib/mcpd.mjs';
import { BridgeProc, toolCall } from './fixtures/bridge-proc.mjs';

const echoOk = async (b, id, message = `ok-${id}`) => {
  b.send(toolCall(id, 'echo', { message }));
  const r = await b.response(id, 20000);
  assert.equal(r.result?.content?.[0]?.text, message, JSON.stringify(r));
};

test('mcp-bridge tcp://: token in mcpd/connect, calls relayed, SIGKILL + restart resumed from the last event id', async () => {
  const { dir, db } = tempDb();
  const tport = await freePort();
  const m = await startMcpd({ db, dir, args: ['--tcp-listen', `127.0.0.1:${tport}`, '--auth', 'token'] });
  const add = mcpAdmin(db, 'tokens', 'add', 'desk');
  assert.equal(add.status, 0, add.stderr);
  const token = add.stdout.trim();
  const b = new BridgeProc(['--token-env', 'TCP_TOKEN', '--response-timeout-ms', '20000', `tcp://127.0.0.1:${tport}`], {
    env: { TCP_TOKEN: token },
  });
  try {
    const init = await b.init();
    assert.ok(init.result?.serverInfo, JSON.stringify(init));
    b.send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const list = await b.response(2);
    assert.ok(list.result.tools.some((t) => t.name === 'countdown'));
    await echoOk(b, 3);
    b.send(toolCall(4, 'countdown', { n: 8, interval_ms: 250 }, { progressToken: 't' }));
    await b.waitFor((x) => x.method === 'notifications/progress' && x.params.progressToken === 't', 15000, 'first progress');
    m.kill('SIGKILL');
    await m.exited;
    await sleep(300);
    await m.start(); // same ports, same db: the session survives
    const r = await b.response(4, 40000);
    if (r.error) assert.match(r.error.message, /restart/, JSON.stringify(r));
    else assert.equal(r.result.content[0].text, 'countdown finished');
    assert.equal(b.repliesTo(4).length, 1);
    const progress = b.msgs.filter((x) => x.method === 'notifications/progress' && x.params.progressToken === 't').map((x) => x.params.progress);
    progress.forEach((p, i) => assert.equal(p, i + 1, `progress once, in order: ${progress}`));
    assert.match(b.stderr, /event=ws_resumed msg="reconnected and resumed after the last event"/);
    await echoOk(b, 5);
    for (const id of [1, 2, 3, 5]) assert.equal(b.repliesTo(id).length, 1);
    assert.ok(!b.msgs.some((x) => x.id === null), `no goodbye reached the client: ${JSON.stringify(b.msgs.filter((x) => x.id === null))}`);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('mcp-bridge tcp:// with a bad token: the request gets one error saying the server refused the token', async () => {
  const tport = await freePort();
  const m = await startMcpd({ args: ['--tcp-listen', `127.0.0.1:${tport}`, '--auth', 'token'] });
  const b = new BridgeProc(['--token-env', 'TCP_TOKEN', `tcp://127.0.0.1:${tport}`], { env: { TCP_TOKEN: 'mcpd_wrong' } });
  try {
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    const r = await b.response(1);
    assert.match(r.error?.message ?? '', /^mcp-bridge: 127\.0\.0\.1:\d+ refused the connection: Unauthorized.*token/, JSON.stringify(r));
    assert.equal(b.repliesTo(1).length, 1);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('mcp-bridge tcp:// to a host that is not loopback is refused without --allow-http (no TLS on raw TCP)', async () => {
  const { spawnSync } = await import('node:child_process');
  const { BRIDGE_BIN } = await import('./fixtures/bridge-proc.mjs');
  const r = spawnSync(BRIDGE_BIN, ['tcp://example.com:9000'], { encoding: 'utf8', timeout: 10000, input: '' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /refusing plain tcp to example\.com/);
});
