// conns_lib.mjs — what the many-connection benchmarks (tcp_conns.mjs,
// ws_sessions.mjs) share: the server's resident memory and threads from
// /proc, a runner that keeps a bounded number of clients busy until a
// deadline, and the first failure seen (for the result line).
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
