// mcp-bridge translates for a 2025-era client before a server that speaks
// only MCP 2026-07-28 (issue 34): the official 2025 SDK client (which always
// opens with initialize) connects through the bridge to a server that
// refuses initialize; the bridge answers initialize from server/discover and
// sends every later request as 2026-07-28 (headers, per-request _meta), turns
// input-required results into the elicitation requests the client
// understands and echoes each requestState on the retry, answers ping and
// logging/setLevel itself, closes the HTTP request of a call the client
// cancels, and fails a request that needs a capability the client did not
// declare with -32021. Against mcpd (dual-era) nothing changes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { startMcpd, waitFor } from './lib/mcpd.mjs';
import { BridgeProc, initialize, initialized, sdkBridge } from './fixtures/bridge-proc.mjs';
import { MODERN, startModernOnlyServer } from './fixtures/modern-only-server.mjs';

let mcpd;
before(async () => {
  mcpd = await startMcpd();
});
after(async () => {
  await mcpd?.cleanup();
});

/** Closes the client, lets the bridge exit, and finds no sanitizer report in its stderr. */
async function close(b) {
  await b.client.close().catch(() => {});
  await Promise.race([b.exited, new Promise((r) => setTimeout(r, 5000))]);
  b.proc.kill('SIGKILL');
  assert.doesNotMatch(b.stderr(), /Sanitizer/, b.stderr().slice(-3000));
}

test('a 2025 SDK client through mcp-bridge to a 2026-07-28-only server: initialize, tools, input-required rounds, ping, logging level', async () => {
  const fx = await startModernOnlyServer();
  const asked = [];
  let b;
  try {
    b = await sdkBridge(['--log-level', 'info', fx.url], {
      capabilities: { elicitation: {} },
      handlers: [
        [
          ElicitRequestSchema,
          async (req) => {
            asked.push(req.params.message);
            if (req.params.message === 'Your name?') return { action: 'accept', content: { name: 'Ada' } };
            return { action: 'accept', content: { ok: true } };
          },
        ],
      ],
    });
    const { client } = b;
    // initialize was answered by the bridge, from server/discover
    assert.deepEqual(client.getServerVersion(), { name: 'modern-only', version: '1.2.3' });
    assert.equal(client.getInstructions(), 'This server speaks only 2026-07-28.');
    const caps = client.getServerCapabilities();
    assert.ok(caps.tools, JSON.stringify(caps));
    assert.equal(caps.tools.listChanged, undefined, 'no list-changed promise the bridge cannot keep');
    assert.equal(caps.extensions, undefined);
    assert.ok(caps.logging, 'logging/setLevel is answered by the bridge');
    assert.match(b.stderr(), /event=translating/);

    const tools = await client.listTools();
    assert.deepEqual(
      tools.tools.map((t) => t.name),
      ['echo', 'whoami', 'ask_name', 'needs_sampling', 'slow'],
    );
    assert.equal(tools.resultType, undefined);

    const echo = await client.callTool({ name: 'echo', arguments: { message: 'through the bridge' } });
    assert.equal(echo.content[0].text, 'through the bridge');
    assert.equal(echo.resultType, undefined, 'a 2025 result has no resultType');

    // two input-required rounds, each requestState echoed (the fixture refuses one it did not issue)
    const named = await client.callTool({ name: 'ask_name', arguments: {} }, CallToolResultSchema, { timeout: 20000 });
    assert.equal(named.isError, undefined, JSON.stringify(named));
    assert.equal(named.content[0].text, 'Hello, Ada (confirmed: true)');
    assert.deepEqual(asked, ['Your name?', 'Is Ada right?']);

    await client.ping();
    await client.setLoggingLevel('warning');
    const who = JSON.parse((await client.callTool({ name: 'whoami', arguments: {} })).content[0].text);
    assert.equal(who['io.modelcontextprotocol/protocolVersion'], MODERN);
    assert.deepEqual(who['io.modelcontextprotocol/clientInfo'], { name: 'bridge-e2e-sdk', version: '0.0.0' });
    assert.ok(who['io.modelcontextprotocol/clientCapabilities'].elicitation, JSON.stringify(who));
    assert.equal(who['io.modelcontextprotocol/logLevel'], 'warning');

    // a request that needs a capability the client did not declare
    await assert.rejects(
      client.callTool({ name: 'needs_sampling', arguments: {} }),
      (e) => e.code === -32021 && /sampling/.test(e.message),
    );
  } finally {
    if (b) await close(b);
    await fx.close();
  }

  const posts = fx.requests.filter((r) => r.method === 'POST');
  assert.equal(posts.filter((r) => r.body?.method === 'initialize').length, 0, 'server/discover said 2026-07-28 only');
  const rest = posts.filter((r) => r.body?.method !== 'initialize');
  for (const r of rest) {
    assert.equal(r.headers['mcp-protocol-version'], MODERN, JSON.stringify(r.body));
    assert.equal(r.headers['mcp-method'], r.body.method);
    assert.equal(r.headers['mcp-session-id'], undefined);
    assert.notEqual(r.body.id, undefined, `no notification reaches a stateless server: ${JSON.stringify(r.body)}`);
  }
  const methods = rest.map((r) => r.body.method);
  assert.ok(!methods.includes('ping') && !methods.includes('logging/setLevel'), methods.join(' '));
  const rounds = rest.filter((r) => r.body.params?.name === 'ask_name');
  assert.equal(rounds.length, 3);
  assert.equal(new Set(rounds.map((r) => JSON.stringify(r.body.id))).size, 3, 'each retry has an id of its own');
  assert.equal(rounds[1].body.params.inputResponses.name.content.name, 'Ada');
  assert.equal(rounds[2].body.params.inputResponses.confirm.content.ok, true);
  assert.equal(rounds[2].body.params.inputResponses.name, undefined, 'each retry answers the latest questions');
});

