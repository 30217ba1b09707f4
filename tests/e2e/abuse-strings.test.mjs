// Strings from a peer, reviewed where they end up (issue 31's review pass):
// in an error message, a log row, a request header or a comparison.
//
// mcpd
//   - An error message that quotes a client's text cut at a byte count (a
//     params key, a stateless method, an MCP-Protocol-Version header) could
//     end inside a UTF-8 character; jansson refused the message and the
//     client got `{}` over HTTP, and nothing at all over a WebSocket. Each
//     gets its JSON-RPC error now, with U+FFFD for the cut character.
//   - A tool's text quoting a client's string cut at a byte count (an
//     elicited name in "Hello, %.200s!", a property name in a schema error)
//     was an internal error, or "(text unavailable)".
//   - Mcp-Param-* headers were compared with their argument as C strings:
//     "eu\u0000us" in the body passed for the header "eu" (and a base64
//     header decoding to "eu\0us" for the argument "eu"), so a proxy routing
//     on the header saw one value and the tool got another.
//   - An upstream child's stderr is any bytes: the logs table stored them
//     raw, and `mcp-admin logs --json` dropped the row's text. The row is
//     UTF-8 now.
//   - X-Forwarded-For "::ffff:198.51.100.1" (an IPv4 client as a
//     dual-stack proxy writes it) was cut at its first colon, so every such
//     client was counted as the proxy for --max-connections-per-ip.
// mcp-bridge
//   - An error body that is not UTF-8 (or is cut mid-character) in the
//     bridge's error message: the reply was never written, and the request
//     waited forever.
//   - A server's protocolVersion, session id or event id went into the
//     bridge's next request headers as it was: a CR LF in one added headers
//     of the server's choosing, bearer token and all (libcurl sends a
//     header value as given, and the WebSocket handshake is written by
//     hand). Only visible ASCII is used now.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

import { dbArg, heldForwardedRequest, initSession, mcpHeaders, request, startMcpd, waitFor, ADMIN_BIN } from './lib/mcpd.mjs';
import { WsClient } from './lib/push-clients.mjs';
import { BridgeProc, toolCall } from './fixtures/bridge-proc.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const HOSTILE = path.join(here, 'fixtures', 'hostile-upstream.py');
const STATELESS = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': STATELESS,
  'io.modelcontextprotocol/clientCapabilities': {},
};
// A string of `n` bytes whose last character is cut by a %.Ns or a buffer
// of that many bytes: an odd count of 2-byte characters after one ASCII.
const cutAt = (prefix, n) => prefix + 'é'.repeat(n);

/** The body of a reply: a JSON-RPC error answering `id`, with `code`. */
function assertError(r, id, code) {
  assert.ok(r.json, `a JSON body, not ${JSON.stringify(r.text)}`);
  assert.equal(r.json.jsonrpc, '2.0', r.text);
  assert.equal(r.json.id, id, r.text);
  assert.equal(r.json.error?.code, code, r.text);
  return r.json.error.message;
}

test('an error quoting a client text cut mid-character is still a JSON-RPC error (HTTP and WebSocket)', async () => {
  const m = await startMcpd();
  try {
    const { session } = await initSession(m.port);
    // a params key with a NUL inside its value: the message names the key,
    // in a buffer of 120 bytes (an invalid request is answered with id null)
    const key = cutAt('kk', 100);
    const nulKey = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: { [key]: 'a\u0000b' } };
    const r1 = await request(m.port, { headers: mcpHeaders({ session }), body: nulKey });
    assert.equal(r1.status, 400);
    assert.match(assertError(r1, null, -32600), /^Invalid Request: params\.kkéé+\ufffd$/);

    // a stateless request for a method that does not exist: %.100s of it.
    // (Headers go out as latin1 text, so a UTF-8 value is given as its
    // bytes, with a Buffer body: Node encodes the head as it does the body.)
    const utf8Bytes = (v) => Buffer.from(v).toString('latin1');
    const method = cutAt('x', 60);
    const r2 = await request(m.port, {
      headers: mcpHeaders({ version: STATELESS, extra: { 'Mcp-Method': utf8Bytes(method) } }),
      body: Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 3, method, params: { _meta: META } })),
    });
    assert.equal(r2.status, 404, r2.text);
    assert.match(assertError(r2, 3, -32601), /^Method not found: xéé+\ufffd$/);

    // an MCP-Protocol-Version header mcpd does not serve: %.40s of it
    const r3 = await request(m.port, {
      headers: mcpHeaders({ session, version: utf8Bytes(cutAt('a', 20)) }),
      body: Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' })),
    });
    assert.equal(r3.status, 400);
    assert.match(assertError(r3, null, -32000), /^Bad Request: Unsupported protocol version aéé+\ufffd \(supported/);

    // over a WebSocket the same error was never sent at all
    const ws = await WsClient.open(m.port);
    try {
      const got = [];
      ws.replies.listeners.push((msg) => got.push(msg));
      ws.send(nulKey);
      await waitFor(() => got.length > 0, 5000, 'the error on the WebSocket');
      assert.equal(got[0].error?.code, -32600, JSON.stringify(got[0]));
      assert.match(got[0].error.message, /^Invalid Request: params\.kkéé+\ufffd$/);
    } finally {
      await ws.close();
    }
  } finally {
    await m.stop();
    await m.cleanup();
  }
});

