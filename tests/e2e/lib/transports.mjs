// Transcripts and transport drivers for the transport-consistency suite.
//
// What it is for: tests/transcripts/*.txt describe protocol scenarios as
// data (format: tests/transcripts/README.md). This module parses them,
// matches received messages against their expected lines (variables,
// wildcards, subset matches), and provides one small driver per transport
// with the same interface, so the same transcript replays over each:
//
//   const d = makeDriver('ws');
//   await d.open();               // start an mcpd for this run; may throw SkipError
//   await d.send(msg);            // one JSON-RPC message from the client
//   const m = await d.next(ms);   // the next message received (throws on timeout)
//   const x = await d.tryNext(ms) // same, but null on timeout
//   const info = await d.close(); // stop mcpd, {exit, stderr}; throws on a bad exit
//
// Drivers: http-json, http-sse, http-longpoll, http-pull, ws, stdio-ndjson,
// stdio-content-length, tcp-ndjson, tcp-content-length, udp, udp-lossy (see DRIVERS). Each starts its own mcpd ($MCPD_BIN).
//
// How HTTP drivers turn HTTP into a message sequence: each POSTed request's
// reply messages (the JSON body, or the SSE events as they arrive) are
// queued in order; a POSTed notification or response must get 202 and adds
// nothing. A request carrying "stream": true is answered with a handle; the
// driver then long-polls mcpd/poll for that stream and queues each polled
// chunk as {"jsonrpc":"2.0","method":"mcpd/chunk","params":{stream_id, seq,
// message, end}} - the notification push transports send - so transcripts
// are the same on every transport. After notifications/initialized the
// driver also opens the session's standalone GET stream (as SDK clients do)
// and queues what arrives there.
//
// Nothing here asserts with node:assert; mismatches throw Errors whose
// messages name the transcript file and line.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { CLUSTER_N, MCPD_BIN, REPO_ROOT, freePort, getStream, mcpHeaders, openStream, request, startMcpd, withTimeout } from './mcpd.mjs';

export const TRANSCRIPT_DIR = path.join(REPO_ROOT, 'tests', 'transcripts');

/** Thrown by open() when the transport does not exist in this mcpd yet. */
export class SkipError extends Error {}

// ---------------------------------------------------------------- transcripts

/**
 * Parse transcript text. Returns {file, steps, timeout, skip:Set}; each step
 * is {kind: 'send'|'expect', subset, json, line, text}.
 */
export function parseTranscript(text, file = '<transcript>') {
  const steps = [];
  const skip = new Set();
  let timeout = 5000;
  let cur = null; // step whose JSON text is being accumulated
  let groups = 0; // `% unordered` blocks so far
  let group = 0; // the block the next expected lines belong to (0: none)
  let pending = false; // `% unordered` seen, its block not started yet
  const finish = () => {
    if (!cur) return;
    try {
      cur.json = JSON.parse(cur.text);
    } catch (e) {
      throw new Error(`${file}:${cur.line}: bad JSON: ${e.message}\n${cur.text}`);
    }
    if (cur.kind === 'send') {
      group = 0;
    } else if (pending) {
      group = ++groups;
      pending = false;
    }
    if (cur.kind === 'expect' && group) cur.group = group;
    steps.push(cur);
    cur = null;
  };
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = i + 1;
    if (/^[ \t]/.test(raw) && raw.trim() !== '') {
      if (!cur) throw new Error(`${file}:${line}: continuation line without a message line`);
      cur.text += `\n${raw}`;
      return;
    }
    finish();
    const s = raw.trim();
    if (s === '' || s.startsWith('#')) return;
    let m;
    if ((m = /^(>|<~|<)\s+(.*)$/.exec(s))) {
      const kind = m[1] === '>' ? 'send' : 'expect';
      cur = { kind, subset: m[1] === '<~', line, text: m[2] };
    } else if ((m = /^%\s*timeout\s+(\d+)\s*$/.exec(s))) {
      timeout = Number(m[1]);
    } else if (/^%\s*unordered\s*$/.test(s)) {
      group = 0;
      pending = true;
    } else if ((m = /^%\s*skip\s+(.+)$/.exec(s))) {
      for (const t of m[1].split(/\s+/)) skip.add(t);
    } else {
      throw new Error(`${file}:${line}: cannot parse line: ${raw}`);
    }
  });
  finish();
  return { file, steps, timeout, skip };
}

/** Every tests/transcripts/*.txt, parsed, sorted by name. */
export function loadTranscripts(dir = TRANSCRIPT_DIR) {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.txt'))
    .sort()
    .map((f) => parseTranscript(fs.readFileSync(path.join(dir, f), 'utf8'), f));
}

// ---------------------------------------------------------------- matching

const VAR_RE = /^\$([A-Za-z_][A-Za-z0-9_]*)$/;
const TYPES = {
  '*': () => true,
  '*string': (v) => typeof v === 'string',
  '*number': (v) => typeof v === 'number',
  '*integer': (v) => Number.isInteger(v),
  '*boolean': (v) => typeof v === 'boolean',
  '*object': (v) => v !== null && typeof v === 'object' && !Array.isArray(v),
  '*array': (v) => Array.isArray(v),
  '*null': (v) => v === null,
};

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const show = (v) => {
  const s = JSON.stringify(v);
  return s === undefined ? 'undefined' : s.length > 300 ? `${s.slice(0, 300)}...` : s;
};

