// Abuse tests for the push transports (WebSocket, stdio) and the upstream
// gateway (issue 7). Each case is a defect that was reproduced against
// bf795bd, written so that it fails there and passes now:
//
//   - a flood of pings on one WebSocket and on stdio: threads, mappings and
//     RSS stay flat (defect 2: finished forwarder threads were never
//     reaped). The e2e run sends PUSH_FLOOD_N pings (30,000 by default) per
//     transport to stay quick under ASan; tests/bench/ping_flood.mjs sends
//     the full 100,000 on each and prints the figures.
//
// After every case another client is still served and the store passes
// PRAGMA integrity_check.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';

import { integrityCheck } from './lib/integrity.mjs';
import { ON_POSTGRES, echo, initSession, request, startMcpd, tempDb } from './lib/mcpd.mjs';
import { StdioClient, WsClient, pingFlood, procSample, smallQuarantineEnv } from './lib/push-clients.mjs';

// ASan keeps freed memory in a quarantine (256 MB by default); a small one
// makes RSS measure mcpd rather than the sanitizer. No effect on a Release build.
process.env.ASAN_OPTIONS = smallQuarantineEnv().ASAN_OPTIONS;

const FLOOD_N = Number(process.env.PUSH_FLOOD_N || 30000);

/** Another client on HTTP still gets served, and the store is sound. */
async function stillServes(m) {
  const h = await request(m.port, { method: 'GET', path: '/healthz', timeout: 10000 });
  assert.equal(h.status, 200, 'healthz');
  const { session } = await initSession(m.port);
  assert.equal(await echo(m.port, session, 'other-client'), 'other-client');
  if (!ON_POSTGRES) assert.equal(integrityCheck(m.db), 'ok'); // SQLite's own check
}

/**
 * Floods `client` (already initialized) with FLOOD_N pings after a warm-up,
 * and checks what the flood left behind in process pid: no more threads,
 * no thread stacks (each was a mapping), a bounded RSS.
 */
async function floodIsFlat(client, pid) {
  await pingFlood(client, 2000, { prefix: 'warm' });
  const before = procSample(pid);
  const samples = [];
  await pingFlood(client, FLOOD_N, {
    every: Math.ceil(FLOOD_N / 4),
    onProgress: () => samples.push(procSample(pid)),
  });
  const after = procSample(pid);
  const report = JSON.stringify({ before, samples, after });
  for (const s of [...samples, after]) {
    assert.ok(s.threads <= before.threads + 4, `threads grew: ${report}`);
    // base: two mappings (stack and guard) per request ever served
    assert.ok(s.maps - before.maps < 400, `mappings grew: ${report}`);
  }
  // base: ~35 KB per request under ASan (a stack and a stream each)
  assert.ok(after.rssKb - before.rssKb < 64 * 1024, `RSS grew by ${after.rssKb - before.rssKb} KB: ${report}`);
  assert.ok(after.fds <= before.fds, `descriptors leaked: ${report}`);
}

test('defect 2: a flood of pings on one WebSocket keeps threads and memory flat', async () => {
  const m = await startMcpd();
  try {
    const c = await WsClient.open(m.port);
    await c.init();
    await floodIsFlat(c, m.pid);
    // the connection still works for real requests
    const r = await c.request({
      jsonrpc: '2.0',
      id: 'echo',
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'after-flood' } },
    });
    assert.equal(r.result?.content?.[0]?.text, 'after-flood');
    await c.close();
    await stillServes(m);
  } finally {
    await m.cleanup();
  }
});

test('defect 2: a flood of pings on stdio keeps threads and memory flat', async () => {
  const { dir, db } = tempDb();
  const c = new StdioClient({ args: ['--db', db] });
  try {
    await c.init();
    await floodIsFlat(c, c.pid);
    const exit = await c.close();
    assert.equal(exit.code, 0, c.stderr);
    assert.equal(integrityCheck(db), 'ok');
  } finally {
    c.proc.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
