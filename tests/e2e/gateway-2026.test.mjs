// The gateway (`mcpd --upstream CMD`) serving a 2025-era stdio server to
// 2026-07-28 clients (issue 34): server/discover says what the child has;
// Mcp-Param-* headers are checked against the child's x-mcp-header
// arguments; a child that asks its client for input mid-call (elicitation,
// sampling) is answered through input-required results, the retry resuming
// the very call that asked; the requestState of a held call is refused
// when tampered with, presented by another principal, or presented after
// the hold expired; a question for an undeclared capability is -32021.
//
// The child is fixtures/asking-server.mjs (the official SDK's 2025 Server).
// The conformance suite (0.2.0-alpha.12 at 2026-07-28, tests/run.sh) covers
// the scenario list with `mcpd --stdio` as the child.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { ACCEPT_BOTH, MCPD_BIN, NODE22, dbArg, initSession, procChildren, request, tempDb, waitFor, withMcpd } from './lib/mcpd.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const CHILD = `${NODE22} ${path.join(here, 'fixtures', 'asking-server.mjs')}`;
const ADMIN_BIN = path.join(path.dirname(MCPD_BIN), 'mcp-admin');
const V = '2026-07-28';
let nextId = 1;

function meta(caps = { elicitation: {} }) {
  return {
    'io.modelcontextprotocol/protocolVersion': V,
    'io.modelcontextprotocol/clientCapabilities': caps,
    'io.modelcontextprotocol/clientInfo': { name: 'gateway-2026-e2e', version: '0' },
  };
}

async function call(port, method, params = {}, { token, caps, headers = {} } = {}) {
  const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: meta(caps) } };
  const h = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  if (params.name !== undefined) h['Mcp-Name'] = params.name;
  if (token) h.Authorization = `Bearer ${token}`;
  return request(port, { headers: { ...h, ...headers }, body, timeout: 20000 });
}

/** The JSON-RPC message of a reply, JSON or SSE. */
function message(r) {
  if (r.json) return r.json;
  const data = r.text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .filter((d) => d.startsWith('{'));
  return JSON.parse(data.at(-1));
}

