// Bad input on the Streamable HTTP endpoint: every file in bad-input/ is one
// malformed, unauthorised or out-of-protocol request, with the HTTP status
// and JSON-RPC error code mcpd documents (format: bad-input/README.md). This
// file is only the driver: adding a case means adding a file. After every
// case the server must still serve: /healthz answers, a valid session's echo
// works, and a reply stored before the bad inputs can still be resumed with
// GET + Last-Event-ID.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import {
  LATEST,
  callTool,
  rawExchange,
  echo,
  getStream,
  initSession,
  mcpHeaders,
  openStream,
  request,
  startMcpd,
  withTimeout,
} from './lib/mcpd.mjs';

const MAX_BODY = 65536;
const CASE_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bad-input');
const SESSIONS = ['none', 'valid', 'legacy', 'unknown', 'deleted', 'fresh'];

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

// ---------------------------------------------------------------- case files

/**
 * Parse one case file (format: bad-input/README.md). Returns {file, name,
 * method, path, session, headers: [[name, value|null]], body: string|null,
 * chunked, pipeline, holdGet, streamMs, status: [number|'2xx'...], codes:
 * [number]|'any'|null, contains: [string], empty, forbid: Set}.
 */
function parseCase(text, file) {
  const c = { file, method: 'POST', path: '/mcp', headers: [], body: null, chunked: 0, pipeline: null };
  Object.assign(c, { holdGet: false, streamMs: 1000, status: null, codes: null, contains: [], empty: false, forbid: new Set() });
  const seen = new Set();
  const once = (key, line) => {
    if (seen.has(key)) throw new Error(`${file}:${line}: "${key}" given twice`);
    seen.add(key);
  };
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === '' || raw.startsWith('#')) return;
    const m = /^([a-z-]+)(?: (.*))?$/.exec(raw);
    if (!m) throw new Error(`${file}:${line}: cannot parse: ${raw}`);
    const [, key, rest = ''] = m;
    const need = () => {
      if (rest === '') throw new Error(`${file}:${line}: "${key}" needs a value`);
      return rest;
    };
    const int = (s) => {
      if (!/^-?\d+$/.test(s)) throw new Error(`${file}:${line}: not an integer: ${s}`);
      return Number(s);
    };
    switch (key) {
      case 'name':
      case 'method':
      case 'path':
      case 'session':
      case 'body':
      case 'pipeline':
        once(key, line);
        c[key] = key === 'body' ? rest : need();
        break;
      case 'header': {
        const h = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):(?: ?(.*))$/.exec(rest);
        if (!h) throw new Error(`${file}:${line}: header must be "Name: value": ${rest}`);
        c.headers.push([h[1], h[2]]);
        break;
      }
      case 'remove':
        c.headers.push([need(), null]);
        break;
      case 'chunked':
        once(key, line);
        c.chunked = int(need());
        if (c.chunked < 1) throw new Error(`${file}:${line}: chunk size must be at least 1`);
        break;
      case 'hold-get':
        once(key, line);
        c.holdGet = true;
        break;
      case 'stream-ms':
        once(key, line);
        c.streamMs = int(need());
        break;
      case 'status':
        once(key, line);
        c.status = need()
          .split(/\s+/)
          .map((s) => (/^[1-5]xx$/.test(s) ? s : int(s)));
        break;
      case 'code':
        once(key, line);
        c.codes = rest === 'any' ? 'any' : need().split(/\s+/).map(int);
        break;
      case 'contains':
        c.contains.push(need());
        break;
      case 'empty':
        once(key, line);
        c.empty = true;
        break;
      case 'forbid':
        if (!['responses', 'stored'].includes(rest)) throw new Error(`${file}:${line}: forbid responses|stored, not "${rest}"`);
        c.forbid.add(rest);
        break;
      default:
        throw new Error(`${file}:${line}: unknown keyword "${key}"`);
    }
  });
  // a case that cannot fail is a defect: say what every allowed status means
  if (!c.name) throw new Error(`${file}: no "name"`);
  if (!SESSIONS.includes(c.session)) throw new Error(`${file}: "session" must be one of ${SESSIONS.join(' ')}`);
  if (!c.status) throw new Error(`${file}: no "status"`);
  const ok2xx = (s) => s === '2xx' || (typeof s === 'number' && s >= 200 && s < 300);
  if (c.status.some((s) => !ok2xx(s)) && !c.codes) throw new Error(`${file}: a non-2xx status needs "code"`);
  if (c.status.every(ok2xx) && c.codes) throw new Error(`${file}: "code" is checked on non-2xx replies only, and none is allowed`);
  if (c.status.some(ok2xx) && !c.contains.length && !c.empty && !c.forbid.size) {
    throw new Error(`${file}: a 2xx status needs "contains", "empty" or "forbid"`);
  }
  if ((c.chunked || c.pipeline) && (c.holdGet || c.forbid.size)) {
    throw new Error(`${file}: "chunked"/"pipeline" (raw socket) do not combine with "hold-get"/"forbid"`);
  }
  if (c.chunked && c.body === null) throw new Error(`${file}: "chunked" needs a body`);
  return c;
}