/** A special string's meaning: {var}, {wild}, {literal} or null. */
function special(v) {
  if (typeof v !== 'string') return null;
  let m;
  if ((m = VAR_RE.exec(v))) return { var: m[1] };
  if (Object.hasOwn(TYPES, v)) return { wild: v };
  if (v.startsWith('\\$') || v.startsWith('\\*')) return { literal: v.slice(1) };
  return null;
}

function deepEqual(a, b) {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObj(a)) {
    if (!isObj(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

class Mismatch extends Error {}

/**
 * Match `actual` against `expected` (transcript JSON). `vars` (a Map) holds
 * bound variables; new captures are added to it. Returns the normalized
 * actual value (variables/wildcards replaced by their token). Throws
 * Mismatch with the JSON path on failure.
 */
function matchValue(exp, act, vars, subset, where) {
  const sp = special(exp);
  if (sp && sp.var) {
    if (act === undefined) throw new Mismatch(`${where}: missing (expected ${exp})`);
    if (vars.has(sp.var)) {
      if (!deepEqual(vars.get(sp.var), act)) {
        throw new Mismatch(`${where}: ${exp} is ${show(vars.get(sp.var))}, received ${show(act)}`);
      }
    } else {
      vars.set(sp.var, act);
    }
    return exp;
  }
  if (sp && sp.wild) {
    if (act === undefined || !TYPES[sp.wild](act)) throw new Mismatch(`${where}: expected ${exp}, received ${show(act)}`);
    return exp;
  }
  if (sp && sp.literal !== undefined) exp = sp.literal;
  if (Array.isArray(exp)) {
    if (!Array.isArray(act)) throw new Mismatch(`${where}: expected an array, received ${show(act)}`);
    if (!subset) {
      if (exp.length !== act.length) {
        throw new Mismatch(`${where}: expected ${exp.length} elements, received ${act.length}: ${show(act)}`);
      }
      return exp.map((e, i) => matchValue(e, act[i], vars, subset, `${where}[${i}]`));
    }
    // subset: each expected element matches a later received element, in order
    const out = act.slice();
    let j = 0;
    exp.forEach((e, i) => {
      for (;;) {
        if (j >= act.length) throw new Mismatch(`${where}[${i}]: no element matching ${show(e)} in ${show(act)}`);
        const trial = new Map(vars);
        try {
          out[j] = matchValue(e, act[j], trial, subset, `${where}[${j}]`);
          for (const [k, v] of trial) vars.set(k, v);
          j++;
          break;
        } catch (err) {
          if (!(err instanceof Mismatch)) throw err;
          j++;
        }
      }
    });
    return out;
  }
  if (isObj(exp)) {
    if (!isObj(act)) throw new Mismatch(`${where}: expected an object, received ${show(act)}`);
    const out = subset ? { ...act } : {};
    for (const k of Object.keys(exp)) {
      if (!Object.hasOwn(act, k)) throw new Mismatch(`${where}.${k}: missing`);
      out[k] = matchValue(exp[k], act[k], vars, subset, `${where}.${k}`);
    }
    if (!subset) {
      const extra = Object.keys(act).filter((k) => !Object.hasOwn(exp, k));
      if (extra.length) throw new Mismatch(`${where}: unexpected key(s) ${extra.join(', ')} in ${show(act)}`);
    }
    return out;
  }
  if (exp !== act) throw new Mismatch(`${where}: expected ${show(exp)}, received ${show(act)}`);
  return act;
}

/**
 * Match one received message. Returns {ok:true, normalized} (and binds new
 * variables in `vars`) or {ok:false, why}.
 */
export function matchMessage(expected, actual, vars, { subset = false } = {}) {
  const trial = new Map(vars);
  try {
    const normalized = matchValue(expected, actual, trial, subset, '$');
    for (const [k, v] of trial) vars.set(k, v);
    return { ok: true, normalized };
  } catch (e) {
    if (e instanceof Mismatch) return { ok: false, why: e.message };
    throw e;
  }
}

/** Replace variables in a message to send; unknown variables throw. */
export function substitute(v, vars, where = '$') {
  const sp = special(v);
  if (sp && sp.var) {
    if (!vars.has(sp.var)) throw new Error(`${where}: variable $${sp.var} is not set`);
    return vars.get(sp.var);
  }
  if (sp && sp.wild) throw new Error(`${where}: a wildcard cannot be sent`);
  if (sp && sp.literal !== undefined) return sp.literal;
  if (Array.isArray(v)) return v.map((x, i) => substitute(x, vars, `${where}[${i}]`));
  if (isObj(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, vars, `${where}.${k}`)]));
  return v;
}

/**
 * Remove the transport metadata WebSocket adds inside a message's params or
 * result: "_meta": {"mcpd/event-id": "<stream>:<seq>"} on every message
 * that has such an object, and "mcpd/session-id" (32 hex digits) in the
 * initialize result (a WebSocket client has no response header to learn
 * its session id from, and needs it to reconnect). The _meta object goes
 * too when nothing else is left in it. Returns {msg, eventId, sessionId};
 * throws if a value is malformed.
 */
export function stripEventId(msg) {
  if (!isObj(msg)) return { msg, eventId: undefined };
  for (const slot of ['params', 'result']) {
    const meta = isObj(msg[slot]) && isObj(msg[slot]._meta) ? msg[slot]._meta : null;
    if (!meta || !(Object.hasOwn(meta, 'mcpd/event-id') || Object.hasOwn(meta, 'mcpd/session-id'))) continue;
    const { 'mcpd/event-id': eventId, 'mcpd/session-id': sessionId, ...rest } = meta;
    if (eventId !== undefined && (typeof eventId !== 'string' || !/^[^:]+:\d+$/.test(eventId))) {
      throw new Error(`malformed mcpd/event-id ${show(eventId)} in ${show(msg)}`);
    }
    if (sessionId !== undefined && (typeof sessionId !== 'string' || !/^[0-9a-f]{32}$/.test(sessionId))) {
      throw new Error(`malformed mcpd/session-id ${show(sessionId)} in ${show(msg)}`);
    }
    const inner = { ...msg[slot] };
    if (Object.keys(rest).length) inner._meta = rest;
    else delete inner._meta;
    return { msg: { ...msg, [slot]: inner }, eventId, sessionId };
  }
  return { msg, eventId: undefined };
}

/**
 * Replay transcript `tr` over an opened driver. Returns {normalized,
 * received, eventIds}: the normalized received sequence (for cross-transport
 * comparison), the raw one, and the WebSocket event ids seen.
 */
export async function replay(driver, tr, { quietMs = 300 } = {}) {
  const vars = new Map(Object.entries(driver.vars || {}));
  const normalized = [];
  const received = [];
  const eventIds = [];
  for (let i = 0; i < tr.steps.length; i++) {
    const step = tr.steps[i];
    const at = `${tr.file}:${step.line}`;
    if (step.kind === 'send') {
      const msg = substitute(step.json, vars, at);
      await driver.send(msg);
      continue;
    }
    if (step.group) {
      // a `% unordered` block: its messages may arrive in any order (they
      // travel on different streams); normalized in the transcript's order
      let j = i;
      while (j < tr.steps.length && tr.steps[j].group === step.group) j++;
      const block = tr.steps.slice(i, j);
      const got = new Array(block.length);
      for (let n = 0; n < block.length; n++) {
        let raw;
        try {
          raw = await driver.next(tr.timeout);
        } catch (e) {
          throw new Error(`${at}: [${driver.name}] nothing received in an unordered block: ${e.message}`);
        }
        received.push(raw);
        const { msg, eventId } = stripEventId(raw);
        if (eventId) eventIds.push(eventId);
        const k = block.findIndex((b, x) => !got[x] && matchMessage(b.json, msg, new Map(vars), { subset: b.subset }).ok);
        if (k < 0) throw new Error(`${at}: [${driver.name}] matches no line of the unordered block\n  received: ${show(raw)}`);
        got[k] = matchMessage(block[k].json, msg, vars, { subset: block[k].subset }).normalized;
      }
      normalized.push(...got);
      i = j - 1;
      continue;
    }
    let raw;
    try {
      raw = await driver.next(tr.timeout);
    } catch (e) {
      throw new Error(
        `${at}: [${driver.name}] nothing received: ${e.message}\n  expected: ${show(step.json)}\n` +
          `  received so far: ${received.length} message(s); last: ${show(received.at(-1))}`,
      );
    }
    received.push(raw);
    const { msg, eventId } = stripEventId(raw);
    if (eventId) eventIds.push(eventId);
    const r = matchMessage(step.json, msg, vars, { subset: step.subset });
    if (!r.ok) {
      throw new Error(`${at}: [${driver.name}] ${r.why}\n  expected: ${show(step.json)}\n  received: ${show(raw)}`);
    }
    normalized.push(r.normalized);
  }
  const extra = await driver.tryNext(quietMs);
  if (extra !== null) throw new Error(`${tr.file}: [${driver.name}] unexpected message after the transcript: ${show(extra)}`);
  return { normalized, received, eventIds };
}

// ---------------------------------------------------------------- drivers

/** A FIFO of received messages with timed reads; fail() makes reads throw. */
class Inbox {
  constructor(name) {
    this.name = name;
    this.items = [];
    this.waiters = [];
    this.error = null;
  }

  push(msg) {
    this.items.push(msg);
    this._wake();
  }

  fail(err) {
    if (!this.error) this.error = err instanceof Error ? err : new Error(String(err));
    this._wake();
  }

  _wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  async next(ms) {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.items.length) return this.items.shift();
      if (this.error) throw this.error;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timeout after ${ms} ms waiting for a message`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async tryNext(ms) {
    try {
      return await this.next(ms);
    } catch (e) {
      if (this.error && e === this.error) throw e;
      return null;
    }
  }
}

const isRequest = (m) => typeof m.method === 'string' && m.id !== undefined;

const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
const META_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
/** The revision a stateless (2026-07-28) client speaks. */
export const STATELESS_VERSION = '2026-07-28';

/**
 * A message of the stateless revision, as a dual-era server tells it from
 * a legacy one (tests/transcripts/README.md): the server/discover probe,
 * or a revision or capabilities in params._meta.
 */
export function isStateless(m) {
  const meta = m.params?._meta;
  return m.method === 'server/discover' || (meta && (Object.hasOwn(meta, META_VERSION) || Object.hasOwn(meta, META_CAPABILITIES)));
}

/** The param the Mcp-Name header repeats (2026-07-28), per method. */
const NAME_PARAM = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** The headers a 2026-07-28 client sends with a request over HTTP. */
function statelessHeaders(msg) {
  const v = msg.params?._meta?.[META_VERSION];
  const extra = { 'Mcp-Method': msg.method };
  const key = NAME_PARAM[msg.method];
  if (key && typeof msg.params?.[key] === 'string') extra['Mcp-Name'] = msg.params[key];
  return mcpHeaders({ version: typeof v === 'string' ? v : STATELESS_VERSION, extra });
}
const isNotification = (m) => typeof m.method === 'string' && m.id === undefined;

/** stderr text that says a sanitizer found something. */
function sanitizerReport(stderr) {
  return /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: UndefinedBehaviorSanitizer/.test(stderr);
}

/**
 * Streamable HTTP. opts: {mode: 'json'|'sse'|'auto', pullAll}. pullAll
 * (the http-pull driver): every request the transcript did not opt in is
 * sent with "stream": true too, its handle hidden and its polled messages
 * queued as plain messages - a client that never reads a streaming
 * response.
 */
class HttpDriver {
  constructor(name, { mode, pullAll = false }) {
    this.name = name;
    this.mode = mode;
    this.pullAll = pullAll;
    this.vars = { TRANSPORT: 'http' };
    this.inbox = new Inbox(name);
    this.open_ = new Set(); // open streams, closed at close()
    this.closing = false;
    this.session = undefined;
    this.version = undefined;
    this.pollId = 0;
    this.pollers = new Set();
    this.cancelled = new Set(); // JSON of request ids the client sent notifications/cancelled for
    this.stateless = new Map(); // JSON of a stateless request's id → its POST's reply stream
  }

  async open() {
    this.mcpd = await startMcpd({ args: this.mode === 'auto' ? [] : ['--reply-mode', this.mode] });
  }

  get port() {
    return this.mcpd.port;
  }

  headers() {
    return mcpHeaders({ session: this.session, version: this.version ?? null });
  }

  /** Queue a message from the server (and learn the negotiated version). */
  _deliver(msg, initId) {
    if (initId !== undefined && msg.id === initId && msg.result?.protocolVersion) {
      const v = msg.result.protocolVersion;
      this.version = v === '2025-03-26' ? null : v;
    }
    this.inbox.push(msg);
  }

  async send(msg) {
    if (!isRequest(msg)) return this._sendOneWay(msg);
    if (isStateless(msg)) return this._sendStateless(msg);
    const initialize = msg.method === 'initialize';
    const optedIn = msg.params?.stream === true;
    let body = msg;
    let hidden = false; // pullAll: the handle and the chunk wrapping are the driver's business
    if (this.pullAll && !optedIn && !initialize) {
      body = { ...msg, params: { ...(msg.params || {}), stream: true } };
      hidden = true;
    }
    // With JSON replies the headers come only with the final message, so
    // only initialize (whose session id the next POSTs need) is awaited.
    const opening = openStream(this.port, {
      method: 'POST',
      headers: initialize ? mcpHeaders({ version: null }) : this.headers(),
      body,
      timeout: initialize ? 10000 : 120000,
    });
    if (initialize) {
      const s = await opening;
      this.session = s.headers['mcp-session-id'];
      this._reply(s, msg, body, hidden, msg.id);
      return;
    }
    opening.then(
      (s) => this._reply(s, msg, body, hidden, undefined),
      (e) => {
        if (!this.closing) this.inbox.fail(new Error(`${this.name}: POST ${msg.method}: ${e.message}`));
      },
    );
  }

  /**
   * A 2026-07-28 request: POSTed on its own, with the revision's headers
   * and no session; the reply stream is kept, as closing it is how an HTTP
   * client cancels the request.
   */
  async _sendStateless(msg) {
    const key = JSON.stringify(msg.id);
    const s = await openStream(this.port, { method: 'POST', headers: statelessHeaders(msg), body: msg, timeout: 120000 });
    this.stateless.set(key, s);
    this._reply(s, msg, msg, false, undefined);
  }

  /** Queue the messages of one POST's reply, in order, as they arrive. */
  _reply(s, msg, body, hidden, initId) {
    this.open_.add(s);
    if (this.closing) s.close();
    if (s.sse) {
      // read in the background: a server request must reach the client
      // while the POST is still open
      (async () => {
        try {
          for (;;) {
            const m = await s.sse.nextMessage(120000);
            if (m === null) break;
            this._deliver(m.msg, initId);
          }
        } catch (e) {
          const cancelled = this.cancelled.has(JSON.stringify(msg.id)) && this.stateless.has(JSON.stringify(msg.id));
          if (!this.closing && !cancelled) this.inbox.fail(new Error(`${this.name}: SSE reply to ${show(msg.method)}: ${e.message}`));
        } finally {
          this.open_.delete(s);
        }
      })();
      return;
    }
    // a JSON (or empty) reply: read it whole, in the background too (with
    // --reply-mode json, a call waits for its final message)
    (async () => {
      try {
        const { text, json } = await withTimeout(s.body, 120000, `reply to ${msg.method}`);
        this.open_.delete(s);
        // With JSON replies a request's other messages travel on the GET
        // stream. mcpd writes them there before it sends the response, but
        // two sockets give no order on the client's side: let the GET
        // socket's data in first.
        await new Promise((resolve) => setTimeout(resolve, 30));
        if (json === undefined) {
          // a request the client cancelled gets no response: with JSON
          // replies its POST is answered 202 with an empty body
          if (s.status === 202 && text === '' && this.cancelled.has(JSON.stringify(msg.id))) return;
          if (!this.closing) {
            this.inbox.fail(new Error(`${this.name}: HTTP ${s.status} with no JSON body for ${msg.method}: ${show(text)}`));
          }
          return;
        }
        const msgs = Array.isArray(json) ? json : [json];
        for (const m of msgs) {
          const handle = m.id === body.id && m.result?.status === 'streaming_started' && body.params?.stream === true;
          if (handle) {
            if (!hidden) this._deliver(m, initId);
            this._poll(m.result.stream_id, hidden, body.id);
          } else {
            this._deliver(m, initId);
          }
        }
      } catch (e) {
        if (!this.closing) this.inbox.fail(new Error(`${this.name}: reply to ${msg.method}: ${e.message}`));
      }
    })();
  }

  async _sendOneWay(msg) {
    if (msg.method === 'notifications/cancelled' && msg.params?.requestId !== undefined) {
      const key = JSON.stringify(msg.params.requestId);
      this.cancelled.add(key);
      const s = this.stateless.get(key);
      if (s) {
        // 2026-07-28 over HTTP: closing the response stream cancels
        s.close();
        this.open_.delete(s);
        return;
      }
    }
    const r = await request(this.port, { headers: this.headers(), body: msg });
    if (r.status !== 202) {
      throw new Error(`${this.name}: POST of ${show(msg)} answered HTTP ${r.status} (expected 202): ${r.text}`);
    }
    if (msg.method === 'notifications/initialized') await this._openGet();
  }

  /** The session's standalone stream, as SDK clients open it. */
  async _openGet() {
    const g = await getStream(this.port, this.session, { version: this.version ?? null });
    if (g.status !== 200 || !g.sse) {
      g.close();
      throw new Error(`${this.name}: GET /mcp answered HTTP ${g.status}`);
    }
    this.open_.add(g);
    (async () => {
      try {
        for (;;) {
          const m = await g.sse.nextMessage(3600000);
          if (m === null) break;
          this._deliver(m.msg);
        }
      } catch (e) {
        if (!this.closing) this.inbox.fail(new Error(`${this.name}: standalone GET stream: ${e.message}`));
      }
    })();
  }

  /**
   * Long-poll a stream until its last chunk; queue each chunk as an
   * mcpd/chunk notification (or, hidden, as the plain message). The stream
   * of a request the client cancelled (`requestId`) may end without one.
   */
  _poll(streamId, hidden, requestId) {
    const p = (async () => {
      let from = 0;
      const deadline = Date.now() + 120000;
      try {
        while (!this.closing && Date.now() < deadline) {
          const id = `poll-${++this.pollId}`;
          const r = await request(this.port, {
            headers: this.headers(),
            body: { jsonrpc: '2.0', id, method: 'mcpd/poll', params: { stream_id: streamId, from_seq: from, wait_ms: 5000, max_chunks: 100 } },
            timeout: 15000,
          });
          if (this.closing) return;
          const res = r.json;
          if (r.status !== 200 || !res || res.id !== id || !res.result) {
            throw new Error(`mcpd/poll ${streamId} from ${from}: HTTP ${r.status} ${r.text}`);
          }
          const { chunks, state, next_seq: nextSeq, has_more: hasMore } = res.result;
          let ended = false;
          for (const c of chunks) {
            if (c.seq !== from) throw new Error(`mcpd/poll ${streamId}: chunk seq ${c.seq}, expected ${from}: ${r.text}`);
            from = c.seq + 1;
            if (hidden) this._deliver(c.message);
            else {
              this._deliver({
                jsonrpc: '2.0',
                method: 'mcpd/chunk',
                params: { stream_id: streamId, seq: c.seq, message: c.message, end: c.end },
              });
            }
            if (c.end) ended = true;
          }
          if (nextSeq !== from) throw new Error(`mcpd/poll ${streamId}: next_seq ${nextSeq}, expected ${from}: ${r.text}`);
          if (ended) return;
          // a request the client cancelled ends its stream without a response
          if (!hasMore && state === 'error' && this.cancelled.has(JSON.stringify(requestId))) return;
          if (!hasMore && state !== 'active' && state !== 'initializing') {
            throw new Error(`mcpd/poll ${streamId}: stream ${state} without an end chunk: ${r.text}`);
          }
        }
        if (!this.closing) throw new Error(`mcpd/poll ${streamId}: no end chunk within 120 s`);
      } catch (e) {
        if (!this.closing) this.inbox.fail(new Error(`${this.name}: ${e.message}`));
      }
    })();
    this.pollers.add(p);
    p.finally(() => this.pollers.delete(p));
  }

  next(ms) {
    return this.inbox.next(ms);
  }

  tryNext(ms) {
    return this.inbox.tryNext(ms);
  }

  async close() {
    this.closing = true;
    for (const s of this.open_) s.close();
    const m = this.mcpd;
    if (!m) return { exit: null, stderr: '' };
    let exit;
    try {
      exit = await m.stop('SIGTERM', 10000);
    } finally {
      const stderr = m.stderr;
      await m.cleanup();
      this.stderr = stderr;
    }
    await Promise.allSettled([...this.pollers]);
    if (sanitizerReport(this.stderr)) throw new Error(`${this.name}: sanitizer report from mcpd:\n${this.stderr}`);
    if (!exit || exit.code !== 0) throw new Error(`${this.name}: mcpd exit ${show(exit)} after SIGTERM:\n${this.stderr}`);
    return { exit, stderr: this.stderr };
  }
}

/** WebSocket at /mcp/ws, subprotocol "mcp" (Node 22's global WebSocket). */
class WsDriver {
  constructor(name) {
    this.name = name;
    this.vars = { TRANSPORT: 'ws' };
    this.inbox = new Inbox(name);
    this.closing = false;
  }

  async open() {
    if (typeof WebSocket !== 'function') throw new SkipError('this Node has no global WebSocket (use Node 22)');
    this.mcpd = await startMcpd();
    const probe = await request(this.mcpd.port, { method: 'GET', path: '/mcp/ws', timeout: 5000 });
    if (probe.status === 404) {
      await this._stop();
      throw new SkipError('mcpd has no WebSocket endpoint yet (GET /mcp/ws → 404)');
    }
    const ws = new WebSocket(`ws://127.0.0.1:${this.mcpd.port}/mcp/ws`, 'mcp');
    this.ws = ws;
    await withTimeout(
      new Promise((resolve, reject) => {
        ws.addEventListener('open', resolve, { once: true });
        ws.addEventListener('error', () => reject(new Error('WebSocket handshake failed')), { once: true });
      }),
      5000,
      'WebSocket open',
    );
    if (ws.protocol !== 'mcp') throw new Error(`${this.name}: subprotocol ${show(ws.protocol)}, expected "mcp"`);
    ws.addEventListener('message', (ev) => {
      if (typeof ev.data !== 'string') {
        this.inbox.fail(new Error(`${this.name}: a non-text frame from the server`));
        return;
      }
      try {
        this.inbox.push(JSON.parse(ev.data));
      } catch {
        this.inbox.fail(new Error(`${this.name}: a text frame that is not JSON: ${show(ev.data)}`));
      }
    });
    ws.addEventListener('close', (ev) => {
      if (!this.closing) this.inbox.fail(new Error(`${this.name}: server closed the WebSocket (${ev.code} ${ev.reason})`));
    });
  }

  async send(msg) {
    if (this.ws.readyState !== WebSocket.OPEN) throw new Error(`${this.name}: WebSocket is not open`);
    this.ws.send(JSON.stringify(msg));
  }

  next(ms) {
    return this.inbox.next(ms);
  }

  tryNext(ms) {
    return this.inbox.tryNext(ms);
  }

  async _stop() {
    const m = this.mcpd;
    let exit;
    try {
      exit = await m.stop('SIGTERM', 10000);
    } finally {
      this.stderr = m.stderr;
      await m.cleanup();
    }
    return exit;
  }

  async close() {
    this.closing = true;
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      const closed = new Promise((r) => this.ws.addEventListener('close', r, { once: true }));
      this.ws.close(1000);
      await withTimeout(closed, 3000, 'WebSocket close').catch(() => {});
    }
    if (!this.mcpd) return { exit: null, stderr: '' };
    const exit = await this._stop();
    if (sanitizerReport(this.stderr)) throw new Error(`${this.name}: sanitizer report from mcpd:\n${this.stderr}`);
    if (!exit || exit.code !== 0) throw new Error(`${this.name}: mcpd exit ${show(exit)} after SIGTERM:\n${this.stderr}`);
    return { exit, stderr: this.stderr };
  }
}

