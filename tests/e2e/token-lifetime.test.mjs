// A token ends everywhere it is used (issue 31, defects 1 and 2), against a
// real mcpd with --auth token on a real SQLite file and tokens made by the
// real mcp-admin:
//
//   - defect 1: every connection authenticated by a token ends within 1 s
//     of `tokens revoke` or of the token's expiry (`tokens add --expires`),
//     whether or not it has a session yet: a WebSocket closes with 1008 and
//     the reason ("token revoked", "token expired"); an SSE GET stream on
//     /mcp, the SSE reply to a POST, and a legacy /sse stream (waiting for
//     its initialize, or following its session) write a final comment
//     (": token revoked", ": token expired") and end; a long-poll (mcpd/poll
//     with wait_ms), and a JSON reply still waiting (--reply-mode json, one
//     request or a batch), are answered 401 with WWW-Authenticate. Then HTTP
//     with the token gets 401.
//     The tests allow 1.5 s (the requirement's 1 s, plus the test's own
//     scheduling);
//   - defect 2: 20,000 requests with random bearer values leave mcpd's RSS
//     within 2 MB of where it was after a warm-up of as many (main grew by
//     5-6.5 MB), while a valid token is served throughout.
//
// Every process this file signals is one it started.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { test } from 'node:test';

import { ACCEPT_BOTH, builtWithTsan, mcpHeaders, newId, request, sleep, tempDb, waitFor, withMcpd, withTimeout, mcpAdmin } from './lib/mcpd.mjs';
import { procSample, smallQuarantineEnv } from './lib/push-clients.mjs';

// ASan keeps freed memory in a quarantine (256 MB by default); a small one
// makes RSS measure mcpd rather than the sanitizer. No effect on a Release build.
process.env.ASAN_OPTIONS = smallQuarantineEnv().ASAN_OPTIONS;

/** The requirement is 1 s; the rest is the test's own scheduling. */
const WITHIN_MS = 1500;
/** A token made with --expires 4s. */
const EXPIRES_MS = 4000;

/** mcp-admin's output, which must succeed. */
function admin(db, ...args) {
  const r = mcpAdmin(db, ...args);
  assert.equal(r.status, 0, `mcp-admin ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

const bearer = (token) => ({ Authorization: `Bearer ${token}` });

function post(port, token, body, { session, timeout = 10000 } = {}) {
  return request(port, {
    headers: { ...mcpHeaders({ session }), 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token) },
    body,
    timeout,
  });
}

async function initWith(port, token) {
  const r = await post(port, token, {
    jsonrpc: '2.0',
    id: newId(),
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'token-lifetime', version: '1' } },
  });
  assert.equal(r.status, 200, r.text);
  const session = r.headers['mcp-session-id'];
  const n = await post(port, token, { jsonrpc: '2.0', method: 'notifications/initialized' }, { session });
  assert.equal(n.status, 202, n.text);
  return session;
}

/**
 * An open event stream read raw (comments included). `ended` resolves with
 * {text, at} once the server ends the body.
 */
function openRaw(port, { method = 'GET', path: p, headers, body }) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers, agent: false });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        text += d;
      });
      const ended = new Promise((done) => {
        const fin = () => done({ text, at: Date.now() });
        res.on('end', fin);
        res.on('close', fin);
        res.on('error', fin);
      });
      resolve({ status: res.statusCode, res, ended, text: () => text, close: () => req.destroy() });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A WebSocket with the token as a subprotocol; `closed` resolves {code, reason, at}. */
function wsOpen(port, token) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/mcp/ws`, ['mcp', `bearer.${token}`]);
    const closed = new Promise((done) => ws.addEventListener('close', (e) => done({ code: e.code, reason: e.reason, at: Date.now() }), { once: true }));
    ws.addEventListener('open', () => resolve({ ws, closed }), { once: true });
    ws.addEventListener('error', () => reject(new Error('WebSocket refused')), { once: true });
  });
}

