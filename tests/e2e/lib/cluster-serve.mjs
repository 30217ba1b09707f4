// Serve a cluster (lib/cluster.mjs) until SIGTERM/SIGINT: for shell scripts
// that need "an mcpd URL" backed by several replicas (tests/conformance.sh
// with CLUSTER=N, tests/replicas.sh).
//
//   node cluster-serve.mjs --replicas N --port PORT [-- MCPD ARGS...]
//
// Starts a fresh PostgreSQL database (on MCPD_TEST_PG_URL's server, else a
// throwaway server of this process: lib/pg.mjs), N replicas on it and the
// round-robin balancer on 127.0.0.1:PORT (/healthz answers through it once
// everything is up). On SIGTERM or SIGINT it stops the replicas (SIGTERM,
// SIGKILL after 7 s, inside conformance.sh's 10 s) and the balancer, prints every replica's stderr tail,
// the balancer's per-replica counts and the requests it saw no answer to
// for over 10 s (a hang's place) to stderr, and exits 0 only if every
// replica exited 0 (so a sanitizer report or a crash fails the caller, as a
// single mcpd's exit status does).

import { Cluster } from './cluster.mjs';

const argv = process.argv.slice(2);
let n = 3;
let port = 0;
let args = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--replicas') n = Number(argv[++i]);
  else if (argv[i] === '--port') port = Number(argv[++i]);
  else if (argv[i] === '--') {
    args = argv.slice(i + 1);
    break;
  } else {
    console.error(`cluster-serve: unknown argument ${argv[i]}`);
    process.exit(2);
  }
}

const c = new Cluster({ n, args, port });
let stopping = false;

async function stop(code) {
  if (stopping) return;
  stopping = true;
  // Requests still without an answer after 10 s, seen before the replicas
  // stop (which ends them): where a hang was, for a failed run's log.
  const now = Date.now();
  const hung = c.balancer ? c.balancer.log.filter((e) => e.status === undefined && now - e.at > 10000) : [];
  await Promise.all(
    c.replicas.map(async (r) => {
      try {
        await r.stop('SIGTERM', 7000);
      } catch {
        /* killed */
      }
    }),
  );
  if (c.balancer) await c.balancer.stop();
  process.stderr.write(`${c.stderr(4000)}\n`);
  if (c.balancer) process.stderr.write(`cluster-serve: requests per replica: ${c.balancer.counts.join(' ')}\n`);
  if (hung.length) process.stderr.write(`cluster-serve: ${hung.length} requests never answered (over 10 s):\n`);
  for (const e of hung.slice(0, 12))
    process.stderr.write(
      `cluster-serve:   replica ${e.replica ?? '(none accepted)'}: ${e.method} ${e.path} ${e.rpc ?? ''} session ${e.session ?? '-'}, ${now - e.at} ms\n`,
    );
  const bad = c.replicas.map((r, i) => [i, r.exit]).filter(([, e]) => !e || e.code !== 0);
  for (const [i, e] of bad) process.stderr.write(`cluster-serve: replica ${i} exit ${JSON.stringify(e)}\n`);
  process.exit(bad.length ? 1 : code);
}

process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));

try {
  await c.start();
  process.stderr.write(`cluster-serve: ${n} replicas on ${c.db} behind ${c.balancer.url} (replica ports ${c.replicas.map((r) => r.port).join(' ')})\n`);
} catch (e) {
  process.stderr.write(`cluster-serve: ${e.stack || e}\n`);
  await stop(1);
}
// a replica that dies on its own fails the run at the end (stop() reports it)