/**
 * `mcpd --stdio --db :memory:` as a child process; framing 'ndjson' or
 * 'content-length'. Checks that stdout carries only framed JSON-RPC in the
 * client's framing. close() ends stdin: mcpd must exit 0 by itself.
 */
export class StdioDriver {
  constructor(name, { framing, args = [] }) {
    this.name = name;
    this.framing = framing;
    this.args = args;
    this.vars = { TRANSPORT: 'stdio' };
    this.inbox = new Inbox(name);
    this.buf = Buffer.alloc(0);
    this.stderr = '';
    this.closing = false;
  }

  async open() {
    const bin = MCPD_BIN;
    if (!fs.existsSync(bin)) throw new Error(`mcpd binary not found at ${bin}`);
    const proc = spawn(bin, ['--stdio', '--db', ':memory:', ...this.args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve((this.exit = { code, signal }))));
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-20000);
    });
    proc.stdin.on('error', () => {}); // EPIPE when mcpd is gone: reported by exit checks
    proc.stdout.on('data', (d) => this._feed(d));
    // an mcpd without stdio refuses the option and exits at once
    const early = await Promise.race([this.exited, new Promise((r) => setTimeout(() => r(null), 500))]);
    if (early) {
      if (/unknown option|unrecognized option|usage/i.test(this.stderr) && early.code !== 0) {
        throw new SkipError(`mcpd does not have --stdio yet: ${this.stderr.trim().split('\n')[0]}`);
      }
      throw new Error(`${this.name}: mcpd --stdio exited at once (${show(early)}):\n${this.stderr}`);
    }
  }

  _feed(d) {
    this.buf = Buffer.concat([this.buf, d]);
    try {
      for (;;) {
        if (this.framing === 'ndjson') {
          const nl = this.buf.indexOf(0x0a);
          if (nl < 0) return;
          let line = this.buf.subarray(0, nl).toString('utf8');
          this.buf = this.buf.subarray(nl + 1);
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line.trim() === '') throw new Error('an empty line on stdout');
          this.inbox.push(JSON.parse(line));
        } else {
          const end = this.buf.indexOf('\r\n\r\n');
          if (end < 0) {
            if (this.buf.length && this.buf[0] === 0x7b) throw new Error('stdout is not Content-Length framed');
            return;
          }
          const head = this.buf.subarray(0, end).toString('latin1');
          const m = /^content-length:\s*(\d+)\s*$/im.exec(head);
          if (!m) throw new Error(`a frame header without Content-Length: ${show(head)}`);
          const n = Number(m[1]);
          if (this.buf.length < end + 4 + n) return;
          const body = this.buf.subarray(end + 4, end + 4 + n).toString('utf8');
          this.buf = this.buf.subarray(end + 4 + n);
          this.inbox.push(JSON.parse(body));
        }
      }
    } catch (e) {
      this.inbox.fail(new Error(`${this.name}: bad output on stdout: ${e.message}`));
      this.buf = Buffer.alloc(0);
    }
  }

  async send(msg) {
    const text = JSON.stringify(msg);
    const frame =
      this.framing === 'ndjson' ? `${text}\n` : `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
    if (this.exit) throw new Error(`${this.name}: mcpd exited (${show(this.exit)}):\n${this.stderr}`);
    await new Promise((resolve, reject) => this.proc.stdin.write(frame, (e) => (e ? reject(e) : resolve())));
  }

  next(ms) {
    return this.inbox.next(ms);
  }

  tryNext(ms) {
    return this.inbox.tryNext(ms);
  }

  async close() {
    this.closing = true;
    if (!this.proc) return { exit: null, stderr: '' };
    if (!this.exit) this.proc.stdin.end();
    let exit;
    try {
      exit = await withTimeout(this.exited, 10000, 'mcpd --stdio exit after EOF on stdin');
    } catch (e) {
      this.proc.kill('SIGKILL');
      await this.exited;
      throw new Error(`${this.name}: ${e.message}:\n${this.stderr}`);
    }
    if (sanitizerReport(this.stderr)) throw new Error(`${this.name}: sanitizer report from mcpd:\n${this.stderr}`);
    if (exit.code !== 0) throw new Error(`${this.name}: mcpd --stdio exit ${show(exit)} at EOF:\n${this.stderr}`);
    if (this.buf.length) throw new Error(`${this.name}: a partial frame left on stdout: ${show(this.buf.toString('utf8'))}`);
    return { exit, stderr: this.stderr };
  }
}

/**
 * mcpd's raw TCP transport (--tcp-listen), framing 'ndjson' or
 * 'content-length': the stdio contract over a socket, so the frames are
 * checked the way StdioDriver checks stdout. No mcpd/connect (no auth, a
 * new session). close() closes the socket, then SIGTERMs mcpd, which must
 * exit 0.
 */
class TcpDriver extends StdioDriver {
  constructor(name, { framing }) {
    super(name, { framing });
    this.vars = { TRANSPORT: 'tcp' };
  }

  async open() {
    // The cluster's balancer speaks HTTP; a raw connection would reach one
    // replica only, on a port each replica would want for itself.
    if (CLUSTER_N) throw new SkipError('raw TCP has no balancer in front of the replicas');
    const tport = await freePort();
    try {
      this.mcpd = await startMcpd({ args: ['--tcp-listen', `127.0.0.1:${tport}`] });
    } catch (e) {
      if (/unknown option '--tcp-listen'/.test(e.message)) throw new SkipError('mcpd has no --tcp-listen yet');
      throw e;
    }
    const sock = net.connect({ host: '127.0.0.1', port: tport });
    this.sock = sock;
    this.sockClosed = new Promise((resolve) => sock.on('close', resolve));
    sock.on('error', () => {});
    await withTimeout(
      new Promise((resolve, reject) => {
        sock.once('connect', resolve);
        sock.once('error', reject);
      }),
      5000,
      'TCP connect',
    );
    sock.on('data', (d) => this._feed(d));
    sock.on('close', () => {
      if (!this.closing) this.inbox.fail(new Error(`${this.name}: mcpd closed the TCP connection`));
    });
  }

  async send(msg) {
    const text = JSON.stringify(msg);
    const frame =
      this.framing === 'ndjson' ? `${text}\n` : `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
    await new Promise((resolve, reject) => this.sock.write(frame, (e) => (e ? reject(e) : resolve())));
  }

  async close() {
    this.closing = true;
    if (this.sock) {
      this.sock.end();
      await withTimeout(this.sockClosed, 3000, 'TCP close').catch(() => this.sock.destroy());
    }
    const m = this.mcpd;
    if (!m) return { exit: null, stderr: '' };
    let exit;
    try {
      exit = await m.stop('SIGTERM', 10000);
    } finally {
      this.stderr = m.stderr;
      await m.cleanup();
    }
    if (sanitizerReport(this.stderr)) throw new Error(`${this.name}: sanitizer report from mcpd:\n${this.stderr}`);
    if (!exit || exit.code !== 0) throw new Error(`${this.name}: mcpd exit ${show(exit)} after SIGTERM:\n${this.stderr}`);
    if (this.buf.length) throw new Error(`${this.name}: a partial frame left on the socket: ${show(this.buf.toString('utf8'))}`);
    return { exit, stderr: this.stderr };
  }
}

