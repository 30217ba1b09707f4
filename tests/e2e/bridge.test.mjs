// mcp-bridge end to end, stage 1: the official SDK's StdioClientTransport
// spawns mcp-bridge, which talks Streamable HTTP to a real mcpd on
// loopback: tools, resources, prompts, progress, sampling and elicitation
// round trips; both stdio framings; many requests in flight; the command
// line; and a clear JSON-RPC error when the server cannot be reached.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { CreateMessageRequestSchema, ElicitRequestSchema, EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';

import { freePort, startMcpd, withTimeout } from './lib/mcpd.mjs';
import { BRIDGE_BIN, BridgeProc, sdkBridge, toolCall } from './fixtures/bridge-proc.mjs';

let mcpd;
before(async () => {
  mcpd = await startMcpd();
});
after(async () => {
  await mcpd?.cleanup();
});

for (const transport of ['http', 'poll', 'ws']) {
  test(`SDK through mcp-bridge --transport ${transport}: tools, resources, prompts, progress, sampling, elicitation`, async () => {
    const sampled = [];
    const url = transport === 'ws' ? `ws://127.0.0.1:${mcpd.port}/mcp/ws` : mcpd.url;
  const b = await sdkBridge(['--transport', transport, url], {
      capabilities: { sampling: {}, elicitation: {} },
      handlers: [
        [
          CreateMessageRequestSchema,
          async (req) => {
            sampled.push(req.params);
            return { role: 'assistant', content: { type: 'text', text: 'sampled answer' }, model: 'test-model', stopReason: 'endTurn' };
          },
        ],
        [ElicitRequestSchema, async (req) => ({ action: 'accept', content: { username: 'ada', email: `ada@${req.params.message}` } })],
      ],
    });
    const { client } = b;
    try {
      assert.equal(client.getServerVersion()?.name, 'mcpd');
      const { tools } = await client.listTools();
      for (const n of ['echo', 'countdown', 'test_sampling', 'test_elicitation']) {
        assert.ok(tools.some((t) => t.name === n), `tools/list lacks ${n}`);
      }
      const r = await client.callTool({ name: 'echo', arguments: { message: 'héllo wörld ✓' } });
      assert.deepEqual(r.content, [{ type: 'text', text: 'héllo wörld ✓' }]);

      // progress is relayed as it arrives, then the result
      const progress = [];
      const c = await client.callTool({ name: 'countdown', arguments: { n: 4, interval_ms: 50 } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        timeout: 20000,
      });
      assert.equal(c.content?.[0]?.text, 'countdown finished');
      assert.ok(progress.length >= 3, `progress notifications relayed: ${JSON.stringify(progress)}`);
      assert.deepEqual(progress, [1, 2, 3, 4].slice(0, progress.length));

      // server→client requests on the call's stream, answers POSTed back
      const s = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'say hi' } }, undefined, { timeout: 20000 });
      assert.equal(s.isError ?? false, false, JSON.stringify(s));
      assert.match(JSON.stringify(s.content), /sampled answer/);
      assert.equal(sampled.length, 1);
      const e = await client.callTool({ name: 'test_elicitation', arguments: { message: 'example.org' } }, undefined, { timeout: 20000 });
      assert.equal(e.isError ?? false, false, JSON.stringify(e));
      assert.match(e.content[0].text, /ada@example\.org/);

      const { resources } = await client.listResources();
      assert.ok(resources.some((x) => x.uri === 'test://static-text'));
      const rr = await client.readResource({ uri: 'test://static-text' });
      assert.equal(rr.contents[0].uri, 'test://static-text');
      const { prompts } = await client.listPrompts();
      assert.ok(prompts.some((p) => p.name === 'test_simple_prompt'));
      const gp = await client.getPrompt({ name: 'test_simple_prompt' });
      assert.ok(gp.messages.length >= 1);

      // a server error is relayed as the server said it
      await assert.rejects(client.request({ method: 'no/such/method', params: {} }, EmptyResultSchema), /-32601|not found/i);
    } finally {
      await client.close();
    }
    const { code, signal } = await withTimeout(b.exited, 15000, 'bridge exit after the SDK closed stdin');
    assert.equal(signal, null, b.stderr());
    assert.equal(code, 0, b.stderr());
    assert.match(b.stderr(), /event=bridge_ready/, 'logs go to stderr');
  });
}

// The official SDK runs a notification's handler a tick after reading it
// but a response's at once, dropping its progress handler: progress read
// together with its result was lost. A poll brings a whole countdown in one
// answer, so the bridge writes them back to back.
test('SDK through mcp-bridge --transport poll: progress that comes in one poll with its result reaches the client', async () => {
  const b = await sdkBridge(['--transport', 'poll', mcpd.url]);
  const { client } = b;
  try {
    for (let round = 0; round < 3; round++) {
      const progress = [];
      const c = await client.callTool({ name: 'countdown', arguments: { n: 8, interval_ms: 1 } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
        timeout: 20000,
      });
      assert.equal(c.content?.[0]?.text, 'countdown finished');
      assert.deepEqual(progress, [1, 2, 3, 4, 5, 6, 7, 8], `round ${round}`);
    }
  } finally {
    await client.close();
  }
  assert.equal((await withTimeout(b.exited, 15000, 'bridge exit')).code, 0, b.stderr());
});

