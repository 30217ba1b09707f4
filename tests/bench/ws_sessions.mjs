// ws_sessions.mjs — resident memory and threads of mcpd holding N WebSocket
// sessions (/mcp/ws, subprotocol mcp), some of them streaming.
//
// 1. sends one HTTP request (a GET of /health), so that the threads mcpd
//    starts with its first request and keeps, whatever the load
//    (mcpd-fiber-time: service/README.md's thread table), are there, then
//    reads VmRSS and Threads of PID (mcpd) from /proc/PID/status: "idle";
// 2. opens N WebSockets (a bounded number at a time): "connected";
// 3. on each, initialize + notifications/initialized: "initialized";
// 4. on STREAM% of them (--stream-percent, 10), tools/call TOOL with a
//    progressToken (the built-in countdown: n notifications, one every
//    --interval-ms) and waits until each has sent its first progress
//    notification; the calls keep streaming while the rest is measured:
//    "streaming";
// 5. sends one request on every socket (--final: ping, or tools/call echo to
//    reach a gateway's upstream child) and counts the answers;
// 6. cancels the streaming calls, prints the figures, closes everything.
//
// The client is lean on purpose: raw net sockets and the few lines of RFC
// 6455 a client needs (masked text frames out with a zero masking key, which
// the server cannot tell from any other key; unmasked frames in, pings
// answered), so 10,000 sockets cost it little; it reports its own CPU time
// and RSS beside mcpd's CPU time, to show it was not the bottleneck. Everything is bounded by
// --timeout seconds: whatever is open by then is measured and reported as
// such. The client needs N+ file descriptors (ulimit -n); so does mcpd,
// whose --max-connections, --max-connections-per-ip and --max-sessions must
// allow N from one address (ws_sessions.sh passes them).
//
// Usage: node ws_sessions.mjs HOST:PORT PID [N=10000] [--timeout S]
//   [--parallel P] [--stream-percent P] [--interval-ms MS]
//   [--final ping|echo] [--label WSSESSIONS] [--request-timeout S (30)]
//   [--hold S: keep everything open S seconds after the figures, to look
//   at mcpd (smaps, gdb) in that state]
// The last line is machine-readable:
//   WSSESSIONS n=.. connected=.. initialized=.. streaming=.. answered=..
//     failed=.. still_open=.. rss_idle_kib=.. rss_connected_kib=..
//     rss_initialized_kib=.. rss_streaming_kib=.. kib_per_session=..
//     threads_idle=.. threads_connected=.. threads_initialized=..
//     threads_sessions=.. children=.. progress=.. client_cpu_s=..
//     client_rss_kib=.. mcpd_cpu_s=..
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';

import { commandLine, failures, gauges, pool as runPool } from './conns_lib.mjs';