/**
 * mcpd's UDP transport (--udp-listen), through the client of the README's
 * "UDP wire rules" (udp-client.mjs), directly or (lossy) through a relay
 * that drops 10% of the datagrams each way and duplicates and reorders
 * some, with a seed per run. No mcpd/connect (no auth, a new session).
 * close() closes the socket, then SIGTERMs mcpd, which must exit 0.
 */
class UdpDriver {
  constructor(name, { lossy = false } = {}) {
    this.name = name;
    this.lossy = lossy;
    this.vars = { TRANSPORT: 'udp' };
    this.inbox = new Inbox(name);
    this.stderr = '';
  }

  async open() {
    if (CLUSTER_N) throw new SkipError('UDP has no balancer in front of the replicas');
    const uport = await freePort();
    try {
      this.mcpd = await startMcpd({ args: ['--udp-listen', `127.0.0.1:${uport}`] });
    } catch (e) {
      if (/unknown option '--udp-listen'/.test(e.message)) throw new SkipError('mcpd has no --udp-listen yet');
      throw e;
    }
    const { UdpClient, LossyRelay } = await import('./udp-client.mjs');
    if (this.lossy) this.relay = await LossyRelay.start(uport, { seed: (udpSeed += 7) });
    this.client = await UdpClient.open(this.relay ? this.relay.port : uport, {
      ms: 10000,
      onMessage: (m) => this.inbox.push(m),
    });
  }

