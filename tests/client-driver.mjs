// The client of the official *client* conformance scenarios, with
// mcp-bridge as its transport (tests/client-conformance.sh runs it).
//
// The suite starts a mock server per scenario and runs
//   node client-driver.mjs <server URL>
// with MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION and, for
// some scenarios, MCP_CONFORMANCE_CONTEXT (JSON) in the environment. The
// driver spawns `mcp-bridge <URL>` ($MCP_BRIDGE_BIN) and talks to it over
// stdio, as a desktop client would:
//   - 2025 revisions: the official SDK client (Client + StdioClientTransport),
//     as it is;
//   - 2026-07-28: the SDK 1.32.2 client does not speak that revision, so the
//     driver writes its JSON-RPC itself (per-request _meta, server/discover,
//     input-required retries); every HTTP header the scenarios check is the
//     bridge's doing.
// It exits non-zero when a step fails, so the suite shows the cause.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const BRIDGE = process.env.MCP_BRIDGE_BIN || path.join(here, '..', 'build', 'bin', 'mcp-bridge');
const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO || '';
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION || '2025-11-25';
const context = process.env.MCP_CONFORMANCE_CONTEXT ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT) : {};
const clientInfo = { name: 'mcpd-client-driver', version: '1.0.0' };
const bridgeArgs = ['--log-level', 'warn', url];

// The echo tool of the json-schema preservation scenario, and what it echoes.
const SCHEMA_TOOL = 'json_schema_2020_12_tool';
const echoTool = (tools) => tools.find((t) => t.name !== SCHEMA_TOOL && t.inputSchema?.properties?.schema);

// ---- 2025 revisions: the SDK client as it is ----

async function run2025() {
  const client = new Client(clientInfo, { capabilities: {} });
  const transport = new StdioClientTransport({ command: BRIDGE, args: bridgeArgs, stderr: 'inherit' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    if (scenario === 'tools_call') {
      await client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } });
    } else if (scenario === 'sse-retry') {
      await client.callTool({ name: 'test_reconnection', arguments: {} }, undefined, { timeout: 15000 });
    } else if (scenario.startsWith('json-schema-')) {
      const focal = tools.find((t) => t.name === SCHEMA_TOOL);
      const echo = echoTool(tools);
      if (focal && echo) await client.callTool({ name: echo.name, arguments: { schema: focal.inputSchema } });
    }
  } finally {
    await client.close();
  }
}

// ---- 2026-07-28: JSON-RPC written here, headers by the bridge ----

class Stdio {
  constructor() {
    this.proc = spawn(BRIDGE, bridgeArgs, { stdio: ['pipe', 'pipe', 'inherit'] });
    this.proc.stdin.on('error', () => {});
    this.buf = '';
    this.waiting = new Map();
    this.nextId = 1;
    this.proc.stdout.setEncoding('utf8');
    this.proc.stdout.on('data', (d) => {
      this.buf += d;
      let nl;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        if (!line.trim()) continue;
        const m = JSON.parse(line);
        const w = this.waiting.get(m.id);
        if (w && (m.result !== undefined || m.error !== undefined)) {
          this.waiting.delete(m.id);
          w(m);
        }
      }
    });
  }

  /** One request with the revision's _meta; the whole response. */
  send(method, params = {}, ms = 15000) {
    const id = this.nextId++;
    const meta = {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, sampling: {}, roots: {} },
      'io.modelcontextprotocol/clientInfo': clientInfo,
    };
    const msg = { jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } };
    this.proc.stdin.write(JSON.stringify(msg) + '\n');
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no answer to ${method} in ${ms} ms`)), ms);
      this.waiting.set(id, (m) => {
        clearTimeout(t);
        resolve(m);
      });
    });
  }

  /** A request retried once when the server names the revision supported
   * after refusing it (-32022), as the revision asks of a client. */
  async request(method, params) {
    let m = await this.send(method, params);
    if (m.error?.code === -32022 && m.error.data?.supported?.includes('2026-07-28')) m = await this.send(method, params);
    if (m.error) throw new Error(`${method}: ${m.error.code} ${m.error.message}`);
    return m.result;
  }

  /** tools/call, answering input-required results until it completes. */
  async callTool(name, args = {}) {
    let extra = {};
    for (let round = 0; round < 5; round++) {
      const r = await this.request('tools/call', { name, arguments: args, ...extra });
      if (r.resultType !== 'input_required') return r;
      const inputResponses = {};
      for (const [key, ask] of Object.entries(r.inputRequests || {})) {
        if (ask.method === 'elicitation/create') inputResponses[key] = { action: 'accept', content: { confirmed: true } };
        else if (ask.method === 'sampling/createMessage')
          inputResponses[key] = { role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'driver' };
        else if (ask.method === 'roots/list') inputResponses[key] = { roots: [] };
      }
      extra = { inputResponses, ...(r.requestState !== undefined ? { requestState: r.requestState } : {}) };
    }
    throw new Error(`${name}: still input_required after 5 rounds`);
  }

  close() {
    this.proc.stdin.end();
    return new Promise((resolve) => {
      const t = setTimeout(() => this.proc.kill('SIGTERM'), 5000);
      this.proc.on('exit', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

async function run2026() {
  const c = new Stdio();
  try {
    await c.request('server/discover');
    const { tools = [] } = await c.request('tools/list');
    if (scenario === 'tools_call') {
      await c.callTool('add_numbers', { a: 5, b: 3 });
    } else if (scenario === 'request-metadata') {
      await c.callTool(tools[0]?.name ?? 'any', {});
    } else if (scenario === 'http-standard-headers') {
      await c.callTool(tools[0].name);
      const { resources = [] } = await c.request('resources/list');
      await c.request('resources/read', { uri: resources[0].uri });
      const { prompts = [] } = await c.request('prompts/list');
      await c.request('prompts/get', { name: prompts[0].name });
    } else if (scenario === 'http-custom-headers') {
      for (const call of context.toolCalls || []) await c.callTool(call.name, call.arguments);
    } else if (scenario === 'http-invalid-tool-headers' || scenario === 'sep-2322-client-request-state') {
      // every tool the bridge let through; the invalid ones must not be there
      for (const t of tools) await c.callTool(t.name, t.name === 'valid_tool' ? { region: 'us-west1' } : {});
    } else if (scenario.startsWith('json-schema-')) {
      const focal = tools.find((t) => t.name === SCHEMA_TOOL);
      const echo = echoTool(tools);
      if (focal && echo) await c.callTool(echo.name, { schema: focal.inputSchema });
    }
  } finally {
    await c.close();
  }
}

try {
  await (version === '2026-07-28' ? run2026() : run2025());
} catch (e) {
  console.error(`client-driver (${scenario} at ${version}): ${e?.stack || e}`);
  process.exit(1);
}
