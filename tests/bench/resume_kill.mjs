// resume_kill.mjs — how long a client waits after its mcpd replica dies
// (issue 30): one sample, printed as one line.
//
// Opens a session on replica A (A_PORT), POSTs a long countdown with a
// progress token there (its SSE reply is the call's stream), reads three
// progress events, then SIGKILLs A (A_PID: a process the caller started)
// and at once resumes with GET + Last-Event-ID on replica B (B_PORT). The
// countdown ran on A, so nothing new is written to its stream until
// another replica finds A's lease lapsed (--replica-lease-ms) and ends the
// call with an error on the stream; events A committed but the client had
// not read yet come first. Times are from the kill:
//   open_ms   B answered the resuming GET (its headers)
//   first_ms  the first event after the cursor
//   end_ms    the call's terminal message (its error, or its result)
// and the check that no progress event came twice or was skipped.
//
// Prints: KILL open_ms=X first_ms=X end_ms=X end=error|result progress=N ok=1|0 [why=...]
// Usage: node resume_kill.mjs A_PORT A_PID B_PORT
import { getStream, initSession, mcpHeaders, newId, openStream } from '../e2e/lib/mcpd.mjs';

const [aPort, aPid, bPort] = process.argv.slice(2).map(Number);
if (!aPort || !aPid || !bPort) {
  console.error('usage: node resume_kill.mjs A_PORT A_PID B_PORT');
  process.exit(2);
}
const ms = (t0) => (Number(process.hrtime.bigint() - t0) / 1e6).toFixed(1);

async function main() {
  const { session } = await initSession(aPort);
  const id = newId();
  const s = await openStream(aPort, {
    method: 'POST',
    headers: mcpHeaders({ session }),
    body: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'countdown', arguments: { n: 600, interval_ms: 50 }, _meta: { progressToken: 'kill' } } },
  });
  if (s.status !== 200 || !s.sse) throw new Error(`countdown POST: HTTP ${s.status}, not SSE`);
  const progress = [];
  while (progress.length < 3) {
    const m = await s.sse.nextMessage(5000);
    if (m?.msg.method !== 'notifications/progress') throw new Error(`expected progress: ${JSON.stringify(m?.msg)}`);
    progress.push(m.msg.params.progress);
  }
  const last = s.sse.lastEventId;
  const t0 = process.hrtime.bigint();
  process.kill(aPid, 'SIGKILL');
  s.close();
  const g = await getStream(bPort, session, { lastEventId: last, timeout: 20000 });
  const open = ms(t0);
  if (g.status !== 200) throw new Error(`resume GET on B: HTTP ${g.status}`);
  let first = 'nan';
  let end = 'nan';
  let kind = 'none';
  try {
    for (;;) {
      const m = await g.sse.nextMessage(30000);
      if (m === null) break;
      if (first === 'nan') first = ms(t0);
      if (m.msg.method === 'notifications/progress') progress.push(m.msg.params.progress);
      if (m.msg.id === id) {
        end = ms(t0);
        kind = m.msg.error ? 'error' : 'result';
        break;
      }
    }
  } finally {
    g.close();
  }
  const inOrder = progress.every((p, i) => p === i + 1);
  const why = inOrder ? (kind === 'none' ? ' why=no_terminal_message' : '') : ` why=progress_${progress.join(',')}`;
  console.log(`KILL open_ms=${open} first_ms=${first} end_ms=${end} end=${kind} progress=${progress.length} ok=${inOrder && kind !== 'none' ? 1 : 0}${why}`);
}

main().catch((e) => {
  console.error(`resume_kill: ${e.message}`);
  process.exit(1);
});
