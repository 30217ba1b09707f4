// The client half of compose-replicas-e2e.sh: the official SDK client
// through Caddy's HTTPS in front of three mcpd replicas over PostgreSQL.
// Each step prints "ok - ..." or "not ok - ..." (with why), and the script
// counts them; a step that cannot run after an earlier failure says so.
//
// Phase "stream":
//   1. initialize, tools/list and nine tools/call echo, each answered, and
//      each replica (its own /metrics, read from the host on the compose
//      network) routed some of the session's messages: round-robin, no
//      stickiness;
//   2. a countdown (n=40, 250 ms apart) with progress; after the 5th
//      progress, the replica whose mcpd_requests_total grew by the call is
//      the one writing the stream, and `docker kill` ends its container;
//   3. the SDK resumes the stream through Caddy (GET with Last-Event-ID,
//      which Caddy sends to a live replica) and the call ends: its progress
//      arrives each exactly once and in order with none missing (1..k), and
//      the call ends with its result or a clear error rather than a hang;
//   4. the same session still answers a tools/call echo afterwards.
// Phase "after" (the killed replica started again): the session answers
// once more on every replica; then a second countdown's stream is cut (as
// a dropped connection) until the SDK resumes it through Caddy on a replica
// other than the runner, found by pausing the others in turn (the stream
// stalls while its replica is paused), and that replica is killed: the
// stream resumes through Caddy again and the countdown finishes, its 80
// progress events each once and in order.
// Environment: MCPD_URL, MCPD_TOKEN, MCPD_BAD_TOKEN, REPLICAS (a JSON list
// of {service, container, ip}), STATE (a file the session id is kept in);
// NODE_EXTRA_CA_CERTS makes Node trust Caddy's local CA.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = new URL(process.env.MCPD_URL);
const auth = { Authorization: `Bearer ${process.env.MCPD_TOKEN}` };
const replicas = JSON.parse(process.env.REPLICAS);
const phase = process.argv[2];
const N = 40;
const KILL_AT = 5;

let failures = 0;
function report(ok, name, why) {
  if (ok) console.log(`ok - ${name}`);
  else {
    failures++;
    console.log(`not ok - ${name}${why ? `: ${why}` : ''}`);
  }
  return ok;
}

/** Every request the SDK makes, in order: method, Last-Event-ID, status, when. */
const wire = [];
/** The countdown's stream: its id (from its event ids) and a cut of the
 * response the SDK reads it from now, as a dropped connection would. */
const countdown = { stream: null, cut: null };
async function loggingFetch(input, init = {}) {
  const headers = new Headers(init.headers);
  const entry = { at: Date.now(), method: init.method ?? 'GET', lastEventId: headers.get('last-event-id') };
  wire.push(entry);
  try {
    const res = await fetch(input, init);
    entry.status = res.status;
    entry.answered = Date.now();
    const ours =
      (entry.method === 'POST' && String(init.body).includes('"name":"countdown"')) ||
      (countdown.stream && entry.lastEventId?.startsWith(`${countdown.stream}:`));
    if (!ours || !res.body) return res;
    let ctl;
    const pipe = new TransformStream({ start: (c) => void (ctl = c) });
    res.body.pipeTo(pipe.writable).catch(() => {});
    countdown.cut = () => ctl.error(new Error('cut by the test'));
    return new Response(pipe.readable, { status: res.status, statusText: res.statusText, headers: res.headers });
  } catch (e) {
    entry.error = String(e?.cause?.code ?? e);
    throw e;
  }
}

/** A replica's counter from its /metrics (straight to the container, not through Caddy). */
async function metric(r, name) {
  const res = await fetch(`http://${r.ip}:8080/metrics`, { signal: AbortSignal.timeout(5000) });
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'm').exec(await res.text());
  return m ? Number(m[1]) : 0;
}
const counts = (name, live = replicas) => Promise.all(live.map((r) => metric(r, name).catch(() => NaN)));