/** One JSON-RPC exchange on a WebSocket. */
function wsCall(ws, msg) {
  return new Promise((resolve) => {
    const on = (e) => {
      const m = JSON.parse(e.data);
      if (m.id === msg.id) {
        ws.removeEventListener('message', on);
        resolve(m);
      }
    };
    ws.addEventListener('message', on);
    ws.send(JSON.stringify(msg));
  });
}

// Each kind of connection: open(port, token) resolves {ended, close}, where
// ended resolves {at, ...what the client saw}; check(seen, why) asserts
// that the connection said why it ended ("token revoked", "token expired").
const KINDS = {
  'WebSocket without a session': {
    async open(port, token) {
      const { ws, closed } = await wsOpen(port, token);
      return { ended: closed, close: () => ws.close() };
    },
    check(seen, why) {
      assert.equal(seen.code, 1008, `close code: ${JSON.stringify(seen)}`);
      assert.equal(seen.reason, why);
    },
  },
  'WebSocket with a session': {
    async open(port, token) {
      const { ws, closed } = await wsOpen(port, token);
      const init = await wsCall(ws, {
        jsonrpc: '2.0',
        id: 'init',
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'token-lifetime', version: '1' } },
      });
      assert.ok(init.result, JSON.stringify(init));
      ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const pong = await wsCall(ws, { jsonrpc: '2.0', id: 'p', method: 'ping' });
      assert.ok(pong.result, JSON.stringify(pong));
      return { ended: closed, close: () => ws.close() };
    },
    check(seen, why) {
      assert.equal(seen.code, 1008, `close code: ${JSON.stringify(seen)}`);
      assert.equal(seen.reason, why);
    },
  },
  'SSE GET stream on /mcp': {
    async open(port, token) {
      const session = await initWith(port, token);
      const s = await openRaw(port, {
        path: '/mcp',
        headers: { Accept: 'text/event-stream', ...mcpHeaders({ session }), ...bearer(token) },
      });
      assert.equal(s.status, 200);
      return { ended: s.ended, close: s.close };
    },
    check(seen, why) {
      assert.match(seen.text, new RegExp(`(^|\\n): ${why}\\n\\n$`), `the stream's last words: ${JSON.stringify(seen.text.slice(-80))}`);
    },
  },
  'SSE reply to a POST on /mcp': {
    async open(port, token) {
      const session = await initWith(port, token);
      // A call whose answer comes in 20 s: the reply is an event stream.
      const body = JSON.stringify({ jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 10000 } } });
      const s = await openRaw(port, {
        method: 'POST',
        path: '/mcp',
        headers: { ...mcpHeaders({ session }), 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, 'Content-Length': Buffer.byteLength(body), ...bearer(token) },
        body,
      });
      assert.equal(s.status, 200);
      return { ended: s.ended, close: s.close };
    },
    check(seen, why) {
      assert.match(seen.text, new RegExp(`(^|\\n): ${why}\\n\\n$`), `the stream's last words: ${JSON.stringify(seen.text.slice(-80))}`);
    },
  },
  'long-poll (mcpd/poll with wait_ms)': {
    async open(port, token) {
      const session = await initWith(port, token);
      // A call whose only message comes in 20 s: the poll waits for it.
      const ack = await post(port, token, {
        jsonrpc: '2.0',
        id: newId(),
        method: 'tools/call',
        params: { name: 'countdown', arguments: { n: 2, interval_ms: 10000 }, stream: true },
      }, { session });
      assert.equal(ack.json?.result?.status, 'streaming_started', ack.text);
      const waiting = post(port, token, {
        jsonrpc: '2.0',
        id: newId(),
        method: 'mcpd/poll',
        params: { stream_id: ack.json.result.stream_id, from_seq: 0, wait_ms: 30000 },
      }, { session, timeout: 40000 });
      await sleep(200); // parked
      return { ended: waiting.then((r) => ({ ...r, at: Date.now() })), close: () => {} };
    },
    check(seen, why) {
      assert.equal(seen.status, 401, `the waiting poll's answer: ${seen.status} ${seen.text}`);
      assert.match(
        String(seen.headers['www-authenticate']),
        /^Bearer error="invalid_token", error_description="token (expired|revoked) while the request waited"$/,
      );
      assert.equal(seen.json?.error?.code, -32000);
      assert.match(seen.json.error.message, new RegExp(why));
    },
  },
  'legacy /sse waiting for its initialize': {
    async open(port, token) {
      const s = await openRaw(port, { path: '/sse', headers: { Accept: 'text/event-stream', ...bearer(token) } });
      assert.equal(s.status, 200);
      await withTimeout((async () => { while (!/event: endpoint/.test(s.text())) await sleep(10); })(), 5000, 'the endpoint event');
      return { ended: s.ended, close: s.close };
    },
    check(seen, why) {
      assert.match(seen.text, new RegExp(`\\n: ${why}\\n\\n$`), `the stream's last words: ${JSON.stringify(seen.text.slice(-80))}`);
    },
  },
  'legacy /sse following its session': {
    async open(port, token) {
      const s = await openRaw(port, { path: '/sse', headers: { Accept: 'text/event-stream', ...bearer(token) } });
      assert.equal(s.status, 200);
      let endpoint;
      await withTimeout((async () => {
        while (!(endpoint = /data: (\/messages\?sessionId=\w+)/.exec(s.text()))) await sleep(10);
      })(), 5000, 'the endpoint event');
      const r = await request(port, {
        path: endpoint[1],
        headers: { 'Content-Type': 'application/json', ...bearer(token) },
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'legacy', version: '1' } } },
      });
      assert.equal(r.status, 202, r.text);
      await withTimeout((async () => { while (!/"protocolVersion"/.test(s.text())) await sleep(10); })(), 5000, 'the initialize result');
      return { ended: s.ended, close: s.close };
    },
    check(seen, why) {
      assert.match(seen.text, new RegExp(`\\n: ${why}\\n\\n$`), `the stream's last words: ${JSON.stringify(seen.text.slice(-80))}`);
    },
  },
};

