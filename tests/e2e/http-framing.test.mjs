// HTTP/1.1 message framing a request smuggler could play on (RFC 9112 §6),
// answered by body_gate before ulfius or libmicrohttpd reads any body:
// (a) Content-Length values that differ: 400 and close, so the bytes past
// the first length are never served as a request of their own; (b)
// Content-Length together with Transfer-Encoding: 400 and close; (c) a
// transfer coding other than chunked: 501 at once, not a connection held
// until --request-timeout-ms; (d) a query string that decodes to a NUL byte,
// which ulfius would cut, so that `sessionId=<id>%00zz` addressed <id>: 400;
// (e) a path that does: 400 (the gate's own test for /mcp/ws reads the path
// decoded, and "/mcp/ws%00x" would have been a WebSocket handshake).
// Each refusal is one response with the JSON-RPC error body (id null) and
// Connection: close, counted in mcpd_refusals_total and written to the
// request log. Requests framed correctly (identical repeated Content-Length,
// chunked in any case) are still served.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';

import {
  ACCEPT_BOTH,
  LATEST,
  initSession,
  newId,
  openStream,
  rawExchange,
  refusals,
  request,
  startMcpd,
  waitFor,
} from './lib/mcpd.mjs';

const SERVER_ERROR = -32000;
const PING = '{"jsonrpc":"2.0","id":1,"method":"ping"}';

let mcpd;
let session;
before(async () => {
  mcpd = await startMcpd();
  ({ session } = await initSession(mcpd.port));
});
after(async () => {
  const exit = await mcpd?.stop('SIGTERM');
  await mcpd?.cleanup();
  assert.deepEqual(exit, { code: 0, signal: null }, mcpd?.stderr);
});

