// The client of the official *client* conformance scenarios, with
// mcp-bridge as its transport (tests/client-conformance.sh runs it).
//
// The suite starts a mock server per scenario and runs
//   node client-driver.mjs <server URL>
// with MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION and, for
// some scenarios, MCP_CONFORMANCE_CONTEXT (JSON) in the environment. The
// driver spawns `mcp-bridge <URL>` ($MCP_BRIDGE_BIN) and talks to it over
// stdio, as a desktop client would, with one of two clients (CLIENT_ERA):
//   - 2025: the official 2025 SDK client (@modelcontextprotocol/sdk), as it
//     is, at every revision: at 2026-07-28 the bridge translates for it;
//   - 2026: the official SDK v2 client (@modelcontextprotocol/client),
//     pinned to 2026-07-28 for that revision, 'auto' for the 2025 ones.
// Every HTTP header the scenarios check is the bridge's doing.
// BRIDGE=mcp-remote spawns mcp-remote 0.15.1 in the bridge's place, for
// the comparison tests/client-auth-conformance.sh documents.
// It exits non-zero when a step fails, so the suite shows the cause.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ModernClient } from '@modelcontextprotocol/client';
import { StdioClientTransport as ModernStdioTransport } from '@modelcontextprotocol/client/stdio';

const here = path.dirname(fileURLToPath(import.meta.url));
const BRIDGE = process.env.MCP_BRIDGE_BIN || path.join(here, '..', 'build', 'bin', 'mcp-bridge');
const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO || '';
const version = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION || '2025-11-25';
const era = process.env.CLIENT_ERA === '2026' ? '2026' : '2025';
const context = process.env.MCP_CONFORMANCE_CONTEXT ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT) : {};
const clientInfo = { name: 'mcpd-client-driver', version: '1.0.0' };
// BRIDGE=mcp-remote: mcp-remote 0.15.1 instead, for comparison (the auth
// scenarios' flags are in mcpRemote below).
const transport = process.env.BRIDGE === 'mcp-remote'
  ? await mcpRemote()
  : { command: BRIDGE, args: ['--log-level', process.env.BRIDGE_LOG_LEVEL || 'warn', ...authArgs(), url] };
// the bridge gets the whole environment (the SDK passes only a few
// variables, and XDG_CONFIG_HOME must reach it)
const childEnv = () => ({ ...process.env });

