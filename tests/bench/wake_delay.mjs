// wake_delay.mjs — the delay from a commit on one mcpd replica to its
// delivery on another (issue 30), measured from the client's side as
// tests/e2e/replicas.test.mjs's wake test does.
//
// The reader: a legacy /sse stream on READER_PORT. The writer: POST
// /messages of `ping` on WRITER_PORT (the same session: legacy sessions are
// found in the store by any replica); each reply is a chunk of the /sse
// stream, committed by the writer's replica and delivered by the reader's
// after PostgreSQL's NOTIFY woke it. One sample is the time from the POST's
// 202 to the reply's event on the /sse stream: the writer answers 202 once
// the reply is committed (legacy_sse.c: core_relay appends it to the
// standalone stream, which waits for the commit), so this is commit ->
// delivery less the 202's own way back over loopback. Samples run one
// after another (one ping in flight), so each wake is one NOTIFY. With
// READER_PORT == WRITER_PORT it measures the same path within one process,
// the baseline.
//
// Prints one line:
//   WAKE samples=N p50_ms=X p90_ms=X p99_ms=X max_ms=X failed=F [first_failure=...]
// Usage: node wake_delay.mjs READER_PORT WRITER_PORT SAMPLES
import { LATEST, newId, openStream, request } from '../e2e/lib/mcpd.mjs';

const [readerPort, writerPort, samples] = process.argv.slice(2).map(Number);
if (!readerPort || !writerPort || !samples) {
  console.error('usage: node wake_delay.mjs READER_PORT WRITER_PORT SAMPLES');
  process.exit(2);
}

/** The q-quantile (0..1) of sorted numbers, nearest rank. */
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];

async function main() {
  const s = await openStream(readerPort, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
  if (s.status !== 200) throw new Error(`GET /sse: HTTP ${s.status}`);
  const failures = [];
  const delays = [];
  try {
    const ev = await s.sse.next(5000);
    const session = /sessionId=([0-9a-f]+)/.exec(ev?.data ?? '')?.[1];
    if (!session) throw new Error(`no endpoint event: ${JSON.stringify(ev)}`);
    const post = (body) =>
      request(writerPort, { path: `/messages?sessionId=${session}`, headers: { 'Content-Type': 'application/json' }, body });
    const iid = newId();
    const init = await post({
      jsonrpc: '2.0',
      id: iid,
      method: 'initialize',
      params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'mcpd-bench-wake', version: '0' } },
    });
    if (init.status !== 202) throw new Error(`initialize: HTTP ${init.status} ${init.text}`);
    if ((await s.sse.nextMessage(5000))?.msg.id !== iid) throw new Error('no initialize result on the /sse stream');
    const n = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    if (n.status !== 202) throw new Error(`notifications/initialized: HTTP ${n.status}`);
    for (let k = 0; k < samples; k++) {
      const id = newId();
      const r = await post({ jsonrpc: '2.0', id, method: 'ping' });
      const sent = process.hrtime.bigint();
      if (r.status !== 202) {
        failures.push(`ping: HTTP ${r.status} ${r.text}`);
        continue;
      }
      const m = await s.sse.nextMessage(5000).catch((e) => ({ error: e.message }));
      if (m?.msg?.id !== id) {
        failures.push(`event: ${JSON.stringify(m?.msg ?? m)}`);
        if (!m?.msg) break; // the stream is gone or silent: later samples would only wait
        continue;
      }
      delays.push(Number(process.hrtime.bigint() - sent) / 1e6);
    }
  } finally {
    s.close();
  }
  delays.sort((a, b) => a - b);
  const f = (v) => (v === undefined ? 'nan' : v.toFixed(2));
  let line = `WAKE samples=${delays.length} p50_ms=${f(quantile(delays, 0.5))} p90_ms=${f(quantile(delays, 0.9))}`;
  line += ` p99_ms=${f(quantile(delays, 0.99))} max_ms=${f(delays.at(-1))} failed=${failures.length}`;
  if (failures.length) line += ` first_failure=${failures[0].replace(/\s+/g, ' ').slice(0, 160)}`;
  console.log(line);
}

main().catch((e) => {
  console.error(`wake_delay: ${e.message}`);
  process.exit(1);
});
