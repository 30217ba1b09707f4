// mcpd --stdio end to end: the official SDK's StdioClientTransport, raw
// NDJSON and Content-Length framing (detected from the first bytes, replies
// in the same framing), bad input (malformed lines, BOM, oversize) answered
// without stopping the loop, concurrent requests, EOF and signals ending the
// process with status 0 after requests in flight finish, a client that goes
// away or never reads, and stdout carrying nothing but JSON-RPC; and
// 2026-07-28 without initialize (lib/stateless-push.mjs), beside 2025.
//
// Every byte mcpd writes to stdout is parsed strictly in the framing the
// test expects (a stray log line or a bad Content-Length fails the test);
// logs must be on stderr.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { MCPD_BIN, sleep, withTimeout } from './lib/mcpd.mjs';
import { StdioClient } from './lib/push-clients.mjs';
import { legacyClient, openSubscription, statelessThenInitialize } from './lib/stateless-push.mjs';

const PROTOCOL = '2025-06-18';

// ------------------------------------------------------------ framing

/** stdout as NDJSON: every line must be one JSON-RPC message. */
function parseNdjson(buf) {
  const text = buf.toString('utf8');
  const lines = text.split('\n');
  const rest = lines.pop(); // after the last newline: an incomplete line
  const msgs = lines.map((line, i) => {
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      throw new Error(`stdout line ${i + 1} is not JSON: ${JSON.stringify(line.slice(0, 200))}`);
    }
    assert.equal(m.jsonrpc, '2.0', `stdout line ${i + 1} is not JSON-RPC: ${line.slice(0, 200)}`);
    return m;
  });
  return { msgs, rest: Buffer.from(rest, 'utf8') };
}

/** stdout as Content-Length frames: nothing else may appear. */
function parseFrames(buf) {
  const msgs = [];
  let off = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', off, 'latin1');
    if (end < 0) break;
    const head = buf.subarray(off, end).toString('latin1');
    const m = /^Content-Length: (\d+)$/.exec(head);
    if (!m) throw new Error(`bad frame header on stdout: ${JSON.stringify(head.slice(0, 200))}`);
    const n = Number(m[1]);
    if (buf.length < end + 4 + n) break;
    const body = buf.subarray(end + 4, end + 4 + n).toString('utf8');
    const msg = JSON.parse(body); // Content-Length counts UTF-8 bytes: a wrong count breaks this
    assert.equal(msg.jsonrpc, '2.0');
    msgs.push(msg);
    off = end + 4 + n;
  }
  // What is left may only be the start of a frame still being written.
  const rest = buf.subarray(off);
  const s = rest.toString('latin1');
  if (s.length && !'Content-Length: '.startsWith(s) && !s.startsWith('Content-Length: ')) {
    throw new Error(`stdout has bytes that are not a frame: ${JSON.stringify(s.slice(0, 200))}`);
  }
  return { msgs, rest };
}