test("a tool's text quoting a client's string cut mid-character is still the tool's result", async () => {
  const m = await startMcpd();
  try {
    // the elicitation answer is greeted with "Hello, %.200s!": it was an
    // internal error
    const name = cutAt('x', 150);
    const params = {
      name: 'test_input_required_result_elicitation',
      arguments: {},
      inputResponses: { user_name: { action: 'accept', content: { name } } },
      _meta: { ...META, 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } },
    };
    const r1 = await request(m.port, {
      headers: mcpHeaders({ version: STATELESS, extra: { 'Mcp-Method': 'tools/call', 'Mcp-Name': params.name } }),
      body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params },
    });
    assert.equal(r1.status, 200, r1.text);
    assert.match(r1.json.result?.content?.[0]?.text ?? r1.text, /^Hello, xéé+\ufffd!$/);

    // an argument the schema does not allow is named in the error, cut to
    // 255 bytes: it was "(text unavailable)"
    const { session } = await initSession(m.port);
    const r2 = await request(m.port, {
      headers: mcpHeaders({ session }),
      body: {
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'json_schema_2020_12_tool', arguments: { [cutAt('k', 200)]: 1 } },
      },
    });
    assert.equal(r2.json?.result?.isError, true, r2.text);
    assert.match(r2.json.result.content[0].text, /^Invalid arguments for tool json_schema_2020_12_tool: arguments has unexpected property 'kéé+\ufffd$/);
  } finally {
    await m.stop();
    await m.cleanup();
  }
});

test('Mcp-Param headers are compared with their argument whole: a NUL on either side is a mismatch', async () => {
  const m = await startMcpd();
  try {
    const call = (region, header, id) =>
      request(m.port, {
        headers: mcpHeaders({
          version: STATELESS,
          extra: { 'Mcp-Method': 'tools/call', 'Mcp-Name': 'test_header_param', 'Mcp-Param-Region': header },
        }),
        body: {
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'test_header_param', arguments: { region }, _meta: META },
        },
      });
    const b64 = (s) => `=?base64?${Buffer.from(s).toString('base64')}?=`;
    const ok = await call('eu', 'eu', 1);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.result?.content?.[0]?.text, 'region: eu');
    assert.equal((await call('eu\u0000us', b64('eu\u0000us'), 2)).status, 200, 'the same bytes on both sides match');

    // the body says more than the header
    const r1 = await call('eu\u0000us', 'eu', 3);
    assert.equal(r1.status, 400, r1.text);
    assert.match(assertError(r1, 3, -32020), /Mcp-Param header does not match its argument/);
    // the header says more than the body
    const r2 = await call('eu', b64('eu\u0000us'), 4);
    assert.equal(r2.status, 400, r2.text);
    assert.match(assertError(r2, 4, -32020), /Mcp-Param header does not match its argument/);
  } finally {
    await m.stop();
    await m.cleanup();
  }
});

