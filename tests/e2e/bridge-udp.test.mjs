// mcp-bridge udp://HOST:PORT: a desktop client's stdio relayed to mcpd's
// UDP transport (--udp-listen; README "UDP wire rules"), with the token of
// --token-env sent in mcpd/connect:
//   - initialize, tools/list, a 20,000-character echo (fragments both
//     ways), a countdown with progress, through the bridge;
//   - mcpd SIGKILLed mid-countdown and restarted on the same database and
//     ports: mcpd says it has no state for the bridge (a reset), the bridge
//     gets a new cookie, resumes with the last event id it saw, and the
//     call gets exactly one reply, its progress once, in order;
//   - a bad token: the client's request gets one error saying the server
//     refused the token;
//   - plain udp:// to a host that is not loopback is refused (no TLS).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { freePort, mcpAdmin, sleep, startMcpd, tempDb } from './lib/mcpd.mjs';
import { BridgeProc, toolCall } from './fixtures/bridge-proc.mjs';

const echoOk = async (b, id, message = `ok-${id}`) => {
  b.send(toolCall(id, 'echo', { message }));
  const r = await b.response(id, 20000);
  assert.equal(r.result?.content?.[0]?.text, message, JSON.stringify(r).slice(0, 300));
};

test('mcp-bridge udp://: token in mcpd/connect, calls relayed, SIGKILL + restart resumed from the last event id', async () => {
  const { dir, db } = tempDb();
  const uport = await freePort();
  const m = await startMcpd({ db, dir, args: ['--udp-listen', `127.0.0.1:${uport}`, '--auth', 'token'] });
  const add = mcpAdmin(db, 'tokens', 'add', 'desk');
  assert.equal(add.status, 0, add.stderr);
  const token = add.stdout.trim();
  const b = new BridgeProc(['--token-env', 'UDP_TOKEN', '--response-timeout-ms', '20000', `udp://127.0.0.1:${uport}`], {
    env: { UDP_TOKEN: token },
  });
  try {
    const init = await b.init();
    assert.ok(init.result?.serverInfo, JSON.stringify(init));
    b.send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const list = await b.response(2);
    assert.ok(list.result.tools.some((t) => t.name === 'countdown'));
    await echoOk(b, 3);
    await echoOk(b, 30, 'ü'.repeat(10000));
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
    assert.match(b.stderr, /event=udp_connected msg="resumed after the last event"/);
    await echoOk(b, 5);
    for (const id of [1, 2, 3, 5, 30]) assert.equal(b.repliesTo(id).length, 1);
    assert.ok(!b.msgs.some((x) => x.id === null), `no goodbye reached the client: ${JSON.stringify(b.msgs.filter((x) => x.id === null))}`);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('mcp-bridge udp:// with a bad token: the request gets one error saying the server refused the token', async () => {
  const uport = await freePort();
  const m = await startMcpd({ args: ['--udp-listen', `127.0.0.1:${uport}`, '--auth', 'token'] });
  const b = new BridgeProc(['--token-env', 'UDP_TOKEN', `udp://127.0.0.1:${uport}`], { env: { UDP_TOKEN: 'mcpd_wrong' } });
  try {
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    const r = await b.response(1);
    assert.match(r.error?.message ?? '', /^mcp-bridge: 127\.0\.0\.1:\d+ refused the token: .*/, JSON.stringify(r));
    await sleep(500);
    assert.equal(b.repliesTo(1).length, 1);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('mcp-bridge udp:// to a host that is not loopback is refused without --allow-http (no TLS on UDP)', async () => {
  const { spawnSync } = await import('node:child_process');
  const { BRIDGE_BIN } = await import('./fixtures/bridge-proc.mjs');
  const r = spawnSync(BRIDGE_BIN, ['udp://example.com:9000'], { encoding: 'utf8', timeout: 10000, input: '' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /refusing plain udp to example\.com/);
});