const ndjson = (msg) => JSON.stringify(msg) + '\n';
const frame = (msg, extra = '') => {
  const body = Buffer.from(typeof msg === 'string' ? msg : JSON.stringify(msg), 'utf8');
  return Buffer.concat([Buffer.from(`${extra}Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
};

const initialize = (id = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'mcpd-e2e-stdio', version: '0.0.0' } },
});
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
const toolCall = (id, name, args, progressToken) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args, ...(progressToken !== undefined ? { _meta: { progressToken } } : {}) },
});

// ------------------------------------------------------------ process

/** mcpd --stdio as a child, with stdout parsed in the given framing. */
class StdioMcpd {
  constructor({ framing = 'ndjson', args = [] } = {}) {
    this.framing = framing;
    this.out = Buffer.alloc(0);
    this.stderr = '';
    this.exit = null;
    this.waiters = [];
    this.proc = spawn(MCPD_BIN, ['--stdio', '--db', ':memory:', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (d) => {
      this.out = Buffer.concat([this.out, d]);
      this._wake();
    });
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-50000);
    });
    this.proc.stdin.on('error', () => {}); // EPIPE after the child exits
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exit = { code, signal };
        this._wake();
        resolve(this.exit);
      });
    });
  }

  _wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  write(data) {
    this.proc.stdin.write(data);
  }

  send(msg) {
    this.write(this.framing === 'cl' ? frame(msg) : ndjson(msg));
  }

  /** Every message on stdout so far (throws on anything that is not). */
  messages() {
    return (this.framing === 'cl' ? parseFrames(this.out) : parseNdjson(this.out)).msgs;
  }

  /** Waits until pred(messages) is truthy; returns its value. */
  async waitFor(pred, ms = 10000, what = 'messages') {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = pred(this.messages());
      if (v) return v;
      if (this.exit) throw new Error(`mcpd exited (${JSON.stringify(this.exit)}) waiting for ${what}:\n${this.stderr}`);
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`timeout waiting for ${what}; stdout so far:\n${this.out.toString('utf8').slice(-2000)}\nstderr:\n${this.stderr}`);
      }
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  response(id, ms) {
    return this.waitFor((msgs) => msgs.find((m) => m.id === id && ('result' in m || 'error' in m)), ms, `response ${id}`);
  }

  async init() {
    this.send(initialize(1));
    const r = await this.response(1);
    assert.ok(r.result, `initialize failed: ${JSON.stringify(r)}`);
    this.send(initialized);
    return r;
  }

  /** Waits for the exit; SIGKILL (and fail) after ms. */
  async waitExit(ms = 10000) {
    try {
      return await withTimeout(this.exited, ms, 'mcpd --stdio exit');
    } catch (e) {
      this.proc.kill('SIGKILL');
      await this.exited;
      throw new Error(`${e.message}\nstderr:\n${this.stderr}`);
    }
  }

  async cleanup() {
    if (!this.exit) {
      this.proc.kill('SIGKILL');
      await this.exited;
    }
  }
}

async function withMcpd(opts, fn) {
  const m = new StdioMcpd(opts);
  try {
    return await fn(m);
  } finally {
    await m.cleanup();
  }
}

const text = (resp) => resp?.result?.content?.[0]?.text;

// ------------------------------------------------------------ tests

test('SDK StdioClientTransport: tools, echo, countdown with progress, elicitation', async () => {
  const transport = new StdioClientTransport({ command: MCPD_BIN, args: ['--stdio', '--db', ':memory:'], stderr: 'pipe' });
  let stderr = '';
  transport.stderr.setEncoding('utf8');
  transport.stderr.on('data', (d) => (stderr += d));
  const client = new Client({ name: 'mcpd-e2e-sdk-stdio', version: '0.0.0' }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => ({
    action: 'accept',
    content: { username: 'ada', email: `ada@${req.params.message}` },
  }));
  await client.connect(transport);
  // Every message in wire order, before the SDK handles it.
  const wire = [];
  const deliver = transport.onmessage;
  transport.onmessage = (msg, extra) => {
    wire.push(msg);
    deliver(msg, extra);
  };
  const proc = transport._process; // to see the exit status
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    assert.equal(client.getServerVersion()?.name, 'mcpd');
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['echo', 'countdown', 'test_elicitation']) assert.ok(names.includes(n), `tools/list lacks ${n}`);

    const r = await client.callTool({ name: 'echo', arguments: { message: 'héllo wörld ✓' } });
    assert.deepEqual(r.content, [{ type: 'text', text: 'héllo wörld ✓' }]);

    const progress = [];
    const c = await client.callTool({ name: 'countdown', arguments: { n: 4, interval_ms: 20 } }, undefined, {
      onprogress: (p) => progress.push([p.progress, p.total]),
      timeout: 10000,
    });
    assert.equal(c.content?.[0]?.text, 'countdown finished');
    // On the wire: all four progress notifications, then the response.
    const mine = wire.filter((m) => m.method === 'notifications/progress' || (m.id !== undefined && m.result?.content?.[0]?.text === 'countdown finished'));
    assert.deepEqual(
      mine.map((m) => (m.method ? m.params.progress : 'result')),
      [1, 2, 3, 4, 'result'],
    );
    // The SDK runs progress handlers in a microtask but drops the handler
    // synchronously on the response, so progress read in one chunk with the
    // response was lost; mcpd writes a response after a notification only
    // once the client has read it (note_gate.h), so every one arrives.
    assert.deepEqual(progress, [
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    // ...also when they come as fast as the tool can make them.
    for (let round = 0; round < 3; round++) {
      const quick = [];
      const q = await client.callTool({ name: 'countdown', arguments: { n: 8, interval_ms: 0 } }, undefined, {
        onprogress: (p) => quick.push(p.progress),
        timeout: 10000,
      });
      assert.equal(q.content?.[0]?.text, 'countdown finished');
      assert.deepEqual(quick, [1, 2, 3, 4, 5, 6, 7, 8], `round ${round}`);
    }

    const e = await client.callTool({ name: 'test_elicitation', arguments: { message: 'example.org' } });
    assert.equal(e.isError ?? false, false, JSON.stringify(e));
    assert.match(e.content[0].text, /action=accept/);
    assert.match(e.content[0].text, /ada@example\.org/);
  } finally {
    await client.close(); // ends stdin: mcpd sees EOF
  }
  const { code, signal } = await withTimeout(exited, 10000, 'mcpd exit after the SDK closed stdin');
  assert.equal(signal, null);
  assert.equal(code, 0, stderr);
  assert.match(stderr, /event=stdio_serving/, 'logs go to stderr');
  assert.match(stderr, /client uses newline-delimited JSON/);
});

test('raw NDJSON: initialize, tools/call; replies are NDJSON', async () => {
  await withMcpd({}, async (m) => {
    const init = await m.init();
    assert.equal(init.result.protocolVersion, PROTOCOL);
    assert.equal(init.result.serverInfo.name, 'mcpd');
    m.send({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
    m.send(toolCall(3, 'echo', { message: 'ünïcode ✓' }));
    const list = await m.response(2);
    assert.ok(list.result.tools.some((t) => t.name === 'echo'));
    assert.equal(text(await m.response(3)), 'ünïcode ✓');
    m.send({ jsonrpc: '2.0', id: 'str-id', method: 'ping' });
    assert.deepEqual((await m.response('str-id')).result, {});
    m.send({ jsonrpc: '2.0', id: 4, method: 'no/such/method' });
    assert.equal((await m.response(4)).error.code, -32601);
    // Strict: no Content-Length anywhere, every line is JSON-RPC.
    assert.ok(!m.out.toString('latin1').includes('Content-Length'));
    assert.equal(parseNdjson(m.out).rest.length, 0, 'stdout ends with a complete line');
    m.proc.stdin.end();
    assert.deepEqual(await m.waitExit(), { code: 0, signal: null });
  });
});

test('NDJSON with CRLF line ends, blank lines and a request split across writes', async () => {
  await withMcpd({}, async (m) => {
    m.write('\r\n\n' + JSON.stringify(initialize(1)) + '\r\n\r\n');
    await m.response(1);
    m.send(initialized);
    const req = JSON.stringify(toolCall(2, 'echo', { message: 'split' })) + '\n';
    for (let i = 0; i < req.length; i += 7) {
      m.write(req.slice(i, i + 7));
      await sleep(1);
    }
    assert.equal(text(await m.response(2)), 'split');
  });
});

test('raw Content-Length: detected, replies in Content-Length framing (UTF-8 byte counts)', async () => {
  await withMcpd({ framing: 'cl' }, async (m) => {
    // Extra header first (LSP style), any case.
    m.write(frame(initialize(1), 'Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n'));
    const init = await m.response(1);
    assert.equal(init.result.serverInfo.name, 'mcpd');
    m.write(frame(initialized));
    // Two requests in one write, and a multi-byte payload.
    m.write(Buffer.concat([frame(toolCall(2, 'echo', { message: '€uro ✓ ü' })), frame({ jsonrpc: '2.0', id: 3, method: 'ping' })]));
    assert.equal(text(await m.response(2)), '€uro ✓ ü');
    assert.deepEqual((await m.response(3)).result, {});
    // lower-case header name, bare LF, blank lines between frames
    const body = JSON.stringify(toolCall(4, 'echo', { message: 'lf' }));
    m.write(`\r\n\ncontent-length: ${Buffer.byteLength(body)}\n\n${body}`);
    assert.equal(text(await m.response(4)), 'lf');
    const { rest } = parseFrames(m.out);
    assert.equal(rest.length, 0, 'stdout is whole frames only');
    m.proc.stdin.end();
    assert.deepEqual(await m.waitExit(), { code: 0, signal: null });
  });
});

test('malformed line → -32700 (id null) and the loop goes on; BOM rejected', async () => {
  await withMcpd({}, async (m) => {
    await m.init();
    m.write('this is not json\n');
    m.write('{"jsonrpc":"2.0","id":5,\n'); // truncated JSON on one line
    m.send(toolCall(2, 'echo', { message: 'after garbage' }));
    assert.equal(text(await m.response(2)), 'after garbage');
    const errs = await m.waitFor((msgs) => {
      const e = msgs.filter((x) => x.id === null && x.error);
      return e.length >= 2 && e;
    });
    for (const e of errs) assert.equal(e.error.code, -32700);

    m.write(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(ndjson(toolCall(3, 'echo', { message: 'bom' })))]));
    m.send(toolCall(4, 'echo', { message: 'after bom' }));
    assert.equal(text(await m.response(4)), 'after bom');
    const bom = await m.waitFor((msgs) => msgs.find((x) => x.id === null && /byte order mark/.test(x.error?.message ?? '')));
    assert.equal(bom.error.code, -32700);
    assert.equal(m.messages().find((x) => x.id === 3), undefined, 'the BOM message was not executed');

    // A valid JSON value that is not a request: -32600 from the core, loop goes on.
    m.write('42\n');
    m.send({ jsonrpc: '2.0', id: 6, method: 'ping' });
    await m.response(6);
    await m.waitFor((msgs) => msgs.some((x) => x.id === null && x.error?.code === -32600));
  });
});

test('BOM at the very start: error for that message, framing still detected', async () => {
  await withMcpd({ framing: 'cl' }, async (m) => {
    m.write(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), frame(initialize(1)), frame(initialize(2))]));
    const r = await m.response(2);
    assert.ok(r.result);
    const bom = m.messages().find((x) => x.id === null);
    assert.equal(bom.error.code, -32700);
    assert.match(bom.error.message, /byte order mark/);
    assert.equal(m.messages().find((x) => x.id === 1), undefined);
  });
});

test('oversize messages (--max-body) → -32600, skipped, next message answered', async () => {
  await withMcpd({ args: ['--max-body', '2000'] }, async (m) => {
    await m.init();
    m.send(toolCall(2, 'echo', { message: 'x'.repeat(5000) }));
    m.send(toolCall(3, 'echo', { message: 'small' }));
    assert.equal(text(await m.response(3)), 'small');
    const e = await m.waitFor((msgs) => msgs.find((x) => x.id === null && x.error));
    assert.equal(e.error.code, -32600);
    assert.equal(m.messages().find((x) => x.id === 2), undefined);
    // A 1 MB line without a newline yet: answered before the line ends.
    m.write('{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"' + 'y'.repeat(1 << 20));
    await m.waitFor((msgs) => msgs.filter((x) => x.id === null && x.error?.code === -32600).length === 2);
    m.write('"}}\n');
    m.send({ jsonrpc: '2.0', id: 10, method: 'ping' });
    await m.response(10);
  });
  await withMcpd({ framing: 'cl', args: ['--max-body', '2000'] }, async (m) => {
    m.write(frame(initialize(1)));
    await m.response(1);
    m.write(frame(toolCall(2, 'echo', { message: 'x'.repeat(5000) })));
    m.write(frame(toolCall(3, 'echo', { message: 'small' })));
    assert.equal(text(await m.response(3)), 'small');
    const e = m.messages().find((x) => x.id === null);
    assert.equal(e.error.code, -32600);
    // A bad header line is a -32700 and the next frame is still decoded.
    m.write('Content-Length: abc\r\n\r\n');
    m.write(frame({ jsonrpc: '2.0', id: 4, method: 'ping' }));
    await m.response(4);
    assert.ok(m.messages().some((x) => x.id === null && x.error.code === -32700));
  });
});

test('concurrency: two countdowns in flight interleave and both complete', async () => {
  await withMcpd({}, async (m) => {
    await m.init();
    const t0 = Date.now();
    m.send(toolCall(2, 'countdown', { n: 5, interval_ms: 100 }, 'a'));
    m.send(toolCall(3, 'countdown', { n: 5, interval_ms: 100 }, 'b'));
    m.send({ jsonrpc: '2.0', id: 4, method: 'ping' });
    const ra = await m.response(2);
    const rb = await m.response(3);
    const elapsed = Date.now() - t0;
    assert.equal(text(ra), 'countdown finished');
    assert.equal(text(rb), 'countdown finished');
    const msgs = m.messages();
    const idx = (pred) => msgs.findIndex(pred);
    const prog = (tok) => msgs.filter((x) => x.method === 'notifications/progress' && x.params.progressToken === tok);
    assert.deepEqual(prog('a').map((x) => x.params.progress), [1, 2, 3, 4, 5]);
    assert.deepEqual(prog('b').map((x) => x.params.progress), [1, 2, 3, 4, 5]);
    // The ping overtakes both; b's progress starts before a's response.
    assert.ok(idx((x) => x.id === 4) < idx((x) => x.id === 2), 'ping answered while countdowns run');
    assert.ok(
      idx((x) => x.params?.progressToken === 'b') < idx((x) => x.id === 2),
      'second countdown runs while the first is in flight',
    );
    assert.ok(elapsed < 950, `ran concurrently (${elapsed} ms for two 500 ms countdowns)`);
  });
});

test('"stream": true on stdio: the handle at once, then mcpd/chunk notifications in order', async () => {
  for (const framing of ['ndjson', 'cl']) {
    await withMcpd({ framing }, async (m) => {
      await m.init();
      const req = toolCall(2, 'countdown', { n: 3, interval_ms: 20 }, 'chunked');
      req.params.stream = true;
      m.send(req);
      const ack = await m.response(2);
      assert.equal(ack.result.status, 'streaming_started');
      assert.equal(ack.result.transport, 'stdio');
      const sid = ack.result.stream_id;
      const chunks = await m.waitFor((msgs) => {
        const c = msgs.filter((x) => x.method === 'mcpd/chunk' && x.params.stream_id === sid);
        return c.some((x) => x.params.end) && c;
      });
      assert.deepEqual(chunks.map((c) => c.params.seq), [0, 1, 2, 3]);
      assert.deepEqual(chunks.map((c) => c.params.end), [false, false, false, true]);
      assert.equal(chunks[3].params.message.id, 2);
      assert.equal(text(chunks[3].params.message), 'countdown finished');
    });
  }
});

test('EOF with a countdown in flight: its response still arrives, then exit 0', async () => {
  await withMcpd({}, async (m) => {
    await m.init();
    m.send(toolCall(2, 'countdown', { n: 3, interval_ms: 150 }, 'eof'));
    m.proc.stdin.end();
    const { code, signal } = await m.waitExit();
    assert.equal(signal, null);
    assert.equal(code, 0, m.stderr);
    const msgs = m.messages();
    assert.equal(text(msgs.find((x) => x.id === 2)), 'countdown finished');
    assert.equal(msgs.filter((x) => x.params?.progressToken === 'eof').length, 3);
  });
  // Content-Length frame cut short by EOF: an error for it, still exit 0.
  await withMcpd({ framing: 'cl' }, async (m) => {
    m.write(frame(initialize(1)));
    await m.response(1);
    m.write('Content-Length: 100\r\n\r\n{"jsonrpc"');
    m.proc.stdin.end();
    assert.deepEqual(await m.waitExit(), { code: 0, signal: null });
    assert.ok(m.messages().some((x) => x.id === null && x.error.code === -32700));
  });
  // The last NDJSON line needs no newline.
  await withMcpd({}, async (m) => {
    m.write(JSON.stringify(initialize(1)));
    m.proc.stdin.end();
    assert.deepEqual(await m.waitExit(), { code: 0, signal: null });
    assert.ok(m.messages().find((x) => x.id === 1)?.result);
  });
});

test('EOF while a request waits on the client (sampling): it is answered with an error at once, not after the drain timeout', async () => {
  for (const when of ['asked before EOF', 'asked after EOF']) {
    await withMcpd({}, async (m) => {
      const init = initialize(1);
      init.params.capabilities = { sampling: {} };
      m.send(init);
      await m.response(1);
      m.send(initialized);
      m.send(toolCall(2, 'test_sampling', { prompt: 'hi' }));
      if (when === 'asked before EOF') await m.waitFor((msgs) => msgs.some((x) => x.method === 'sampling/createMessage'));
      const t0 = Date.now();
      m.proc.stdin.end();
      assert.deepEqual(await m.waitExit(3000), { code: 0, signal: null }, `${when}: ${m.stderr}`);
      assert.ok(Date.now() - t0 < 3000, `${when}: exit ${Date.now() - t0} ms after EOF`);
      const r = m.messages().find((x) => x.id === 2);
      assert.ok(r, `${when}: id 2 answered: ${JSON.stringify(m.messages())}`);
      assert.equal(r.result?.isError, true, `${when}: ${JSON.stringify(r)}`);
      assert.doesNotMatch(m.stderr, /stdio_drain_timeout/);
    });
  }
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  test(`${sig} → graceful exit 0 (a request in flight finishes first)`, async () => {
    await withMcpd({}, async (m) => {
      await m.init();
      m.send(toolCall(2, 'countdown', { n: 3, interval_ms: 100 }, 'sig'));
      await m.waitFor((msgs) => msgs.some((x) => x.params?.progressToken === 'sig'));
      m.proc.kill(sig);
      const { code, signal } = await m.waitExit();
      assert.equal(signal, null);
      assert.equal(code, 0, m.stderr);
      assert.equal(text(m.messages().find((x) => x.id === 2)), 'countdown finished');
      assert.match(m.stderr, /event=shutting_down/);
    });
    await withMcpd({}, async (m) => {
      await m.init();
      m.proc.kill(sig); // idle, stdin still open
      assert.deepEqual(await m.waitExit(), { code: 0, signal: null });
    });
  });
}

test('client closes its end of stdout (EPIPE): mcpd stops and exits 0', async () => {
  await withMcpd({}, async (m) => {
    await m.init();
    m.proc.stdout.destroy();
    m.send(toolCall(2, 'countdown', { n: 2, interval_ms: 50 }, 'gone'));
    const { code, signal } = await m.waitExit();
    assert.equal(signal, null, 'not killed by SIGPIPE');
    assert.equal(code, 0, m.stderr);
  });
});

test('a client that never reads stdout cannot hold mcpd after SIGTERM', async () => {
  await withMcpd({ args: ['--shutdown-grace-ms', '500'] }, async (m) => {
    await m.init();
    m.proc.stdout.pause(); // stop reading: the pipe fills up
    m.proc.stdout.removeAllListeners('data');
    const big = 'z'.repeat(200000);
    for (let i = 0; i < 40; i++) m.send(toolCall(100 + i, 'echo', { message: big }));
    await sleep(500);
    const t0 = Date.now();
    m.proc.kill('SIGTERM');
    const { code, signal } = await m.waitExit(8000);
    assert.equal(signal, null);
    assert.equal(code, 0, m.stderr);
    assert.ok(Date.now() - t0 < 5000, `exited ${Date.now() - t0} ms after SIGTERM`);
  });
});

test('stdout carries only JSON-RPC, logs go to stderr (debug level)', async () => {
  await withMcpd({ args: ['--log-level', 'debug'] }, async (m) => {
    await m.init();
    m.send(toolCall(2, 'countdown', { n: 2, interval_ms: 10 }, 'p'));
    m.send(toolCall(3, 'test_tool_with_logging', {}));
    m.write('garbage\n'); // a JSON parse error: answered, not logged as framing
    m.write('\ufeff{}\n'); // a framing error (BOM): answered and logged
    m.send({ jsonrpc: '2.0', id: 4, method: 'tools/list' });
    await m.response(2);
    await m.response(3);
    await m.response(4);
    m.proc.stdin.end();
    await m.waitExit();
    const { msgs, rest } = parseNdjson(m.out); // throws on any non-JSON-RPC line
    assert.equal(rest.length, 0);
    assert.ok(msgs.length >= 6);
    assert.ok(!m.out.toString('utf8').includes('level='), 'no log line on stdout');
    assert.match(m.stderr, /level=info .*event=stdio_serving/);
    assert.match(m.stderr, /event=stdio_bad_frame/);
    assert.match(m.stderr, /event=stdio_eof/);
  });
});

// ------------------------------------------------------------ 2026-07-28

test('2026-07-28 without initialize: server/discover, calls with _meta, input-required, a subscription until cancelled; then initialize picks 2025', async () => {
  const c = new StdioClient({ args: ['--db', ':memory:'] });
  try {
    await statelessThenInitialize(c);
  } finally {
    const exit = await c.close();
    assert.deepEqual(exit, { code: 0, signal: null }, c.stderr);
    assert.doesNotMatch(c.stderr, /Sanitizer|runtime error:/);
  }
  // A 2025 client, which opens with initialize, on a fresh process.
  const legacy = new StdioClient({ args: ['--db', ':memory:'] });
  try {
    await legacyClient(legacy);
  } finally {
    assert.deepEqual(await legacy.close(), { code: 0, signal: null }, legacy.stderr);
  }
});

test('EOF with a subscription open: it ends with the input, mcpd exits without waiting out the drain', async () => {
  const c = new StdioClient({ args: ['--db', ':memory:', '--shutdown-grace-ms', '60000'] });
  await openSubscription(c);
  const t0 = Date.now();
  const exit = await c.close(); // 10 s bound, well under the grace
  assert.deepEqual(exit, { code: 0, signal: null }, c.stderr);
  assert.ok(Date.now() - t0 < 10000);
  assert.doesNotMatch(c.stderr, /stdio_drain_timeout|Sanitizer/);
});

test('stdin and stdout as regular files (which cannot be polled): every message answered, then exit 0', async () => {
  const fs = await import('node:fs');
  const os = await import('node:os');
  const path = await import('node:path');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpd-stdio-files-'));
  try {
    const input = path.join(dir, 'in.ndjson');
    const output = path.join(dir, 'out.ndjson');
    fs.writeFileSync(
      input,
      [initialize(1), initialized, toolCall(2, 'echo', { message: 'from a file' }), { jsonrpc: '2.0', id: 3, method: 'ping' }]
        .map(ndjson)
        .join(''),
    );
    const inFd = fs.openSync(input, 'r');
    const outFd = fs.openSync(output, 'w');
    const proc = spawn(MCPD_BIN, ['--stdio', '--db', ':memory:'], { stdio: [inFd, outFd, 'pipe'] });
    fs.closeSync(inFd);
    fs.closeSync(outFd);
    let stderr = '';
    proc.stderr.on('data', (d) => (stderr += d));
    const exit = await withTimeout(new Promise((resolve) => proc.on('exit', (code) => resolve(code))), 20000, 'mcpd exit').catch((e) => {
      proc.kill('SIGKILL');
      throw new Error(`${e.message}\n${stderr}`);
    });
    assert.equal(exit, 0, stderr);
    const { msgs, rest } = parseNdjson(fs.readFileSync(output));
    assert.equal(rest.length, 0);
    assert.equal(msgs.find((m) => m.id === 1)?.result?.protocolVersion, PROTOCOL);
    assert.equal(msgs.find((m) => m.id === 2)?.result?.content?.[0]?.text, 'from a file');
    assert.deepEqual(msgs.find((m) => m.id === 3)?.result, {});
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
