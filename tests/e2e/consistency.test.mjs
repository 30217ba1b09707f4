// Transport consistency (issue 3, seed 003's unified test suite): every
// transcript in tests/transcripts/ is replayed over every transport - HTTP
// with JSON replies, HTTP with SSE, HTTP long-polling, HTTP pull-only
// (every request long-polled), WebSocket, stdio NDJSON, stdio
// Content-Length - and
//   1. each transport's received messages must match the transcript, and
//   2. the normalized received sequences must be identical on all of them.
// A transport this mcpd does not have yet (no /mcp/ws, no --stdio) is
// reported as skipped. Format and drivers: tests/transcripts/README.md and
// lib/transports.mjs. Adding a scenario = adding a transcript file.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  DRIVERS,
  SkipError,
  loadTranscripts,
  makeDriver,
  matchMessage,
  parseTranscript,
  replay,
  stripEventId,
  substitute,
} from './lib/transports.mjs';

const only = process.env.MCPD_TRANSPORTS ? process.env.MCPD_TRANSPORTS.split(',') : Object.keys(DRIVERS);

for (const tr of loadTranscripts()) {
  test(`transcript ${tr.file}`, async (t) => {
    const results = new Map(); // driver name → normalized sequence
    for (const name of only) {
      await t.test(name, async (st) => {
        if (tr.skip.has(name)) {
          st.skip(`the transcript skips ${name}`);
          return;
        }
        const d = makeDriver(name);
        try {
          await d.open();
        } catch (e) {
          if (e instanceof SkipError) {
            st.skip(e.message);
            return;
          }
          await d.close().catch(() => {});
          throw e;
        }
        let out;
        try {
          out = await replay(d, tr);
        } catch (e) {
          await d.close().catch(() => {}); // the replay error is the one to report
          throw e;
        }
        await d.close(); // mcpd must exit cleanly (and without sanitizer reports)
        // event ids (WebSocket) are "<stream>:<seq>" with seq increasing per stream
        const last = new Map();
        for (const id of out.eventIds) {
          const i = id.lastIndexOf(':');
          const s = id.slice(0, i);
          const seq = Number(id.slice(i + 1));
          assert.ok(!last.has(s) || seq > last.get(s), `event ids not increasing on stream ${s}: ${out.eventIds.join(' ')}`);
          last.set(s, seq);
        }
        results.set(name, out.normalized);
      });
    }

    await t.test('identical on every transport', (st) => {
      const names = [...results.keys()];
      if (names.length < 2) {
        st.skip(`only ${names.length} transport(s) completed the transcript`);
        return;
      }
      const [ref, ...rest] = names;
      const refSeq = results.get(ref);
      for (const name of rest) {
        const seq = results.get(name);
        for (let i = 0; i < Math.max(seq.length, refSeq.length); i++) {
          assert.deepEqual(
            seq[i],
            refSeq[i],
            `${tr.file}: message ${i + 1} differs between ${name} and ${ref}:\n  ${name}: ${JSON.stringify(seq[i])}\n  ${ref}: ${JSON.stringify(refSeq[i])}`,
          );
        }
      }
      const missing = only.filter((n) => !results.has(n));
      if (missing.length) st.diagnostic(`compared ${names.join(', ')}; not compared (failed or skipped): ${missing.join(', ')}`);
    });
  });
}

