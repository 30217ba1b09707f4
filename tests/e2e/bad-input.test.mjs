// Bad input on the Streamable HTTP endpoint: a table of malformed,
// unauthorised or out-of-protocol requests, each with the HTTP status and
// JSON-RPC error code mcpd documents. After every case the server must still
// serve: /healthz answers, a valid session's echo works, and a reply stored
// before the bad inputs can still be resumed with GET + Last-Event-ID.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';

import {
  ACCEPT_BOTH,
  LATEST,
  callTool,
  rawExchange,
  echo,
  getStream,
  initSession,
  mcpHeaders,
  request,
  startMcpd,
} from './lib/mcpd.mjs';

const MAX_BODY = 65536;

let mcpd;
const ctx = {}; // sessions and the stored stream, filled in before()

before(async () => {
  mcpd = await startMcpd({ args: ['--max-body', String(MAX_BODY)] });
  ctx.valid = (await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session;
  ctx.legacy = (await initSession(mcpd.port, { protocolVersion: '2025-03-26' })).session;
  ctx.deleted = (await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session;
  const d = await request(mcpd.port, {
    method: 'DELETE',
    headers: { 'Mcp-Session-Id': ctx.deleted, 'MCP-Protocol-Version': LATEST },
  });
  assert.equal(d.status, 200, `DELETE session: ${d.status} ${d.text}`);
  ctx.unknown = crypto.randomBytes(16).toString('hex');

  // a stored reply on the valid session: countdown 3 with progress
  const c = await callTool(mcpd.port, ctx.valid, 'countdown', { n: 3, interval_ms: 10 }, { progressToken: 'bad-input' });
  assert.equal(c.status, 200);
  assert.ok(c.sse, 'countdown with progress replies with SSE');
  const withData = c.events.filter((e) => e.data !== '');
  assert.equal(withData.length, 4, `3 progress + result: ${JSON.stringify(c.events)}`);
  ctx.resumeFrom = withData[0].id; // after progress 1
  ctx.resumeRest = withData.slice(1).map((e) => JSON.parse(e.data));
  ctx.countdownId = c.id;
  assert.ok(ctx.resumeFrom, 'progress event has an id');
});

after(async () => {
  await mcpd?.cleanup();
});

const sessionHeader = (kind) =>
  ({ none: undefined, valid: ctx.valid, legacy: ctx.legacy, unknown: ctx.unknown, deleted: ctx.deleted })[kind];

const req = (method, params = {}, id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
const echoBody = (message, id = 1) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { message } } });

// Invalid UTF-8 (0xff 0xfe, and a lone continuation byte) inside a JSON string.
const badUtf8 = Buffer.concat([
  Buffer.from('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a'),
  Buffer.from([0xff, 0xfe, 0x80]),
  Buffer.from('b"}}}'),
]);

const big = echoBody('x'.repeat(100 * 1024));

