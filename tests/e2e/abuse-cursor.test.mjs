// Abuse suite (issue 7, items 1 and 11): cursors a client hands back, and
// the Accept header.
//
// Cursors: Last-Event-ID on GET /mcp, last_event_id= on /mcp/ws and the
// from_seq of mcpd/poll, at the int64 edges (INT64_MAX once wrapped to a
// negative chunk index: heap bytes sent as SSE data, then SIGSEGV), past
// the end of a stream still being written, negative, overflowing and
// garbage. Each is refused with a clear error (HTTP 400 + JSON-RPC -32602 on
// GET and on the WebSocket handshake, a -32602 reply on a poll) and counted
// as mcpd_refusals_total{reason="bad_cursor"}; past the end of a stream that
// has ended there is nothing to read, so the reader sees the end. After each
// case the server still serves: a valid resume replays, echo answers.
//
// Accept per RFC 9110: whitespace around commas, q=0 (not acceptable),
// wildcards and their precedence, parameters, case.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';

import {
  ACCEPT_BOTH,
  LATEST,
  callTool,
  echo,
  getStream,
  initSession,
  mcpHeaders,
  newId,
  parseEventId,
  rawExchange,
  request,
  startMcpd,
} from './lib/mcpd.mjs';

const INT64_MAX = '9223372036854775807';
const INT64_MAX_1 = '9223372036854775806';
const OVERFLOW = '99999999999999999999';

/** mcpd_refusals_total{reason="bad_cursor"} from /metrics (0 when absent). */
async function badCursorCount(port) {
  const r = await request(port, { method: 'GET', path: '/metrics' });
  assert.equal(r.status, 200);
  const m = /^mcpd_refusals_total\{reason="bad_cursor"\} (\d+)$/m.exec(r.text);
  return m ? Number(m[1]) : 0;
}

/** The server is alive and still answers this session. */
async function stillServes(mcpd, session) {
  assert.equal(mcpd.exit, null, `mcpd died: ${JSON.stringify(mcpd.exit)}\n${mcpd.stderr}`);
  assert.equal(await echo(mcpd.port, session), 'still-alive');
}

/** The id of the session's standalone stream (active while the session lives). */
async function standaloneStream(port, session) {
  const g = await getStream(port, session);
  try {
    assert.equal(g.status, 200, 'standalone GET');
    const prime = await g.sse.next(5000);
    assert.match(prime?.id ?? '', /:-1$/, `priming event: ${JSON.stringify(prime)}`);
    return parseEventId(prime.id).stream;
  } finally {
    g.close();
  }
}

/** A request stream that has ended: {stream, ids (every message event id), messages}. */
async function endedStream(port, session) {
  const r = await callTool(port, session, 'countdown', { n: 2, interval_ms: 10 }, { progressToken: 'cur' });
  assert.equal(r.status, 200);
  assert.ok(r.sse, 'countdown with progress replies with SSE');
  assert.ok(r.response?.result, JSON.stringify(r.messages));
  const ids = r.events.filter((e) => e.data).map((e) => e.id);
  return { stream: parseEventId(ids[0]).stream, ids, messages: r.messages };
}

/** GET + Last-Event-ID that must be refused with 400 / -32602. */
async function sseRefused(port, session, lei) {
  const g = await getStream(port, session, { lastEventId: lei });
  try {
    assert.equal(g.status, 400, `Last-Event-ID ${lei}: status ${g.status}`);
    const b = await g.body;
    assert.match(String(g.headers['content-type']), /^application\/json/);
    assert.equal(b.json?.jsonrpc, '2.0', b.text);
    assert.equal(b.json?.error?.code, -32602, `Last-Event-ID ${lei}: ${b.text}`);
    assert.match(b.json.error.message, /Last-Event-ID/);
  } finally {
    g.close();
  }
}

/** A full resume from the priming id replays the ended stream. */
async function resumeReplays(port, session, ended) {
  const g = await getStream(port, session, { lastEventId: `${ended.stream}:-1` });
  try {
    assert.equal(g.status, 200);
    const got = (await g.sse.rest(10000)).map((m) => m.msg);
    assert.deepEqual(got, ended.messages);
  } finally {
    g.close();
  }
}