// The auth scenarios: the bridge signs in by itself. Its "browser" is curl,
// which follows the suite's authorization endpoint (it redirects at once)
// back to the bridge's loopback listener; the client ID metadata document
// URL is the one the suite expects; pre-registered credentials come from
// the scenario's context. Each run keeps its tokens in a fresh directory.
function authArgs() {
  if (!scenario.startsWith('auth/')) return [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-bridge-auth-'));
  process.env.XDG_CONFIG_HOME = dir;
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const args = ['--oauth-open-command', 'curl -sS -L -o /dev/null',
    '--oauth-client-metadata-url', 'https://conformance-test.local/client-metadata.json'];
  if (context.client_id) args.push('--oauth-client-id', context.client_id);
  if (context.client_secret) args.push('--oauth-client-secret', context.client_secret);
  if (context.private_key_pem) {
    const key = path.join(process.env.XDG_CONFIG_HOME, 'client-key.pem');
    fs.writeFileSync(key, context.private_key_pem, { mode: 0o600 });
    args.push('--oauth-client-key', key);
  }
  if (context.valid_jwt) {
    const jwt = path.join(dir, 'workload.jwt');
    fs.writeFileSync(jwt, context.valid_jwt, { mode: 0o600 });
    args.push('--oauth-jwt-bearer', jwt);
  }
  if (context.idp_id_token) {
    const idt = path.join(dir, 'id-token.jwt');
    fs.writeFileSync(idt, context.idp_id_token, { mode: 0o600 });
    args.push('--oauth-idp-id-token', idt, '--oauth-idp-token-endpoint', context.idp_token_endpoint,
      '--oauth-idp-client-id', context.idp_client_id);
  }
  if (scenario.startsWith('auth/client-credentials')) args.push('--oauth-client-credentials');
  return args;
}

// The same auth scenarios through mcp-remote 0.15.1 (node_modules), given
// what a user could give it from its README: a fresh MCP_REMOTE_CONFIG_DIR
// per run (no tokens, registrations or lock files shared with other runs or
// with ~/.mcp-auth), and the flags a scenario needs:
//   - basic-cimd: --client-metadata-url with the URL the suite expects.
//     That flag makes the callback port strict (a port taken by anything
//     else on the machine is a fatal error, not a reason to walk on), so a
//     free one is picked and passed, as its README suggests;
//   - a pre-registered client (pre-registration, client-credentials-*, and
//     the enterprise and workload-identity extensions):
//     --static-oauth-client-info with the scenario's id and secret;
//   - client-credentials-*: --client-credentials;
//   - every scenario at 2026-07-28: --protocol auto (its default, legacy,
//     sends `initialize`, which a 2026-07-28 server no longer has).
// It has no flag for a private_key_jwt key, a workload JWT or an enterprise
// IdP token, so those scenarios run without them. Its "browser" is
// tests/mcp-remote-browser/curl-browser: mcp-remote opens URLs with the
// `open` package, whose bundled xdg-open runs $BROWSER when there is no
// desktop (the variables naming one are removed, so the run is headless
// wherever it runs).
async function mcpRemote() {
  const args = [path.join(here, 'node_modules', 'mcp-remote', 'dist', 'proxy.js'), url];
  if (!scenario.startsWith('auth/')) return { command: process.execPath, args };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-remote-auth-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  process.env.MCP_REMOTE_CONFIG_DIR = dir;
  process.env.BROWSER = path.join(here, 'mcp-remote-browser', 'curl-browser');
  for (const v of ['DISPLAY', 'WAYLAND_DISPLAY', 'XDG_CURRENT_DESKTOP', 'DESKTOP_SESSION', 'KDE_FULL_SESSION', 'GNOME_DESKTOP_SESSION_ID']) {
    delete process.env[v];
  }
  if (scenario === 'auth/basic-cimd') {
    args.push(String(await freeLoopbackPort()), '--client-metadata-url', 'https://conformance-test.local/client-metadata.json');
  }
  if (context.client_id) {
    const info = { client_id: context.client_id };
    if (context.client_secret) info.client_secret = context.client_secret;
    args.push('--static-oauth-client-info', JSON.stringify(info));
  }
  if (scenario.startsWith('auth/client-credentials')) args.push('--client-credentials');
  if (version === '2026-07-28') args.push('--protocol', 'auto');
  return { command: process.execPath, args };
}

/** A loopback port nothing listens on now (the kernel's pick). */
async function freeLoopbackPort() {
  const server = net.createServer();
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// The echo tool of the json-schema preservation scenario, and what it echoes.
const SCHEMA_TOOL = 'json_schema_2020_12_tool';
const echoTool = (tools) => tools.find((t) => t.name !== SCHEMA_TOOL && t.inputSchema?.properties?.schema);

// ---- what each scenario asks of a client ----

/** The scenario's calls, through either client (their method names agree). */
async function drive(client) {
  const { tools = [] } = await client.listTools();
  // The 2025 SDK takes a result schema before the options; v2 does not.
  const call = (name, args = {}, options) =>
    era === '2026' ? client.callTool({ name, arguments: args }, options) : client.callTool({ name, arguments: args }, undefined, options);
  if (scenario.startsWith('auth/')) {
    if (tools[0]) await call(tools[0].name, {});
  } else if (scenario === 'tools_call') {
    await call('add_numbers', { a: 5, b: 3 });
  } else if (scenario === 'sse-retry') {
    await call('test_reconnection', {}, { timeout: 15000 });
  } else if (scenario === 'request-metadata') {
    await call(tools[0]?.name ?? 'any', {});
  } else if (scenario === 'http-standard-headers') {
    await call(tools[0].name);
    const { resources = [] } = await client.listResources();
    await client.readResource({ uri: resources[0].uri });
    const { prompts = [] } = await client.listPrompts();
    await client.getPrompt({ name: prompts[0].name });
  } else if (scenario === 'http-custom-headers') {
    for (const c of context.toolCalls || []) await call(c.name, c.arguments);
  } else if (scenario === 'http-invalid-tool-headers' || scenario === 'sep-2322-client-request-state') {
    // every tool the bridge let through; the invalid ones must not be there
    for (const t of tools) await call(t.name, t.name === 'valid_tool' ? { region: 'us-west1' } : {});
  } else if (scenario.startsWith('json-schema-')) {
    const focal = tools.find((t) => t.name === SCHEMA_TOOL);
    const echo = echoTool(tools);
    if (focal && echo) await call(echo.name, { schema: focal.inputSchema });
  }
}

// What the client answers when asked (a 2025 server's request, or an
// input-required result's, which the bridge or the v2 client turns into one).
const answers = {
  elicit: async () => ({ action: 'accept', content: { confirmed: true } }),
  sample: async () => ({ role: 'assistant', content: { type: 'text', text: 'ok' }, model: 'driver' }),
  roots: async () => ({ roots: [] }),
};
const capabilities = { elicitation: {}, sampling: {}, roots: {} };

// ---- CLIENT_ERA=2025: the 2025 SDK client as it is, at every revision ----
// At 2026-07-28 the bridge translates for it (initialize answered from
// server/discover, per-request _meta, input-required as requests).

async function run2025() {
  const client = new Client(clientInfo, { capabilities });
  client.setRequestHandler(ElicitRequestSchema, answers.elicit);
  client.setRequestHandler(CreateMessageRequestSchema, answers.sample);
  client.setRequestHandler(ListRootsRequestSchema, answers.roots);
  await client.connect(new StdioClientTransport({ ...transport, env: childEnv(), stderr: 'inherit' }));
  try {
    await drive(client);
  } finally {
    await client.close();
  }
}

// ---- CLIENT_ERA=2026: the SDK v2 client, in its modern era ----
// Pinned to 2026-07-28 for that revision (per-request _meta and the
// input-required retries are its doing, every header the bridge's); in
// 'auto' for the 2025 ones, where its server/discover probe falls back.

async function run2026() {
  const client = new ModernClient(clientInfo, {
    versionNegotiation: { mode: version === '2026-07-28' ? { pin: '2026-07-28' } : 'auto' },
    capabilities,
  });
  client.setRequestHandler('elicitation/create', answers.elicit);
  client.setRequestHandler('sampling/createMessage', answers.sample);
  client.setRequestHandler('roots/list', answers.roots);
  await client.connect(new ModernStdioTransport({ ...transport, env: childEnv(), stderr: 'inherit' }));
  try {
    await drive(client);
  } finally {
    await client.close();
  }
}

try {
  await (era === '2026' ? run2026() : run2025());
} catch (e) {
  console.error(`client-driver (${era}-era client, ${scenario} at ${version}): ${e?.stack || e}`);
  process.exit(1);
}