/** After the end: HTTP with the token is refused. */
async function refusedNow(port, token, why) {
  const r = await post(port, token, { jsonrpc: '2.0', id: newId(), method: 'ping' });
  assert.equal(r.status, 401, r.text);
  assert.match(r.json.error.message, why === 'token revoked' ? /revoked/ : /expired/);
}

for (const [kind, k] of Object.entries(KINDS)) {
  test(`revoke: ${kind} ends within 1 s, saying why`, async () => {
    const { db, dir } = tempDb();
    await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
      const token = admin(db, 'tokens', 'add', 'alice');
      const conn = await k.open(m.port, token);
      let revokedAt = 0;
      let early = false;
      conn.ended.then(() => {
        early = !revokedAt;
      });
      await sleep(300);
      assert.equal(early, false, 'the connection ended before its token did');
      admin(db, 'tokens', 'revoke', 'alice');
      revokedAt = Date.now();
      try {
        const seen = await withTimeout(conn.ended, 5000, `${kind} to end after the revocation`);
        k.check(seen, 'token revoked');
        assert.ok(seen.at - revokedAt <= WITHIN_MS, `ended ${seen.at - revokedAt} ms after the revocation`);
      } finally {
        conn.close();
      }
      await refusedNow(m.port, token, 'token revoked');
    });
  });

  test(`expiry: ${kind} ends within 1 s of its token's expiry, saying why`, async () => {
    const { db, dir } = tempDb();
    await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
      const before = Date.now();
      const token = admin(db, 'tokens', 'add', 'shortlived', '--expires', `${EXPIRES_MS / 1000}s`);
      const after = Date.now();
      const conn = await k.open(m.port, token);
      try {
        const seen = await withTimeout(conn.ended, EXPIRES_MS + 5000, `${kind} to end after the expiry`);
        k.check(seen, 'token expired');
        assert.ok(seen.at >= before + EXPIRES_MS - 100, `ended ${before + EXPIRES_MS - seen.at} ms before the expiry`);
        assert.ok(seen.at - (after + EXPIRES_MS) <= WITHIN_MS, `ended ${seen.at - (after + EXPIRES_MS)} ms after the expiry`);
      } finally {
        conn.close();
      }
      await refusedNow(m.port, token, 'token expired');
    });
  });
}

