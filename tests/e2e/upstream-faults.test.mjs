// An upstream child that answers in ways mcpd cannot pass on
// (fixtures/faulty-upstream.mjs). Every request must still get exactly one
// reply, promptly, and the client must see only what it asked for:
//
// (1) A response larger than --max-body (the limit on a child's message):
//     the call fails at once with -32603, whether the id comes first or
//     last (as the TypeScript SDK writes it), in NDJSON or Content-Length
//     framing; the client's id is free again; the drop is logged.
// (2) An error without an integer code, and a result that is not an
//     object: the call fails at once with -32603, and is logged.
// (3) Progress with no token, or one mcpd never gave the child: not sent
//     to the client; progress with the child's real token is, with the
//     client's own token (string or integer).
// (4) The child's sampling, elicitation and roots requests, when the
//     client did not declare the capability: the child gets -32601, the
//     client sees nothing.
// (5) The child refusing initialize: its message reaches the client and
//     the log. An oversized initialize answer fails the start at once.
// (6) An oversized request from the child: the child gets an error back.
//
// Every process this file signals is one it started.

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  NODE22,
  callTool,
  echo,
  initSession,
  mcpHeaders,
  newId,
  request,
  responseFor,
  rpc,
  waitFor,
  withMcpd,
} from './lib/mcpd.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const FAULTY_CMD = `${NODE22} ${path.join(here, 'fixtures', 'faulty-upstream.mjs')}`;
const MAX_BODY = 1024 * 1024;
// Far beyond what a prompt answer takes, far below any "until the child exits".
const PROMPT_MS = 5000;

const withFaulty = (args, fn) =>
  withMcpd(['--upstream', FAULTY_CMD, '--max-body', String(MAX_BODY), ...args], { stopMs: 15000 }, fn);

/** tools/call with a given client id; resolves the reply (rejects after ms). */
/** A bare initialize on /mcp: what the faulty child makes of it. */
const initialize = (m, opts = {}) =>
  request(m.port, {
    headers: mcpHeaders({ version: null }),
    body: {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'faults', version: '0' } },
    },
    ...opts,
  });

async function callWithId(m, session, id, name, args, { ms = PROMPT_MS, meta } = {}) {
  const params = { name, arguments: args };
  if (meta) params._meta = meta;
  const r = await rpc(m.port, { jsonrpc: '2.0', id, method: 'tools/call', params }, { session, ms });
  return { ...r, response: responseFor(r.messages, id) };
}

/** The call failed at once with -32603 naming the reason, and the child's fault was logged. */
async function assertInvalid(m, r, reason) {
  assert.equal(r.status, 200, JSON.stringify(r.messages));
  assert.equal(r.response?.error?.code, -32603, JSON.stringify(r.messages));
  assert.match(r.response.error.message, /upstream server sent an invalid response/);
  assert.match(r.response.error.message, reason);
  await waitFor(() => reason.test(m.stderr.split('\n').filter((l) => /event=upstream_bad_message/.test(l)).join('\n')), 5000, 'the log line');
}

test('an oversized response fails its call at once (id first or last, NDJSON or Content-Length); the id is free again', async () => {
  for (const framing of ['', 'cl']) {
    await withFaulty(['--upstream-env', `FAULTY_FRAMING=${framing}`], async (m) => {
      const { session } = await initSession(m.port);
      // Just under the limit still passes.
      const ok = await callWithId(m, session, newId(), 'big', { bytes: MAX_BODY - 200 });
      assert.equal(ok.response?.result?.content?.[0]?.text?.length, MAX_BODY - 200, `${framing}: a large answer`);
      for (const idLast of [false, true]) {
        const id = newId();
        const r = await callWithId(m, session, id, 'big', { bytes: MAX_BODY + 4096, idLast });
        await assertInvalid(m, r, new RegExp(`larger than ${MAX_BODY} bytes`));
        // The id is not left "in flight": the same id is served again.
        const again = await callWithId(m, session, id, 'echo', { message: 'same id' });
        assert.equal(again.response?.result?.content?.[0]?.text, 'same id', `${framing} idLast=${idLast}: ${JSON.stringify(again.messages)}`);
      }
      assert.equal(await echo(m.port, session, 'still-served'), 'still-served');
    });
  }
});