test('SSE resume: Last-Event-ID at the int64 edges, past the end, negative, garbage', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port);
    const active = await standaloneStream(mcpd.port, session);
    const ended = await endedStream(mcpd.port, session);
    const before = await badCursorCount(mcpd.port);
    const refused = [
      `${ended.stream}:${INT64_MAX}`, // wrapped to INT64_MIN, read the heap
      `${active}:${INT64_MAX}`,
      `${active}:${INT64_MAX_1}`, // next = INT64_MAX: past the end of an active stream
      `${active}:5`, // past the end
      `${active}:0`, // the first message that does not exist yet
      `${active}:-2`,
      `${active}:-9223372036854775808`,
      `${ended.stream}:${OVERFLOW}`,
      `${ended.stream}:18446744073709551615`,
      `${ended.stream}:+1`,
      `${ended.stream}: 1`,
      `${ended.stream}:0x1`,
    ];
    for (const lei of refused) {
      await sseRefused(mcpd.port, session, lei);
      await stillServes(mcpd, session);
    }
    assert.equal(await badCursorCount(mcpd.port), before + refused.length, 'each refusal is counted');

    // Past the end of an ended stream: nothing to read, the stream just ends.
    const g = await getStream(mcpd.port, session, { lastEventId: `${ended.stream}:${INT64_MAX_1}` });
    try {
      assert.equal(g.status, 200);
      assert.deepEqual(await g.sse.rest(10000), [], 'nothing replayed past the end');
    } finally {
      g.close();
    }
    // The last real id: nothing after it. The priming id: everything.
    const last = await getStream(mcpd.port, session, { lastEventId: ended.ids.at(-1) });
    try {
      assert.equal(last.status, 200);
      assert.deepEqual(await last.sse.rest(10000), []);
    } finally {
      last.close();
    }
    await resumeReplays(mcpd.port, session, ended);
    await stillServes(mcpd, session);
  } finally {
    await mcpd.cleanup();
  }
});

