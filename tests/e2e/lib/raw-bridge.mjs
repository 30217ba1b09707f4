// What the mcp-bridge tests of the raw transports (bridge-tcp, bridge-udp)
// share: the bridge against mcpd's --tcp-listen or --udp-listen with
// --auth token, through a SIGKILL and restart; a bad token; and the
// refusal of a plain raw scheme to a host that is not loopback. The
// scheme ('tcp' or 'udp') names the mcpd flag (--<scheme>-listen) and the
// bridge's URL; what differs between the transports is passed in.

import assert from 'node:assert/strict';

import { BridgeProc, toolCall } from '../fixtures/bridge-proc.mjs';
import { freePort, mcpAdmin, sleep, startMcpd, tempDb } from './mcpd.mjs';

export const echoOk = async (b, id, message = `ok-${id}`) => {
  b.send(toolCall(id, 'echo', { message }));
  const r = await b.response(id, 20000);
  assert.equal(r.result?.content?.[0]?.text, message, JSON.stringify(r).slice(0, 300));
};

/** Token in mcpd/connect, calls relayed, SIGKILL + restart: the countdown
 * in flight gets one reply, its progress once, in order. `calls(b)` makes
 * the transport's own calls before the countdown and returns their ids;
 * `resumed` is the bridge's log line saying it resumed. */
export async function bridgeSurvivesRestart(scheme, { calls = async () => [], resumed }) {
  const { dir, db } = tempDb();
  const port = await freePort();
  const m = await startMcpd({ db, dir, args: [`--${scheme}-listen`, `127.0.0.1:${port}`, '--auth', 'token'] });
  const add = mcpAdmin(db, 'tokens', 'add', 'desk');
  assert.equal(add.status, 0, add.stderr);
  const token = add.stdout.trim();
  const env = `${scheme.toUpperCase()}_TOKEN`;
  const b = new BridgeProc(['--token-env', env, '--response-timeout-ms', '20000', `${scheme}://127.0.0.1:${port}`], {
    env: { [env]: token },
  });
  try {
    const init = await b.init();
    assert.ok(init.result?.serverInfo, JSON.stringify(init));
    b.send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const list = await b.response(2);
    assert.ok(list.result.tools.some((t) => t.name === 'countdown'));
    await echoOk(b, 3);
    const extra = await calls(b);
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
    assert.match(b.stderr, resumed);
    await echoOk(b, 5);
    for (const id of [1, 2, 3, 5, ...extra]) assert.equal(b.repliesTo(id).length, 1);
    assert.ok(!b.msgs.some((x) => x.id === null), `no goodbye reached the client: ${JSON.stringify(b.msgs.filter((x) => x.id === null))}`);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
}

/** A bad token: the client's request gets one error matching `refusal`
 * (and no second one within half a second). */
export async function bridgeBadToken(scheme, refusal) {
  const port = await freePort();
  const m = await startMcpd({ args: [`--${scheme}-listen`, `127.0.0.1:${port}`, '--auth', 'token'] });
  const env = `${scheme.toUpperCase()}_TOKEN`;
  const b = new BridgeProc(['--token-env', env, `${scheme}://127.0.0.1:${port}`], { env: { [env]: 'mcpd_wrong' } });
  try {
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    const r = await b.response(1);
    assert.match(r.error?.message ?? '', refusal, JSON.stringify(r));
    await sleep(500);
    assert.equal(b.repliesTo(1).length, 1);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
}

/** Plain <scheme>:// to a host that is not loopback: exit 2, saying so. */
export async function bridgeRefusesRemote(scheme) {
  const { spawnSync } = await import('node:child_process');
  const { BRIDGE_BIN } = await import('../fixtures/bridge-proc.mjs');
  const r = spawnSync(BRIDGE_BIN, [`${scheme}://example.com:9000`], { encoding: 'utf8', timeout: 10000, input: '' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, new RegExp(`refusing plain ${scheme} to example\\.com`));
}