function loadCases() {
  return fs
    .readdirSync(CASE_DIR)
    .filter((f) => f.endsWith('.txt'))
    .sort()
    .map((f) => parseCase(fs.readFileSync(path.join(CASE_DIR, f), 'utf8'), f));
}

/**
 * Expand %...% in a body or header value (see README.md) into bytes.
 * `vars` maps PORT, STREAM and LAST_EVENT_ID to strings.
 */
function expand(text, vars, file) {
  const parts = [];
  let last = 0;
  for (const m of text.matchAll(/%repeat\[(\d+) x (.*?)\]%|%hex\[([0-9a-fA-F ]*)\]%|%([A-Z_]+)%/g)) {
    parts.push(Buffer.from(text.slice(last, m.index), 'utf8'));
    if (m[1] !== undefined) parts.push(Buffer.from(m[2].repeat(Number(m[1])), 'utf8'));
    else if (m[3] !== undefined) {
      const hex = m[3].replace(/ /g, '');
      if (hex.length % 2) throw new Error(`${file}: odd number of hex digits in ${m[0]}`);
      parts.push(Buffer.from(hex, 'hex'));
    } else {
      if (!Object.hasOwn(vars, m[4])) throw new Error(`${file}: unknown variable ${m[0]}`);
      parts.push(Buffer.from(vars[m[4]], 'utf8'));
    }
    last = m.index + m[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------- running

const sessionId = (kind) =>
  ({ none: undefined, valid: ctx.valid, legacy: ctx.legacy, unknown: ctx.unknown, deleted: ctx.deleted, fresh: ctx.fresh })[kind];

/** The request's headers: the defaults for a POST on the session, then the file's header/remove lines. */
function caseHeaders(c, vars) {
  const h = mcpHeaders({ session: sessionId(c.session), version: c.session === 'legacy' ? null : LATEST });
  for (const [k, v] of c.headers) {
    for (const hk of Object.keys(h)) if (hk.toLowerCase() === k.toLowerCase()) delete h[hk];
    if (v !== null) h[k] = expand(v, vars, c.file).toString('latin1');
  }
  return h;
}

const is2xx = (status) => status >= 200 && status < 300;
const statusAllowed = (c, status) => c.status.some((s) => s === status || (typeof s === 'string' && Number(s[0]) === Math.floor(status / 100)));

/** The checks of one reply {status, headers, text, msgs} against the case. */
function checkReply(c, r) {
  assert.ok(statusAllowed(c, r.status), `HTTP status ${r.status}, expected ${c.status.join(' or ')} (body: ${r.text.slice(0, 300)})`);
  for (const s of c.contains) assert.ok(r.text.includes(s), `reply should contain ${s}: ${r.text.slice(0, 300)}`);
  if (c.empty) assert.equal(r.text.length, 0, `empty body expected, got ${r.text.slice(0, 200)}`);
  if (!is2xx(r.status)) {
    assert.ok(r.json, `JSON-RPC error body expected, got: ${r.text.slice(0, 300)}`);
    assert.match(String(r.headers['content-type']), /application\/json/);
    assert.equal(r.json.jsonrpc, '2.0');
    assert.ok(r.json.id === null || r.json.id === undefined, `error id must be null/absent: ${r.text}`);
    if (c.codes === 'any') assert.ok(Number.isInteger(r.json.error?.code), `an error code expected: ${r.text}`);
    else assert.ok(c.codes.includes(r.json.error?.code), `error code ${r.json.error?.code}, expected ${c.codes}: ${r.text}`);
    assert.equal(typeof r.json.error.message, 'string');
    return;
  }
  const forbidden = c.forbid.has('stored') ? ctx.resumeRest.map((m) => JSON.stringify(m)) : [];
  for (const m of r.msgs) {
    assert.ok(!forbidden.includes(JSON.stringify(m)), `the reply carries a message of the stored stream: ${JSON.stringify(m)}`);
    if (c.forbid.has('responses')) assert.ok(!('result' in m || 'error' in m), `the reply carries a response: ${JSON.stringify(m)}`);
  }
}

/** Send the case over node:http; an SSE reply is read until it ends or stream-ms passes. */
async function httpExchange(c, headers, body) {
  const s = await openStream(mcpd.port, { method: c.method, path: c.path, headers, body: body ?? undefined, timeout: 5000 });
  try {
    if (!s.sse) {
      const b = await withTimeout(s.body, 5000, `reply body of ${c.file}`);
      const msgs = b.json === undefined ? [] : Array.isArray(b.json) ? b.json : [b.json];
      return { status: s.status, headers: s.headers, text: b.text, json: b.json, msgs };
    }
    await s.sse.waitEnd(c.streamMs);
    const msgs = s.sse.drainMessages().map((m) => m.msg);
    return { status: s.status, headers: s.headers, text: msgs.map((m) => JSON.stringify(m)).join('\n'), json: undefined, msgs };
  } finally {
    s.close();
  }
}

/** HTTP/1.1 responses in raw bytes (latin1 text): complete ones, in order, and whether more was left. */
function parseResponses(raw) {
  const out = [];
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return { responses: out, partial: rest.length > 0 };
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const sm = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
    if (!sm) throw new Error(`not an HTTP/1.1 response: ${rest.slice(0, 200)}`);
    const headers = {};
    for (const l of lines) {
      const i = l.indexOf(':');
      headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    let p = end + 4;
    let body;
    if (/chunked/i.test(headers['transfer-encoding'] || '')) {
      body = '';
      for (;;) {
        const nl = rest.indexOf('\r\n', p);
        if (nl < 0) return { responses: out, partial: true };
        const n = parseInt(rest.slice(p, nl), 16);
        if (rest.length < nl + 2 + n + 2) return { responses: out, partial: true };
        body += rest.slice(nl + 2, nl + 2 + n);
        p = nl + 2 + n + 2;
        if (n === 0) break;
      }
    } else {
      const n = Number(headers['content-length'] ?? NaN);
      if (!Number.isFinite(n) || rest.length < p + n) return { responses: out, partial: true };
      body = rest.slice(p, p + n);
      p += n;
    }
    const text = Buffer.from(body, 'latin1').toString('utf8');
    let json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    const msgs = json === undefined ? [] : Array.isArray(json) ? json : [json];
    out.push({ status: Number(sm[1]), headers, text, json, msgs });
    rest = rest.slice(p);
  }
}

/** Request bytes for a raw socket: Host first, then the headers, then the length or chunked framing. */
function rawRequest(c, headers, body, chunked) {
  const h = { Host: `127.0.0.1:${mcpd.port}`, ...headers };
  const host = Object.keys(h).filter((k) => k.toLowerCase() === 'host');
  if (host.length > 1) delete h.Host; // the file's own Host wins
  let head = `${c.method} ${c.path} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(h)) head += `${k}: ${v}\r\n`;
  if (!body) return Buffer.from(`${head}\r\n`, 'latin1');
  if (!chunked) return Buffer.concat([Buffer.from(`${head}Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
  const parts = [Buffer.from(`${head}Transfer-Encoding: chunked\r\n\r\n`, 'latin1')];
  for (let i = 0; i < body.length; i += chunked) {
    const piece = body.subarray(i, i + chunked);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`, 'latin1'), piece, Buffer.from('\r\n', 'latin1'));
  }
  parts.push(Buffer.from('0\r\n\r\n', 'latin1'));
  return Buffer.concat(parts);
}

/**
 * chunked / pipeline: one raw TCP connection. With pipeline, a valid echo
 * follows on the same socket: it must be answered (200, the echo), or the
 * server must close the connection after the first reply.
 */
async function rawCase(c, headers, body) {
  let data = rawRequest(c, headers, body, c.chunked);
  const want = c.pipeline ? 2 : 1;
  if (c.pipeline) {
    const second = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: c.pipeline } } }));
    const h2 = mcpHeaders({ session: ctx.valid });
    data = Buffer.concat([data, rawRequest({ method: 'POST', path: '/mcp' }, h2, second, 0)]);
  }
  const r = await rawExchange(mcpd.port, data.toString('latin1'), { ms: 5000, until: (t) => parseResponses(t).responses.length >= want });
  const { responses } = parseResponses(r.text);
  assert.ok(responses.length >= 1, `no complete response (closed: ${r.closed}): ${r.text.slice(0, 300)}`);
  checkReply(c, responses[0]);
  if (!c.pipeline) return;
  if (responses.length >= 2) {
    const second = responses[1];
    assert.equal(second.status, 200, `second response on the socket: ${second.status} ${second.text.slice(0, 300)}`);
    assert.ok(second.text.includes(`"text":"${c.pipeline}"`), second.text.slice(0, 400));
  } else {
    assert.ok(r.closed, `after a ${responses[0].status} the server neither answered the next request nor closed: ${r.text.slice(0, 300)}`);
  }
}

/** hold-get: a GET stream held open on the session during the case. */
async function holdGet(c, run) {
  const first = await getStream(mcpd.port, sessionId(c.session));
  try {
    assert.equal(first.status, 200, 'the held GET');
    assert.match(String(first.headers['content-type']), /^text\/event-stream/);
    await run();
    await echo(mcpd.port, ctx.valid, 'while-get-open');
    assert.equal(first.sse.ended, false, 'the held GET stays open');
  } finally {
    first.close();
  }
  // after it closes, a new GET is accepted again promptly (well before the
  // 15 s keepalive would reveal the dead peer; allow a few tries)
  let status;
  for (let i = 0; i < 10; i++) {
    const g = await getStream(mcpd.port, sessionId(c.session));
    status = g.status;
    g.close();
    if (status === 200) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.equal(status, 200, 'a GET after the held one closed is accepted');
}

async function runCase(c) {
  if (c.session === 'fresh') ctx.fresh = (await initSession(mcpd.port, { protocolVersion: '2025-11-25' })).session;
  try {
    const vars = {
      PORT: String(mcpd.port),
      STREAM: ctx.resumeFrom.slice(0, ctx.resumeFrom.lastIndexOf(':')),
      LAST_EVENT_ID: ctx.resumeFrom,
    };
    const headers = caseHeaders(c, vars);
    const body = c.body === null ? null : expand(c.body, vars, c.file);
    const once = async () => {
      if (c.chunked || c.pipeline) await rawCase(c, headers, body);
      else checkReply(c, await httpExchange(c, headers, body));
    };
    if (c.holdGet) await holdGet(c, once);
    else await once();
  } finally {
    if (c.session === 'fresh') {
      await request(mcpd.port, { method: 'DELETE', headers: { 'Mcp-Session-Id': ctx.fresh, 'MCP-Protocol-Version': LATEST } });
      ctx.fresh = undefined;
    }
  }
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

for (const c of loadCases()) {
  test(`${c.file}: ${c.name}`, async () => {
    await runCase(c);
    await assertStillServing();
  });
}

test('valid sessions used above are still valid (legacy batch works)', async () => {
  const ping = (id) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping', params: {} });
  const r = await request(mcpd.port, {
    headers: mcpHeaders({ session: ctx.legacy, version: null }),
    body: `[${ping(1)},${ping(2)}]`,
  });
  assert.equal(r.status, 200);
});