function addToken(db, name) {
  const r = spawnSync(ADMIN_BIN, ['--db', dbArg(db), 'tokens', 'add', name], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

const accept = (field, value) => ({ action: 'accept', content: { [field]: value } });

test("server/discover reflects the child's capabilities; Mcp-Param headers are checked against its schemas", async () => {
  await withMcpd(['--upstream', CHILD], {}, async (m) => {
    const d = message(await call(m.port, 'server/discover'));
    const caps = d.result.capabilities;
    assert.ok(caps.tools, JSON.stringify(caps));
    assert.equal(caps.prompts, undefined, 'the child has no prompts');
    assert.equal(caps.resources, undefined, 'the child has no resources');
    assert.equal(caps.logging, undefined);

    const prompts = message(await call(m.port, 'prompts/list'));
    assert.equal(prompts.error?.code, -32601, JSON.stringify(prompts));

    const ok = await call(m.port, 'tools/call', { name: 'weather', arguments: { region: 'north' } }, { headers: { 'Mcp-Param-Region': 'north' } });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(message(ok).result.content[0].text, 'weather in north');
    const missing = await call(m.port, 'tools/call', { name: 'weather', arguments: { region: 'north' } });
    assert.equal(missing.status, 400, missing.text);
    assert.equal(missing.json.error.code, -32020);
    const mismatch = await call(m.port, 'tools/call', { name: 'weather', arguments: { region: 'north' } }, { headers: { 'Mcp-Param-Region': 'south' } });
    assert.equal(mismatch.status, 400, mismatch.text);
    assert.equal(mismatch.json.error.code, -32020);

    // A 2025 session on the same gateway still gets the child's own answer.
    const s = await initSession(m.port);
    assert.equal(s.result.serverInfo.name, 'asking-server');
  });
});

test('an elicitation from a 2025 child is answered through 2026-07-28 round trips that resume the same call', async () => {
  await withMcpd(['--upstream', CHILD], {}, async (m) => {
    const first = message(await call(m.port, 'tools/call', { name: 'ask_name', arguments: {} }));
    const r1 = first.result;
    assert.equal(r1.resultType, 'input_required', JSON.stringify(first));
    const [key] = Object.keys(r1.inputRequests);
    assert.equal(r1.inputRequests[key].method, 'elicitation/create');
    assert.equal(r1.inputRequests[key].params.message, 'What is your name?');
    assert.equal(typeof r1.requestState, 'string');

    // Unanswered: asked again, the child still waiting.
    const again = message(await call(m.port, 'tools/call', { name: 'ask_name', arguments: {}, inputResponses: {}, requestState: r1.requestState }));
    assert.equal(again.result.resultType, 'input_required', JSON.stringify(again));
    assert.deepEqual(Object.keys(again.result.inputRequests), [key]);

    const done = message(
      await call(m.port, 'tools/call', {
        name: 'ask_name',
        arguments: {},
        inputResponses: { [key]: accept('name', 'Ada') },
        requestState: again.result.requestState,
      }),
    );
    // "call 1": the child's first call finished; a new one would ask again.
    assert.equal(done.result.content[0].text, 'Hello, Ada! (call 1)', JSON.stringify(done));

    // Two questions, one after the other: three requests, one child call.
    const a = message(await call(m.port, 'tools/call', { name: 'ask_two', arguments: {} })).result;
    const ka = Object.keys(a.inputRequests)[0];
    const b = message(
      await call(m.port, 'tools/call', { name: 'ask_two', arguments: {}, inputResponses: { [ka]: accept('name', 'Bo') }, requestState: a.requestState }),
    ).result;
    assert.equal(b.resultType, 'input_required', JSON.stringify(b));
    const kb = Object.keys(b.inputRequests)[0];
    assert.notEqual(kb, ka);
    assert.equal(b.inputRequests[kb].params.message, 'What is your favourite colour?');
    assert.notEqual(b.requestState, a.requestState);
    const c = message(
      await call(m.port, 'tools/call', { name: 'ask_two', arguments: {}, inputResponses: { [kb]: accept('colour', 'teal') }, requestState: b.requestState }),
    );
    assert.match(c.result.content[0].text, /^Bo likes teal \(call \d+\)$/, JSON.stringify(c));

    // A question the client cannot answer (no sampling declared): -32021.
    // (An HTTP 400 when the reply is still a JSON body; the child asks
    // mid-call, so the response may be an event stream already.)
    const refused = await call(m.port, 'tools/call', { name: 'sample', arguments: {} });
    if (refused.headers['content-type']?.startsWith('application/json')) assert.equal(refused.status, 400, refused.text);
    const rm = message(refused);
    assert.equal(rm.error.code, -32021);
    assert.deepEqual(rm.error.data.requiredCapabilities, { sampling: {} });
    // A tool whose listing says it needs sampling is refused before it runs.
    const upFront = await call(m.port, 'tools/call', { name: 'sample_declared', arguments: {} });
    assert.equal(upFront.status, 400, upFront.text);
    assert.equal(upFront.json.error.code, -32021);
    assert.deepEqual(upFront.json.error.data.requiredCapabilities, { sampling: {} });
    // Declared: asked as an input-required result.
    const sampled = message(await call(m.port, 'tools/call', { name: 'sample', arguments: {} }, { caps: { sampling: {} } })).result;
    const ks = Object.keys(sampled.inputRequests)[0];
    assert.equal(sampled.inputRequests[ks].method, 'sampling/createMessage');
    const said = message(
      await call(
        m.port,
        'tools/call',
        {
          name: 'sample',
          arguments: {},
          inputResponses: { [ks]: { role: 'assistant', content: { type: 'text', text: 'hi there' }, model: 'm' } },
          requestState: sampled.requestState,
        },
        { caps: { sampling: {} } },
      ),
    );
    assert.equal(said.result.content[0].text, 'hi there', JSON.stringify(said));
  });
});

test("a held call's requestState: tampered, another principal's, or past the hold's time, is refused", async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--upstream', CHILD, '--auth', 'token', '--upstream-relay-timeout-ms', '3000'], { db, dir }, async (m) => {
    const alice = addToken(db, 'alice');
    const bob = addToken(db, 'bob');
    const ask = () => call(m.port, 'tools/call', { name: 'ask_name', arguments: {} }, { token: alice });
    const retry = (token, requestState, name = 'Ada') =>
      call(m.port, 'tools/call', { name: 'ask_name', arguments: {}, inputResponses: { elicitation_1: accept('name', name) }, requestState }, { token });

    const r1 = message(await ask()).result;
    assert.equal(r1.resultType, 'input_required');
    assert.deepEqual(Object.keys(r1.inputRequests), ['elicitation_1']);
    const state = r1.requestState;

    // Tampered: one character of the payload changed.
    const i = 5;
    const tampered = state.slice(0, i) + (state[i] === 'A' ? 'B' : 'A') + state.slice(i + 1);
    const t = message(await retry(alice, tampered));
    assert.equal(t.error?.code, -32602, JSON.stringify(t));

    // Bob presents Alice's state.
    const stolen = message(await retry(bob, state));
    assert.equal(stolen.error?.code, -32602, JSON.stringify(stolen));
    assert.match(stolen.error.message, /principal/);

    // Neither consumed it: Alice's own retry resumes the held call.
    const done = message(await retry(alice, state));
    assert.match(done.result?.content?.[0]?.text ?? '', /^Hello, Ada! \(call \d+\)$/, JSON.stringify(done));
    // And it is used: the same state with other answers is refused.
    const reused = message(await retry(alice, state, 'Eve'));
    assert.equal(reused.error?.code, -32602, JSON.stringify(reused));

    // Past the hold's time (--upstream-relay-timeout-ms 3000): refused,
    // and the child that held it is stopped.
    const late = message(await ask()).result;
    await new Promise((r) => setTimeout(r, 3500));
    const expired = message(await retry(alice, late.requestState));
    assert.equal(expired.error?.code, -32602, JSON.stringify(expired));
    assert.match(expired.error.message, /no longer held/);
    await waitFor(() => procChildren(m.pid).length === 0, 10000, 'the held child is stopped');
  });
});
