// The official TypeScript SDK client against mcpd over Streamable HTTP:
// connect, list tools, call echo and countdown (with progress), then end the
// session with HTTP DELETE and check that the id is gone (404).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { mcpHeaders, request, startMcpd } from './lib/mcpd.mjs';

const CONFORMANCE_TOOLS = [
  'test_simple_text',
  'test_image_content',
  'test_audio_content',
  'test_embedded_resource',
  'test_multiple_content_types',
  'test_tool_with_logging',
  'test_error_handling',
  'test_tool_with_progress',
  'test_sampling',
  'test_elicitation',
  'test_elicitation_sep1034_defaults',
  'test_elicitation_sep1330_enums',
];

let mcpd;
before(async () => {
  mcpd = await startMcpd();
});
after(async () => {
  await mcpd?.cleanup();
});

test('SDK client: tools, echo, countdown progress, DELETE ends the session', async () => {
  const transport = new StreamableHTTPClientTransport(new URL(mcpd.url));
  const client = new Client({ name: 'mcpd-e2e-sdk', version: '0.0.0' });
  await client.connect(transport);
  try {
    const sessionId = transport.sessionId;
    assert.match(sessionId ?? '', /^[0-9a-f]{32}$/, 'Mcp-Session-Id is 32 hex chars');
    assert.equal(client.getServerVersion() !== undefined, true);

    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['echo', 'countdown', ...CONFORMANCE_TOOLS]) {
      assert.ok(names.includes(n), `tools/list lacks ${n}: ${names.join(',')}`);
    }
    for (const t of tools) assert.equal(t.inputSchema?.type, 'object', `${t.name} inputSchema.type`);

    const r = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
    assert.equal(r.isError ?? false, false);
    assert.deepEqual(r.content, [{ type: 'text', text: 'hi' }]);

    const progress = [];
    const c = await client.callTool({ name: 'countdown', arguments: { n: 5, interval_ms: 20 } }, undefined, {
      onprogress: (p) => progress.push(p),
      timeout: 10000,
    });
    assert.equal(c.isError ?? false, false);
    assert.equal(c.content?.[0]?.type, 'text');
    assert.equal(c.content[0].text, 'countdown finished');
    assert.deepEqual(
      progress.map((p) => [p.progress, p.total]),
      [
        [1, 5],
        [2, 5],
        [3, 5],
        [4, 5],
        [5, 5],
      ],
    );

    await transport.terminateSession();
    assert.equal(transport.sessionId, undefined, 'SDK cleared the session id after DELETE');

    const after = await request(mcpd.port, {
      headers: mcpHeaders({ session: sessionId }),
      body: { jsonrpc: '2.0', id: 99, method: 'tools/list', params: {} },
    });
    assert.equal(after.status, 404, `POST on a deleted session: ${after.status} ${after.text}`);
    assert.equal(after.json?.error?.code, -32001);
  } finally {
    await client.close();
  }
});

test('SDK client with SSE polling (--sse-poll-ms 200): countdown still delivers every progress and the result', async () => {
  const m = await startMcpd({ args: ['--sse-poll-ms', '200', '--sse-retry-ms', '50'] });
  const transport = new StreamableHTTPClientTransport(new URL(m.url));
  const client = new Client({ name: 'mcpd-e2e-sdk-poll', version: '0.0.0' });
  try {
    await client.connect(transport);
    const progress = [];
    const c = await client.callTool({ name: 'countdown', arguments: { n: 10, interval_ms: 60 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      timeout: 15000,
    });
    assert.equal(c.content?.[0]?.text, 'countdown finished');
    assert.deepEqual(progress, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const r = await client.callTool({ name: 'echo', arguments: { message: 'after-poll' } });
    assert.equal(r.content?.[0]?.text, 'after-poll');
  } finally {
    await client.close().catch(() => {});
    await m.cleanup();
  }
});
