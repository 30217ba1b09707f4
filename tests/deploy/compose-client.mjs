// The client half of compose-e2e.sh, against Caddy's HTTPS in front of the
// compose stack. Phase "first": the official SDK client with the token
// (tools, a countdown whose progress arrives), a second countdown dropped
// half-way over raw SSE, mcp-bridge --cacert, a request without the token
// (401), the legacy HTTP+SSE transport (GET /sse, initialize and a
// tools/call POSTed to /messages, the answers on the stream), and a
// WebSocket on /mcp/ws with the token as its `bearer.<token>` subprotocol
// (and one with MCPD_BAD_TOKEN, refused); the session and the last event id
// seen are saved. Phase "down" (mcpd stopped): the same WebSocket and a POST
// with the token get 502 from Caddy, which logs failed requests with their
// headers. Phase "after-kill" (also after a restart, and after down and
// up): the stream resumes with Last-Event-ID to its end, and the session
// still answers.
// Environment: MCPD_URL, MCPD_TOKEN, MCPD_BAD_TOKEN, STATE, BRIDGE_BIN, CA;
// NODE_EXTRA_CA_CERTS makes Node trust Caddy's local CA.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import WebSocket from 'ws';

const url = new URL(process.env.MCPD_URL);
const auth = { Authorization: `Bearer ${process.env.MCPD_TOKEN}` };
const phase = process.argv[2];
const initialize = (version) => ({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'compose-e2e', version: '1' } } });

/** Opens /mcp/ws with `token` as the bearer subprotocol; resolves the open socket. */
function wsOpen(token) {
  const ws = new WebSocket(new URL('/mcp/ws', url).href.replace(/^https:/, 'wss:'), ['mcp', `bearer.${token}`], { ca: fs.readFileSync(process.env.CA) });
  const opened = new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
  return Promise.race([opened, new Promise((_, reject) => setTimeout(() => reject(new Error('wss open: timeout')), 15000))]);
}

/** A WebSocket client that can only authenticate with the subprotocol (a browser): initialize answers. */
async function wsBearer() {
  const ws = await wsOpen(process.env.MCPD_TOKEN);
  assert.equal(ws.protocol, 'mcp');
  const reply = new Promise((resolve) => ws.once('message', (d) => resolve(JSON.parse(String(d)))));
  ws.send(JSON.stringify(initialize('2025-11-25')));
  assert.equal((await reply).result.serverInfo.name, 'mcpd');
  ws.close();
  await assert.rejects(wsOpen(process.env.MCPD_BAD_TOKEN), /401/, 'an unknown token is refused');
}

/** The events of an SSE response body, one at a time. */
function sseEvents(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  return async function next() {
    for (;;) {
      const sep = /\r?\n\r?\n/.exec(buf);
      if (sep) {
        const block = buf.slice(0, sep.index);
        buf = buf.slice(sep.index + sep[0].length);
        const ev = { event: 'message', data: [] };
        for (const line of block.split(/\r?\n/)) {
          const m = /^(event|data|id): ?(.*)$/.exec(line);
          if (m && m[1] === 'data') ev.data.push(m[2]);
          else if (m) ev[m[1]] = m[2];
        }
        if (ev.data.length) return { ...ev, data: ev.data.join('\n') };
        continue; // a comment (keepalive) or a bare id
      }
      const { value, done } = await reader.read();
      if (done) throw new Error(`/sse ended; unread: ${buf}`);
      buf += decoder.decode(value, { stream: true });
    }
  };
}

/** A 2024-11-05 client: GET /sse, its endpoint, POSTs to /messages, the answers on the stream. */
async function legacy() {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 20000);
  try {
    const res = await fetch(new URL('/sse', url), { headers: { Accept: 'text/event-stream', ...auth }, signal: ctl.signal });
    assert.equal(res.status, 200, 'GET /sse through Caddy');
    const next = sseEvents(res.body);
    const ep = await next();
    assert.equal(ep.event, 'endpoint');
    assert.match(ep.data, /^\/messages\?sessionId=[0-9a-f]{32}$/);
    const post = async (body) => {
      const r = await fetch(new URL(ep.data, url), { method: 'POST', headers: { 'Content-Type': 'application/json', ...auth }, body: JSON.stringify(body) });
      assert.equal(r.status, 202, `POST ${body.method} to /messages: ${await r.text()}`);
    };
    await post(initialize('2024-11-05'));
    const init = JSON.parse((await next()).data);
    assert.equal(init.id, 1);
    assert.equal(init.result.protocolVersion, '2024-11-05');
    await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'via-legacy' } } });
    const answer = JSON.parse((await next()).data);
    assert.equal(answer.id, 2);
    assert.equal(answer.result.content[0].text, 'via-legacy');
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
}

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
  // A countdown read only half-way over raw SSE: its last event id is kept,
  // to resume the stream after mcpd is killed.
  const session = transport.sessionId;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-11-25', 'Mcp-Session-Id': session, ...auth },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'half', method: 'tools/call', params: { name: 'countdown', arguments: { n: 4, interval_ms: 300 }, _meta: { progressToken: 'h' } } }),
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  let text = '';
  while ((text.match(/^data: \S/gm) || []).length < 2) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  await reader.cancel();
  const ids = text
    .split(/\n\n/)
    .filter((ev) => /^data: \S/m.test(ev))
    .map((ev) => ev.match(/^id: (\S+)$/m)?.[1]);
  assert.ok(ids.length >= 2, `events before the drop: ${text}`);
  fs.writeFileSync(process.env.STATE, JSON.stringify({ session, lastEventId: ids.at(-1) }));
  const anon = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  assert.equal(anon.status, 401);
  await bridgeEcho();
  await legacy();
  await wsBearer();
} else if (phase === 'down') {
  await assert.rejects(wsOpen(process.env.MCPD_TOKEN), /502/, 'Caddy: 502 with mcpd stopped');
  const r = await post({ jsonrpc: '2.0', id: 1, method: 'ping' });
  assert.equal(r.status, 502, r.text);
} else {
  const { session, lastEventId } = JSON.parse(fs.readFileSync(process.env.STATE, 'utf8'));
  // The stream resumes after the last event seen, to its end (stored events,
  // then the answer or the restart's error), each event once.
  const resumed = await fetch(url, {
    headers: { Accept: 'text/event-stream', 'MCP-Protocol-Version': '2025-11-25', 'Mcp-Session-Id': session, 'Last-Event-ID': lastEventId, ...auth },
  });
  assert.equal(resumed.status, 200);
  const body = await resumed.text();
  // Messages only: the priming event that repeats the cursor has no data.
  const seqs = body
    .split(/\n\n/)
    .filter((ev) => /^data: \S/m.test(ev))
    .map((ev) => Number(ev.match(/^id: \S+:(\d+)$/m)?.[1]));
  const from = Number(lastEventId.split(':').pop());
  assert.deepEqual(seqs, seqs.map((_, i) => from + 1 + i), `resumed after ${lastEventId}: ${body}`);
  assert.match(body, /"id":"half"/, `the stream ends with the request's answer: ${body}`);
  const r = await post({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { message: 'survived' } } }, session);
  assert.equal(r.status, 200, r.text);
  assert.match(r.text, /survived/);
}
process.exit(0);