test("an upstream's stderr that is not UTF-8 reaches the logs table as text mcp-admin can print as JSON", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpd-strings-'));
  const script = path.join(dir, 'upstream.sh');
  fs.writeFileSync(
    script,
    `#!/bin/sh\nprintf 'bad \\377\\376 bytes, \\033[2J, and a cut \\342\\202\\n' >&2\nexec python3 ${HOSTILE}\n`,
    { mode: 0o755 },
  );
  const m = await startMcpd({ args: ['--upstream', script] });
  try {
    await initSession(m.port);
    await waitFor(() => m.stderr.includes('event=upstream_stderr'), 10000, 'the stderr line');
    // the stderr log escapes it, as before
    assert.match(m.stderr, /event=upstream_stderr msg="bad \\xff\\xfe bytes, \\x1b\[2J, and a cut \\xe2\\x82"/);
    let rows = [];
    await waitFor(
      () => {
        const a = spawnSync(ADMIN_BIN, ['--db', dbArg(m.db), '--json', 'logs'], { encoding: 'utf8', timeout: 30000 });
        assert.equal(a.status, 0, a.stderr);
        rows = JSON.parse(a.stdout);
        return rows.some((r) => r.session_id && r.event?.startsWith('session_created'));
      },
      10000,
      'the rows in the logs table',
      200,
    );
    const row = rows.find((r) => typeof r.event !== 'string' || r.event.startsWith('upstream_stderr'));
    assert.ok(row, `an upstream_stderr row: ${JSON.stringify(rows)}`);
    assert.equal(row.event, 'upstream_stderr bad \ufffd\ufffd bytes, \u001b[2J, and a cut \ufffd\ufffd');
  } finally {
    await m.stop();
    await m.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('--trusted-proxies: an IPv4 client written as ::ffff:a.b.c.d in X-Forwarded-For is counted as itself', async () => {
  const m = await startMcpd({
    args: ['--max-connections-per-ip', '2', '--trusted-proxies', 'loopback', '--request-timeout-ms', '0'],
  });
  const held = [];
  try {
    // two held connections of one client, through the proxy (loopback),
    // each counted before the next: a probe counted first would take one's
    // place, and that one would be the connection refused
    for (let i = 0; i < 2; i++) held.push(await heldForwardedRequest(m.port, '::ffff:198.51.100.1'));
    const healthz = (xff) => request(m.port, { method: 'GET', path: '/healthz', headers: { 'X-Forwarded-For': xff } });
    const same = await healthz('::ffff:198.51.100.1');
    assert.equal(same.status, 429, same.text);
    assert.match(same.json.error.message, /198\.51\.100\.1/, 'the client named is the forwarded one, not the proxy');
    // another client of the same proxy is not counted with it
    assert.equal((await healthz('::ffff:192.0.2.7')).status, 200);
  } finally {
    for (const s of held) s.destroy();
    await m.stop();
    await m.cleanup();
  }
});

// ------------------------------------------------------------ mcp-bridge

/**
 * A Streamable HTTP server of its own, for what a real one would not send:
 * initialize gets `initResult`, tools/call gets `onCall(req, res, msg)`,
 * notifications 202, GET 405. `heads` keeps every request's headers.
 */
async function fakeServer({ initResult, onCall }) {
  const heads = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      heads.push(req.headers);
      if (req.method !== 'POST') {
        res.writeHead(405).end();
        return;
      }
      const msg = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (msg.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'fake-session' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: initResult }));
      } else if (msg.id === undefined) {
        res.writeHead(202).end();
      } else {
        onCall(req, res, msg);
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    heads,
    url: `http://127.0.0.1:${server.address().port}/mcp`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

const INIT_RESULT = {
  protocolVersion: '2025-11-25',
  capabilities: { tools: {} },
  serverInfo: { name: 'fake', version: '0' },
};

test('mcp-bridge: an HTTP error body that is not UTF-8 still gets the request its error', async () => {
  const s = await fakeServer({
    initResult: INIT_RESULT,
    onCall: (req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      // bytes that are not UTF-8, and a character cut by the 160-byte hint
      res.end(Buffer.concat([Buffer.from('boom \xff\xfe ', 'latin1'), Buffer.from(cutAt('x', 100))]));
    },
  });
  const b = new BridgeProc([s.url]);
  try {
    await b.init();
    b.send(toolCall(2, 'anything'));
    const r = await b.response(2, 10000);
    assert.match(r.error?.message, /answered HTTP 500.*\(body: boom \ufffd\ufffd xéé+/, JSON.stringify(r));
    assert.equal(b.repliesTo(2).length, 1);
  } finally {
    await b.cleanup();
    await s.close();
  }
});

test("mcp-bridge: a server's protocolVersion with CR LF does not write headers into the next request", async () => {
  const s = await fakeServer({
    initResult: { ...INIT_RESULT, protocolVersion: '2025-11-25\r\nX-Injected: yes' },
    onCall: (req, res, msg) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: 'ok' }] } }));
    },
  });
  const b = new BridgeProc([s.url]);
  try {
    await b.init();
    b.send(toolCall(2, 'anything'));
    const r = await b.response(2, 10000);
    assert.equal(r.result?.content?.[0]?.text, 'ok', JSON.stringify(r));
    const after = s.heads.slice(1);
    assert.ok(after.length >= 1);
    for (const h of after) {
      assert.equal(h['x-injected'], undefined, `a header of the server's: ${JSON.stringify(h)}`);
      assert.ok(!/[\r\n]/.test(h['mcp-protocol-version'] ?? ''), JSON.stringify(h));
    }
    assert.match(b.stderr, /event=bad_protocol_version/);
  } finally {
    await b.cleanup();
    await s.close();
  }
});