test('a cancelled call to a 2026-07-28-only server closes its HTTP request', async () => {
  const fx = await startModernOnlyServer();
  let b;
  try {
    b = await sdkBridge(['--log-level', 'warn', fx.url]);
    assert.equal(b.client.getServerVersion().name, 'modern-only');
    const ac = new AbortController();
    const slow = b.client.callTool({ name: 'slow', arguments: {} }, CallToolResultSchema, { signal: ac.signal });
    await waitFor(() => fx.slowStarted === 1, 10000, 'the slow call reaches the server');
    ac.abort('the user gave up');
    await assert.rejects(slow);
    await waitFor(() => fx.closed === 1, 10000, 'the bridge closes the cancelled call');
    const echo = await b.client.callTool({ name: 'echo', arguments: { message: 'after the cancel' } });
    assert.equal(echo.content[0].text, 'after the cancel');
  } finally {
    if (b) await close(b);
    await fx.close();
  }
});

test('raw: a question the client refuses fails the call; a cancel takes the question back; EOF fails a call that waits for an answer', async () => {
  const fx = await startModernOnlyServer();
  const b = new BridgeProc(['--log-level', 'warn', fx.url]);
  try {
    assert.ok((await b.init({ elicitation: {} })).result.serverInfo, 'initialize answered');
    const question = (after) =>
      b.waitFor((m) => m.method === 'elicitation/create' && m.id !== undefined && !after.includes(m.id), 15000, 'an elicitation');

    b.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'ask_name', arguments: {} } });
    const q1 = await question([]);
    assert.match(String(q1.id), /^mcp-bridge-input-/);
    b.send({ jsonrpc: '2.0', id: q1.id, error: { code: -32603, message: 'the user closed the dialog' } });
    const r2 = await b.response(2);
    assert.equal(r2.error?.code, -32603, JSON.stringify(r2));
    assert.match(r2.error.message, /the user closed the dialog/);

    b.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'ask_name', arguments: {} } });
    const q2 = await question([q1.id]);
    b.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3 } });
    await b.waitFor((m) => m.method === 'notifications/cancelled' && m.params.requestId === q2.id, 15000, 'the question taken back');

    b.send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'ask_name', arguments: {} } });
    await question([q1.id, q2.id]);
    b.end();
    const r4 = await b.response(4);
    assert.match(r4.error?.message ?? '', /closed stdin/, JSON.stringify(r4));
    assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
    assert.equal(b.repliesTo(3).length, 0, 'a cancelled request gets no reply');
    assert.doesNotMatch(b.stderr, /Sanitizer/, b.stderr.slice(-3000));
  } finally {
    await b.cleanup();
    await fx.close();
  }
});

test('when the first server/discover fails, an initialize refused as a 2026-only server refuses it (404 -32601, -32022, -32020) is probed again and translated', async () => {
  for (const refuse of ['notFound', 'version', 'header']) {
    const fx = await startModernOnlyServer({ refuse, flakyDiscover: true });
    let b;
    try {
      b = await sdkBridge(['--log-level', 'warn', fx.url]);
      assert.equal(b.client.getServerVersion().name, 'modern-only', refuse);
      const echo = await b.client.callTool({ name: 'echo', arguments: { message: refuse } });
      assert.equal(echo.content[0].text, refuse);
    } finally {
      if (b) await close(b);
      await fx.close();
    }
    const methods = fx.requests.map((r) => r.body?.method);
    assert.deepEqual(methods.slice(0, 3), ['server/discover', 'initialize', 'server/discover'], refuse);
  }
});

test('after a server/discover that lists only 2026-07-28, initialize is answered without asking the server', async () => {
  const fx = await startModernOnlyServer();
  const b = new BridgeProc(['--log-level', 'warn', fx.url]);
  try {
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
    b.send({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: meta } });
    assert.deepEqual((await b.response(1)).result.supportedVersions, [MODERN]);
    const init = initialize(2);
    init.params.protocolVersion = '2025-06-18';
    b.send(init);
    const r = await b.response(2);
    assert.equal(r.result?.protocolVersion, '2025-06-18', JSON.stringify(r));
    b.send(initialized);
    b.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { message: 'x' } } });
    assert.equal((await b.response(3)).result.content[0].text, 'x');
    // a revision the bridge does not serve gets the latest 2025 one
    const other = initialize(4);
    other.params.protocolVersion = '2099-01-01';
    b.send(other);
    assert.equal((await b.response(4)).result.protocolVersion, '2025-11-25');
  } finally {
    await b.cleanup();
    await fx.close();
  }
  assert.equal(fx.requests.filter((r) => r.body?.method === 'initialize').length, 0);
});

test('the same SDK client through mcp-bridge to mcpd (dual-era) is not translated', async () => {
  const b = await sdkBridge(['--log-level', 'info', mcpd.url]);
  try {
    assert.equal(b.client.getServerVersion().name, 'mcpd');
    const echo = await b.client.callTool({ name: 'echo', arguments: { message: 'plain 2025' } });
    assert.equal(echo.content[0].text, 'plain 2025');
    await b.client.ping();
    assert.doesNotMatch(b.stderr(), /event=translating/);
  } finally {
    await close(b);
  }
});
