// N mcpd replicas on one PostgreSQL database behind the round-robin balancer.
//
// What it is for: the replica tests (replicas.test.mjs, tests/replicas.sh)
// need "a deployment": one database, several mcpd processes on it, and a
// proxy with no stickiness in front. startCluster() builds that on loopback:
// a fresh database on the test process's PostgreSQL server (lib/pg.mjs), N
// replicas (default 3) started at the same time (so that concurrent start-up
// migrations are exercised every time), each on its own fixed port, and a
// Balancer over them.
//
// How it works: each replica is an Mcpd (lib/mcpd.mjs) given the database's
// URL as --db, so restart(i) starts it again on the same port and database.
// kill(i) is SIGKILL (a crash: the balancer then finds the port refused and
// tries the next replica); stop() ends everything (SIGTERM, then SIGKILL) and
// closes the balancer. The cluster's `port` is the balancer's, so every
// helper of lib/mcpd.mjs that takes a port (rpc, initSession, getStream…)
// works through the balancer as is.

import { Balancer } from './balancer.mjs';
import { Mcpd, freePort } from './mcpd.mjs';
import { freshDatabase } from './pg.mjs';

export class Cluster {
  constructor({ n = 3, args = [], db, perReplicaArgs, port = 0 } = {}) {
    this.n = n;
    this.balancerPort = port; // 0: a free one
    this.args = args;
    this.db = db;
    this.perReplicaArgs = perReplicaArgs; // (i) => extra args for replica i
    this.replicas = [];
    this.balancer = null;
  }

  /** The balancer's port and URLs (what clients use). */
  get port() {
    return this.balancer.port;
  }

  get base() {
    return this.balancer.base;
  }

  get url() {
    return this.balancer.url;
  }

  /** The balancer's request log (see balancer.mjs). */
  get log() {
    return this.balancer.log;
  }

  async start() {
    if (!this.db) this.db = freshDatabase('cluster');
    const ports = [];
    for (let i = 0; i < this.n; i++) ports.push(await freePort());
    this.replicas = ports.map(
      (port, i) =>
        new Mcpd({ db: this.db, port, args: [...this.args, ...(this.perReplicaArgs ? this.perReplicaArgs(i) : [])] }),
    );
    try {
      await Promise.all(this.replicas.map((r) => r.start()));
      this.balancer = await new Balancer(ports.map((port) => ({ port }))).start(this.balancerPort);
    } catch (e) {
      await this.stop();
      throw e;
    }
    return this;
  }

  /** SIGKILL replica i and wait for it to be gone. */
  async kill(i) {
    const r = this.replicas[i];
    r.kill('SIGKILL');
    if (r.exited) await r.exited;
  }

  /** Start replica i again (same port, same database); SIGTERM first if it runs. */
  async restart(i) {
    await this.replicas[i].restart();
    this.balancer.markUp(i);
  }

  /** The tails of every replica's stderr, labelled, for a failure message. */
  stderr(tail = 3000) {
    return this.replicas.map((r, i) => `--- replica ${i} (port ${r.port}) ---\n${r.stderr.slice(-tail)}`).join('\n');
  }

  /** Stop every replica (SIGTERM, SIGKILL after 5 s) and the balancer. */
  async stop() {
    await Promise.all(
      this.replicas.map(async (r) => {
        try {
          await r.stop('SIGTERM', 5000);
        } catch {
          /* killed */
        }
      }),
    );
    if (this.balancer) await this.balancer.stop();
  }
}

/** Start a cluster (see Cluster); stop it with stop(). */
export async function startCluster(opts = {}) {
  return new Cluster(opts).start();
}

/**
 * A cluster that stands in for one Mcpd (lib/mcpd.mjs), for running the
 * single-server tests through the balancer (MCPD_TEST_CLUSTER=N, see
 * startMcpd): `port`, `base` and `url` are the balancer's; stop(), kill()
 * and restart() act on every replica; `exit` is the first replica exit that
 * was not clean (or replica 0's); `pid` is replica 0's, `stderr` all tails.
 */
export class ClusterAsMcpd {
  constructor(cluster, dir) {
    this.cluster = cluster;
    this.dir = dir;
    this.db = cluster.db;
  }

  get port() {
    return this.cluster.port;
  }

  get base() {
    return this.cluster.base;
  }

  get url() {
    return this.cluster.url;
  }

  get pid() {
    return this.cluster.replicas[0].pid;
  }

  get proc() {
    return this.cluster.replicas[0].proc;
  }

  get stderr() {
    return this.cluster.stderr(20000);
  }

  get exit() {
    const exits = this.cluster.replicas.map((r) => r.exit);
    if (exits.some((e) => e === null)) return null;
    return exits.find((e) => e.code !== 0) || exits[0];
  }

  get exited() {
    return Promise.all(this.cluster.replicas.map((r) => r.exited)).then(() => this.exit);
  }

  kill(signal = 'SIGTERM') {
    for (const r of this.cluster.replicas) r.kill(signal);
  }

  async stop(signal = 'SIGTERM', ms = 5000) {
    await Promise.all(this.cluster.replicas.map((r) => r.stop(signal, ms)));
    return this.exit;
  }

  async restart() {
    await Promise.all(this.cluster.replicas.map((r) => r.restart()));
    return this;
  }

  async cleanup() {
    await this.cluster.stop();
    if (this.dir) (await import('node:fs')).rmSync(this.dir, { recursive: true, force: true });
  }
}