const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no end within ${ms / 1000} s`)), ms))]);

async function connect(sessionId) {
  const client = new Client({ name: 'compose-replicas-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(url, {
    sessionId,
    fetch: loggingFetch,
    requestInit: { headers: auth },
    // A cut stream is resumed until a replica answers, not twice only.
    reconnectionOptions: { initialReconnectionDelay: 500, maxReconnectionDelay: 2000, reconnectionDelayGrowFactor: 1.5, maxRetries: 20 },
  });
  await client.connect(transport);
  return { client, transport };
}

async function echo(client, message) {
  const r = await client.callTool({ name: 'echo', arguments: { message } });
  return r.content?.[0]?.text === message;
}

async function stream() {
  const before = await Promise.all([counts('mcpd_requests_total'), counts('mcpd_notifications_total')]);
  const { client, transport } = await connect();
  fs.writeFileSync(process.env.STATE, JSON.stringify({ session: transport.sessionId }));
  const tools = await client.listTools();
  report(tools.tools.some((t) => t.name === 'countdown'), 'initialize and tools/list through Caddy');
  let echoes = 0;
  for (let i = 0; i < 9; i++) echoes += (await echo(client, `hello ${i}`)) ? 1 : 0;
  report(echoes === 9, 'nine tools/call echo in the session, each answered', `${echoes} of 9`);
  const after = await Promise.all([counts('mcpd_requests_total'), counts('mcpd_notifications_total')]);
  const served = replicas.map((_, i) => after[0][i] + after[1][i] - before[0][i] - before[1][i]);
  report(
    served.every((n) => n > 0),
    `every replica served messages of the session (round-robin): ${replicas.map((r, i) => `${r.service} ${served[i]}`).join(', ')}`,
  );
  const bad = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', Authorization: `Bearer ${process.env.MCPD_BAD_TOKEN}` },
    body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
  });
  report(bad.status === 401, 'an unknown token gets 401', `status ${bad.status}`);

  // The countdown, and the kill of the replica writing its stream.
  const progress = [];
  const start = await counts('mcpd_requests_total');
  let killed = null;
  let killing = null;
  const onprogress = (p) => {
    progress.push(p.progress);
    if (p.progress === KILL_AT && !killing)
      killing = (async () => {
        const now = await counts('mcpd_requests_total');
        const grew = replicas.filter((_, i) => now[i] > start[i]);
        if (!report(grew.length === 1, 'the replica running the countdown is known (its mcpd_requests_total grew)', JSON.stringify({ start, now }))) return;
        killed = { ...grew[0], atProgress: progress.length, wireAt: wire.length, time: Date.now() };
        execFileSync('docker', ['kill', killed.container], { stdio: 'ignore' });
        report(true, `docker kill ${killed.service} after progress ${killed.atProgress} of ${N}`);
      })();
  };
  let result;
  let error;
  try {
    result = await withTimeout(
      client.callTool({ name: 'countdown', arguments: { n: N, interval_ms: 250 } }, undefined, { onprogress, resetTimeoutOnProgress: true, timeout: 60000 }),
      120000,
      'the countdown',
    );
  } catch (e) {
    error = e;
  }
  const ended = Date.now();
  await killing;
  if (!killed) {
    report(false, `the countdown ran until the kill (progress ${KILL_AT})`, `progress ${JSON.stringify(progress)}${error ? `, then ${error}` : ''}`);
    return;
  }
  const resumed = wire.slice(killed.wireAt).filter((w) => w.method === 'GET' && w.lastEventId);
  report(
    resumed.some((w) => w.status === 200),
    'the SDK resumed the stream through Caddy with Last-Event-ID and a live replica answered 200',
    JSON.stringify(resumed.map(({ lastEventId, status, error: e }) => ({ lastEventId, status, error: e }))),
  );
  const inOrder = progress.every((p, i) => p === i + 1);
  report(inOrder && progress.length >= killed.atProgress, 'every progress event arrived exactly once and in order, none missing', JSON.stringify(progress));
  const text = result?.content?.[0]?.text;
  if (result && !result.isError)
    report(text === 'countdown finished' && progress.length === N, `the countdown finished across the kill (${progress.length} of ${N} progress events)`, JSON.stringify(result));
  else
    report(
      Boolean(error || result?.isError) && !/no end within/.test(String(error)),
      `the call ended with a clear error after ${progress.length} of ${N} progress events (its replica died)`,
      String(error ?? JSON.stringify(result)),
    );
  if (error || result?.isError) console.log(`# the call ended with: ${String(error ?? JSON.stringify(result)).slice(0, 300)}`);
  const firstResume = resumed.find((w) => w.status === 200);
  console.log(`# after the kill: the stream resumed in ${firstResume ? `${firstResume.answered - killed.time} ms` : '-'} (the SDK waits 500 ms before it retries), the call ended in ${ended - killed.time} ms`);
  console.log(`# requests: ${JSON.stringify(wire.slice(killed.wireAt).map(({ method, lastEventId, status, error: e }) => ({ method, lastEventId, status, error: e })))}`);
  report(await echo(client, 'after the kill').catch(() => false), 'the session answers a tools/call echo after the kill');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const docker = (...args) => execFileSync('docker', args, { stdio: 'ignore' });

