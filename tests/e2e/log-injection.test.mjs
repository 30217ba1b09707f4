// Log injection: a client's text in mcpd's stderr log. The session id
// of an Mcp-Session-Id header, with spaces, key=value pairs, quotes and a
// tab, and a tool name with a line break, must
// not forge a field or a line: every line mcpd writes parses as strict
// logfmt with exactly the fields ts, level, session, event, msg, and no
// line says event=token_revoked_used.

import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';

import { initSession, mcpHeaders, request, rpc, startMcpd, waitFor } from './lib/mcpd.mjs';

const FORGED = 'x level=error event=token_revoked_used msg="forged line"';

/**
 * Fields of one line as [key, raw value] pairs, or null when it is not
 * strict logfmt: bare values of [A-Za-z0-9._:/@+-] only, and in quotes no
 * control character and only the escapes mcpd writes.
 */
function parseLogfmt(line) {
  const bare = '([A-Za-z0-9._:/@+-]+)';
  const quoted = String.raw`"((?:[^"\\\x00-\x1f\x7f]|\\["\\nrt]|\\x[0-9a-f]{2})*)"`;
  const re = new RegExp(`([A-Za-z_]+)=(?:${bare}|${quoted})(?: |$)`, 'y');
  const out = [];
  let i = 0;
  while (i < line.length) {
    re.lastIndex = i;
    const m = re.exec(line);
    if (!m) return null;
    out.push([m[1], m[2] ?? m[3]]);
    i = re.lastIndex;
  }
  return out;
}

test('a forging Mcp-Session-Id and tool name stay inside their fields', async () => {
  const m = await startMcpd();
  try {
    const r = await request(m.port, {
      headers: mcpHeaders({ session: `${FORGED}\tz` }),
      body: { jsonrpc: '2.0', id: 1, method: 'ping' },
    });
    assert.equal(r.status, 404);
    const { session } = await initSession(m.port);
    const name = 'x"\nts=0 level=error event=token_revoked_used';
    await rpc(m.port, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: {} } }, { session });
    const requests = () => m.stderr.split('\n').filter((l) => l.includes('event=request')).length;
    await waitFor(() => requests() >= 3, 5000, 'the request lines');
  } finally {
    await m.stop();
    await m.cleanup();
  }
  const lines = m.stderr.split('\n');
  assert.equal(lines.pop(), '', 'stderr ends with a whole line');
  for (const line of lines) {
    assert.ok(!line.includes('\ufffd'), `only UTF-8 on stderr: ${line}`);
    const fields = parseLogfmt(line);
    assert.ok(fields, `not logfmt: ${line}`);
    assert.deepEqual(fields.map(([k]) => k), ['ts', 'level', 'session', 'event', 'msg'], line);
    assert.notEqual(fields[3][1], 'token_revoked_used', `forged: ${line}`);
  }
  const forged = lines.find((l) => l.includes('forged line'));
  assert.ok(forged, 'the request with the forged session id is logged');
  const quoted = String.raw` session="x level=error event=token_revoked_used msg=\"forged line\"\tz" event=request `;
  assert.ok(forged.includes(quoted), forged);
});

test('inside the request line, a tool name or method a client chose cannot pose as a field of its own', async () => {
  const m = await startMcpd();
  const name = 'x status=200 principal=root';
  try {
    const { session } = await initSession(m.port);
    await rpc(m.port, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: {} } }, { session });
    await waitFor(() => m.stderr.includes('tool=\\"x status=200'), 5000, 'the request line');
  } finally {
    await m.stop();
    await m.cleanup();
  }
  const line = m.stderr.split('\n').find((l) => l.includes('tool=\\"x status=200'));
  const msg = parseLogfmt(line).find(([k]) => k === 'msg')[1].replace(/\\(["\\])/g, '$1');
  // msg itself reads as logfmt once unescaped: the tool is one quoted value.
  const sub = parseLogfmt(msg.slice(msg.indexOf('status=')));
  assert.ok(sub, `msg fields: ${msg}`);
  assert.deepEqual(sub.filter(([k]) => k === 'status').length, 1, msg);
  assert.deepEqual(sub.find(([k]) => k === 'tool')[1], name);
});

test('an HTTP method a client made up cannot pose as a field of the request line', async () => {
  const m = await startMcpd();
  try {
    // libmicrohttpd takes any bytes up to the first space as the method.
    await new Promise((resolve, reject) => {
      const sock = net.connect(m.port, '127.0.0.1', () =>
        sock.write('status=200 /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n'),
      );
      sock.setTimeout(5000, () => sock.destroy(new Error('no answer to the made-up method')));
      sock.on('data', () => sock.end());
      sock.on('close', resolve);
      sock.on('error', reject);
    });
    await waitFor(() => m.stderr.includes('event=request'), 5000, 'the request line');
  } finally {
    await m.stop();
    await m.cleanup();
  }
  const line = m.stderr.split('\n').find((l) => l.includes('event=request'));
  const msg = parseLogfmt(line).find(([k]) => k === 'msg')[1].replace(/\\(["\\])/g, '$1');
  assert.ok(msg.startsWith('"status="'), `the method is one quoted value: ${msg}`);
  const sub = parseLogfmt(msg.slice(msg.indexOf(' status=') + 1));
  assert.ok(sub, `msg fields: ${msg}`);
  assert.equal(sub.filter(([k]) => k === 'status').length, 1, msg);
});