// session: none | valid (2025-11-25) | legacy (2025-03-26) | unknown | deleted
// headers: merged over the defaults for a POST (Accept both, JSON, session,
//   MCP-Protocol-Version 2025-11-25 except on legacy); a null value removes one.
// expectCode: a JSON-RPC error code in a JSON error body, an array of allowed
//   codes, or null for "no body expected" (expectEmpty) / not checked.
const CASES = [
  { name: 'malformed JSON', session: 'valid', body: '{"jsonrpc":"2.0","id":1,"method":', expectStatus: 400, expectCode: -32700 },
  { name: 'trailing garbage after JSON', session: 'valid', body: `${req('ping')} x`, expectStatus: 400, expectCode: -32700 },
  { name: 'non-object body: 42', session: 'valid', body: '42', expectStatus: 400, expectCode: -32600 },
  { name: 'non-object body: "x"', session: 'valid', body: '"x"', expectStatus: 400, expectCode: -32600 },
  { name: 'non-object body: null', session: 'valid', body: 'null', expectStatus: 400, expectCode: -32600 },
  { name: 'empty batch [] (2025-03-26 session)', session: 'legacy', body: '[]', expectStatus: 400, expectCode: -32600 },
  { name: 'empty batch [] (2025-11-25 session)', session: 'valid', body: '[]', expectStatus: 400, expectCode: -32600 },
  { name: 'invalid UTF-8 in a string', session: 'valid', body: badUtf8, expectStatus: 400, expectCode: -32700 },
  { name: 'request with "jsonrpc": "1.0"', session: 'valid', body: '{"jsonrpc":"1.0","id":1,"method":"ping"}', expectStatus: 400, expectCode: -32600 },
  { name: 'request without "jsonrpc"', session: 'valid', body: '{"id":1,"method":"ping"}', expectStatus: 400, expectCode: -32600 },
  { name: 'request with a non-string method', session: 'valid', body: '{"jsonrpc":"2.0","id":1,"method":42}', expectStatus: 400, expectCode: -32600 },
  { name: 'request with a fractional id', session: 'valid', body: '{"jsonrpc":"2.0","id":1.5,"method":"ping"}', expectStatus: 400, expectCode: -32600 },
  { name: 'request with an object id', session: 'valid', body: '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', expectStatus: 400, expectCode: -32600 },
  { name: 'request with "id": null', session: 'valid', body: '{"jsonrpc":"2.0","id":null,"method":"ping"}', expectStatus: 400, expectCode: -32600 },
  { name: 'Accept: application/json only', session: 'valid', headers: { Accept: 'application/json' }, body: req('tools/list'), expectStatus: 406, expectCode: -32000 },
  { name: 'Accept: text/event-stream only', session: 'valid', headers: { Accept: 'text/event-stream' }, body: req('tools/list'), expectStatus: 406, expectCode: -32000 },
  { name: 'no Accept header', session: 'valid', headers: { Accept: null }, body: req('tools/list'), expectStatus: 406, expectCode: -32000 },
  { name: 'Content-Type: text/plain', session: 'valid', headers: { 'Content-Type': 'text/plain' }, body: req('tools/list'), expectStatus: 415, expectCode: -32000 },
  { name: `oversized body (100 KiB > --max-body ${MAX_BODY})`, session: 'valid', body: big, expectStatus: 413, expectCode: -32000 },
  // design.md: JSON depth is limited; hitting the limit is a clear 400, not a crash
  { name: 'deeply nested JSON (30000 levels) in params', session: 'valid', body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":${'['.repeat(30000)}${']'.repeat(30000)}}}`, expectStatus: 400, expectCode: [-32700, -32600] },
  { name: 'missing Mcp-Session-Id on tools/list', session: 'none', body: req('tools/list'), expectStatus: 400, expectCode: -32000 },
  { name: 'unknown session id', session: 'unknown', body: req('tools/list'), expectStatus: 404, expectCode: -32001 },
  { name: 'deleted session id', session: 'deleted', body: req('tools/list'), expectStatus: 404, expectCode: -32001 },
  { name: 'GET on an unknown session', method: 'GET', session: 'unknown', headers: { Accept: 'text/event-stream', 'Content-Type': null }, expectStatus: 404, expectCode: -32001 },
  { name: 'DELETE on an unknown session', method: 'DELETE', session: 'unknown', headers: { 'Content-Type': null, Accept: null }, expectStatus: 404, expectCode: -32001 },
  { name: 'unsupported MCP-Protocol-Version 1999-01-01', session: 'valid', headers: { 'MCP-Protocol-Version': '1999-01-01' }, body: req('tools/list'), expectStatus: 400, expectCode: -32000 },
  { name: 'Host: evil.example.com (initialize)', session: 'none', headers: { Host: 'evil.example.com', 'MCP-Protocol-Version': null }, body: req('initialize', { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'x', version: '1' } }), expectStatus: 403, expectCode: -32000 },
  { name: 'Host: evil.example.com (valid session)', session: 'valid', headers: { Host: 'evil.example.com:80' }, body: echoBody('x'), expectStatus: 403, expectCode: -32000 },
  { name: 'Origin: http://evil.example.com', session: 'valid', headers: { Origin: 'http://evil.example.com' }, body: echoBody('x'), expectStatus: 403, expectCode: -32000 },
  { name: 'JSON-RPC response for an id the server never sent', session: 'valid', body: '{"jsonrpc":"2.0","id":"never-sent-42","result":{}}', expectStatus: 400, expectCode: -32600 },
  { name: 'batch on a 2025-11-25 session', session: 'valid', body: `[${req('ping', {}, 1)},${req('ping', {}, 2)}]`, expectStatus: 400, expectCode: -32600 },
  { name: 'notification → 202, empty body', session: 'valid', body: '{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}', expectStatus: 202, expectCode: null, expectEmpty: true },
  { name: 'cancel of an unknown request → 202', session: 'valid', body: '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}', expectStatus: 202, expectCode: null, expectEmpty: true },
  { name: 'GET without session', method: 'GET', session: 'none', headers: { Accept: 'text/event-stream', 'Content-Type': null }, expectStatus: 400, expectCode: -32000 },
  { name: 'GET with Accept: application/json', method: 'GET', session: 'valid', headers: { Accept: 'application/json', 'Content-Type': null }, expectStatus: 406, expectCode: -32000 },
  { name: 'PUT /mcp', method: 'PUT', session: 'valid', body: req('ping'), expectStatus: 405, expectCode: -32000 },
  { name: 'overlong session id (4096 chars)', session: 'valid', headers: { 'Mcp-Session-Id': 'a'.repeat(4096) }, body: req('tools/list'), expectStatus: [400, 404], expectCode: [-32000, -32001] },
  { name: 'session id with path characters', session: 'valid', headers: { 'Mcp-Session-Id': '../../../etc/passwd' }, body: req('tools/list'), expectStatus: [400, 404], expectCode: [-32000, -32001] },
  { name: 'resume GET on a deleted session', method: 'GET', session: 'deleted', headers: { Accept: 'text/event-stream', 'Content-Type': null, 'Last-Event-ID': 'x:0' }, expectStatus: 404, expectCode: -32001 },
  { name: 'Last-Event-ID of another session\'s stream is not replayed', run: foreignLastEventId },
  { name: 'garbage Last-Event-ID values are refused or replay nothing', run: garbageLastEventId },
  { name: 'Host: localhost.evil.example.com (prefix of an allowed name)', session: 'valid', headers: { Host: 'localhost.evil.example.com' }, body: echoBody('x'), expectStatus: 403, expectCode: -32000 },
  { name: 'Host: 127.0.0.1.evil.example.com', session: 'valid', headers: { Host: '127.0.0.1.evil.example.com:80' }, body: echoBody('x'), expectStatus: 403, expectCode: -32000 },
  { name: 'Origin: http://localhost.evil.example.com', session: 'valid', headers: { Origin: 'http://localhost.evil.example.com' }, body: echoBody('x'), expectStatus: 403, expectCode: -32000 },
  { name: 'Origin: null', session: 'valid', headers: { Origin: 'null' }, body: echoBody('x'), expectStatus: 403, expectCode: -32000 },
  { name: 'Origin on GET: http://evil.example.com', method: 'GET', session: 'valid', headers: { Origin: 'http://evil.example.com', Accept: 'text/event-stream', 'Content-Type': null }, expectStatus: 403, expectCode: -32000 },
  { name: 'Origin: http://localhost:1234 is allowed', session: 'valid', headers: { Origin: 'http://localhost:1234' }, body: echoBody('ok-origin'), expectStatus: 200, expectCode: null },
  { name: 'Host: localhost:<port> is allowed', session: 'valid', headers: { Host: 'localhost:1' }, body: echoBody('ok-host'), expectStatus: 200, expectCode: null },
  { name: 'Host: [::1]:<port> is allowed', session: 'valid', headers: { Host: '[::1]:1' }, body: echoBody('ok-host6'), expectStatus: 200, expectCode: null },
  { name: 'Content-Type with charset is accepted', session: 'valid', headers: { 'Content-Type': 'application/json; charset=utf-8' }, body: echoBody('ok-charset'), expectStatus: 200, expectCode: null },
  { name: 'Accept with q-values is accepted', session: 'valid', headers: { Accept: 'application/json;q=0.9, text/event-stream;q=0.8' }, body: echoBody('ok-q'), expectStatus: 200, expectCode: null },
  { name: 'pipelined: oversized body then a valid request on the same connection', run: pipelinedAfterError },
  { name: 'chunked body over --max-body → 413; under it → 200', run: chunkedBodies },
  { name: 'second concurrent GET on the same session → 409', run: secondGet },
];

