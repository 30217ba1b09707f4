// mcp-bridge --transport ws under faults that the WebSocket transport meets
// in its own way, and the bridge's own limit on stdin:
//   - the session is gone (killed with mcp-admin; mcpd restarted on an
//     empty database is bridge-faults.test.mjs's, for http and ws): the
//     handshake gets 404, and the bridge re-initializes by itself, as it
//     does over http and poll;
//   - a request over mcpd's --ws-max-message: mcpd closes with 1009, and
//     the request gets one error saying it was too big, at once;
//   - a message over the bridge's stdin limit: one error, from the bridge,
//     with the request's id.
// Each test ends with a call that works, and checks every request got
// exactly one reply.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { dbArg, startMcpd, ADMIN_BIN } from './lib/mcpd.mjs';
import { BridgeProc, toolCall } from './fixtures/bridge-proc.mjs';


const wsUrl = (port) => `ws://127.0.0.1:${port}/mcp/ws`;

const echoOk = async (b, id, message = `ok-${id}`) => {
  b.send(toolCall(id, 'echo', { message }));
  const r = await b.response(id, 20000);
  assert.equal(r.result?.content?.[0]?.text, message, JSON.stringify(r));
};

test('--transport ws: a session killed with mcp-admin is rebuilt; a call in flight is sent again', async () => {
  const m = await startMcpd();
  const b = new BridgeProc(['--transport', 'ws', '--response-timeout-ms', '6000', wsUrl(m.port)]);
  try {
    await b.init();
    await echoOk(b, 2);
    const list = spawnSync(ADMIN_BIN, ['--db', dbArg(m.db), '--json', 'sessions', '--active'], { encoding: 'utf8', timeout: 30000 });
    assert.equal(list.status, 0, list.stderr);
    const ids = JSON.parse(list.stdout).map((s) => s.id);
    assert.equal(ids.length, 1, list.stdout);
    // a call runs while the session is killed: it is lost with the session
    b.send(toolCall(3, 'countdown', { n: 5, interval_ms: 300 }));
    const kill = spawnSync(ADMIN_BIN, ['--db', dbArg(m.db), 'session', 'kill', ids[0]], { encoding: 'utf8', timeout: 30000 });
    assert.equal(kill.status, 0, kill.stderr);
    // sent again on the new session (or finished before the kill took)
    const r3 = await b.response(3, 20000);
    assert.equal(r3.result?.content?.[0]?.text, 'countdown finished', JSON.stringify(r3));
    await echoOk(b, 4);
    await echoOk(b, 5);
    assert.match(b.stderr, /event=session_reinitialized/);
    for (const id of [2, 3, 4, 5]) assert.equal(b.repliesTo(id).length, 1);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('--transport ws: a request over --ws-max-message gets one error at once, saying so', async () => {
  const m = await startMcpd({ args: ['--ws-max-message', '65536'] });
  const b = new BridgeProc(['--transport', 'ws', '--response-timeout-ms', '6000', wsUrl(m.port)]);
  try {
    await b.init();
    await echoOk(b, 2, 'z'.repeat(60000));
    const t0 = Date.now();
    b.send(toolCall(3, 'echo', { message: 'z'.repeat(70000) }));
    const r = await b.response(3, 20000);
    assert.ok(Date.now() - t0 < 3000, `answered after ${Date.now() - t0} ms`);
    assert.match(r.error?.message, /^mcp-bridge: .*too big.*--ws-max-message/, JSON.stringify(r));
    await echoOk(b, 4);
    for (const id of [2, 3, 4]) assert.equal(b.repliesTo(id).length, 1);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

test('--transport ws: what follows a too-big request on the same connection still gets one reply in time', async () => {
  const m = await startMcpd({ args: ['--ws-max-message', '65536'] });
  const b = new BridgeProc(['--transport', 'ws', '--response-timeout-ms', '2000', wsUrl(m.port)]);
  try {
    await b.init();
    const t0 = Date.now();
    // one write: the bridge may put both on the connection before mcpd closes it
    b.proc.stdin.write(
      `${JSON.stringify(toolCall(3, 'echo', { message: 'z'.repeat(70000) }))}\n${JSON.stringify(toolCall(4, 'echo', { message: 'after' }))}\n`,
    );
    const r3 = await b.response(3, 20000);
    assert.match(r3.error?.message, /too big/, JSON.stringify(r3));
    const r4 = await b.response(4, 20000);
    assert.ok(Date.now() - t0 < 2000 + 1500, `answered after ${Date.now() - t0} ms`);
    if (r4.error) assert.match(r4.error.message, /^mcp-bridge: .*dropped.*may or may not have run/);
    else assert.equal(r4.result.content[0].text, 'after');
    await echoOk(b, 5);
    for (const id of [3, 4, 5]) assert.equal(b.repliesTo(id).length, 1);
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});

for (const framing of ['ndjson', 'content-length']) {
  test(`a message over the bridge's stdin limit (${framing}): one error from the bridge, with the request's id`, async () => {
    const m = await startMcpd();
    const b = new BridgeProc(['--transport', 'ws', wsUrl(m.port)], { framing });
    try {
      await b.init();
      const id = framing === 'ndjson' ? 5 : 'big-5';
      b.send(toolCall(id, 'echo', { message: 'y'.repeat(4300000) }));
      const r = await b.response(id, 20000);
      assert.equal(r.error?.code, -32600, JSON.stringify(r));
      assert.match(r.error.message, /^mcp-bridge: .*larger than the 4194304 bytes the bridge accepts/);
      assert.ok(!b.msgs.some((x) => x.id === null), 'no reply without an id');
      await echoOk(b, 6);
      assert.equal(b.repliesTo(id).length, 1);
    } finally {
      await b.cleanup();
      await m.cleanup();
    }
  });
}

test('--transport ws: a progress token that is neither string nor integer (0.5) is relayed like any request', async () => {
  const m = await startMcpd();
  const b = new BridgeProc(['--transport', 'ws', wsUrl(m.port)]);
  try {
    await b.init();
    const call = toolCall(2, 'echo', { message: 'half' });
    call.params._meta = { progressToken: 0.5 };
    b.send(call);
    const r = await b.response(2, 10000);
    assert.equal(r.result?.content?.[0]?.text, 'half', JSON.stringify(r));
  } finally {
    await b.cleanup();
    await m.cleanup();
  }
});
