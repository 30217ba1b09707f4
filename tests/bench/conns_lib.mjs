// conns_lib.mjs — what the many-connection benchmarks (tcp_conns.mjs,
// ws_sessions.mjs) share: their command line (HOST:PORT PID [N] and
// --options), the server's resident memory and threads from /proc, a runner
// that keeps a bounded number of clients busy until a deadline, and the
// first failure seen (for the result line).
import fs from 'node:fs';

/** VmRSS (KiB) and thread count of process pid, read afresh each call. */
export function gauges(pid) {
  const status = () => fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    status,
    rssKiB: () => Number(/VmRSS:\s+(\d+)\s+kB/.exec(status())[1]),
    threads: () => Number(/Threads:\s+(\d+)/.exec(status())[1]),
  };
}

/** Runs fn(i) for i in [0, n) with at most `width` in flight, while left() > 0. */
export async function pool(n, width, fn, left) {
  let next = 0;
  const worker = async () => {
    while (next < n && left() > 0) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(width, n) }, worker));
}

/** The first failure's text; fail(why) records it (once) and returns false. */
export function failures() {
  const f = {
    first: '',
    fail: (why) => {
      if (!f.first) f.first = why;
      return false;
    },
  };
  return f;
}

/**
 * The command line `HOST:PORT PID [N] [--name value]...` of argv: opt(name,
 * dflt) takes an option's value (a string), then target() gives {host, port,
 * pid, n} (n defaults to 10000), or prints usage and exits 2 when HOST:PORT
 * or PID is missing.
 */
export function commandLine(argv, usage) {
  const args = argv.slice();
  const opt = (name, dflt) => {
    const i = args.indexOf(name);
    if (i < 0) return dflt;
    const v = args[i + 1];
    args.splice(i, 2);
    return v;
  };
  const target = () => {
    const [hostPort, pid, n] = args;
    if (!hostPort || !pid) {
      console.error(`usage: ${usage}`);
      process.exit(2);
    }
    const colon = hostPort.lastIndexOf(':');
    return { host: hostPort.slice(0, colon), port: Number(hostPort.slice(colon + 1)), pid: Number(pid), n: Number(n || 10000) };
  };
  return { opt, target };
}
