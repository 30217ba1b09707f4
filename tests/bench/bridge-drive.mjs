// bridge-drive.mjs — drives one stdio bridge for tests/bench/bridge.sh.
//
// Spawns the bridge command (argv after the options, as JSON), speaks
// NDJSON on its stdin, and measures:
//   init_ms   from spawn to the initialize reply (start-up included: what a
//             desktop client waits for)
//   rps       tools/call echo answered per second with CONC requests kept
//             in flight for SECONDS (after a 1 s warm-up)
//   rss_kb    the bridge process's peak resident memory (VmHWM), read from
//             /proc before it is stopped
//   errors    error replies during the run
// and prints one JSON line. Every wait is bounded; the child is killed by
// PID at the end.
//
// Usage: node bridge-drive.mjs SECONDS CONC '["cmd","arg",...]'
import { spawn } from 'node:child_process';
import fs from 'node:fs';

const [seconds, conc, cmdJson] = [Number(process.argv[2]), Number(process.argv[3]), process.argv[4]];
const [cmd, ...args] = JSON.parse(cmdJson);

const t0 = performance.now();
const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'ignore'] });
const fail = (why) => {
  console.log(JSON.stringify({ error: why }));
  try {
    process.kill(child.pid, 'SIGKILL');
  } catch {}
  process.exit(1);
};
const guard = setTimeout(() => fail('timed out'), (seconds + 60) * 1000);

const waiting = new Map();
let buf = '';
child.stdout.setEncoding('utf8');
child.stdout.on('data', (d) => {
  buf += d;
  let nl;
  while ((nl = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (!line.trim()) continue;
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      continue;
    }
    const w = waiting.get(m.id);
    if (w && (m.result !== undefined || m.error !== undefined)) {
      waiting.delete(m.id);
      w(m);
    }
  }
});
child.on('exit', () => fail('the bridge exited'));

let nextId = 1;
const call = (method, params) =>
  new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
  });

const init = await call('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } });
const initMs = performance.now() - t0;
if (!init.result) fail(`initialize failed: ${JSON.stringify(init).slice(0, 300)}`);
child.stdin.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');

let done = 0;
let errors = 0;
let counting = false;
let stop = false;
async function worker() {
  while (!stop) {
    const r = await call('tools/call', { name: 'echo', arguments: { message: 'bench' } });
    if (counting) {
      done++;
      if (r.error) errors++;
    }
  }
}
const workers = Array.from({ length: conc }, worker);
await new Promise((r) => setTimeout(r, 1000));
counting = true;
const start = performance.now();
await new Promise((r) => setTimeout(r, seconds * 1000));
counting = false;
const elapsed = (performance.now() - start) / 1000;
stop = true;
await Promise.race([Promise.all(workers), new Promise((r) => setTimeout(r, 5000))]);

let rssKb = 0;
try {
  const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
  rssKb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] || 0);
} catch {}
clearTimeout(guard);
child.removeAllListeners('exit');
child.kill('SIGKILL');
console.log(JSON.stringify({ init_ms: Math.round(initMs * 10) / 10, rps: Math.round(done / elapsed), rss_kb: rssKb, errors }));
process.exit(0);
