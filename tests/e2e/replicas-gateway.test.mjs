// A gateway session across replicas (issue 30, "Process-bound state has an
// owner"): with --upstream in per-session mode, a session's stdio child lives
// in one replica, its owner. Requests and notifications that reach another
// replica are handed to the owner through the store, and their replies
// followed there as a stream; when the owner dies, another replica takes the
// session over after the lease and revives the child by replaying the
// client's initialize; a call that was running on the dead owner ends with an
// error on its stream, never a hang.
//
// Three replicas on one PostgreSQL database (lib/cluster.mjs) in front of
// tests/e2e/fixtures/fault-server.mjs (the official SDK's stdio server with a
// `pid` tool: which child answered). Skipped without postgresql-15.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { startCluster } from './lib/cluster.mjs';
import { PG_SKIP } from './lib/pg.mjs';
import { NODE22, callTool, initSession, newId, openStream, mcpHeaders, sleep } from './lib/mcpd.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const FAULT = path.join(here, 'fixtures', 'fault-server.mjs');
const SKIP = PG_SKIP;
const LEASE_MS = 1500;

async function withGateway(fn) {
  const cluster = await startCluster({
    args: ['--upstream', `${NODE22} ${FAULT}`, '--replica-lease-ms', String(LEASE_MS)],
  });
  try {
    await fn(cluster);
  } catch (e) {
    e.message += `\n${cluster.stderr(4000)}`;
    throw e;
  } finally {
    await cluster.stop();
  }
}

const text = (r) => r.response?.result?.content?.[0]?.text;

/** The replica whose process is the parent of the child `pid`. */
function ownerOf(cluster, pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return cluster.replicas.findIndex((r) => r.pid === ppid);
}

test('one child serves a session whichever replica each request reaches', { skip: SKIP, timeout: 120000 }, async () => {
  await withGateway(async (cluster) => {
    const { session, version } = await initSession(cluster.port);
    const pids = new Set();
    for (let i = 0; i < 6; i++) {
      const r = await callTool(cluster.port, session, 'pid', {}, { version });
      assert.equal(r.status, 200, JSON.stringify(r.messages));
      pids.add(text(r));
    }
    assert.equal(pids.size, 1, `children: ${[...pids]}`);
    const served = new Set(cluster.log.filter((e) => e.method === 'POST').map((e) => e.replica));
    assert.ok(served.size >= 2, `the balancer spread the calls: ${[...served]}`);
    const owner = ownerOf(cluster, Number([...pids][0]));
    assert.ok(owner >= 0, 'the child is a replica\'s');
  });
});

test('sampling asked by the owner\'s child is answered through any replica', { skip: SKIP, timeout: 120000 }, async () => {
  await withGateway(async (cluster) => {
    const client = new Client({ name: 'replica-gw', version: '1.0.0' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
      model: 'test',
      role: 'assistant',
      content: { type: 'text', text: `answer to ${req.params.messages[0].content.text}` },
    }));
    await client.connect(new StreamableHTTPClientTransport(new URL(cluster.url)));
    try {
      for (let i = 0; i < 4; i++) {
        const r = await client.callTool({ name: 'sample', arguments: { prompt: `q${i}` } });
        assert.equal(r.content[0].text, `answer to q${i}`);
      }
    } finally {
      await client.close();
    }
  });
});

test('the owner dies: a running call ends with an error, and another replica takes the session over', { skip: SKIP, timeout: 120000 }, async () => {
  await withGateway(async (cluster) => {
    const { session, version } = await initSession(cluster.port);
    const first = await callTool(cluster.port, session, 'pid', {}, { version });
    const child = Number(text(first));
    const owner = ownerOf(cluster, child);
    const other = (owner + 1) % cluster.replicas.length;

    // A slow call sent to a replica that is not the owner: handed over.
    const id = newId();
    const slow = await openStream(cluster.replicas[other].port, {
      method: 'POST',
      headers: mcpHeaders({ session, version }),
      body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'slow', arguments: { ms: 60000 } } },
      timeout: 30000,
    });
    assert.equal(slow.status, 200);
    await sleep(500);
    await cluster.kill(owner);
    const t0 = Date.now();
    const msgs = await slow.sse.rest(30000);
    const reply = msgs.map((m) => m.msg).find((m) => m.id === id);
    assert.ok(reply && reply.error, `an error ends the call: ${JSON.stringify(msgs)}`);
    assert.match(reply.error.message, /stopped|interrupted/i);
    assert.ok(Date.now() - t0 < 20000, 'within the lease and a sweep, not a hang');

    // The session goes on, on a new child initialized as the first was.
    let again;
    const deadline = Date.now() + 20000;
    for (;;) {
      again = await callTool(cluster.port, session, 'whoami', {}, { version });
      if (again.response?.result || Date.now() > deadline) break;
      await sleep(300);
    }
    const who = JSON.parse(text(again));
    assert.notEqual(who.pid, child, 'a new child');
    assert.equal(who.clientInfo.name, 'mcpd-e2e', 'initialize replayed with the client\'s params');
    const newOwner = ownerOf(cluster, who.pid);
    assert.ok(newOwner >= 0 && newOwner !== owner);
  });
});
