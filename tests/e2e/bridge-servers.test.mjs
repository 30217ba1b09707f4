// mcp-bridge in front of servers that are not mcpd: the TypeScript SDK's
// Streamable HTTP server, and @modelcontextprotocol/server-everything in its
// Streamable HTTP mode and in its legacy HTTP+SSE (2024-11-05) mode, which
// the bridge reaches by falling back when POST gets 404/405, or directly
// with --transport sse. The desktop side is the official SDK client.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';

import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { REPO_ROOT, freePort, sleep, withTimeout } from './lib/mcpd.mjs';
import { BridgeProc, sdkBridge, toolCall } from './fixtures/bridge-proc.mjs';
import { startSdkServer } from './fixtures/bridge-sdk-server.mjs';

const TESTS = path.join(REPO_ROOT, 'tests');
const EVERYTHING = path.join(TESTS, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** server-everything in `mode` on a free loopback port; resolves {port, stop}. */
async function startEverything(mode, port) {
  port = port || (await freePort());
  const proc = spawn(process.execPath, ['--require', path.join(TESTS, 'e2e/fixtures/bridge-loopback.cjs'), EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (d) => (stderr = (stderr + d).slice(-20000)));
  const exited = new Promise((r) => proc.on('exit', r));
  const deadline = Date.now() + 20000;
  while (!/listening on port|running on port/i.test(stderr)) {
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill('SIGKILL');
      throw new Error(`server-everything ${mode} did not start:\n${stderr}`);
    }
    await sleep(50);
  }
  return {
    port,
    stop: async () => {
      proc.kill('SIGTERM');
      await withTimeout(exited, 5000, 'server-everything exit').catch(() => proc.kill('SIGKILL'));
    },
  };
}

async function everythingRoundTrip(args) {
  const b = await sdkBridge(args, {
    capabilities: { elicitation: {} },
    handlers: [[ElicitRequestSchema, async () => ({ action: 'decline' })]],
  });
  try {
    const { tools } = await b.client.listTools();
    assert.ok(tools.some((t) => t.name === 'echo'));
    const r = await b.client.callTool({ name: 'echo', arguments: { message: 'through the bridge' } });
    assert.match(r.content[0].text, /through the bridge/);
    const progress = [];
    const lr = await b.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      timeout: 20000,
    });
    assert.ok(lr.content.length >= 1);
    assert.ok(progress.length >= 1, 'progress relayed');
    const { resources } = await b.client.listResources();
    assert.ok(resources.length >= 1);
    const { prompts } = await b.client.listPrompts();
    assert.ok(prompts.length >= 1);
  } finally {
    await b.client.close();
  }
  const { code } = await withTimeout(b.exited, 15000, 'bridge exit');
  assert.equal(code, 0, b.stderr());
  return b.stderr();
}

test('the TypeScript SDK Streamable HTTP server: tools, progress, elicitation; its restart is survived', async () => {
  let s = await startSdkServer();
  const b = await sdkBridge([s.url], {
    capabilities: { elicitation: {} },
    handlers: [[ElicitRequestSchema, async (req) => ({ action: 'accept', content: { answer: `yes to ${req.params.message}` } })]],
  });
  try {
    assert.equal(b.client.getServerVersion()?.name, 'sdk-peer');
    const r = await b.client.callTool({ name: 'echo', arguments: { message: 'hi sdk' } });
    assert.equal(r.content[0].text, 'hi sdk');
    const progress = [];
    const c = await b.client.callTool({ name: 'countdown', arguments: { n: 3 } }, undefined, { onprogress: (p) => progress.push(p.progress) });
    assert.equal(c.content[0].text, 'countdown finished');
    assert.ok(progress.length >= 1);
    const a = await b.client.callTool({ name: 'ask', arguments: { question: 'tea?' } });
    assert.match(a.content[0].text, /yes to tea\?/);
    // the server forgets every session (a restart without a store): the
    // bridge re-initializes on the 404 and the client notices nothing
    const port = new URL(s.url).port;
    await s.close();
    s = await startSdkServer({ port });
    const r2 = await b.client.callTool({ name: 'echo', arguments: { message: 'after restart' } });
    assert.equal(r2.content[0].text, 'after restart');
    assert.match(b.stderr(), /event=session_reinitialized/);
  } finally {
    await b.client.close();
    await s.close();
  }
});

test('server-everything, Streamable HTTP mode', async () => {
  const e = await startEverything('streamableHttp');
  try {
    await everythingRoundTrip([`http://127.0.0.1:${e.port}/mcp`]);
  } finally {
    await e.stop();
  }
});

test('server-everything, legacy HTTP+SSE mode: the bridge falls back by itself', async () => {
  const e = await startEverything('sse');
  try {
    const stderr = await everythingRoundTrip([`http://127.0.0.1:${e.port}/sse`]);
    assert.match(stderr, /event=legacy_transport/);
  } finally {
    await e.stop();
  }
});

test('server-everything, legacy HTTP+SSE mode with --transport sse', async () => {
  const e = await startEverything('sse');
  try {
    const stderr = await everythingRoundTrip(['--transport', 'sse', `http://127.0.0.1:${e.port}/sse`]);
    assert.doesNotMatch(stderr, /event=legacy_transport/, 'no fallback needed');
  } finally {
    await e.stop();
  }
});

test('legacy HTTP+SSE: the server going away fails what was in flight clearly, then it recovers', async () => {
  const e = await startEverything('sse');
  const b = new BridgeProc(['--transport', 'sse', '--connect-timeout-ms', '3000', `http://127.0.0.1:${e.port}/sse`]);
  let e2;
  try {
    await b.init();
    b.send(toolCall(2, 'echo', { message: 'one' }));
    assert.match((await b.response(2)).result.content[0].text, /one/);
    await e.stop();
    b.send(toolCall(3, 'echo', { message: 'two' }));
    const r3 = await b.response(3, 20000);
    assert.match(r3.error.message, /^mcp-bridge: /);
    // back again: a new stream, the client's initialize replayed on it
    e2 = await startEverything('sse', e.port);
    b.send(toolCall(4, 'echo', { message: 'three' }));
    assert.match((await b.response(4, 20000)).result.content[0].text, /three/);
    assert.match(b.stderr, /event=session_reinitialized/);
  } finally {
    await b.cleanup();
    await e2?.stop();
  }
});