test('revoke: a JSON reply still waiting (--reply-mode json), for one request and for a 2025-03-26 batch, is answered 401', async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token', '--reply-mode', 'json'], { db, dir }, async (m) => {
    const token = admin(db, 'tokens', 'add', 'alice');
    const call = () => ({ jsonrpc: '2.0', id: newId(), method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 10000 } } });
    const single = await initWith(m.port, token);
    const batchSession = await (async () => {
      const r = await request(m.port, {
        headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token) },
        body: { jsonrpc: '2.0', id: newId(), method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'batch', version: '1' } } },
      });
      assert.equal(r.status, 200, r.text);
      return r.headers['mcp-session-id'];
    })();
    const waiting = [
      post(m.port, token, call(), { session: single, timeout: 30000 }),
      request(m.port, {
        headers: { ...mcpHeaders({ session: batchSession, version: '2025-03-26' }), 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, ...bearer(token) },
        body: [call(), call()],
        timeout: 30000,
      }),
    ].map((p) => p.then((r) => ({ ...r, at: Date.now() })));
    await sleep(500);
    admin(db, 'tokens', 'revoke', 'alice');
    const revokedAt = Date.now();
    for (const r of await withTimeout(Promise.all(waiting), 5000, 'the waiting replies')) {
      assert.equal(r.status, 401, r.text);
      assert.match(String(r.headers['www-authenticate']), /^Bearer/);
      assert.match(r.json.error.message, /token revoked/);
      assert.ok(r.at - revokedAt <= WITHIN_MS, `answered ${r.at - revokedAt} ms after the revocation`);
    }
  });
});

// A JSON reply hands what comes before its response (progress) to the
// session's standalone stream, and at its end waits (up to 2 s) for the
// stream's reader to have written it; a token's end skips that wait. Here
// progress was relayed (no GET stream reads it) and the 401 still comes at
// once.
test('revoke: a JSON reply waiting after relaying progress is answered 401 at once', async () => {
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token', '--reply-mode', 'json'], { db, dir }, async (m) => {
    const token = admin(db, 'tokens', 'add', 'alice');
    const session = await initWith(m.port, token);
    const call = {
      jsonrpc: '2.0',
      id: newId(),
      method: 'tools/call',
      params: { name: 'countdown', arguments: { n: 20, interval_ms: 300 }, _meta: { progressToken: 'p' } },
    };
    const waiting = post(m.port, token, call, { session, timeout: 30000 }).then((r) => ({ ...r, at: Date.now() }));
    await sleep(1000); // three progress notifications relayed, none read (no GET stream)
    admin(db, 'tokens', 'revoke', 'alice');
    const revokedAt = Date.now();
    const r = await withTimeout(waiting, 5000, 'the waiting reply');
    assert.equal(r.status, 401, r.text);
    assert.match(r.json.error.message, /token revoked/);
    assert.ok(r.at - revokedAt <= WITHIN_MS, `answered ${r.at - revokedAt} ms after the revocation`);
  });
});

