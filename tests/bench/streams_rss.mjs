// streams_rss.mjs — resident memory of a server holding N open GET streams.
//
// 1. reads VmRSS of PID (the server) from /proc/PID/status: "idle";
// 2. opens N sessions (initialize + notifications/initialized, a bounded
//    number at a time), reads VmRSS again: "sessions";
// 3. opens one GET /mcp SSE stream per session on its own raw TCP socket and
//    waits until every stream has its 200 header and first body bytes (the
//    priming event or the first chunk), reads VmRSS again: "streams";
// 4. prints one line per figure and the KiB per stream, then (after --hold S
//    seconds, 0 by default, for a load run beside the open streams:
//    streams_load.sh) closes everything.
//
// Everything is bounded by --timeout seconds (default 180): whatever is open
// by then is measured and reported as such. The client needs N+ file
// descriptors (ulimit -n); so does the server.
//
// Usage: node streams_rss.mjs URL PID [N=10000] [--timeout S] [--parallel P] [--hold S]
// The last line is machine-readable:
//   STREAMS n=.. open=.. failed=.. rss_idle_kib=.. rss_sessions_kib=..
//   rss_streams_kib=.. kib_per_stream=.. kib_per_session_and_stream=..
import net from 'node:net';
import fs from 'node:fs';
import http from 'node:http';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  if (i < 0) return dflt;
  const v = Number(args[i + 1]);
  args.splice(i, 2);
  return v;
};
const timeoutS = opt('--timeout', 180);
const parallel = opt('--parallel', 64);
const holdS = opt('--hold', 0);
const [urlArg, pidArg, nArg] = args;
if (!urlArg || !pidArg) {
  console.error('usage: node streams_rss.mjs URL PID [N] [--timeout S] [--parallel P] [--hold S]');
  process.exit(2);
}
const url = new URL(urlArg);
const pid = Number(pidArg);
const N = Number(nArg || 10000);
const PROTO = '2025-11-25';
const deadline = Date.now() + timeoutS * 1000;
const left = () => deadline - Date.now();
const log = (m) => console.error(`streams_rss: ${m}`);

function rssKiB() {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(s);
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}
const threads = () => {
  try {
    return Number(/Threads:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
  } catch {
    return -1;
  }
};

const agent = new http.Agent({ keepAlive: true, maxSockets: parallel });

function post(body, sid) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'Content-Length': Buffer.byteLength(data),
    };
    if (sid) {
      headers['Mcp-Session-Id'] = sid;
      headers['MCP-Protocol-Version'] = PROTO;
    }
    const req = http.request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode, sid: res.headers['mcp-session-id'], text }));
        res.on('error', reject);
      },
    );
    req.setTimeout(Math.max(1000, Math.min(30000, left())), () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(data);
  });
}

async function openSession() {
  const init = await post({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: PROTO, capabilities: {}, clientInfo: { name: 'streams-rss', version: '1' } },
  });
  if (init.status !== 200 || !init.sid) throw new Error(`initialize HTTP ${init.status}: ${init.text.slice(0, 120)}`);
  const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, init.sid);
  if (note.status !== 202) throw new Error(`initialized HTTP ${note.status}`);
  return init.sid;
}

// Runs fn(i) for i in [0, n) with at most `width` in flight; stops at the deadline.
async function pool(n, width, fn) {
  let next = 0;
  const worker = async () => {
    while (next < n && left() > 0) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(width, n) }, worker));
}

// One GET stream on a raw socket. Resolves true once the 200 header and at
// least one body byte have arrived, false on any failure.
const sockets = [];
let firstFailure = '';
function openStream(sid) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: url.hostname, port: Number(url.port) });
    sockets.push(sock);
    let buf = '';
    let settled = false;
    const finish = (ok, why) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!ok && !firstFailure) firstFailure = why;
      if (!ok) sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false, 'no first bytes within 30 s'), Math.min(30000, Math.max(1, left())));
    sock.setEncoding('latin1');
    sock.on('connect', () => {
      sock.write(
        `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n` +
          `Mcp-Session-Id: ${sid}\r\nMCP-Protocol-Version: ${PROTO}\r\n\r\n`,
      );
    });
    sock.on('data', (d) => {
      if (settled) return; // keep reading (keepalives) so the server never blocks
      buf += d;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (!/^HTTP\/1\.1 200/.test(buf)) return finish(false, buf.split('\r\n')[0]);
      if (buf.length > end + 4) finish(true);
    });
    sock.on('error', (e) => finish(false, e.code || e.message));
    sock.on('close', () => finish(false, 'closed before first bytes'));
  });
}

async function main() {
  const rssIdle = rssKiB();
  log(`pid ${pid}: VmRSS ${rssIdle} KiB idle, ${threads()} threads; opening ${N} sessions`);

  const sids = [];
  let sessionFailures = 0;
  let t0 = Date.now();
  await pool(N, parallel, async () => {
    try {
      sids.push(await openSession());
    } catch (e) {
      if (sessionFailures++ === 0) log(`session failed: ${e.message}`);
    }
  });
  agent.destroy();
  log(`${sids.length} sessions in ${Date.now() - t0} ms (${sessionFailures} failed)`);
  await new Promise((r) => setTimeout(r, 1000));
  const rssSessions = rssKiB();

  t0 = Date.now();
  let open = 0;
  let failed = 0;
  await pool(sids.length, 256, async (i) => {
    if (await openStream(sids[i])) open++;
    else failed++;
  });
  log(`${open} streams open in ${Date.now() - t0} ms, ${failed} failed${firstFailure ? ` (first: ${firstFailure})` : ''}`);
  await new Promise((r) => setTimeout(r, 2000)); // let the server settle
  const stillOpen = sockets.filter((s) => !s.destroyed).length;
  const rssStreams = rssKiB();
  const nthreads = threads();

  const per = open ? (rssStreams - rssSessions) / open : NaN;
  const perBoth = open ? (rssStreams - rssIdle) / open : NaN;
  log(`VmRSS ${rssSessions} KiB with ${sids.length} sessions, ${rssStreams} KiB with ${stillOpen} streams open, ${nthreads} threads`);
  console.log(
    `STREAMS n=${N} open=${open} still_open=${stillOpen} failed=${failed} session_failures=${sessionFailures} ` +
      `rss_idle_kib=${rssIdle} rss_sessions_kib=${rssSessions} rss_streams_kib=${rssStreams} ` +
      `threads=${nthreads} kib_per_stream=${per.toFixed(1)} kib_per_session_and_stream=${perBoth.toFixed(1)}` +
      (firstFailure ? ` first_failure=${JSON.stringify(firstFailure)}` : ''),
  );
  if (holdS > 0) await new Promise((r) => setTimeout(r, holdS * 1000));
  for (const s of sockets) s.destroy();
}

const hard = setTimeout(() => {
  log('hard timeout');
  process.exit(1);
}, (timeoutS + holdS + 40) * 1000);
hard.unref();
main().then(
  () => process.exit(0),
  (e) => {
    log(e.message);
    process.exit(1);
  },
);
