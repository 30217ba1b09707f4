// A hostile upstream behind the gateway (issue 7): what one child does must
// stay within its share and never crash mcpd. The child is
// fixtures/hostile-upstream.py (raw NDJSON, so that it can misbehave).
//
// (1) A flood of 2,000 roots/list requests from the child while the client
//     holds its answers: mcpd's thread count (/proc/PID/status) stays
//     bounded, the requests past --upstream-max-pending get a JSON-RPC error
//     at once (counted in /metrics), and another session is served meanwhile.
// (2) DELETE racing sends in flight: the child stops reading its stdin, so
//     mcpd's writes to it pile up on a full pipe, the session is deleted
//     (which stops the child) and the child exits under them. Repeated a few
//     times; under the ASan build any use after free aborts mcpd.
// (3) A child writing 50,000 stderr lines, 20,000 lines that are not
//     JSON-RPC and one 10 MB line: the logs table grows by what
//     --upstream-log-rate lets through (the rest is counted, and the count
//     logged), the call is still answered and others are served.
//
// Every process this file signals is one it started.

import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { integrityCheck } from './lib/integrity.mjs';
import {
  ON_POSTGRES,
  queryStore,
  callTool,
  echo,
  initSession,
  mcpHeaders,
  procChildren,
  procThreads,
  request,
  sleep,
  waitFor,
  withMcpd,
  withTimeout,
  refusals,
} from './lib/mcpd.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const HOSTILE_CMD = `python3 ${path.join(here, 'fixtures', 'hostile-upstream.py')}`;

/** Run fn(m) on a gateway fronting the hostile child; then SIGTERM: exit 0 (no ASan report), no child left. */
const withHostile = (args, fn) => withMcpd(['--upstream', HOSTILE_CMD, ...args], { stopMs: 15000 }, fn);

test('a child flooding 2,000 roots/list requests: threads stay bounded, the excess is refused, others are served', async () => {
  const COUNT = 2000;
  const MAX_PENDING = 16; // the default of --upstream-max-pending
  await withHostile([], async (m) => {
    const client = new Client({ name: 'abuse-upstream', version: '1.0.0' }, { capabilities: { roots: {} } });
    let asked = 0;
    let release;
    const released = new Promise((r) => (release = r));
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      await released; // every relayed request stays in flight until the checks are done
      return { roots: [] };
    });
    const transport = new StreamableHTTPClientTransport(new URL(m.url));
    await client.connect(transport);
    try {
      const baseline = procThreads(m.pid);
      let maxThreads = baseline;
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const t = procThreads(m.pid);
          if (t > maxThreads) maxThreads = t;
          await sleep(20);
        }
      })();

      const flood = client.callTool({ name: 'flood_roots', arguments: { count: COUNT } }, undefined, {
        timeout: 120000,
      });
      flood.catch(() => {});
      // Every request of the flood has been either relayed or refused.
      await waitFor(
        async () => asked + (await refusals(m.port, 'upstream_requests')) >= COUNT,
        90000,
        'every request of the flood to be relayed or refused',
        200,
      );
      await sleep(500); // anything a thread per request would start has started by now

      // Another session is served while the flood's requests are held.
      const other = await initSession(m.port);
      assert.equal(await echo(m.port, other.session, 'other-session'), 'other-session');

      sampling = false;
      await sampler;
      assert.ok(
        maxThreads <= baseline + MAX_PENDING + 48,
        `threads grew from ${baseline} to ${maxThreads} for ${COUNT} requests from one child`,
      );
      assert.ok(asked <= MAX_PENDING, `${asked} requests reached the client (limit ${MAX_PENDING})`);
      assert.ok(asked >= 1, 'some requests still reach the client');

      release();
      const r = await flood;
      const tally = JSON.parse(r.content[0].text);
      assert.equal(tally.ok, asked, 'every request the client answered got its answer back to the child');
      assert.equal(tally.errors, COUNT - asked, 'every other request got an error reply');
      for (const code of Object.keys(tally.codes)) {
        assert.equal(Number(code), -32012, `refused with -32012 (--upstream-max-pending): ${code}`);
      }
      assert.equal(Object.keys(tally.codes).length, 1, `one refusal code: ${JSON.stringify(tally.codes)}`);
      assert.equal(tally.messages.length, 1, `one refusal message: ${JSON.stringify(tally.messages)}`);
      assert.match(tally.messages[0], /--upstream-max-pending/);
      assert.equal(await refusals(m.port, 'upstream_requests'), COUNT - asked);

      // The slots are free again: a second, small flood is served in full.
      const again = await client.callTool({ name: 'flood_roots', arguments: { count: 8 } }, undefined, {
        timeout: 30000,
      });
      assert.deepEqual(JSON.parse(again.content[0].text).ok, 8);
      await transport.terminateSession();
    } finally {
      release?.();
      await client.close();
    }
  });
});