const { opt, target } = commandLine(
  process.argv.slice(2),
  'node ws_sessions.mjs HOST:PORT PID [N] [--timeout S] [--parallel P] [--stream-percent P] [--interval-ms MS] [--final ping|echo] [--label L]',
);
const timeoutS = Number(opt('--timeout', 240));
const parallel = Number(opt('--parallel', 64));
const streamPercent = Number(opt('--stream-percent', 10));
const intervalMs = Number(opt('--interval-ms', 1000));
const final = opt('--final', 'ping');
const label = opt('--label', 'WSSESSIONS');
const requestS = Number(opt('--request-timeout', 30));
const holdS = Number(opt('--hold', 0));
const { host, port, pid, n: N } = target();
const PROTO = '2025-11-25';
const deadline = Date.now() + timeoutS * 1000;
const left = () => deadline - Date.now();
const log = (m) => console.error(`ws_sessions: ${m}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { rssKiB, threads } = gauges(pid);
// mcpd's user + system CPU in seconds (the fields after the comm, which may hold spaces).
const cpuS = () => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};
// mcpd's direct children (a gateway's upstream processes).
const children = () => {
  let n = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      n += fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).length;
    } catch {
      /* the thread ended */
    }
  }
  return n;
};

// Where mcpd's resident memory is: /proc/PID/smaps summed by mapping kind
// (a file, [heap], or an anonymous mapping of a given size: fiber stacks,
// libmicrohttpd's connection pools, malloc arenas each have their own).
function smaps() {
  const by = new Map();
  let key = null;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      const kib = Number((BigInt(`0x${head[2]}`) - BigInt(`0x${head[1]}`)) / 1024n);
      const path = head[3];
      key = path.startsWith('[') ? path : path ? 'files' : kib >= 1024 ? 'anon >= 1 MiB' : `anon ${kib} KiB`;
      if (!by.has(key)) by.set(key, { n: 0, rss: 0 });
      by.get(key).n++;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && key) by.get(key).rss += Number(rss[1]);
  }
  return by;
}
// The kinds that grew most since `before`, for the log.
function grown(before, after, per) {
  const rows = [];
  for (const [k, v] of after) {
    const b = before.get(k) || { n: 0, rss: 0 };
    if (v.rss - b.rss > 0) rows.push([k, v.n - b.n, v.rss - b.rss]);
  }
  rows.sort((x, y) => y[2] - x[2]);
  return rows
    .slice(0, 8)
    .map(([k, n, rss]) => `${k}: ${n >= 0 ? '+' : ''}${n} mappings, +${rss} KiB (${per ? (rss / per).toFixed(1) : '-'} KiB each)`)
    .join('; ');
}

const pool = (n, width, fn) => runPool(n, width, fn, left);
const failed = failures();
const fail = failed.fail;

const ZERO_MASK = Buffer.alloc(4);
/** A masked client frame: FIN + opcode, payload as is (zero masking key). */
function frame(opcode, payload) {
  const n = payload.length;
  let head;
  if (n < 126) {
    head = Buffer.from([0x80 | opcode, 0x80 | n]);
  } else if (n < 65536) {
    head = Buffer.from([0x80 | opcode, 0x80 | 126, n >> 8, n & 0xff]);
  } else {
    head = Buffer.alloc(10);
    head[0] = 0x80 | opcode;
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, ZERO_MASK, payload]);
}

/** One WebSocket: send(msg), request(msg) resolves with the reply of that id (or null). */
class Ws {
  constructor() {
    this.buf = null; // unparsed bytes
    this.upgraded = false;
    this.frag = null; // a fragmented text message being gathered
    this.waiting = new Map();
    this.closed = false;
    this.progress = 0; // progress notifications received
    this.onProgress = null;
  }

  open() {
    return new Promise((resolve) => {
      const done = (ok) => {
        clearTimeout(t);
        resolve(ok);
      };
      const t = setTimeout(() => {
        fail('handshake timed out');
        this.sock.destroy();
        done(false);
      }, Math.max(1000, Math.min(30000, left())));
      this.sock = net.connect({ host, port });
      this.sock.setNoDelay(true);
      this.opened = done;
      this.sock.once('connect', () => {
        const key = crypto.randomBytes(16).toString('base64');
        this.sock.write(
          `GET /mcp/ws HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n\r\n`,
        );
      });
      this.sock.on('error', (e) => fail(e.code || e.message));
      this.sock.on('close', () => {
        this.closed = true;
        for (const w of this.waiting.values()) w(null);
        this.waiting.clear();
        done(false);
      });
      this.sock.on('data', (d) => this.data(d));
    });
  }

  data(d) {
    this.buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    if (!this.upgraded) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buf.subarray(0, end).toString('latin1');
      this.buf = this.buf.subarray(end + 4);
      if (!/^HTTP\/1\.1 101 /.test(head)) {
        fail(`handshake: ${head.split('\r\n')[0]}`);
        this.sock.destroy();
        return;
      }
      this.upgraded = true;
      this.opened(true);
    }
    for (;;) {
      const b = this.buf;
      if (b.length < 2) break;
      const op = b[0] & 0x0f;
      const fin = b[0] & 0x80;
      let len = b[1] & 0x7f;
      let at = 2;
      if (len === 126) {
        if (b.length < 4) break;
        len = b.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (b.length < 10) break;
        len = Number(b.readBigUInt64BE(2));
        at = 10;
      }
      if (b[1] & 0x80) at += 4; // a server never masks; skip a key if it did
      if (b.length < at + len) break;
      const payload = b.subarray(at, at + len);
      this.buf = b.subarray(at + len);
      if (op === 0x9) this.sock.write(frame(0xa, payload));
      else if (op === 0x8) {
        fail(`closed by mcpd (${len >= 2 ? payload.readUInt16BE(0) : 'no code'})`);
        this.sock.end();
      } else if (op === 0x1 || op === 0x0) {
        this.frag = this.frag ? Buffer.concat([this.frag, payload]) : Buffer.from(payload);
        if (fin) {
          const text = this.frag.toString('utf8');
          this.frag = null;
          this.message(text);
        }
      }
    }
    if (this.buf.length === 0) this.buf = null;
  }

  message(text) {
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      return void fail(`not JSON: ${text.slice(0, 100)}`);
    }
    if (m.method === 'notifications/progress') {
      this.progress++;
      if (this.onProgress) this.onProgress();
      return;
    }
    const w = this.waiting.get(m.id);
    if (w) {
      this.waiting.delete(m.id);
      w(m);
    }
  }

  send(msg) {
    this.sock.write(frame(0x1, Buffer.from(JSON.stringify(msg))));
  }

  /** Resolves with the reply to msg, or null after ms (or when the socket closes). */
  request(msg, ms = Math.max(1000, Math.min(requestS * 1000, left()))) {
    return new Promise((resolve) => {
      if (this.closed) return resolve(null);
      const t = setTimeout(() => {
        this.waiting.delete(msg.id);
        resolve(null);
      }, ms);
      this.waiting.set(msg.id, (m) => {
        clearTimeout(t);
        resolve(m);
      });
      this.send(msg);
    });
  }
}

async function main() {
  await fetch(`http://${host}:${port}/health`).then((r) => r.arrayBuffer());
  const cpu0 = process.cpuUsage();
  const mcpdCpu0 = cpuS();
  const rssIdle = rssKiB();
  const threadsIdle = threads();
  const mapsIdle = smaps();
  log(`pid ${pid}: VmRSS ${rssIdle} KiB idle, ${threadsIdle} threads; opening ${N} WebSockets`);

  const socks = [];
  let failed = 0;
  let t0 = Date.now();
  await pool(N, parallel, async () => {
    const w = new Ws();
    if (!(await w.open())) return void failed++;
    socks.push(w);
  });
  log(`${socks.length} WebSockets open in ${Date.now() - t0} ms (${failed} failed)`);
  await sleep(1000); // let mcpd settle
  const rssConnected = rssKiB();
  const threadsConnected = threads();
  const mapsConnected = smaps();
  log(`grown with ${socks.length} sockets: ${grown(mapsIdle, mapsConnected, socks.length)}`);

  t0 = Date.now();
  const inited = [];
  await pool(socks.length, parallel, async (i) => {
    const w = socks[i];
    const r = await w.request({
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: PROTO, capabilities: {}, clientInfo: { name: 'ws-sessions', version: '1' } },
    });
    if (!r?.result) return void fail(r ? `initialize: ${JSON.stringify(r.error)}` : 'no answer to initialize');
    w.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    inited.push(w);
  });
  log(`${inited.length} sessions initialized in ${Date.now() - t0} ms`);
  await sleep(2000);
  const rssInitialized = rssKiB();
  const threadsInitialized = threads();
  const mapsInitialized = smaps();
  log(`grown with ${inited.length} sessions: ${grown(mapsConnected, mapsInitialized, inited.length)}`);

  // Streaming: every tenth (or whatever share) session runs a countdown long
  // enough to outlast the run; each counts once it has sent progress.
  const want = Math.floor((inited.length * streamPercent) / 100);
  const step = want ? inited.length / want : 0;
  const streamers = [];
  for (let k = 0; k < want; k++) streamers.push(inited[Math.floor(k * step)]);
  const n = Math.min(10000, Math.ceil((timeoutS * 1000 + 120000) / Math.max(1, intervalMs)));
  let streaming = 0;
  const calls = [];
  t0 = Date.now();
  await pool(streamers.length, parallel, async (k) => {
    const w = streamers[k];
    const first = new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), Math.max(1000, Math.min(intervalMs * 5 + 10000, left())));
      w.onProgress = () => {
        w.onProgress = null;
        clearTimeout(t);
        resolve(true);
      };
    });
    // The reply comes only when the countdown ends (or is cancelled).
    calls.push(
      w.request(
        {
          jsonrpc: '2.0',
          id: 'stream',
          method: 'tools/call',
          params: { name: 'countdown', arguments: { n, interval_ms: intervalMs }, _meta: { progressToken: `p${k}` } },
        },
        Math.max(1000, left() + 60000),
      ),
    );
    if (await first) streaming++;
    else fail('no progress from countdown');
  });
  log(`${streaming} of ${streamers.length} sessions streaming in ${Date.now() - t0} ms`);
  if (streamers.length) await sleep(Math.max(2000, intervalMs * 2));
  const rssStreaming = rssKiB();
  const threadsStreaming = threads();
  const kids = children();
  log(`grown with ${streaming} streaming: ${grown(mapsInitialized, smaps(), streamers.length)}`);

  // Every socket answers: one request each, counted.
  t0 = Date.now();
  let answered = 0;
  let unanswered = 0;
  await pool(inited.length, parallel, async (i) => {
    const msg =
      final === 'echo'
        ? { jsonrpc: '2.0', id: 'last', method: 'tools/call', params: { name: 'echo', arguments: { message: `s${i}` } } }
        : { jsonrpc: '2.0', id: 'last', method: 'ping' };
    const r = await inited[i].request(msg);
    if (r?.result) answered++;
    else {
      unanswered++;
      fail(r ? `${msg.method}: ${JSON.stringify(r.error)}` : `no answer to ${msg.method}`);
    }
  });
  log(`${answered} of ${inited.length} sessions answered ${final} in ${Date.now() - t0} ms`);
  const threadsAfter = threads();
  const stillOpen = socks.filter((w) => !w.closed).length;
  const progress = streamers.reduce((a, w) => a + w.progress, 0);
  const cpu = process.cpuUsage(cpu0);
  const clientCpuS = (cpu.user + cpu.system) / 1e6;
  const clientRss = Math.round(process.memoryUsage().rss / 1024);
  const mcpdCpuS = cpuS() - mcpdCpu0;

  for (const [k, w] of streamers.entries())
    if (!w.closed)
      w.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'stream', reason: `bench over ${k}` } });

  const s = inited.length;
  const per = s ? (rssStreaming - rssIdle) / s : NaN;
  log(
    `VmRSS ${rssIdle} KiB idle, ${rssConnected} with ${socks.length} sockets, ${rssInitialized} with ${s} sessions, ` +
      `${rssStreaming} with ${streaming} streaming; threads ${threadsIdle}/${threadsConnected}/${threadsInitialized}/` +
      `${threadsStreaming}/${threadsAfter}; ${stillOpen} still open; ${kids} children; client ${clientCpuS.toFixed(1)} s CPU, ${clientRss} KiB; mcpd ${mcpdCpuS.toFixed(1)} s CPU`,
  );
  console.log(
    `${label} n=${N} connected=${socks.length} initialized=${s} streaming=${streaming} answered=${answered} ` +
      `failed=${failed + (s ? unanswered : 0) + (socks.length - s)} still_open=${stillOpen} ` +
      `rss_idle_kib=${rssIdle} rss_connected_kib=${rssConnected} rss_initialized_kib=${rssInitialized} ` +
      `rss_streaming_kib=${rssStreaming} kib_per_socket=${(socks.length ? (rssConnected - rssIdle) / socks.length : NaN).toFixed(1)} ` +
      `kib_per_session=${per.toFixed(1)} threads_idle=${threadsIdle} threads_connected=${threadsConnected} ` +
      `threads_initialized=${threadsInitialized} threads_sessions=${Math.max(threadsStreaming, threadsAfter)} ` +
      `children=${kids} progress=${progress} client_cpu_s=${clientCpuS.toFixed(1)} client_rss_kib=${clientRss} mcpd_cpu_s=${mcpdCpuS.toFixed(1)}` +
      (failed.first ? ` first_failure=${JSON.stringify(failed.first)}` : ''),
  );
  await sleep(200); // let the cancellations leave
  if (holdS > 0) {
    log(`holding ${socks.length} sockets open for ${holdS} s`);
    await sleep(holdS * 1000);
  }
  for (const w of socks) w.sock.destroy();
  void calls;
}

const hard = setTimeout(() => {
  log('hard timeout');
  process.exit(1);
}, (timeoutS + holdS + 60) * 1000);
hard.unref();
main().then(
  () => process.exit(0),
  (e) => {
    log(e.stack || e.message);
    process.exit(1);
  },
);