test('an error without an integer code, or a result that is not an object, fails the call at once', async () => {
  await withFaulty([], async (m) => {
    const { session } = await initSession(m.port);
    for (const [tool, reason] of [
      ['err_nocode', /integer code/],
      ['err_strcode', /integer code/],
      ['result_str', /result is not an object/],
    ]) {
      const id = newId();
      await assertInvalid(m, await callWithId(m, session, id, tool, {}), reason);
      const again = await callWithId(m, session, id, 'echo', { message: tool });
      assert.equal(again.response?.result?.content?.[0]?.text, tool, JSON.stringify(again.messages));
    }
  });
});

test('progress reaches the client only for a token it sent, with its own token', async () => {
  await withFaulty([], async (m) => {
    const { session } = await initSession(m.port);
    const bare = await callWithId(m, session, newId(), 'progress', {});
    assert.equal(bare.response?.result?.content?.[0]?.text, 'progressed');
    const stray = bare.messages.filter((x) => x.method === 'notifications/progress');
    assert.deepEqual(stray, [], 'no progress for a request that asked for none');
    for (const token of ['tok-1', 7]) {
      const r = await callWithId(m, session, newId(), 'progress', {}, { meta: { progressToken: token } });
      assert.equal(r.response?.result?.content?.[0]?.text, 'progressed');
      const prog = r.messages.filter((x) => x.method === 'notifications/progress');
      assert.deepEqual(
        prog.map((p) => p.params),
        [{ progressToken: token, progress: 3, total: 3 }],
        `only the child's progress with our token, as the client's token ${JSON.stringify(token)}`,
      );
    }
  });
});

test('sampling, elicitation and roots requests for a client that did not declare them are refused to the child', async () => {
  await withFaulty([], async (m) => {
    const { session } = await initSession(m.port, { capabilities: {} });
    for (const [method, cap, params] of [
      ['sampling/createMessage', 'sampling', { messages: [{ role: 'user', content: { type: 'text', text: 'q' } }], maxTokens: 5 }],
      ['elicitation/create', 'elicitation', { message: 'name?', requestedSchema: { type: 'object', properties: {} } }],
      ['roots/list', 'roots', {}],
    ]) {
      const r = await callWithId(m, session, newId(), 'ask', { method, params });
      const asked = r.messages.filter((x) => x.method === method);
      assert.deepEqual(asked, [], `${method} must not reach the client`);
      const answer = JSON.parse(r.response?.result?.content?.[0]?.text ?? '{}');
      assert.equal(answer.error?.code, -32601, `${method}: ${JSON.stringify(r.messages)}`);
      assert.match(answer.error.message, new RegExp(`did not declare the ${cap} capability`));
    }
  });
});

test('the child refusing initialize: its own message reaches the client and the log', async () => {
  await withFaulty(['--upstream-env', 'FAULTY_INIT=error'], async (m) => {
    const r = await initialize(m);
    assert.notEqual(r.status, 200, r.text);
    assert.match(JSON.stringify(r.json), /unsupported version, try 1999/);
    assert.match(JSON.stringify(r.json), /code -32602/);
    await waitFor(() => /event=upstream_start_failed[^\n]*unsupported version, try 1999/.test(m.stderr), 5000, 'the log line');
  });
});

test('an oversized initialize answer fails the start at once', async () => {
  await withFaulty(['--upstream-env', 'FAULTY_INIT=big', '--upstream-start-timeout-ms', '30000'], async (m) => {
    const t0 = Date.now();
    const r = await initialize(m, { timeout: PROMPT_MS });
    assert.ok(Date.now() - t0 < PROMPT_MS, 'well before --upstream-start-timeout-ms');
    assert.notEqual(r.status, 200, r.text);
    assert.match(JSON.stringify(r.json), new RegExp(`invalid initialize response: a message larger than ${MAX_BODY} bytes`));
  });
});

test('an oversized request from the child gets an error back', async () => {
  await withFaulty([], async (m) => {
    const { session } = await initSession(m.port, { capabilities: { sampling: {} } });
    const r = await callTool(m.port, session, 'big_request', { bytes: MAX_BODY + 4096 }, { ms: PROMPT_MS });
    assert.equal(r.messages.filter((x) => x.method === 'sampling/createMessage').length, 0);
    const answer = JSON.parse(r.response?.result?.content?.[0]?.text ?? '{}');
    assert.equal(answer.error?.code, -32600, JSON.stringify(r.messages));
    assert.match(answer.error.message, new RegExp(`larger than ${MAX_BODY} bytes`));
  });
});