// The matcher itself: a transcript suite that matches anything proves nothing.
test('transcript matcher: variables, wildcards, subset and exact matches', () => {
  const ok = (exp, act, vars = new Map(), subset = false) => matchMessage(exp, act, vars, { subset });
  assert.ok(ok({ a: 1 }, { a: 1 }).ok);
  assert.ok(!ok({ a: 1 }, { a: 1, b: 2 }).ok, 'exact: extra key');
  assert.ok(ok({ a: 1 }, { a: 1, b: 2 }, new Map(), true).ok, 'subset: extra key');
  assert.ok(!ok({ a: 1 }, { a: '1' }).ok, 'types differ');
  assert.ok(!ok({ a: [1, 2] }, { a: [1, 2, 3] }).ok, 'exact: array length');
  assert.ok(ok({ a: [1, 3] }, { a: [1, 2, 3] }, new Map(), true).ok, 'subset: subsequence');
  assert.ok(!ok({ a: [3, 1] }, { a: [1, 2, 3] }, new Map(), true).ok, 'subset: order kept');
  assert.ok(!ok({ a: 1, b: 2 }, { a: 1 }, new Map(), true).ok, 'subset: missing key');
  const vars = new Map();
  const r = ok({ id: '$E', x: '*string' }, { id: 'srv-1', x: 'y' }, vars);
  assert.ok(r.ok);
  assert.deepEqual(r.normalized, { id: '$E', x: '*string' });
  assert.equal(vars.get('E'), 'srv-1');
  assert.ok(!ok({ id: '$E' }, { id: 'srv-2' }, vars).ok, 'a bound variable must match');
  assert.ok(ok({ id: '$E' }, { id: 'srv-1' }, vars).ok);
  assert.ok(!ok({ x: '*number' }, { x: '1' }).ok);
  assert.ok(!ok({ x: '*' }, {}).ok, '* needs the key');
  assert.ok(ok({ x: '\\$E' }, { x: '$E' }).ok, 'escaped literal');
  const failed = new Map([['A', 1]]);
  assert.ok(!ok({ a: '$A', b: '$B', c: 1 }, { a: 1, b: 2, c: 0 }, failed).ok);
  assert.ok(!failed.has('B'), 'a failed match binds nothing');
  assert.deepEqual(substitute({ id: '$E', n: ['$E'] }, vars), { id: 'srv-1', n: ['srv-1'] });
  assert.throws(() => substitute({ id: '$NOPE' }, vars), /not set/);
  const st = stripEventId({ jsonrpc: '2.0', method: 'm', params: { a: 1, _meta: { 'mcpd/event-id': 'abc:3' } } });
  assert.deepEqual(st.msg, { jsonrpc: '2.0', method: 'm', params: { a: 1 } });
  assert.equal(st.eventId, 'abc:3');
  const si = stripEventId({ id: 1, result: { v: 1, _meta: { 'mcpd/session-id': '0123456789abcdef0123456789abcdef', x: 1 } } });
  assert.deepEqual(si.msg, { id: 1, result: { v: 1, _meta: { x: 1 } } }, 'other _meta keys stay');
  assert.throws(() => stripEventId({ result: { _meta: { 'mcpd/session-id': 'short' } } }), /malformed/);
  assert.throws(() => stripEventId({ result: { _meta: { 'mcpd/event-id': 'nocolon' } } }), /malformed/);
  const tr = parseTranscript('# c\n> {"a":\n  1}\n<~ {"b":2}\n% timeout 100\n% skip ws stdio-ndjson\n', 't.txt');
  assert.deepEqual(
    tr.steps.map((x) => [x.kind, x.subset, x.json, x.line]),
    [
      ['send', false, { a: 1 }, 2],
      ['expect', true, { b: 2 }, 4],
    ],
  );
  assert.equal(tr.timeout, 100);
  assert.deepEqual([...tr.skip], ['ws', 'stdio-ndjson']);
  const un = parseTranscript('> {"s":1}\n% unordered\n< {"a":1}\n< {"b":2}\n> {"s":2}\n< {"c":3}\n', 'u.txt');
  assert.deepEqual(
    un.steps.map((x) => [x.kind, x.group]),
    [
      ['send', undefined],
      ['expect', 1],
      ['expect', 1],
      ['send', undefined],
      ['expect', undefined],
    ],
    '% unordered covers the expected lines up to the next sent one',
  );
  assert.throws(() => parseTranscript('> {bad json}\n', 'b.txt'), /b\.txt:1: bad JSON/);
  assert.throws(() => parseTranscript('what\n', 'c.txt'), /c\.txt:1: cannot parse/);
});

// An unordered block takes its messages in any order, and normalizes them
// in the transcript's order (so transports that order them differently
// still compare equal); a message outside the block fails it.
test('transcript replay: % unordered', async () => {
  const tr = parseTranscript('> {"go":1}\n% unordered\n< {"a":"$A"}\n< {"b":2}\n', 'u.txt');
  const fake = (msgs) => ({
    name: 'fake',
    vars: {},
    send: async () => {},
    next: async () => {
      if (!msgs.length) throw new Error('nothing left');
      return msgs.shift();
    },
    tryNext: async () => msgs.shift() ?? null,
  });
  const one = await replay(fake([{ b: 2 }, { a: 'x' }]), tr, { quietMs: 0 });
  const two = await replay(fake([{ a: 'y' }, { b: 2 }]), tr, { quietMs: 0 });
  assert.deepEqual(one.normalized, [{ a: '$A' }, { b: 2 }]);
  assert.deepEqual(two.normalized, one.normalized);
  await assert.rejects(replay(fake([{ b: 2 }, { c: 3 }]), tr, { quietMs: 0 }), /matches no line of the unordered block/);
});
