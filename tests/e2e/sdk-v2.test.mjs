// The official SDK v2 client (@modelcontextprotocol/client) in its modern
// era, as a new user runs it (issue 34): pinned to 2026-07-28 and in 'auto'
// (it probes with server/discover), over Streamable HTTP on /mcp and over
// stdio through mcp-bridge. Each way it connects in the 2026-07-28 era and
// covers:
//   - tools: list, call, progress (countdown), an input-required tool whose
//     elicitation the client fulfils through its own handler;
//   - resources: list and read; prompts: list and get;
//   - listen(): a list change and a subscribed resource's change arrive;
//   - close, then a new client connects and is served again.
// And in 'auto' through mcp-bridge to a 2025-only server (the SDK's own
// Streamable HTTP server): the probe falls back, and it lands in 2025.
// No timing assertions beyond the bounds the waits need.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

import { BRIDGE_BIN } from './fixtures/bridge-proc.mjs';
import { startSdkServer } from './fixtures/bridge-sdk-server.mjs';
import { withMcpd } from './lib/mcpd.mjs';

const V = '2026-07-28';
const WATCHED = 'test://watched-resource';

const modes = [
  ['pinned to 2026-07-28', { mode: { pin: V } }],
  ["'auto'", { mode: 'auto' }],
];
const ways = [
  ['/mcp', (port) => new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`))],
  ['stdio through mcp-bridge', (port) => new StdioClientTransport({ command: BRIDGE_BIN, args: [`http://127.0.0.1:${port}/mcp`], stderr: 'pipe' })],
];

function newClient(negotiation) {
  const client = new Client({ name: 'sdk-v2-e2e', version: '0' }, { versionNegotiation: negotiation, capabilities: { elicitation: {} } });
  client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Ada' } }));
  return client;
}

/** Progress values as the SDK v2 client reports them: 1, 2, … in order,
 * all n over HTTP. Over stdio the client drops a progress notification
 * that reaches it in the same read as the call's response (the bridge
 * writes them in order: bridge.test.mjs reads its raw output), so there
 * the last may be missing. */
function assertProgress(progress, n, overStdio) {
  assert.deepEqual(progress, Array.from({ length: progress.length }, (_, i) => i + 1), `in order from 1: ${progress}`);
  assert.ok(progress.length === n || (overStdio && progress.length === n - 1), `${progress.length} of ${n}: ${progress}`);
}

/** Waits until pred() holds, waking on each notification. */
async function until(pred, what, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!pred()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const [wayName, transport] of ways) {
  for (const [modeName, negotiation] of modes) {
    test(`SDK v2 client ${modeName}, over ${wayName}: tools, progress, input-required, resources, prompts, listen, close and reconnect`, async () => {
      await withMcpd([], {}, async (m) => {
        const client = newClient(negotiation);
        await client.connect(transport(m.port));
        try {
          assert.equal(client.getNegotiatedProtocolVersion(), V);

          const { tools } = await client.listTools();
          const names = tools.map((t) => t.name);
          for (const n of ['echo', 'countdown', 'test_input_required_result_elicitation']) assert.ok(names.includes(n), `${n} in ${names}`);
          const echoed = await client.callTool({ name: 'echo', arguments: { message: 'héllo ✓' } });
          assert.equal(echoed.content[0].text, 'héllo ✓');

          const progress = [];
          const done = await client.callTool({ name: 'countdown', arguments: { n: 3, interval_ms: 20 } }, { onprogress: (p) => progress.push(p.progress) });
          assert.equal(done.content[0].text, 'countdown finished');
          assertProgress(progress, 3, wayName !== '/mcp');

          const asked = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
          assert.match(asked.content[0].text, /Hello, Ada!/);

          const { resources } = await client.listResources();
          assert.ok(resources.length > 0);
          const read = await client.readResource({ uri: resources[0].uri });
          assert.ok(read.contents.length > 0);
          const { prompts } = await client.listPrompts();
          const simple = prompts.find((p) => !p.arguments?.some((a) => a.required));
          assert.ok(simple, `a prompt without required arguments in ${prompts.map((p) => p.name)}`);
          const prompt = await client.getPrompt({ name: simple.name });
          assert.ok(prompt.messages.length > 0);

          const got = [];
          for (const method of ['notifications/resources/updated', 'notifications/tools/list_changed']) client.setNotificationHandler(method, (n) => got.push(n));
          const sub = await client.listen({ toolsListChanged: true, resourceSubscriptions: [WATCHED] }, { timeout: 10000 });
          assert.deepEqual(sub.honoredFilter, { toolsListChanged: true, resourceSubscriptions: [WATCHED] });
          await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
          await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
          await until(() => got.length >= 2, 'the two notifications');
          assert.deepEqual(got.map((n) => [n.method, n.params?.uri]).sort(), [
            ['notifications/resources/updated', WATCHED],
            ['notifications/tools/list_changed', undefined],
          ]);
          await sub.close();
        } finally {
          await client.close();
        }

        // A new client after the close is served as the first was.
        const again = newClient(negotiation);
        await again.connect(transport(m.port));
        try {
          assert.equal(again.getNegotiatedProtocolVersion(), V);
          const r = await again.callTool({ name: 'echo', arguments: { message: 'again' } });
          assert.equal(r.content[0].text, 'again');
        } finally {
          await again.close();
        }
      });
    });
  }
}

test("SDK v2 client in 'auto' through mcp-bridge to a 2025-only server (the SDK's own): it falls back and lands in the 2025 era", async () => {
  const sdk = await startSdkServer();
  const client = newClient({ mode: 'auto' });
  try {
    await client.connect(new StdioClientTransport({ command: BRIDGE_BIN, args: [sdk.url], stderr: 'pipe' }));
    const version = client.getNegotiatedProtocolVersion();
    assert.ok(version && version < V, `a 2025 revision, not ${version}`);
    const r = await client.callTool({ name: 'echo', arguments: { message: 'legacy era' } });
    assert.equal(r.content[0].text, 'legacy era');
    const progress = [];
    await client.callTool({ name: 'countdown', arguments: { n: 3 } }, { onprogress: (p) => progress.push(p.progress) });
    assertProgress(progress, 3, true);
  } finally {
    await client.close();
    await sdk.close();
  }
});