// A WebSocket server of its own (RFC 6455 by hand): every handshake is kept
// raw; the first connection answers initialize with a session id and an
// event id that carry CR LF, then drops, so that the bridge reconnects with
// them.
async function fakeWsServer() {
  const handshakes = [];
  const sockets = new Set();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => {});
    let buf = Buffer.alloc(0);
    let open = false;
    const nth = handshakes.length;
    const send = (obj) => {
      const p = Buffer.from(JSON.stringify(obj));
      const head = p.length < 126 ? Buffer.from([0x81, p.length]) : Buffer.from([0x81, 126, p.length >> 8, p.length & 255]);
      sock.write(Buffer.concat([head, p]));
    };
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      if (!open) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        handshakes.push(head);
        buf = buf.subarray(end + 4);
        const key = /\r\nSec-WebSocket-Key: *([^\r\n]+)/i.exec(head)?.[1] ?? '';
        const accept = crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
        sock.write(
          'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: mcp\r\n\r\n`,
        );
        open = true;
      }
      for (;;) {
        if (buf.length < 2) return;
        let len = buf[1] & 127;
        let at = 2;
        if (len === 126) {
          if (buf.length < 4) return;
          len = buf.readUInt16BE(2);
          at = 4;
        } else if (len === 127) {
          if (buf.length < 10) return;
          len = Number(buf.readBigUInt64BE(2));
          at = 10;
        }
        if (buf.length < at + 4 + len) return;
        const mask = buf.subarray(at, at + 4);
        const payload = Buffer.from(buf.subarray(at + 4, at + 4 + len));
        for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
        const opcode = buf[0] & 15;
        buf = buf.subarray(at + 4 + len);
        if (opcode !== 1) continue;
        const msg = JSON.parse(payload.toString('utf8'));
        if (msg.method === 'initialize') {
          send({
            jsonrpc: '2.0',
            id: msg.id,
            result: {
              ...INIT_RESULT,
              _meta: {
                'mcpd/session-id': 'sid\r\nX-Injected-Session: yes',
                'mcpd/event-id': 'eid\r\nX-Injected-Event: yes',
              },
            },
          });
        } else if (msg.id !== undefined) {
          send({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: `ok ${nth}` }] } });
          if (nth === 0) setTimeout(() => sock.destroy(), 20); // the first connection drops
        }
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    handshakes,
    url: `ws://127.0.0.1:${server.address().port}/mcp/ws`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

test("mcp-bridge --transport ws: a server's session id or event id with CR LF does not write headers into the next handshake", async () => {
  const s = await fakeWsServer();
  const b = new BridgeProc(['--transport', 'ws', s.url]);
  try {
    await b.init();
    b.send(toolCall(2, 'anything'));
    assert.equal((await b.response(2, 10000)).result?.content?.[0]?.text, 'ok 0');
    await waitFor(() => s.handshakes.length >= 2, 10000, 'the reconnect');
    b.send(toolCall(3, 'anything'));
    await b.response(3, 10000);
    for (const h of s.handshakes) {
      const names = h.split('\r\n').slice(1).map((l) => l.slice(0, l.indexOf(':')).toLowerCase());
      assert.ok(!names.some((n) => n.startsWith('x-injected')), `a header of the server's in:\n${h}`);
    }
    assert.match(b.stderr, /event=bad_session_id/);
  } finally {
    await b.cleanup();
    await s.close();
  }
});
