// tcp_conns.mjs — resident memory and threads of mcpd holding N open raw
// TCP connections (--tcp-listen).
//
// 1. reads VmRSS and Threads of PID (mcpd) from /proc/PID/status: "idle";
// 2. opens N connections (a bounded number at a time); each sends
//    mcpd/connect (with TOKEN when given) and waits for its answer: the
//    connection is then past its handshake timeout and holds no session:
//    "connected";
// 3. on each, initialize + notifications/initialized: one session per
//    connection, as a client has: "sessions";
// 4. prints one line per figure and the KiB per connection, then closes
//    everything. The connections stay quiet between the steps: mcpd's
//    --tcp-idle-ms must be longer than the whole run (tcp_conns.sh passes
//    it), or they are closed under the measurement.
//
// Everything is bounded by --timeout seconds (default 180): whatever is open
// by then is measured and reported as such. The client needs N+ file
// descriptors (ulimit -n); so does mcpd, whose --max-connections and
// --max-connections-per-ip must allow N from one address.
//
// Usage: node tcp_conns.mjs HOST:PORT PID [N=10000] [--timeout S] [--parallel P] [--token T]
// The last line is machine-readable:
//   TCPCONNS n=.. connected=.. sessions=.. still_open=.. failed=..
//     rss_idle_kib=.. rss_connected_kib=.. rss_sessions_kib=..
//     threads_idle=.. threads_connected=.. threads_sessions=..
//     kib_per_connection=.. kib_per_connection_and_session=..
import net from 'node:net';

import { commandLine, failures, gauges, pool as runPool } from './conns_lib.mjs';

const { opt, target } = commandLine(
  process.argv.slice(2),
  'node tcp_conns.mjs HOST:PORT PID [N] [--timeout S] [--parallel P] [--token T]',
);
const timeoutS = Number(opt('--timeout', 180));
const parallel = Number(opt('--parallel', 64));
const token = opt('--token', '');
const { host, port, pid, n: N } = target();
const PROTO = '2025-11-25';
const deadline = Date.now() + timeoutS * 1000;
const left = () => deadline - Date.now();
const log = (m) => console.error(`tcp_conns: ${m}`);

const { rssKiB, threads } = gauges(pid);

const pool = (n, width, fn) => runPool(n, width, fn, left);
const failed = failures();
const fail = failed.fail;

/** One NDJSON connection: send(msg), reply(id) resolves with the message of that id. */
class Conn {
  constructor() {
    this.buf = '';
    this.waiting = new Map();
    this.closed = false;
  }

  open() {
    return new Promise((resolve) => {
      this.sock = net.connect({ host, port });
      this.sock.setEncoding('utf8');
      this.sock.once('connect', () => resolve(true));
      this.sock.on('error', (e) => {
        fail(e.code || e.message);
        resolve(false);
      });
      this.sock.on('close', () => {
        this.closed = true;
        for (const w of this.waiting.values()) w(null);
        this.waiting.clear();
        resolve(false);
      });
      this.sock.on('data', (d) => {
        this.buf += d;
        let nl;
        while ((nl = this.buf.indexOf('\n')) >= 0) {
          const line = this.buf.slice(0, nl);
          this.buf = this.buf.slice(nl + 1);
          let m;
          try {
            m = JSON.parse(line);
          } catch {
            fail(`not JSON: ${line.slice(0, 100)}`);
            continue;
          }
          const w = this.waiting.get(m.id);
          if (w) {
            this.waiting.delete(m.id);
            w(m);
          } else if (m.id === null && m.error) fail(`mcpd: ${m.error.message}`);
        }
      });
    });
  }

  request(msg) {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.waiting.delete(msg.id);
        resolve(null);
      }, Math.max(1000, Math.min(30000, left())));
      this.waiting.set(msg.id, (m) => {
        clearTimeout(t);
        resolve(m);
      });
      this.sock.write(`${JSON.stringify(msg)}\n`);
    });
  }
}

async function main() {
  const rssIdle = rssKiB();
  const threadsIdle = threads();
  log(`pid ${pid}: VmRSS ${rssIdle} KiB idle, ${threadsIdle} threads; opening ${N} connections`);

  const conns = [];
  let failed = 0;
  let t0 = Date.now();
  await pool(N, parallel, async () => {
    const c = new Conn();
    if (!(await c.open())) return void failed++;
    const r = await c.request({ jsonrpc: '2.0', id: 'hello', method: 'mcpd/connect', params: token ? { token } : {} });
    if (!r?.result) {
      fail(r ? JSON.stringify(r.error) : 'no answer to mcpd/connect');
      failed++;
      c.sock.destroy();
      return;
    }
    conns.push(c);
  });
  log(`${conns.length} connections greeted in ${Date.now() - t0} ms (${failed} failed)`);
  await new Promise((r) => setTimeout(r, 1000)); // let mcpd settle
  const rssConnected = rssKiB();
  const threadsConnected = threads();

  t0 = Date.now();
  let sessions = 0;
  await pool(conns.length, parallel, async (i) => {
    const c = conns[i];
    const r = await c.request({
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: { protocolVersion: PROTO, capabilities: {}, clientInfo: { name: 'tcp-conns', version: '1' } },
    });
    if (!r?.result) return void fail(r ? JSON.stringify(r.error) : 'no answer to initialize');
    c.sock.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    sessions++;
  });
  log(`${sessions} sessions in ${Date.now() - t0} ms`);
  await new Promise((r) => setTimeout(r, 2000));
  const stillOpen = conns.filter((c) => !c.closed).length;
  const rssSessions = rssKiB();
  const threadsSessions = threads();

  const n = conns.length;
  const per = n ? (rssConnected - rssIdle) / n : NaN;
  const perBoth = n ? (rssSessions - rssIdle) / n : NaN;
  log(`VmRSS ${rssConnected} KiB with ${n} connections, ${rssSessions} KiB with ${sessions} sessions on them; ${stillOpen} still open; threads ${threadsIdle}/${threadsConnected}/${threadsSessions}`);
  console.log(
    `TCPCONNS n=${N} connected=${n} sessions=${sessions} still_open=${stillOpen} failed=${failed} ` +
      `rss_idle_kib=${rssIdle} rss_connected_kib=${rssConnected} rss_sessions_kib=${rssSessions} ` +
      `threads_idle=${threadsIdle} threads_connected=${threadsConnected} threads_sessions=${threadsSessions} ` +
      `kib_per_connection=${per.toFixed(1)} kib_per_connection_and_session=${perBoth.toFixed(1)}` +
      (failed.first ? ` first_failure=${JSON.stringify(failed.first)}` : ''),
  );
  for (const c of conns) c.sock.destroy();
}

const hard = setTimeout(() => {
  log('hard timeout');
  process.exit(1);
}, (timeoutS + 40) * 1000);
hard.unref();
main().then(
  () => process.exit(0),
  (e) => {
    log(e.message);
    process.exit(1);
  },
);