test('DELETE racing sends to a child that stopped reading: no use after free, the server goes on', async () => {
  const ITERATIONS = 4;
  const SENDERS = 24;
  const big = 'x'.repeat(80 * 1024); // more than a pipe holds: each send blocks
  await withHostile([], async (m) => {
    for (let i = 0; i < ITERATIONS; i++) {
      const { session } = await initSession(m.port);
      const stall = await callTool(m.port, session, 'stall', { ms: 1500 });
      assert.equal(stall.response?.result?.content?.[0]?.text, 'stalling');
      const sends = Array.from({ length: SENDERS }, () =>
        callTool(m.port, session, 'echo', { message: big }, { ms: 30000 }).catch((e) => e),
      );
      await sleep(500); // the sends are blocked on the full pipe
      const del = await request(m.port, { method: 'DELETE', headers: mcpHeaders({ session }), timeout: 30000 });
      assert.ok([200, 202, 204, 404].includes(del.status), `DELETE: HTTP ${del.status} ${del.text}`);
      await withTimeout(Promise.allSettled(sends), 40000, 'the sends to end');
      assert.equal(m.exit, null, `mcpd died in iteration ${i}`);
      assert.doesNotMatch(m.stderr, /AddressSanitizer|runtime error/);
    }
    const { session } = await initSession(m.port);
    assert.equal(await echo(m.port, session, 'after-races'), 'after-races');
  });
});

test('a child flooding stderr and stdout with garbage: logging is rate-limited and counted', async () => {
  await withHostile(['--upstream-log-rate', '20'], async (m) => {
    const { session } = await initSession(m.port);
    const flood = await callTool(m.port, session, 'stderr_flood', { lines: 50000, length: 100 }, { ms: 60000 });
    assert.match(JSON.stringify(flood), /flooded/);
    const junk = await callTool(m.port, session, 'garbage', { lines: 20000, big: 10 * 1024 * 1024 }, { ms: 60000 });
    assert.match(JSON.stringify(junk), /garbage sent/);
    // What was not logged was counted.
    await waitFor(async () => (await refusals(m.port, 'upstream_log_rate')) >= 60000, 30000, 'the drops to be counted', 200);
    const other = await initSession(m.port);
    assert.equal(await echo(m.port, other.session, 'still-served'), 'still-served');
    await sleep(1200); // the log writer commits asynchronously
    // A log row's event column is "<event> <message>" (counted here: SQL
    // that splits a string differs between SQLite and PostgreSQL).
    const by = {};
    for (const { event } of queryStore(m.db, "SELECT event FROM logs WHERE event LIKE 'upstream_%'")) {
      const ev = String(event).split(' ')[0];
      by[ev] = (by[ev] || 0) + 1;
    }
    assert.ok(by.upstream_log_dropped >= 1, `the drops are reported: ${JSON.stringify(by)}`);
    const logged = (by.upstream_stderr || 0) + (by.upstream_bad_message || 0);
    assert.ok(logged >= 20, `some lines are still logged: ${JSON.stringify(by)}`);
    assert.ok(logged < 2000, `70,000 lines made ${logged} log rows: ${JSON.stringify(by)}`);
    if (!ON_POSTGRES) assert.equal(integrityCheck(m.db), 'ok'); // SQLite's own check
  });
});

test('8 concurrent initializes under --upstream-max 2: never more than 2 children, the rest refused clearly', async () => {
  await withHostile(['--upstream-max', '2'], async (m) => {
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, procChildren(m.pid).length);
        await sleep(5);
      }
    })();
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => initSession(m.port)));
    sampling = false;
    await sampler;
    const ok = results.filter((r) => r.status === 'fulfilled');
    assert.equal(ok.length, 2, `sessions that got a child: ${ok.length}`);
    for (const r of results.filter((x) => x.status === 'rejected')) assert.match(String(r.reason), /--upstream-max/);
    assert.ok(most <= 2, `${most} children ran at once under --upstream-max 2`);
    assert.equal(await refusals(m.port, 'upstream_max'), 6);
  });
});

test('--upstream-idle-ms: an idle child gives its slot to a new session and is started again when its session returns', async () => {
  await withHostile(['--upstream-max', '1', '--upstream-idle-ms', '400'], async (m) => {
    const a = await initSession(m.port);
    assert.equal(await echo(m.port, a.session, 'a-1'), 'a-1');
    await sleep(800);
    const b = await initSession(m.port); // a's child is idle: reclaimed
    assert.equal(await echo(m.port, b.session, 'b-1'), 'b-1');
    await sleep(800);
    assert.equal(await echo(m.port, a.session, 'a-2'), 'a-2'); // a restarted, b reclaimed
    assert.ok(procChildren(m.pid).length <= 1);
    await waitFor(
      () => Number(queryStore(m.db, "SELECT COUNT(*) AS n FROM logs WHERE event LIKE 'upstream_reclaimed%'")[0].n) >= 2,
      5000,
      'two reclaims in the log',
    );
  });
});