test('a client retrying with a revoked token cannot flood the log: 300 refusals, a handful of warnings with the count of the rest', async () => {
  const { db, dir } = tempDb();
  // warn: the request lines would push the warnings out of the stderr the helper keeps
  await withMcpd(['--auth', 'token', '--log-level', 'warn'], { db, dir }, async (m) => {
    const token = admin(db, 'tokens', 'add', 'alice');
    admin(db, 'tokens', 'revoke', 'alice');
    const N = 300;
    for (let i = 0; i < N; i += 30) {
      const rs = await Promise.all(Array.from({ length: 30 }, () => post(m.port, token, { jsonrpc: '2.0', id: newId(), method: 'ping' })));
      for (const r of rs) assert.equal(r.status, 401, r.text);
    }
    await sleep(1100); // one more warning is due, carrying the count of those held back
    assert.equal((await post(m.port, token, { jsonrpc: '2.0', id: newId(), method: 'ping' })).status, 401);
    // mcpd logs before it answers, but its stderr pipe and the response's
    // socket reach this process in either order: wait for the line.
    await waitFor(() => /more uses/.test(m.stderr), 3000, 'the warning with the count').catch(() => {});
    const warnings = m.stderr.split('\n').filter((l) => l.includes('event=token_revoked_used'));
    assert.ok(warnings.length >= 2 && warnings.length <= 20, `${warnings.length} warnings for ${N + 1} uses`);
    const counted = warnings.map((l) => Number((/\((\d+) more uses/.exec(l) || [0, 0])[1])).reduce((a, b) => a + b, 0);
    assert.equal(counted + warnings.length, N + 1, `every use is logged or counted: ${warnings.join('\n')}`);
  });
});

test('defect 2: 20,000 random bearer values leave RSS within 2 MB, and a valid token is served throughout', async (t) => {
  if (builtWithTsan()) {
    // 40,000 requests grow a TSan build by gigabytes of fiber histories; the
    // ASan and Release runs measure mcpd.
    t.skip('RSS of a ThreadSanitizer build measures TSan');
    return;
  }
  const { db, dir } = tempDb();
  await withMcpd(['--auth', 'token'], { db, dir }, async (m) => {
    const token = admin(db, 'tokens', 'add', 'steady');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const send = (bearerValue) =>
      new Promise((resolve, reject) => {
        const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
        const req = http.request({
          host: '127.0.0.1',
          port: m.port,
          method: 'POST',
          path: '/mcp',
          agent,
          headers: { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, Authorization: `Bearer ${bearerValue}`, 'Content-Length': Buffer.byteLength(body) },
        });
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        });
        req.on('error', reject);
        req.end(body);
      });
    const flood = async (n) => {
      let valid = 0;
      for (let i = 0; i < n; i += 64) {
        const batch = [];
        for (let j = i; j < Math.min(n, i + 64); j++) batch.push(send(`mcpd_${crypto.randomBytes(32).toString('base64url')}`));
        batch.push(send(token)); // the valid token is admitted: 400 (a ping needs a session), not 401
        const statuses = await Promise.all(batch);
        assert.ok(statuses.slice(0, -1).every((s) => s === 401), `random tokens: ${statuses}`);
        assert.equal(statuses.at(-1), 400, 'the valid token is admitted');
        valid++;
      }
      return valid;
    };
    try {
      // Warm-up: the caches, the allocator and SQLite's page cache (every
      // refusal is a row of the request log) reach their size.
      await flood(20000);
      // Then three rounds, and the least any of them grew must be under
      // 2 MB: a leak of 100 bytes a token grows every round, while an
      // allocator or a page cache settling (an ASan build on a busy
      // machine: a jump of 2 MB now and then, on either store) grows one.
      const grew = [];
      for (let round = 0; round < 3; round++) {
        const before = procSample(m.pid);
        const admitted = await flood(20000);
        const after = procSample(m.pid);
        assert.ok(admitted > 300);
        grew.push(after.rssKb - before.rssKb);
      }
      t.diagnostic(`RSS grew by ${grew.join(', ')} KB in three rounds of 20,000`);
      assert.ok(Math.min(...grew) < 2048, `RSS grew by ${grew.join(', ')} KB in each of three rounds of 20,000 random tokens`);
    } finally {
      agent.destroy();
    }
  });
});