async function runCase(c) {
  const session = sessionHeader(c.session);
  const h = mcpHeaders({ session, version: c.session === 'legacy' ? null : LATEST });
  for (const [k, v] of Object.entries(c.headers || {})) {
    for (const hk of Object.keys(h)) if (hk.toLowerCase() === k.toLowerCase()) delete h[hk];
    if (v !== null) h[k] = v;
  }
  const r = await request(mcpd.port, { method: c.method || 'POST', headers: h, body: c.body, timeout: 5000 });
  const statuses = Array.isArray(c.expectStatus) ? c.expectStatus : [c.expectStatus];
  assert.ok(statuses.includes(r.status), `HTTP status ${r.status}, expected ${statuses} (body: ${r.text.slice(0, 300)})`);
  if (c.expectStatus === 200) {
    const msg = JSON.parse(c.body).params.arguments.message;
    assert.ok(r.text.includes(`"text":"${msg}"`), `echo reply expected: ${r.text.slice(0, 300)}`);
  }
  if (c.expectEmpty) assert.equal(r.body.length, 0, `empty body expected, got ${r.text.slice(0, 200)}`);
  if (c.expectCode !== null && c.expectCode !== undefined) {
    assert.ok(r.json, `JSON-RPC error body expected, got: ${r.text.slice(0, 300)}`);
    assert.match(String(r.headers['content-type']), /application\/json/);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.ok(r.json.id === null || r.json.id === undefined, `error id must be null/absent: ${r.text}`);
    const allowed = Array.isArray(c.expectCode) ? c.expectCode : [c.expectCode];
    assert.ok(allowed.includes(r.json.error?.code), `error code ${r.json.error?.code}, expected ${allowed}: ${r.text}`);
    assert.equal(typeof r.json.error.message, 'string');
  }
}