/** A WebSocket handshake on /mcp/ws; resolves {status, json} (the socket is closed). */
async function wsHandshake(port, query) {
  const key = crypto.randomBytes(16).toString('base64');
  const req =
    `GET /mcp/ws?${query} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
    `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n` +
    `Sec-WebSocket-Protocol: mcp\r\n\r\n`;
  const r = await rawExchange(port, req, {
    ms: 10000,
    until: (t) => {
      const end = t.indexOf('\r\n\r\n');
      if (end < 0) return false;
      if (/^HTTP\/1\.1 101 /.test(t)) return true;
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(t.slice(0, end));
      return len !== null && t.length - end - 4 >= Number(len[1]);
    },
  });
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(r.text)?.[1]);
  const body = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
  let json;
  try {
    json = JSON.parse(body);
  } catch {
    json = undefined;
  }
  return { status, json, text: r.text };
}

test('WebSocket resume: last_event_id= at the int64 edges, past the end, negative, garbage', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port);
    const active = await standaloneStream(mcpd.port, session);
    const ended = await endedStream(mcpd.port, session);
    const before = await badCursorCount(mcpd.port);
    const refused = [
      `${ended.stream}:${INT64_MAX}`,
      `${active}:${INT64_MAX}`,
      `${active}:${INT64_MAX_1}`,
      `${active}:3`,
      `${active}:-2`,
      `${ended.stream}:${OVERFLOW}`,
      `${ended.stream}:abc`,
    ];
    for (const lei of refused) {
      const q = `session=${session}&last_event_id=${encodeURIComponent(lei)}`;
      const r = await wsHandshake(mcpd.port, q);
      assert.equal(r.status, 400, `last_event_id ${lei}: ${r.text.slice(0, 300)}`);
      assert.equal(r.json?.error?.code, -32602, `last_event_id ${lei}: ${r.text.slice(0, 300)}`);
      await stillServes(mcpd, session);
    }
    assert.equal(await badCursorCount(mcpd.port), before + refused.length, 'each refusal is counted');
    // A valid resume still upgrades.
    const ok = await wsHandshake(mcpd.port, `session=${session}&last_event_id=${encodeURIComponent(ended.ids[0])}`);
    assert.equal(ok.status, 101, ok.text.slice(0, 300));
    await stillServes(mcpd, session);
  } finally {
    await mcpd.cleanup();
  }
});

/** mcpd/poll with a raw JSON body (from_seq may be beyond what JS numbers hold). */
async function pollRaw(port, session, streamId, fromSeqText) {
  const id = newId();
  const body = `{"jsonrpc":"2.0","id":${id},"method":"mcpd/poll","params":{"stream_id":"${streamId}","from_seq":${fromSeqText},"wait_ms":0}}`;
  const r = await request(port, { headers: mcpHeaders({ session }), body, timeout: 20000 });
  return { status: r.status, msg: r.json, text: r.text };
}

test('long-poll: from_seq at the int64 edges, past the end, negative', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port);
    // A stream still being written for the whole test (progress every 2 s).
    const ack = await request(mcpd.port, {
      headers: mcpHeaders({ session }),
      body: {
        jsonrpc: '2.0',
        id: newId(),
        method: 'tools/call',
        params: { name: 'countdown', arguments: { n: 30, interval_ms: 2000 }, stream: true, _meta: { progressToken: 'p' } },
      },
    });
    const streamId = ack.json?.result?.stream_id;
    assert.ok(streamId, ack.text);
    const before = await badCursorCount(mcpd.port);
    const refused = [INT64_MAX, INT64_MAX_1, '5', '-1', '-9223372036854775808'];
    for (const from of refused) {
      const p = await pollRaw(mcpd.port, session, streamId, from);
      assert.equal(p.status, 200, p.text);
      assert.equal(p.msg?.error?.code, -32602, `from_seq ${from}: ${p.text}`);
      assert.match(p.msg.error.message, /from_seq/);
      await stillServes(mcpd, session);
    }
    assert.equal(await badCursorCount(mcpd.port), before + refused.length, 'each refusal is counted');
    // Digits no int64 holds: refused too (the JSON does not parse).
    const big = await pollRaw(mcpd.port, session, streamId, OVERFLOW);
    assert.ok(big.msg?.error, big.text);
    await stillServes(mcpd, session);
    // The valid cursor still waits for and reads the first chunk.
    const body = { jsonrpc: '2.0', id: newId(), method: 'mcpd/poll', params: { stream_id: streamId, from_seq: 0, wait_ms: 10000 } };
    const first = await request(mcpd.port, { headers: mcpHeaders({ session }), body, timeout: 20000 });
    assert.equal(first.json?.result?.chunks?.[0]?.seq, 0, first.text);
    assert.equal(first.json.result.next_seq, 1);
  } finally {
    await mcpd.cleanup();
  }
});

test('Accept per RFC 9110: whitespace, q=0, wildcards, parameters, case', async () => {
  const mcpd = await startMcpd();
  try {
    const { session } = await initSession(mcpd.port);
    const post = (accept, contentType = 'application/json') =>
      request(mcpd.port, {
        headers: mcpHeaders({ session, extra: { Accept: accept, 'Content-Type': contentType } }),
        body: { jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'echo', arguments: { message: 'a' } } },
      });
    const cases = [
      ['application/json , text/event-stream', 200],
      ['application/json ,text/event-stream', 200],
      ['text/event-stream\t, application/json', 200],
      ['APPLICATION/JSON, Text/Event-Stream', 200],
      ['*/*', 200],
      ['application/*, text/*', 200],
      ['application/json;charset=utf-8;q=0.5, text/event-stream;q=0.1', 200],
      ['application/json;q=0, text/event-stream', 406],
      ['application/json, text/event-stream;q=0', 406],
      ['application/json;q=0.000, text/event-stream', 406],
      ['*/*;q=0', 406],
      ['text/event-stream;q=0, */*', 406],
      ['*/*, application/json;q=0', 406],
      ['application/jsonx, text/event-stream', 406],
      ['', 406],
    ];
    for (const [accept, want] of cases) {
      const r = await post(accept);
      assert.equal(r.status, want, `Accept "${accept}": ${r.status} ${r.text.slice(0, 200)}`);
      if (want === 406) assert.equal(r.json?.error?.code, -32000, r.text);
      await stillServes(mcpd, session);
    }
    // Content-Type: the media type, whatever its case and parameters.
    assert.equal((await post(ACCEPT_BOTH, 'Application/JSON ; charset="utf-8"')).status, 200);
    assert.equal((await post(ACCEPT_BOTH, 'application/json-seq')).status, 415);
    assert.equal((await post(ACCEPT_BOTH, 'application/json charset=utf-8')).status, 415);
    // GET: q=0 on the only type it serves.
    const g = await getStream(mcpd.port, session, { headers: { Accept: 'text/event-stream;q=0, application/json' } });
    try {
      assert.equal(g.status, 406);
    } finally {
      g.close();
    }
    const h = await getStream(mcpd.port, session, { version: LATEST, headers: { Accept: 'text/* ; q=0.5' } });
    try {
      assert.equal(h.status, 200);
    } finally {
      h.close();
    }
    await stillServes(mcpd, session);
  } finally {
    await mcpd.cleanup();
  }
});
