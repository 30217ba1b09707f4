// PostgreSQL away and back under load (issue 30, "Faults"): while the
// database is stopped or killed, every request gets 503 with Retry-After at
// once (no hang), /readyz says not ready, nothing crashes; once it is back,
// every replica serves again within 2 s by itself, and what was committed
// before is all there. Frozen (SIGSTOP, the last test), it refuses nothing:
// see there.
//
// Three replicas on this process's PostgreSQL server (lib/pg.mjs, whose
// stopServer/startServer keep the data folder and the port), driven directly
// (one client loop per replica) so that each replica's answers are seen.
// Skipped without postgresql-15.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { startCluster } from './lib/cluster.mjs';
import { callTool, initSession, request, sleep } from './lib/mcpd.mjs';
import { startServer, stopServer, killServer, freezeServer, thawServer, PG_SKIP } from './lib/pg.mjs';

const SKIP = PG_SKIP;

/** Echo on a replica's port; resolves {status, ms, retryAfter, text}. */
async function probe(port, session, version, message) {
  const t0 = Date.now();
  try {
    const r = await callTool(port, session, 'echo', { message }, { version, ms: 8000 });
    return {
      status: r.status,
      ms: Date.now() - t0,
      retryAfter: r.headers['retry-after'],
      text: r.response?.result?.content?.[0]?.text,
      body: r.text || JSON.stringify(r.messages),
    };
  } catch (e) {
    return { status: 0, ms: Date.now() - t0, error: String(e) };
  }
}

/**
 * One client loop per replica, each probing every 20 ms (at most 2,000
 * times) and keeping {from, to, ...probe} of each answer in seen[i]; stop()
 * ends them.
 */