/** Waits (up to ms) until fn() holds. */
async function until(fn, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (fn()) return true;
  return fn();
}

/**
 * Which replica serves the countdown's stream now, found by pausing each
 * other live replica in turn: the stream stalls while its replica is
 * paused (the runner keeps counting; nothing is lost, the events wait).
 * Returns that replica, or null when the runner serves it itself.
 */
async function streamServer(runner, progress) {
  for (const r of replicas.filter((x) => x !== runner)) {
    const before = progress.length;
    docker('pause', r.container);
    await sleep(1500);
    const stalled = progress.length === before;
    docker('unpause', r.container);
    if (stalled) return r;
  }
  return null;
}

/**
 * The stream moved off its runner, then that replica killed: the countdown
 * goes on, on its runner, and the stream resumes through Caddy again.
 */
async function killReader(client) {
  const n = 80;
  const progress = [];
  const start = await counts('mcpd_requests_total');
  const call = client.callTool({ name: 'countdown', arguments: { n, interval_ms: 250 } }, undefined, {
    onprogress: (p) => progress.push(p.progress),
    onresumptiontoken: (id) => void (countdown.stream ??= id.split(':')[0]),
    resetTimeoutOnProgress: true,
    timeout: 60000,
  });
  let outcome = null;
  call.then((r) => (outcome = { r }), (e) => (outcome = { e }));
  if (!(await until(() => progress.length >= 3 || outcome, 15000)) || outcome)
    return report(false, 'a second countdown runs', JSON.stringify({ progress, outcome: String(outcome?.e ?? '') }));
  const now = await counts('mcpd_requests_total');
  const runner = replicas.find((_, i) => now[i] > start[i]);
  // Cut the stream until Caddy resumes it on another replica than the runner.
  let reader = null;
  for (let attempt = 0; attempt < 4 && !reader && !outcome; attempt++) {
    const sent = wire.length;
    countdown.cut();
    const resumed = await until(() => wire.slice(sent).some((w) => w.lastEventId?.startsWith(`${countdown.stream}:`) && w.status === 200), 10000);
    const seen = progress.length;
    if (!resumed || !(await until(() => progress.length > seen + 1 || outcome, 5000))) break;
    reader = await streamServer(runner, progress);
  }
  if (!report(Boolean(reader) && !outcome, `the countdown's stream, cut, resumed through Caddy on another replica than its runner (${runner?.service})`, JSON.stringify({ progress: progress.length, outcome: String(outcome?.e ?? outcome?.r ?? '') })))
    return;
  const sent = wire.length;
  docker('kill', reader.container);
  const at = progress.length;
  let r;
  try {
    r = await withTimeout(call, 60000, 'the countdown');
  } catch (e) {
    return report(false, `the countdown ended well after ${reader.service}, which served its stream, was killed`, String(e));
  }
  const again = wire.slice(sent).filter((w) => w.lastEventId?.startsWith(`${countdown.stream}:`));
  report(again.some((w) => w.status === 200), `docker kill ${reader.service} (serving the stream, not running the call) after ${at} progress events: the SDK resumed through Caddy`, JSON.stringify(again));
  report(
    r?.content?.[0]?.text === 'countdown finished' && progress.length === n && progress.every((p, i) => p === i + 1),
    `the countdown finished on ${runner.service}, its ${n} progress events each received once and in order`,
    JSON.stringify({ r, progress }),
  );
}

async function afterRestart() {
  if (!fs.existsSync(process.env.STATE)) return report(false, 'a session to go on with', 'the stream phase got none');
  const { session } = JSON.parse(fs.readFileSync(process.env.STATE, 'utf8'));
  const { client } = await connect(session);
  let ok = 0;
  for (let i = 0; i < replicas.length * 2; i++) ok += (await echo(client, `again ${i}`).catch(() => false)) ? 1 : 0;
  report(ok === replicas.length * 2, 'with the killed replica back, the session answers on every replica', `${ok} of ${replicas.length * 2}`);
  await killReader(client);
}

try {
  await (phase === 'stream' ? stream() : afterRestart());
} catch (e) {
  report(false, `phase ${phase} ran to its end`, e?.stack ?? String(e));
}
process.exit(failures ? 1 : 0);