  async send(msg) {
    if (this.client.error) throw new Error(`${this.name}: ${this.client.error.message}`);
    this.client.send(msg);
  }

  next(ms) {
    return this.inbox.next(ms);
  }

  tryNext(ms) {
    return this.inbox.tryNext(ms);
  }

  async close() {
    const clientError = this.client?.error;
    this.client?.close();
    this.relay?.close();
    const m = this.mcpd;
    if (!m) return { exit: null, stderr: '' };
    let exit;
    try {
      exit = await m.stop('SIGTERM', 10000);
    } finally {
      this.stderr = m.stderr;
      await m.cleanup();
    }
    if (sanitizerReport(this.stderr)) throw new Error(`${this.name}: sanitizer report from mcpd:\n${this.stderr}`);
    if (!exit || exit.code !== 0) throw new Error(`${this.name}: mcpd exit ${show(exit)} after SIGTERM:\n${this.stderr}`);
    if (clientError) throw new Error(`${this.name}: the UDP client saw: ${clientError.message}`);
    return { exit, stderr: this.stderr };
  }
}

let udpSeed = 1;

/** Every driver, in the order the suite runs them. */
export const DRIVERS = {
  'http-json': () => new HttpDriver('http-json', { mode: 'json' }),
  'http-sse': () => new HttpDriver('http-sse', { mode: 'sse' }),
  'http-longpoll': () => new HttpDriver('http-longpoll', { mode: 'auto' }),
  'http-pull': () => new HttpDriver('http-pull', { mode: 'auto', pullAll: true }),
  ws: () => new WsDriver('ws'),
  'stdio-ndjson': () => new StdioDriver('stdio-ndjson', { framing: 'ndjson' }),
  'stdio-content-length': () => new StdioDriver('stdio-content-length', { framing: 'content-length' }),
  'tcp-ndjson': () => new TcpDriver('tcp-ndjson', { framing: 'ndjson' }),
  'tcp-content-length': () => new TcpDriver('tcp-content-length', { framing: 'content-length' }),
  udp: () => new UdpDriver('udp'),
  'udp-lossy': () => new UdpDriver('udp-lossy', { lossy: true }),
};

export function makeDriver(name) {
  const f = DRIVERS[name];
  if (!f) throw new Error(`no driver ${name}`);
  return f();
}