/** A keep-alive POST /mcp head on the session, with `extra` header lines. */
function postHead(extra) {
  return (
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nAccept: ${ACCEPT_BOTH}\r\n` +
    `Content-Type: application/json\r\nMcp-Session-Id: ${session}\r\n` +
    `MCP-Protocol-Version: ${LATEST}\r\n${extra}\r\n`
  );
}

const chunked = (body) => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;

/** What a smuggled request would be answered with: a second response. */
const SMUGGLED = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

/** The responses in raw text: [{status, head, body}], bodies cut by Content-Length. */
function responses(text) {
  const out = [];
  let p = 0;
  while (p < text.length) {
    const end = text.indexOf('\r\n\r\n', p);
    if (end < 0) break;
    const head = text.slice(p, end);
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
    const len = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    out.push({ status, head, body: text.slice(end + 4, end + 4 + len) });
    p = end + 4 + len;
  }
  return out;
}

/**
 * Sends `data` on one connection, and requires exactly one response, the
 * refusal `status` with mcpd's JSON-RPC error (id null) whose message
 * matches `message`, and the connection closed by the server right after.
 */
async function assertRefused(data, status, message, what) {
  const x = await rawExchange(mcpd.port, data, { ms: 5000 });
  assert.ok(!x.timedOut, `${what}: the server held the connection: ${JSON.stringify(x.text.slice(0, 300))}`);
  assert.ok(x.closed, `${what}: the connection is closed`);
  const rs = responses(x.text);
  assert.equal(rs.length, 1, `${what}: exactly one response: ${JSON.stringify(x.text)}`);
  const [r] = rs;
  assert.equal(r.status, status, `${what}: ${r.head}`);
  assert.match(r.head, /\r\ncontent-type: application\/json/i, `${what}: ${r.head}`);
  assert.match(r.head, /\r\nconnection: close/i, `${what}: ${r.head}`);
  const json = JSON.parse(r.body);
  assert.equal(json.jsonrpc, '2.0');
  assert.equal(json.id, null);
  assert.equal(json.error.code, SERVER_ERROR);
  assert.match(json.error.message, message, what);
}

/** A request that must be served: one 200 with the ping's result. */
async function assertServed(data, what) {
  const x = await rawExchange(mcpd.port, data, { ms: 5000, until: (t) => responses(t).some((r) => r.body.endsWith('}')) });
  const [r] = responses(x.text);
  assert.ok(r, `${what}: no response: ${JSON.stringify(x.text)}`);
  assert.equal(r.status, 200, `${what}: ${x.text}`);
  assert.deepEqual(JSON.parse(r.body), { jsonrpc: '2.0', id: 1, result: {} }, what);
}

/** The request log has a line for a refused POST to `path`, with its status and error. */
async function assertLogged(path, status) {
  const mark = `event=request msg="POST ${path} status=${status} `;
  await waitFor(() => mcpd.stderr.includes(mark), 3000, `a request-log line ${mark}`);
  const line = mcpd.stderr.split('\n').find((l) => l.includes(mark));
  assert.match(line, / error=-32000 /, line);
}

test('(a) differing Content-Length values: one 400, the connection closed, the bytes past the first length never served', async () => {
  const before = await refusals(mcpd.port, 'bad_framing');
  const longer = Buffer.byteLength(PING) + SMUGGLED.length;
  const cases = [
    [`Content-Length: ${Buffer.byteLength(PING)}\r\nContent-Length: ${longer}\r\n`, 'the shorter first'],
    [`Content-Length: ${longer}\r\nContent-Length: ${Buffer.byteLength(PING)}\r\n`, 'the longer first'],
    [`Content-Length: ${Buffer.byteLength(PING)}\r\nContent-Length: 0${Buffer.byteLength(PING)}\r\n`, 'a leading zero'],
    [`Content-Length: ${Buffer.byteLength(PING)}\r\nContent-Length: -1\r\n`, 'a malformed second value'],
  ];
  for (const [lengths, what] of cases) {
    await assertRefused(postHead(lengths) + PING + SMUGGLED, 400, /^Bad Request: conflicting Content-Length values$/, what);
  }
  assert.equal(await refusals(mcpd.port, 'bad_framing'), before + cases.length);
  await assertLogged('/mcp', 400);
  // The same value twice frames the body one way only (RFC 9110 §8.6).
  const n = Buffer.byteLength(PING);
  await assertServed(postHead(`Content-Length: ${n}\r\nContent-Length: ${n}\r\nConnection: close\r\n`) + PING, 'the same length twice');
});

test('(b) Content-Length with Transfer-Encoding: 400 and the connection closed, nothing after the body served', async () => {
  const before = await refusals(mcpd.port, 'bad_framing');
  await assertRefused(
    postHead('Content-Length: 5\r\nTransfer-Encoding: chunked\r\n') + chunked(PING) + SMUGGLED,
    400,
    /^Bad Request: both Content-Length and Transfer-Encoding$/,
    'Content-Length then Transfer-Encoding',
  );
  // libmicrohttpd ignores Content-Length next to Transfer-Encoding, so even
  // a value it would refuse reaches the gate.
  await assertRefused(
    postHead('Transfer-Encoding: chunked\r\nContent-Length: -1\r\n') + chunked(PING) + SMUGGLED,
    400,
    /^Bad Request: both Content-Length and Transfer-Encoding$/,
    'Transfer-Encoding then a malformed Content-Length',
  );
  assert.equal(await refusals(mcpd.port, 'bad_framing'), before + 2);
  await assertServed(postHead('Transfer-Encoding: chunked\r\nConnection: close\r\n') + chunked(PING), 'chunked alone');
});

test('(c) a transfer coding other than chunked: 501 at once, not a connection held until the request timeout', async () => {
  const before = await refusals(mcpd.port, 'transfer_coding');
  const codings = [
    ['Transfer-Encoding: gzip\r\n', PING],
    ['Transfer-Encoding: gzip, chunked\r\n', chunked(PING)],
    ['Transfer-Encoding: identity\r\n', PING],
    ['Transfer-Encoding: chunked, gzip\r\n', chunked(PING)],
    ['Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n', chunked(PING)],
    ['Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n', chunked(PING)],
  ];
  for (const [te, body] of codings) {
    const t0 = Date.now();
    await assertRefused(postHead(te) + body, 501, /^Not Implemented: the only Transfer-Encoding served is chunked$/, JSON.stringify(te));
    assert.ok(Date.now() - t0 < 3000, `${JSON.stringify(te)}: answered after ${Date.now() - t0} ms`);
  }
  assert.equal(await refusals(mcpd.port, 'transfer_coding'), before + codings.length);
  await assertLogged('/mcp', 501);
  // Codings are case-insensitive (RFC 9112 §7).
  await assertServed(postHead('Transfer-Encoding: Chunked\r\nConnection: close\r\n') + chunked(PING), 'Chunked');
});

test('(d) a query string that decodes to a NUL byte is refused with 400 and addresses no session', async () => {
  const before = await refusals(mcpd.port, 'nul_in_query');
  // A 2024-11-05 session: its POST /messages names the session in the query.
  const sse = await openStream(mcpd.port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
  try {
    assert.equal(sse.status, 200);
    const ep = await sse.sse.next(5000);
    const sid = /sessionId=([0-9a-f]{32})$/.exec(ep.data)[1];
    const post = (query, body) =>
      request(mcpd.port, { path: `/messages?${query}`, headers: { 'Content-Type': 'application/json' }, body });
    const init = newId();
    const i = await post(`sessionId=${sid}`, {
      jsonrpc: '2.0',
      id: init,
      method: 'initialize',
      params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'framing-e2e', version: '0' } },
    });
    assert.equal(i.status, 202, i.text);
    assert.equal((await sse.sse.nextMessage(5000)).msg.id, init);
    assert.equal((await post(`sessionId=${sid}`, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);

    const cut = newId();
    for (const query of [`sessionId=${sid}%00zz`, `sessionId=${sid}&x%00=1`, `sessionId%00=${sid}`]) {
      const r = await post(query, { jsonrpc: '2.0', id: cut, method: 'ping' });
      assert.equal(r.status, 400, `${query}: ${r.status} ${r.text}`);
      assert.match(r.headers['content-type'], /^application\/json/);
      assert.equal(r.headers.connection, 'close');
      assert.deepEqual(r.json, {
        jsonrpc: '2.0',
        id: null,
        error: { code: SERVER_ERROR, message: 'Bad Request: the query string decodes to a NUL byte' },
      });
    }
    // On /mcp too, whatever the parameter.
    const m = await request(mcpd.port, {
      path: '/mcp?x=%00',
      headers: { Accept: ACCEPT_BOTH, 'Content-Type': 'application/json', 'Mcp-Session-Id': session, 'MCP-Protocol-Version': LATEST },
      body: PING,
    });
    assert.equal(m.status, 400, m.text);
    assert.equal(await refusals(mcpd.port, 'nul_in_query'), before + 4);
    await assertLogged('/messages', 400);

    // None of the refused pings reached the session: the next message on
    // its stream answers the one sent with the exact id.
    const ok = newId();
    assert.equal((await post(`sessionId=${sid}`, { jsonrpc: '2.0', id: ok, method: 'ping' })).status, 202);
    assert.equal((await sse.sse.nextMessage(5000)).msg.id, ok);
  } finally {
    sse.close();
  }
});

test('(e) a path that decodes to a NUL byte is refused with 400: /mcp/ws%00x is no WebSocket handshake', async () => {
  const before = await refusals(mcpd.port, 'nul_in_path');
  const ws =
    `GET /mcp/ws%00zz HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n\r\n';
  await assertRefused(ws, 400, /path decodes to a NUL byte/, 'GET /mcp/ws%00zz');
  await assertRefused(postHead(`Content-Length: ${PING.length}\r\n`).replace('POST /mcp ', 'POST /mcp%00x ') + PING, 400,
    /path decodes to a NUL byte/, 'POST /mcp%00x');
  assert.equal(await refusals(mcpd.port, 'nul_in_path'), before + 2);
  const ok = await request(mcpd.port, { method: 'GET', path: '/healthz' });
  assert.equal(ok.status, 200, 'the server goes on');
});

test('(f) trailing whitespace after a field value is not part of it (RFC 9110 5.5): the session and the revision are found', async () => {
  const head =
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nAccept: ${ACCEPT_BOTH} \r\n` +
    `Content-Type: application/json\t\r\nMcp-Session-Id: ${session} \t \r\n` +
    `MCP-Protocol-Version: ${LATEST}  \r\nContent-Length: ${PING.length}\r\nConnection: close\r\n\r\n`;
  await assertServed(head + PING, 'trailing whitespace');
  // A field on two lines is one list (RFC 9110 5.3): Accept's two types.
  const split = head.replace(`Accept: ${ACCEPT_BOTH} \r\n`, 'Accept: application/json \r\nAccept: text/event-stream\r\n');
  assert.notEqual(split, head);
  await assertServed(split + PING, 'Accept on two lines');
  // A singleton sent twice is one invalid value, never silently the first.
  const twice = head.replace(`Mcp-Session-Id: ${session} \t \r\n`, `Mcp-Session-Id: ${session}\r\nMcp-Session-Id: ${session}\r\n`);
  assert.notEqual(twice, head);
  const x2 = await rawExchange(mcpd.port, twice + PING, { ms: 5000, until: (t) => responses(t).some((r) => r.body.endsWith('}')) });
  assert.equal(responses(x2.text)[0]?.status, 404, x2.text);
  // The WebSocket handshake reads its fields the same way: the key (whose
  // digest the 101 carries), the version, the session it resumes.
  const key = 'dGhlIHNhbXBsZSBub25jZQ==';
  const ws =
    `GET /mcp/ws HTTP/1.1\r\nHost: 127.0.0.1:${mcpd.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${key} \t\r\nSec-WebSocket-Version: 13 \r\nSec-WebSocket-Protocol: mcp\r\n` +
    `Mcp-Session-Id: ${session}  \r\n\r\n`;
  const x = await rawExchange(mcpd.port, ws, { ms: 5000, until: (t) => t.includes('\r\n\r\n') });
  assert.match(x.text, /^HTTP\/1\.1 101 /, x.text);
  const accept = crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  assert.match(x.text, new RegExp(`\r\nsec-websocket-accept: ${accept.replace(/[+/]/g, '\\$&')}\r\n`, 'i'), x.text);
  assert.match(x.text, new RegExp(`\r\nmcp-session-id: ${session}\r\n`, 'i'), x.text);
});