function underLoad(ports, session, version) {
  let stopped = false;
  const seen = ports.map(() => []);
  const loops = ports.map(async (port, i) => {
    for (let n = 0; !stopped && n < 2000; n++) {
      const from = Date.now();
      const r = await probe(port, session, version, `m${n}`);
      seen[i].push({ from, to: Date.now(), ...r });
      await sleep(20);
    }
  });
  return {
    seen,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Ms from `since` until replica i on port answers an echo again, or null after `ms`. */
async function servesAgain(port, session, version, i, since, ms) {
  while (Date.now() - since < ms) {
    const r = await probe(port, session, version, `after-${i}`);
    if (r.text === `after-${i}`) return Date.now() - since;
    await sleep(50);
  }
  return null;
}

for (const how of ['stopped', 'killed']) {
  test(`PostgreSQL ${how} and started again under load: 503 + Retry-After at once, then every replica serves again`, { skip: SKIP, timeout: 120000 }, async (t) => {
    const cluster = await startCluster();
    try {
      const { session, version } = await initSession(cluster.port);
      const ports = cluster.replicas.map((r) => r.port);
      // Committed before the outage: a message per replica.
      for (const [i, port] of ports.entries()) assert.equal((await probe(port, session, version, `before-${i}`)).text, `before-${i}`);

      const load = underLoad(ports, session, version);
      const seen = load.seen;
      await sleep(300);
      // stopServer, killServer and startServer block this process (spawnSync):
      // a request in flight meanwhile waits for the test, not for mcpd (its
      // answer sits unread in the socket), so the part of [from, to] that
      // falls in those windows is taken out of its time below. After a
      // SIGKILL, startServer alone can block for seconds (crash recovery,
      // pg_ctl retried while the old backends let go of shared memory).
      const blocked = [];
      const blocking = (fn) => {
        const from = Date.now();
        try {
          return fn();
        } finally {
          blocked.push([from, Date.now()]);
        }
      };
      const down = Date.now();
      blocking(how === 'stopped' ? stopServer : killServer);
      await sleep(2500);
      // While it is away: 503 with Retry-After, each at once.
      for (const [i, port] of ports.entries()) {
        const r = await probe(port, session, version, 'while-down');
        assert.equal(r.status, 503, `replica ${i} while down: ${JSON.stringify(r)}`);
        assert.ok(r.retryAfter, 'Retry-After');
        assert.ok(r.ms < 1000, `answered at once (${r.ms} ms)`);
        const ready = await request(port, { method: 'GET', path: '/readyz' });
        assert.equal(ready.status, 503, '/readyz says not ready');
      }
      blocking(startServer);
      const up = Date.now();
      // Every replica serves again within 2 s of the database's return.
      for (const [i, port] of ports.entries()) {
        const ok = await servesAgain(port, session, version, i, up, 10000);
        assert.ok(ok !== null, `replica ${i} never served again`);
        t.diagnostic(`replica ${i} served again ${ok} ms after PostgreSQL was back`);
        assert.ok(ok <= 2500, `replica ${i} back after ${ok} ms`);
      }
      await load.stop();
      // No request hung: every answer during the outage came within the
      // client's limit, and the statuses were 200 or 503 only.
      for (const [i, list] of seen.entries()) {
        const during = list.filter((r) => r.from > down && r.from < up);
        assert.ok(during.length > 0, `replica ${i} was asked during the outage`);
        for (const r of during) assert.ok(r.status === 503 || r.status === 200, `replica ${i}: ${JSON.stringify(r)}`);
        const waited = (r) =>
          r.to - r.from - blocked.reduce((sum, [from, to]) => sum + Math.max(0, Math.min(r.to, to) - Math.max(r.from, from)), 0);
        const slowest = during.reduce((a, b) => (waited(b) > waited(a) ? b : a));
        assert.ok(
          waited(slowest) < 3000,
          `replica ${i}: a request waited ${waited(slowest)} ms (asked ${slowest.from - down} ms after the outage began, ` +
            `answered ${slowest.to - slowest.from} ms later; this process was blocked ` +
            `${JSON.stringify(blocked.map(([from, to]) => [from - down, to - down]))})`,
        );
      }
      // Nothing committed before is lost: the session and its messages.
      for (const [i, port] of ports.entries()) assert.equal((await probe(port, session, version, `end-${i}`)).text, `end-${i}`);
      for (const r of cluster.replicas) assert.equal(r.exit, null, 'no replica died');
    } catch (e) {
      e.message += `\n${cluster.stderr(3000)}`;
      throw e;
    } finally {
      try {
        startServer();
      } catch {
        /* running */
      }
      await cluster.stop();
    }
  });
}

// A database host that stops answering without closing a connection (a
// frozen VM, a stopped process, a partition that drops packets the kernel
// already acknowledged): no connection fails, so only the store's own bound
// on a call (MCPD_DB_TIMEOUT_MS) ends the wait. Every request still gets an
// answer, 200 or 503, within that bound and a reconnect attempt's
// (connect_timeout, 2 s); then 503 with Retry-After at once; once the server
// goes on, every replica serves again by itself, and nothing committed
// before is lost.
test('PostgreSQL frozen (SIGSTOP) under load: every request answered within the query timeout, then 503 at once, then every replica serves again', { skip: SKIP, timeout: 120000 }, async (t) => {
  const timeoutMs = 1500;
  const saved = process.env.MCPD_DB_TIMEOUT_MS;
  process.env.MCPD_DB_TIMEOUT_MS = String(timeoutMs);
  let cluster;
  try {
    cluster = await startCluster();
  } finally {
    if (saved === undefined) delete process.env.MCPD_DB_TIMEOUT_MS;
    else process.env.MCPD_DB_TIMEOUT_MS = saved;
  }
  try {
    const { session, version } = await initSession(cluster.port);
    const ports = cluster.replicas.map((r) => r.port);
    for (const [i, port] of ports.entries()) assert.equal((await probe(port, session, version, `before-${i}`)).text, `before-${i}`);

    const load = underLoad(ports, session, version);
    const seen = load.seen;
    await sleep(300);
    const down = Date.now();
    freezeServer();
    let up;
    try {
      await sleep(timeoutMs + 2500);
      // Every replica has given up on the server by now: 503 at once.
      for (const [i, port] of ports.entries()) {
        const r = await probe(port, session, version, 'while-frozen');
        assert.equal(r.status, 503, `replica ${i} while frozen: ${JSON.stringify(r)}`);
        assert.ok(r.retryAfter, 'Retry-After');
        assert.ok(r.ms < 1000, `answered at once (${r.ms} ms)`);
      }
    } finally {
      thawServer();
      up = Date.now();
    }
    for (const [i, port] of ports.entries()) {
      const ok = await servesAgain(port, session, version, i, up, 15000);
      assert.ok(ok !== null, `replica ${i} never served again`);
      t.diagnostic(`replica ${i} served again ${ok} ms after PostgreSQL went on`);
    }
    await load.stop();
    const bound = timeoutMs + 2000 + 1500; // the call's bound, a reconnect attempt's, slack
    for (const [i, list] of seen.entries()) {
      const during = list.filter((r) => r.from > down && r.from < up);
      assert.ok(during.length > 0, `replica ${i} was asked while the server was frozen`);
      for (const r of during) assert.ok(r.status === 503 || r.status === 200, `replica ${i}: ${JSON.stringify(r)}`);
      const slowest = during.reduce((a, b) => (b.to - b.from > a.to - a.from ? b : a));
      t.diagnostic(`replica ${i}: the slowest answer while frozen took ${slowest.to - slowest.from} ms (${slowest.status})`);
      assert.ok(slowest.to - slowest.from < bound, `replica ${i}: a request waited ${slowest.to - slowest.from} ms`);
    }
    for (const [i, port] of ports.entries()) assert.equal((await probe(port, session, version, `end-${i}`)).text, `end-${i}`);
    for (const r of cluster.replicas) assert.equal(r.exit, null, 'no replica died');
  } catch (e) {
    e.message += `\n${cluster.stderr(3000)}`;
    throw e;
  } finally {
    thawServer();
    await cluster.stop();
  }
});