/**
 * GET on session `session` with Last-Event-ID `lei`: either a 4xx JSON-RPC
 * error, or a 200 stream that (within 1 s) carries none of `forbidden`
 * (JSON strings of messages that belong to another stream).
 */
async function resumeMustNotLeak(session, lei, forbidden) {
  const g = await getStream(mcpd.port, session, { lastEventId: lei });
  try {
    if (g.status === 200) {
      await new Promise((r) => setTimeout(r, 1000));
      const got = g.sse.drainMessages().map((m) => m.msg);
      for (const m of got) {
        assert.ok(!forbidden.includes(JSON.stringify(m)), `Last-Event-ID ${lei} replayed a foreign message ${JSON.stringify(m)}`);
        assert.ok(!('result' in m || 'error' in m), `Last-Event-ID ${lei} replayed a response ${JSON.stringify(m)}`);
      }
    } else {
      assert.ok(g.status >= 400 && g.status < 500, `status ${g.status} for Last-Event-ID ${lei}`);
      const b = await g.body;
      assert.ok(b.json?.error, `error body for Last-Event-ID ${lei}: ${b.text}`);
    }
  } finally {
    g.close();
  }
}

async function foreignLastEventId() {
  // another session, same server: must not see the valid session's stream
  const other = (await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session;
  const forbidden = ctx.resumeRest.map((m) => JSON.stringify(m));
  await resumeMustNotLeak(other, ctx.resumeFrom, forbidden);
  await request(mcpd.port, { method: 'DELETE', headers: { 'Mcp-Session-Id': other, 'MCP-Protocol-Version': LATEST } });
}

async function garbageLastEventId() {
  const forbidden = ctx.resumeRest.map((m) => JSON.stringify(m));
  const stream = ctx.resumeFrom.slice(0, ctx.resumeFrom.lastIndexOf(':'));
  for (const lei of ['zzz', ':', `${stream}:abc`, `${stream}:-5`, `${stream}:999999999999999999999`, 'x'.repeat(2000), `${stream}:1e3`]) {
    // a nonsense id must not replay the (ended) stream as if from its start
    await resumeMustNotLeak(ctx.valid, lei, lei.endsWith(':-5') ? [] : forbidden);
  }
}

function rawPost(body, extra = '') {
  return (
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nAccept: ${ACCEPT_BOTH}\r\n` +
    `Content-Type: application/json\r\nMcp-Session-Id: ${ctx.valid}\r\nMCP-Protocol-Version: ${LATEST}\r\n` +
    (extra || `Content-Length: ${Buffer.byteLength(body)}\r\n`) +
    '\r\n'
  );
}

const countResponses = (text) => (text.match(/HTTP\/1\.1 \d{3} /g) || []).length;

async function pipelinedAfterError() {
  // an error answered before the body is read must not leave that body to be
  // parsed as the next request: either the next request is answered
  // correctly, or the server closes the connection after the error.
  for (const [first, status] of [
    [rawPost(big) + big, 413],
    [rawPost(echoBody('x')).replace('Content-Type: application/json', 'Content-Type: text/plain') + echoBody('x'), 415],
    [rawPost('{"jsonrpc":').replace('Content-Length', 'X-Pad: 1\r\nContent-Length') + '{"jsonrpc":', 400],
  ]) {
    const second = echoBody('second-on-socket', 2);
    const r = await rawExchange(mcpd.port, first + rawPost(second) + second, {
      ms: 5000,
      until: (t) => countResponses(t) >= 2 && t.includes('second-on-socket'),
    });
    assert.match(r.text, new RegExp(`^HTTP/1\\.1 ${status} `), `first response: ${r.text.slice(0, 200)}`);
    const n = countResponses(r.text);
    if (n >= 2) {
      const tail = r.text.slice(r.text.indexOf('HTTP/1.1', 10));
      assert.match(tail, /^HTTP\/1\.1 200 /, `second response on the socket: ${tail.slice(0, 300)}`);
      assert.ok(tail.includes('"text":"second-on-socket"'), tail.slice(0, 400));
    } else {
      assert.ok(r.closed, `after a ${status} the server neither answered the next request nor closed: ${r.text.slice(0, 300)}`);
    }
  }
}

async function chunkedBodies() {
  const chunked = (body) => {
    let o = '';
    for (let i = 0; i < body.length; i += 8000) {
      const c = body.slice(i, i + 8000);
      o += `${Buffer.byteLength(c).toString(16)}\r\n${c}\r\n`;
    }
    return `${o}0\r\n\r\n`;
  };
  const te = 'Transfer-Encoding: chunked\r\n';
  const over = await rawExchange(mcpd.port, rawPost(big, te) + chunked(big), { until: (t) => /\r\n\r\n\{.*\}/s.test(t) });
  assert.match(over.text, /^HTTP\/1\.1 413 /, `chunked 100 KiB: ${over.text.slice(0, 300)}`);
  assert.ok(over.text.includes('-32000'), over.text.slice(0, 300));
  const small = echoBody('chunked-ok');
  const under = await rawExchange(mcpd.port, rawPost(small, te) + chunked(small), { until: (t) => t.includes('chunked-ok') });
  assert.match(under.text, /^HTTP\/1\.1 200 /, `chunked small body: ${under.text.slice(0, 300)}`);
  assert.ok(under.text.includes('"text":"chunked-ok"'));
}

async function secondGet() {
  const first = await getStream(mcpd.port, ctx.valid);
  try {
    assert.equal(first.status, 200, 'first GET');
    assert.match(String(first.headers['content-type']), /^text\/event-stream/);
    const second = await request(mcpd.port, {
      method: 'GET',
      headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': ctx.valid, 'MCP-Protocol-Version': LATEST },
      timeout: 5000,
    });
    assert.equal(second.status, 409, `second GET: ${second.status} ${second.text}`);
    assert.equal(second.json?.error?.code, -32000);
    await echo(mcpd.port, ctx.valid, 'while-get-open');
    assert.equal(first.sse.ended, false, 'the first GET stays open');
  } finally {
    first.close();
  }
  // after the first closes, a new GET is accepted again promptly (well before
  // the 15 s keepalive would reveal the dead peer; allow a few tries)
  let status;
  for (let i = 0; i < 10; i++) {
    const g = await getStream(mcpd.port, ctx.valid);
    status = g.status;
    g.close();
    if (status === 200) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.equal(status, 200, 'a GET after the first one closed is accepted');
}

async function assertStillServing() {
  const h = await request(mcpd.port, { method: 'GET', path: '/healthz', timeout: 5000 });
  assert.equal(h.status, 200, 'healthz after the case');
  await echo(mcpd.port, ctx.valid, 'still-alive');
  const g = await getStream(mcpd.port, ctx.valid, { lastEventId: ctx.resumeFrom });
  try {
    assert.equal(g.status, 200, 'resume GET after the case');
    const msgs = await g.sse.rest(5000);
    assert.deepEqual(
      msgs.map((m) => m.msg),
      ctx.resumeRest,
      'stored stream replays the same messages after the bad input',
    );
  } finally {
    g.close();
  }
}

for (const c of CASES) {
  test(c.name, async () => {
    if (c.run) await c.run();
    else await runCase(c);
    await assertStillServing();
  });
}

test('valid sessions used above are still valid (legacy batch works)', async () => {
  const r = await request(mcpd.port, {
    headers: mcpHeaders({ session: ctx.legacy, version: null }),
    body: `[${req('ping', {}, 1)},${req('ping', {}, 2)}]`,
  });
  assert.equal(r.status, 200);
});
