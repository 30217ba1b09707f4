// The client half of compose-e2e.sh, against Caddy's HTTPS in front of the
// compose stack. Phase "first": the official SDK client with the token
// (tools, a countdown whose progress arrives), mcp-bridge --cacert, and a
// request without the token (401); the session id is saved. Phase
// "after-kill": that session still answers after mcpd was SIGKILLed.
// Environment: MCPD_URL, MCPD_TOKEN, STATE, BRIDGE_BIN, CA; NODE_EXTRA_CA_CERTS
// makes Node trust Caddy's local CA.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = new URL(process.env.MCPD_URL);
const auth = { Authorization: `Bearer ${process.env.MCPD_TOKEN}` };
const phase = process.argv[2];

async function post(body, session) {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25', ...(session ? { 'Mcp-Session-Id': session } : {}), ...auth },
    body: JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
}

async function bridgeEcho() {
  const b = spawn(process.env.BRIDGE_BIN, ['--cacert', process.env.CA, '--token-env', 'MCPD_TOKEN', url.href], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  b.stdout.on('data', (d) => (out += d));
  const send = (m) => b.stdin.write(`${JSON.stringify(m)}\n`);
  send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'compose-bridge', version: '1' } } });
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'via-bridge' } } });
  const deadline = Date.now() + 20000;
  while (!out.includes('via-bridge') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  b.stdin.end();
  assert.ok(out.includes('via-bridge'), `mcp-bridge answered: ${out}`);
}

if (phase === 'first') {
  const client = new Client({ name: 'compose-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: auth } });
  await client.connect(transport);
  const tools = await client.listTools();
  assert.ok(tools.tools.some((t) => t.name === 'countdown'));
  const progress = [];
  const r = await client.callTool({ name: 'countdown', arguments: { n: 3, interval_ms: 200 } }, undefined, { onprogress: (p) => progress.push(p.progress) });
  assert.ok(!r.isError, JSON.stringify(r));
  assert.ok(progress.length >= 2, `progress through Caddy: ${JSON.stringify(progress)}`);
  fs.writeFileSync(process.env.STATE, JSON.stringify({ session: transport.sessionId }));
  const anon = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  assert.equal(anon.status, 401);
  await bridgeEcho();
} else {
  const { session } = JSON.parse(fs.readFileSync(process.env.STATE, 'utf8'));
  const r = await post({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { message: 'survived' } } }, session);
  assert.equal(r.status, 200, r.text);
  assert.match(r.text, /survived/);
}
process.exit(0);
