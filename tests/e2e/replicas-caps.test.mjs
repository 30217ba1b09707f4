// The per-session in-flight cap across replicas (issue 30: "the in-flight
// cap count[s] across all replicas"): calls running on one replica count on
// every other. Three replicas on one PostgreSQL database (lib/cluster.mjs),
// asked directly so that which replica runs what is known. Skipped without
// postgresql-15.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { startCluster } from './lib/cluster.mjs';
import { PG_SKIP } from './lib/pg.mjs';
import { callTool, initSession, mcpHeaders, newId, openStream } from './lib/mcpd.mjs';

const SKIP = PG_SKIP;

test('--max-inflight-per-session counts the calls running on every replica', { skip: SKIP, timeout: 60000 }, async () => {
  const cluster = await startCluster({ args: ['--max-inflight-per-session', '2'] });
  const open = [];
  try {
    const { session, version } = await initSession(cluster.port);
    const [a, b] = cluster.replicas;
    // Two long countdowns on replica A: each writes its first progress at once.
    for (let i = 0; i < 2; i++) {
      const s = await openStream(a.port, {
        method: 'POST',
        headers: mcpHeaders({ session, version }),
        body: {
          jsonrpc: '2.0',
          id: newId(),
          method: 'tools/call',
          params: { name: 'countdown', arguments: { n: 100, interval_ms: 200 }, _meta: { progressToken: `p${i}` } },
        },
        timeout: 30000,
      });
      assert.equal(s.status, 200);
      await s.sse.nextMessage(5000); // its first progress: stored, so other replicas see it
      open.push(s);
    }
    // A third call on replica B (one that runs on a worker, as the cap
    // counts them) is over the cap of the session.
    const third = await callTool(b.port, session, 'countdown', { n: 1, interval_ms: 0 }, { version });
    assert.equal(third.status, 429, JSON.stringify(third.messages || third.text));
  } catch (e) {
    e.message += `\n${cluster.stderr(3000)}`;
    throw e;
  } finally {
    for (const s of open) s.close();
    await cluster.stop();
  }
});