for (const framing of ['ndjson', 'content-length']) {
  test(`raw ${framing}: replies and server messages come back in the client's framing`, async () => {
    const b = new BridgeProc([mcpd.url], { framing: framing === 'ndjson' ? 'ndjson' : 'cl' });
    try {
      const init = await b.init({ elicitation: {} });
      assert.equal(init.result.serverInfo.name, 'mcpd');
      b.send(toolCall(2, 'echo', { message: 'ünïcode ✓' }));
      assert.equal((await b.response(2)).result.content[0].text, 'ünïcode ✓');
      b.send(toolCall(3, 'countdown', { n: 3, interval_ms: 20 }, { progressToken: 'pt' }));
      const done = await b.response(3);
      assert.equal(done.result.content[0].text, 'countdown finished');
      const prog = b.msgs.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'pt');
      assert.deepEqual(prog.map((m) => m.params.progress), [1, 2, 3]);
      // elicitation: the server's request comes out framed, our answer goes back
      b.send(toolCall(4, 'test_elicitation', { message: 'x.org' }));
      const ask = await b.waitFor((m) => m.method === 'elicitation/create', 15000, 'elicitation/create');
      b.send({ jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: { username: 'bo', email: 'bo@x.org' } } });
      assert.match((await b.response(4)).result.content[0].text, /bo@x\.org/);
      // a line that is not JSON gets a parse error, and the bridge goes on
      if (framing === 'ndjson') b.proc.stdin.write('{not json\n');
      else b.proc.stdin.write('Content-Length: 9\r\n\r\n{not json');
      const pe = await b.waitFor((m) => m.error?.code === -32700, 10000, 'parse error');
      assert.equal(pe.id, null);
      b.send({ jsonrpc: '2.0', id: 5, method: 'ping' });
      assert.deepEqual((await b.response(5)).result, {});
      b.end();
      assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
      for (const id of [1, 2, 3, 4, 5]) assert.equal(b.repliesTo(id).length, 1, `exactly one reply to ${id}`);
    } finally {
      await b.cleanup();
    }
  });
}

test('48 requests in flight at once, each answered exactly once', async () => {
  const b = new BridgeProc([mcpd.url]);
  try {
    await b.init();
    const ids = Array.from({ length: 48 }, (_, i) => 100 + i);
    for (const id of ids) b.send(toolCall(id, id % 3 ? 'echo' : 'countdown', id % 3 ? { message: `m${id}` } : { n: 2, interval_ms: 30 }));
    for (const id of ids) await b.response(id, 30000);
    for (const id of ids) assert.equal(b.repliesTo(id).length, 1);
    for (const id of ids.filter((i) => i % 3)) assert.equal(b.repliesTo(id)[0].result.content[0].text, `m${id}`);
    b.end();
    assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
  } finally {
    await b.cleanup();
  }
});

test('an unreachable server: every request gets a JSON-RPC error saying what to check', async () => {
  const port = await freePort(); // nothing listens there
  const b = new BridgeProc([`http://127.0.0.1:${port}/mcp`, '--connect-timeout-ms', '3000']);
  try {
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    const r = await b.response(1);
    assert.equal(r.error.code, -32000);
    assert.match(r.error.message, /^mcp-bridge: cannot connect to 127\.0\.0\.1:\d+ .*server running/);
    b.send({ jsonrpc: '2.0', id: 'two', method: 'tools/list' });
    assert.match((await b.response('two')).error.message, /cannot connect/);
    b.end();
    assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
  } finally {
    await b.cleanup();
  }
});

test('command line: --help, --version, bad options, plain http only to loopback', () => {
  const run = (args, env = {}) => spawnSync(BRIDGE_BIN, args, { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 10000 });
  const help = run(['--help']);
  assert.equal(help.status, 0);
  for (const f of ['--header', '--token-env', '--token-file', '--cacert', '--transport', '--connect-timeout-ms', '--response-timeout-ms', '--allow-http', '--log-level', '--version']) {
    assert.ok(help.stdout.includes(f), `--help lists ${f}`);
  }
  assert.match(run(['--version']).stdout, /^mcp-bridge \d+\.\d+\.\d+/);
  let r = run([]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /URL is missing/);
  r = run(['http://example.com/mcp']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /refusing plain http to example\.com.*--allow-http/);
  r = run(['ftp://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  // a ws:// URL selects the WebSocket transport by itself, unless another is asked for
  r = run(['--logout', 'ws://127.0.0.1:9/mcp/ws'], { XDG_CONFIG_HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-cli-')) });
  assert.equal(r.status, 0, r.stderr);
  r = run(['--transport', 'http', 'ws://127.0.0.1:9/mcp/ws']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /scheme 'ws' is not supported/);
  r = run(['--transport', 'carrier-pigeon', 'http://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--transport is http, ws, poll or sse/);
  r = run(['--token-env', 'MCP_BRIDGE_TEST_UNSET', 'http://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /MCP_BRIDGE_TEST_UNSET.*not set/);
  r = run(['--header', 'X-A: ${MCP_BRIDGE_TEST_UNSET}', 'http://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  r = run(['--header', 'no colon', 'http://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  r = run(['--connect-timeout-ms', '-5', 'http://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  r = run(['--token-file', '/nonexistent/token', 'http://127.0.0.1/mcp']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /cannot read --token-file/);
});
