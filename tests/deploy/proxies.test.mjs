// The shipped deployment files, checked without Docker:
//   - docker-compose.yml, alone and with docker-compose.replicas.yml, passes
//     `docker-compose config -q`, deploy/Caddyfile `caddy validate` (also
//     balancing three replicas), deploy/nginx.conf `nginx -t`, and the
//     Dockerfiles a lint (dockerfile-utils, plus the image rules this
//     project keeps);
//   - Debian's caddy running deploy/Caddyfile, and Debian's nginx running
//     deploy/nginx.conf, each on loopback in front of a native mcpd. Through
//     each over HTTPS: the official SDK client, SSE progress arriving as it
//     is sent (timestamps, not only order), WebSocket on /mcp/ws, the legacy
//     HTTP+SSE transport (GET /sse, POST /messages?sessionId=...) raw and
//     through mcp-bridge --transport sse, mcp-bridge --cacert, and a stream
//     resumed with Last-Event-ID after the proxy itself was killed
//     mid-stream and started again;
//   - no credential in any log: after a WebSocket connect with the token as
//     its `bearer.<token>` subprotocol (and one with an unknown token), a
//     POST with Authorization and a URL with a token in its query, the
//     proxy's logs (access and error, with access logging on as shipped;
//     also a second proxy whose upstream is down, so that Caddy logs the
//     failed request with its headers), mcpd's stderr at --log-level debug
//     and `mcp-admin logs` hold neither token.
//
// Caddy gets its loopback ports and upstream through the CADDY_* and
// MCPD_UPSTREAM variables the Caddyfile reads; nginx.conf is used with only
// its ports, upstream address, certificate and log paths replaced (each
// replacement must match, so a changed file fails here rather than being
// tested half). Where mcpd has token auth (--auth) and mcp-admin is built,
// mcpd runs with --auth token and every client sends its token; without
// it, a request with no token gets 401.

import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import WebSocket from 'ws';

import { BRIDGE_BIN, BridgeProc, toolCall } from '../e2e/fixtures/bridge-proc.mjs';
import { LATEST, MCPD_BIN, REPO_ROOT, SseReader, freePort, sleep, startMcpd, withTimeout, ADMIN_BIN } from '../e2e/lib/mcpd.mjs';

const DEPLOY = path.join(REPO_ROOT, 'deploy');
const has = (cmd, args = ['--version']) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
const haveCaddy = has('caddy', ['version']);
const haveNginx = has('nginx', ['-v']);
const haveOpenssl = has('openssl', ['version']);
const mcpdHelp = spawnSync(MCPD_BIN, ['--help'], { encoding: 'utf8' }).stdout ?? '';
// Token auth is mcp-admin's half of the product: tested here once both exist.
const withTokens = /--auth\b/.test(mcpdHelp) && fs.existsSync(ADMIN_BIN);
const trustedProxies = /--trusted-proxies\b/.test(mcpdHelp);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-proxies-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const portOpen = (p) =>
  new Promise((resolve) => {
    const s = net.connect(p, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Replace `from` in `text`, asserting it occurs exactly `times` times. */
function replaceExactly(text, from, to, times = 1) {
  const n = text.split(from).length - 1;
  assert.equal(n, times, `deploy/nginx.conf: expected ${times}× ${JSON.stringify(from)}, found ${n}`);
  return text.split(from).join(to);
}

// ------------------------------------------------------------ certificates

/** A CA and a leaf for localhost/127.0.0.1 signed by it, for nginx. */
function makeCerts(dir) {
  const o = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=mcpd test CA', '-keyout', 'ca.key', '-out', 'ca.crt']);
  o(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'leaf.key', '-out', 'leaf.csr']);
  fs.writeFileSync(path.join(dir, 'leaf.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  o(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'leaf.ext', '-out', 'leaf.crt']);
  return { ca: path.join(dir, 'ca.crt'), cert: path.join(dir, 'leaf.crt'), key: path.join(dir, 'leaf.key') };
}

/** deploy/nginx.conf with only what a loopback test must change. */
function nginxConf(dir, { httpPort = 80, httpsPort = 443, upstreamPort = 8080, certs }) {
  let c = fs.readFileSync(path.join(DEPLOY, 'nginx.conf'), 'utf8');
  c = replaceExactly(c, 'pid /run/nginx.pid;', `pid ${dir}/nginx.pid;`);
  c = replaceExactly(c, '/var/log/nginx/error.log', `${dir}/error.log`);
  c = replaceExactly(c, '/var/log/nginx/access.log', `${dir}/access.log`);
  c = replaceExactly(c, '/etc/letsencrypt/live/mcp.example.com/fullchain.pem', certs.cert);
  c = replaceExactly(c, '/etc/letsencrypt/live/mcp.example.com/privkey.pem', certs.key);
  c = replaceExactly(c, 'worker_processes auto;', 'worker_processes 1;');
  c = replaceExactly(c, 'listen 80;', `listen 127.0.0.1:${httpPort};`);
  c = replaceExactly(c, 'listen [::]:80;', '');
  c = replaceExactly(c, 'listen 443 ssl http2;', `listen 127.0.0.1:${httpsPort} ssl http2;`);
  c = replaceExactly(c, 'listen [::]:443 ssl http2;', '');
  c = replaceExactly(c, 'server 127.0.0.1:8080;', `server 127.0.0.1:${upstreamPort};`);
  c = replaceExactly(c, 'server_name mcp.example.com;', 'server_name localhost;', 2);
  // nginx's temporary files go under the prefix (-p), not /var/lib/nginx.
  c = replaceExactly(c, 'http {', `http {\n    client_body_temp_path ${dir}/body;\n    proxy_temp_path ${dir}/proxy;`);
  const file = path.join(dir, 'nginx.conf');
  fs.writeFileSync(file, c);
  return file;
}

function caddyEnv(dir, { httpPort = 80, httpsPort = 443, upstreamPort = 8080 } = {}) {
  return {
    ...process.env,
    MCPD_DOMAIN: 'localhost',
    MCPD_UPSTREAM: `127.0.0.1:${upstreamPort}`,
    CADDY_ADMIN: 'off',
    CADDY_HTTP_PORT: String(httpPort),
    CADDY_HTTPS_PORT: String(httpsPort),
    CADDY_BIND: '127.0.0.1',
    XDG_DATA_HOME: path.join(dir, 'data'),
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    HOME: dir,
  };
}

// ------------------------------------------------------------ static checks

describe('the shipped files pass their own tools', () => {
  test('docker-compose config -q', { skip: !has('docker-compose') && 'docker-compose is not installed' }, () => {
    const r = run('docker-compose', ['-f', path.join(REPO_ROOT, 'docker-compose.yml'), 'config', '-q'], { cwd: REPO_ROOT });
    assert.equal(r.status, 0, r.out);
    // and with a real domain and the stand-in variables set
    const env = { ...process.env, MCPD_DOMAIN: 'mcp.example.com', CADDY_IMAGE: 'caddy:2', MCPD_BIND: '127.0.0.1' };
    const cfg = run('docker-compose', ['-f', path.join(REPO_ROOT, 'docker-compose.yml'), 'config'], { cwd: REPO_ROOT, env });
    assert.equal(cfg.status, 0, cfg.out);
    assert.match(cfg.out, /MCPD_DOMAIN: mcp\.example\.com/);
    assert.match(cfg.out, /condition: service_healthy/);
    assert.match(cfg.out, /init: true/);
  });

  test('docker-compose config -q with docker-compose.replicas.yml', { skip: !has('docker-compose') && 'docker-compose is not installed' }, () => {
    const files = ['-f', path.join(REPO_ROOT, 'docker-compose.yml'), '-f', path.join(REPO_ROOT, 'docker-compose.replicas.yml')];
    const q = run('docker-compose', [...files, 'config', '-q'], { cwd: REPO_ROOT });
    assert.equal(q.status, 0, q.out);
    const env = { ...process.env, POSTGRES_IMAGE: 'postgres:16', POSTGRES_USER: 'u1', POSTGRES_PASSWORD: 'pw-from-env', POSTGRES_DB: 'd1' };
    const cfg = run('docker-compose', [...files, 'config'], { cwd: REPO_ROOT, env });
    assert.equal(cfg.status, 0, cfg.out);
    const out = cfg.out;
    const service = (name) => {
      const m = new RegExp(`^  ${name}:\n((?:    .*\n|      .*\n)*)`, 'm').exec(out);
      assert.ok(m, `service ${name} in:\n${out}`);
      return m[1];
    };
    for (const name of ['mcpd', 'mcpd2', 'mcpd3']) {
      const s = service(name);
      // The URL names the user and the database; the password goes apart.
      assert.match(s, /MCPD_DB: postgres:\/\/u1@postgres:5432\/d1\n/, `${name}: ${s}`);
      assert.match(s, /PGPASSWORD: pw-from-env/, name);
      assert.match(s, /postgres:\n\s+condition: service_healthy/, `${name} waits for the database`);
      assert.match(s, /MCPD_AUTH: token/, `${name} is the base file's mcpd`);
      assert.match(s, /\bdb: \{\}/, `${name} is on the database network`);
    }
    const pg = service('postgres');
    assert.match(pg, /image: postgres:16/);
    assert.match(pg, /pg_isready/);
    assert.match(pg, /pg-data:\/var\/lib\/postgresql\/data/);
    assert.doesNotMatch(pg, /ports:/, 'the database is not published');
    const caddy = service('caddy');
    assert.match(caddy, /MCPD_UPSTREAM: mcpd:8080 mcpd2:8080 mcpd3:8080/);
    assert.match(caddy, /MCPD_BALANCE: replicas/);
    for (const name of ['mcpd', 'mcpd2', 'mcpd3']) assert.match(caddy, new RegExp(`${name}:\\n\\s+condition: service_healthy`));
    assert.match(out, /^  db:\n    internal: true/m, 'the database network has no way out');
  });

  test('deploy/Caddyfile balances the replicas: round-robin, /readyz probes, retries, no stickiness', { skip: !haveCaddy && 'caddy is not installed' }, () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'replicas-'));
    const env = { ...caddyEnv(dir), MCPD_UPSTREAM: 'mcpd:8080 mcpd2:8080 mcpd3:8080', MCPD_BALANCE: 'replicas' };
    const v = run('caddy', ['validate', '--config', path.join(DEPLOY, 'Caddyfile'), '--adapter', 'caddyfile'], { env });
    assert.equal(v.status, 0, v.out);
    const a = run('caddy', ['adapt', '--config', path.join(DEPLOY, 'Caddyfile'), '--adapter', 'caddyfile'], { env });
    assert.equal(a.status, 0, a.out);
    const json = JSON.parse(a.out.slice(a.out.indexOf('{')));
    const proxies = [];
    const walk = (v) => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        if (v.handler === 'reverse_proxy') proxies.push(v);
        Object.values(v).forEach(walk);
      }
    };
    walk(json.apps.http.servers);
    assert.equal(proxies.length, 1, 'one reverse_proxy');
    const rp = proxies[0];
    assert.deepEqual(rp.upstreams.map((u) => u.dial), ['mcpd:8080', 'mcpd2:8080', 'mcpd3:8080']);
    assert.deepEqual(rp.load_balancing.selection_policy, { policy: 'round_robin' }, 'round-robin, no cookie or hash policy');
    assert.ok(rp.load_balancing.try_duration >= 5e9, 'a request to a dead replica is retried on another');
    assert.equal(rp.health_checks.active.uri, '/readyz');
    assert.ok(rp.health_checks.active.interval <= 1e9, 'probed every second');
    assert.equal(rp.flush_interval, -1, 'SSE flushed as written');
    // The same log filters as with one mcpd: the logging block is shared.
    const one = run('caddy', ['adapt', '--config', path.join(DEPLOY, 'Caddyfile'), '--adapter', 'caddyfile'], { env: caddyEnv(dir) });
    assert.equal(one.status, 0, one.out);
    const single = JSON.parse(one.out.slice(one.out.indexOf('{')));
    assert.deepEqual(json.logging, single.logging);
    assert.equal(JSON.stringify(single).includes('health_checks'), false, 'one mcpd: no health checks, a stopped mcpd answers 502');
  });

  test('caddy validate on deploy/Caddyfile, for localhost and for a real domain', { skip: !haveCaddy && 'caddy is not installed' }, () => {
    for (const domain of ['localhost', 'mcp.example.com']) {
      const dir = fs.mkdtempSync(path.join(tmp, 'validate-'));
      const env = { ...caddyEnv(dir), MCPD_DOMAIN: domain, MCPD_UPSTREAM: 'mcpd:8080' };
      const r = run('caddy', ['validate', '--config', path.join(DEPLOY, 'Caddyfile'), '--adapter', 'caddyfile'], { env });
      assert.equal(r.status, 0, r.out);
      assert.match(r.out, /Valid configuration/);
      // The adapted JSON: localhost gets the internal issuer, a domain ACME.
      const a = run('caddy', ['adapt', '--config', path.join(DEPLOY, 'Caddyfile'), '--adapter', 'caddyfile'], { env });
      assert.equal(a.status, 0, a.out);
      const json = JSON.parse(a.out.slice(a.out.indexOf('{')));
      const route = JSON.stringify(json.apps.http.servers);
      assert.match(route, new RegExp(`"host":\\["${domain.replace('.', '\\.')}"\\]`));
      assert.match(route, /"flush_interval":-1/);
      assert.doesNotMatch(route, /"encode"/, 'no compression');
      for (const p of ['/mcp', '/mcp/ws', '/sse', '/messages', '/healthz', '/readyz']) assert.ok(route.includes(`"${p}"`), `${p} is routed`);
      // Both of Caddy's logs that write requests (the access log, and the
      // default log where failed requests go) filter the credentials out.
      const logs = json.logging?.logs ?? {};
      assert.deepEqual(Object.keys(logs).sort(), ['default', 'log0']);
      for (const [name, log] of Object.entries(logs)) {
        assert.equal(log.encoder?.format, 'filter', `log ${name} is filtered`);
        for (const f of ['request>headers>Sec-Websocket-Protocol', 'request>headers>Authorization', 'request>uri'])
          assert.ok(log.encoder.fields?.[f], `log ${name} filters ${f}`);
      }
    }
  });

  test('nginx -t on deploy/nginx.conf', { skip: (!haveNginx || !haveOpenssl) && 'nginx or openssl is not installed' }, async () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'nginx-t-'));
    const conf = nginxConf(dir, { certs: makeCerts(dir), httpPort: await freePort(), httpsPort: await freePort() });
    const r = run('nginx', ['-t', '-p', dir, '-c', conf]);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /test is successful/);
    // and a broken copy fails, so the check can fail
    fs.writeFileSync(conf, fs.readFileSync(conf, 'utf8').replace('proxy_buffering off;', 'proxy_buffering sideways;'));
    assert.notEqual(run('nginx', ['-t', '-p', dir, '-c', conf]).status, 0);
  });

  test('nginx.conf: the access log format names no credential and no query string', () => {
    const c = fs.readFileSync(path.join(DEPLOY, 'nginx.conf'), 'utf8');
    const formats = [...c.matchAll(/^\s*log_format\s+(\S+)\s+((?:'[^']*'\s*)+);/gm)];
    assert.equal(formats.length, 1, 'one log_format');
    const [, name, fmt] = formats[0];
    for (const v of ['$request_uri', '$args', '$query_string', '$arg_', '$is_args'])
      assert.ok(!fmt.includes(v), `the log format has ${v}`);
    assert.doesNotMatch(fmt, /\$request\b/, '$request has the query string');
    assert.doesNotMatch(fmt, /\$http_(?!user_agent)/, 'no request header but the user agent');
    const logs = [...c.matchAll(/^\s*access_log\s+([^;]+);/gm)].map((m) => m[1].trim().split(/\s+/));
    assert.ok(logs.length >= 1);
    for (const l of logs) assert.ok(l[0] === 'off' || l[1] === name, `access_log ${l.join(' ')} uses the ${name} format`);
  });

  const LINT = path.join(REPO_ROOT, 'tests', 'deploy', 'lint', 'node_modules', 'dockerfile-utils', 'bin', 'dockerfile-utils');
  const lint = (file) => run(process.execPath, [LINT, 'lint', file]);
  test('the Dockerfiles lint clean', { skip: !fs.existsSync(LINT) && 'dockerfile-utils is not installed (npm ci in tests/deploy/lint)' }, () => {
    for (const f of ['deploy/Dockerfile', 'deploy/caddy-standin/Dockerfile', 'deploy/postgres-standin/Dockerfile']) {
      const r = lint(path.join(REPO_ROOT, f));
      assert.equal(r.status, 0, r.out);
      assert.equal(r.out.trim(), '', `${f}:\n${r.out}`);
    }
    const bad = path.join(tmp, 'bad.Dockerfile');
    fs.writeFileSync(bad, 'FROM debian:bookworm-slim\nUSER\nHEALTHCHECK CMD\n');
    assert.match(lint(bad).out, /Error/, 'the linter reports errors at all');
  });

  test('deploy/Dockerfile keeps the image rules', () => {
    const d = fs.readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
    const froms = [...d.matchAll(/^FROM\s+(\S+)/gm)].map((m) => m[1]);
    assert.ok(froms.length >= 2, 'multi-stage');
    assert.match(d, /^ARG BASE=debian:bookworm-slim$/m);
    assert.ok(froms.every((f) => f === '${BASE}'), `every stage on the base: ${froms}`);
    const runtime = d.slice(d.lastIndexOf('\nFROM '));
    assert.doesNotMatch(runtime, /-dev\b|build-essential|cmake/, 'no build tools in the runtime stage');
    assert.match(runtime, /^USER mcpd$/m, 'runs as the non-root user');
    assert.match(runtime, /^VOLUME \["\/data"\]$/m);
    assert.match(runtime, /MCPD_LISTEN=0\.0\.0\.0:8080/);
    assert.match(runtime, /MCPD_AUTH=token/);
    assert.match(runtime, /^HEALTHCHECK .*\n?.*mcp-admin.*health/m);
    for (const m of d.matchAll(/apt-get install[^\n]*\\?\n?/g)) assert.match(m[0], /--no-install-recommends/);
    assert.equal(d.match(/rm -rf \/var\/lib\/apt\/lists/g)?.length, 2, 'apt lists removed in both stages');
    const ignore = fs.readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8');
    assert.match(ignore, /^\*$/m, '.dockerignore starts from nothing and names what goes in');
  });

  test('the Docker build context (what .dockerignore lets in) configures with the Dockerfile\'s cmake line', () => {
    // The image build fails on a source the context leaves out; this says so
    // in seconds, without an engine.
    const d = fs.readFileSync(path.join(DEPLOY, 'Dockerfile'), 'utf8');
    const line = d.match(/^RUN cmake -S \. -B \/build ([^\\\n]*)/m);
    assert.ok(line, 'the Dockerfile configures with cmake -S . -B /build');
    const ignore = fs.readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n');
    const ctx = path.join(tmp, 'docker-context');
    for (const l of ignore.filter((x) => x.startsWith('!'))) {
      const rel = l.slice(1).replace(/\/$/, '');
      fs.cpSync(path.join(REPO_ROOT, rel), path.join(ctx, rel), { recursive: true });
    }
    const r = run('cmake', ['-S', ctx, '-B', path.join(ctx, 'build'), ...line[1].trim().split(/\s+/)]);
    assert.equal(r.status, 0, `cmake in the build context:\n${r.out}`);
  });
});

// ------------------------------------------------------------ live proxies

class Proc {
  /** All of its output (across restarts) also goes to `file`: the logs test reads it whole. */
  constructor(name, cmd, args, env, file) {
    Object.assign(this, { name, cmd, args, env, file, log: '' });
  }

  start() {
    // Its own process group: nginx's workers outlive a SIGKILLed master and
    // would hold our pipes (and this test process) open.
    this.proc = spawn(this.cmd, this.args, { env: this.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const keep = (d) => {
      this.log = (this.log + d).slice(-20000);
      fs.appendFileSync(this.file, d);
    };
    this.proc.stdout.on('data', keep);
    this.proc.stderr.on('data', keep);
    this.exited = new Promise((r) => this.proc.on('exit', (code, signal) => r({ code, signal })));
  }

  /** Signals the proxy's whole process group (ours: started by start()). */
  kill(signal) {
    try {
      process.kill(-this.proc.pid, signal);
    } catch {
      /* already gone */
    }
  }

  async stop(signal = 'SIGTERM') {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.kill(signal);
    await withTimeout(this.exited, 10000, `${this.name} exit`).catch(() => this.kill('SIGKILL'));
    if (signal === 'SIGKILL') this.kill('SIGKILL'); // the workers of a killed master
  }
}

/**
 * The proxy `kind` with its shipped config in `dir`, on fresh loopback
 * ports, in front of 127.0.0.1:upstreamPort; not started. Everything it
 * writes (stdout, stderr, nginx's log files) stays in `dir`.
 */
async function makeProxy(kind, dir, upstreamPort) {
  const httpPort = await freePort();
  const httpsPort = await freePort();
  const out = path.join(dir, `${kind}.out`);
  if (kind === 'caddy') {
    const env = caddyEnv(dir, { httpPort, httpsPort, upstreamPort });
    const proxy = new Proc('caddy', 'caddy', ['run', '--config', path.join(DEPLOY, 'Caddyfile'), '--adapter', 'caddyfile'], env, out);
    return { proxy, httpsPort, ca: path.join(dir, 'data', 'caddy', 'pki', 'authorities', 'local', 'root.crt') };
  }
  const certs = makeCerts(dir);
  const conf = nginxConf(dir, { httpPort, httpsPort, upstreamPort, certs });
  const proxy = new Proc('nginx', 'nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], process.env, out);
  return { proxy, httpsPort, ca: certs.ca };
}

/** Starts a proxy made by makeProxy; resolves its CA's PEM once it answers. */
async function proxyUp(kind, { proxy, httpsPort, ca }) {
  proxy.start();
  const deadline = Date.now() + 30000;
  // Caddy makes its CA on the first start; it must be there before a
  // client can trust it, and the port must answer.
  while (!(fs.existsSync(ca) && (await portOpen(httpsPort)))) {
    if (Date.now() > deadline || proxy.proc.exitCode !== null) throw new Error(`${kind} did not start:\n${proxy.log}`);
    await sleep(100);
  }
  // Caddy issues the site's certificate after it listens: until then a
  // handshake ends in an "internal error" alert (seen under the CI's load).
  const pem = fs.readFileSync(ca);
  while (!(await handshakes(httpsPort, pem))) {
    if (Date.now() > deadline || proxy.proc.exitCode !== null) throw new Error(`${kind}: no TLS handshake:\n${proxy.log}`);
    await sleep(100);
  }
  return pem;
}

/** Whether a TLS handshake for localhost on port, trusting ca, succeeds. */
function handshakes(port, ca) {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
    s.setTimeout(2000, () => {
      s.destroy();
      resolve(false);
    });
  });
}

/** mcpd, and one proxy in front of it on loopback HTTPS. */
async function startStack(kind) {
  const dir = fs.mkdtempSync(path.join(tmp, `${kind}-`));
  // Debug: the logs test checks every line mcpd can write.
  const args = ['--log-level', 'debug'];
  if (withTokens) args.push('--auth', 'token');
  if (trustedProxies) args.push('--trusted-proxies', '127.0.0.1');
  const mcpd = await startMcpd({ args });
  // mcpd's whole stderr from here on (Mcpd keeps only its tail); no token
  // exists before this point.
  const mcpdLog = path.join(dir, 'mcpd.stderr');
  fs.writeFileSync(mcpdLog, '');
  mcpd.proc.stderr.on('data', (d) => fs.appendFileSync(mcpdLog, d));
  let token;
  if (withTokens) {
    token = execFileSync(ADMIN_BIN, ['--db', mcpd.db, 'tokens', 'add', `${kind}-test`], { encoding: 'utf8' }).trim();
    assert.match(token, /^\S{16,}$/, 'mcp-admin tokens add prints only the token');
  }
  const made = await makeProxy(kind, dir, mcpd.port);
  const { proxy, ca, httpsPort } = made;
  const stack = {
    kind,
    dir,
    mcpd,
    proxy,
    ca,
    token,
    mcpdLog,
    port: httpsPort,
    url: `https://localhost:${httpsPort}/mcp`,
    auth: token ? { Authorization: `Bearer ${token}` } : {},
    async up() {
      stack.caPem = await proxyUp(kind, made);
      stack.agent = new Agent({ connect: { ca: stack.caPem } });
    },
    async down() {
      await proxy.stop();
      await mcpd.cleanup();
    },
  };
  await stack.up();
  return stack;
}

/** An HTTPS request through the proxy, answered with a node response (SSE readable). */
function httpsOpen(stack, { method = 'POST', path: p = '/mcp', headers = {}, body, auth = true } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      {
        host: '127.0.0.1',
        servername: 'localhost',
        port: stack.port,
        path: p,
        method,
        ca: stack.caPem,
        agent: false,
        headers: {
          Host: `localhost:${stack.port}`,
          Accept: 'application/json, text/event-stream',
          // Streamable HTTP's header; the legacy transport predates it.
          ...(p === '/mcp' || p.startsWith('/mcp?') ? { 'MCP-Protocol-Version': LATEST } : {}),
          ...(payload ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) } : {}),
          ...(auth ? stack.auth : {}),
          ...headers,
        },
        timeout: 20000,
      },
      (res) => resolve(res),
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('request timeout')));
    if (payload) req.write(payload);
    req.end();
  });
}

async function readBody(res) {
  let text = '';
  res.setEncoding('utf8');
  for await (const d of res) text += d;
  return text;
}

async function sdkClient(stack) {
  const client = new Client({ name: 'deploy-proxies', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(stack.url), {
    fetch: (url, init) => undiciFetch(url, { ...init, dispatcher: stack.agent }),
    requestInit: { headers: stack.auth },
  });
  await withTimeout(client.connect(transport), 20000, `SDK connect through ${stack.kind}`);
  return client;
}

/** Progress sent `interval` ms apart must arrive spread out, before the result. */
function assertIncremental(times, resultAt, n, interval) {
  assert.equal(times.length, n, `${n} progress notifications, got ${times.length}`);
  const spread = times[n - 1] - times[0];
  // a buffering proxy delivers them in one burst with the result
  assert.ok(spread >= (n - 1) * interval * 0.5, `progress spread over ${spread} ms, sent over ${(n - 1) * interval} ms`);
  assert.ok(resultAt - times[0] >= (n - 1) * interval * 0.5, `first progress only ${resultAt - times[0]} ms before the result`);
}

for (const kind of ['caddy', 'nginx']) {
  const missing = kind === 'caddy' ? !haveCaddy && 'caddy is not installed' : (!haveNginx || !haveOpenssl) && 'nginx or openssl is not installed';
  describe(`${kind} with the shipped config in front of mcpd`, { skip: missing }, () => {
    let stack;
    before(async () => {
      stack = await startStack(kind);
    });
    after(async () => {
      await stack?.down();
    });

    test('the SDK client over HTTPS: tools and a call', async () => {
      const client = await sdkClient(stack);
      try {
        const { tools } = await client.listTools();
        assert.ok(tools.some((t) => t.name === 'echo'));
        const r = await client.callTool({ name: 'echo', arguments: { message: `through ${kind}` } });
        assert.equal(r.content[0].text, `through ${kind}`);
      } finally {
        await client.close();
      }
    });

    test('SSE progress arrives as it is sent (timestamps)', async () => {
      const client = await sdkClient(stack);
      try {
        const times = [];
        const progress = [];
        const r = await client.callTool({ name: 'countdown', arguments: { n: 5, interval_ms: 400 } }, undefined, {
          onprogress: (p) => {
            times.push(Date.now());
            progress.push(p.progress);
          },
          timeout: 30000,
        });
        const resultAt = Date.now();
        assert.equal(r.content[0].text, 'countdown finished');
        assert.deepEqual(progress, [1, 2, 3, 4, 5]);
        assertIncremental(times, resultAt, 5, 400);
      } finally {
        await client.close();
      }
    });

    test('health endpoints pass, /metrics and other paths do not', async () => {
      for (const [p, status] of [['/healthz', 200], ['/readyz', 200], ['/metrics', 404], ['/', 404]]) {
        const r = await undiciFetch(`https://localhost:${stack.port}${p}`, { dispatcher: stack.agent, headers: stack.auth });
        await r.arrayBuffer();
        assert.equal(r.status, status, `${p} through ${kind}`);
      }
    });

    test('a request without the token gets 401', { skip: !withTokens && 'mcpd has no --auth or mcp-admin is not built yet' }, async () => {
      const res = await httpsOpen(stack, {
        auth: false,
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'x', version: '0' } } },
      });
      await readBody(res);
      assert.equal(res.statusCode, 401);
      assert.match(String(res.headers['www-authenticate']), /^Bearer/);
    });

    test('WebSocket on /mcp/ws through the proxy: progress as sent, and the reply', async () => {
      const ws = new WebSocket(`wss://localhost:${stack.port}/mcp/ws`, 'mcp', { ca: stack.caPem, headers: stack.auth });
      const inbox = [];
      const waiters = [];
      ws.on('message', (d) => {
        inbox.push({ msg: JSON.parse(String(d)), at: Date.now() });
        for (const w of waiters.splice(0)) w();
      });
      const until = async (pred, ms = 20000) => {
        const deadline = Date.now() + ms;
        for (;;) {
          const hit = inbox.find((m) => pred(m.msg));
          if (hit) return hit;
          if (Date.now() > deadline) throw new Error(`WebSocket through ${kind}: timeout; got ${JSON.stringify(inbox.map((m) => m.msg))}`);
          await new Promise((r) => {
            waiters.push(r);
            setTimeout(r, 200);
          });
        }
      };
      try {
        await withTimeout(new Promise((res, rej) => (ws.once('open', res), ws.once('error', rej))), 10000, 'wss open');
        assert.equal(ws.protocol, 'mcp');
        ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'ws', version: '0' } } }));
        assert.equal((await until((m) => m.id === 1)).msg.result.serverInfo.name, 'mcpd');
        ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        ws.send(JSON.stringify(toolCall(2, 'countdown', { n: 4, interval_ms: 400 }, { progressToken: 'ws' })));
        const done = await until((m) => m.id === 2);
        assert.equal(done.msg.result.content[0].text, 'countdown finished');
        const prog = inbox.filter((m) => m.msg.method === 'notifications/progress');
        assert.deepEqual(prog.map((m) => m.msg.params.progress), [1, 2, 3, 4]);
        assertIncremental(prog.map((m) => m.at), done.at, 4, 400);
      } finally {
        ws.terminate();
      }
    });

    test('the legacy HTTP+SSE transport (2024-11-05): the endpoint event, initialize and a tools/call POSTed to /messages, the answers and progress on /sse as sent', async () => {
      const get = await httpsOpen(stack, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
      try {
        assert.equal(get.statusCode, 200, `GET /sse through ${kind}`);
        assert.match(String(get.headers['content-type']), /^text\/event-stream/);
        const sse = new SseReader(get);
        // The first event is small and the stream stays open: a buffering
        // proxy holds it back.
        const ep = await sse.next(10000);
        assert.equal(ep?.event, 'endpoint', `the first event: ${JSON.stringify(ep)}`);
        assert.match(ep.data, /^\/messages\?sessionId=[0-9a-f]{32}$/);
        const post = async (body) => {
          const r = await httpsOpen(stack, { path: ep.data, body });
          return { status: r.statusCode, text: await readBody(r) };
        };
        const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'legacy', version: '0' } } });
        assert.equal(init.status, 202, `POST initialize to /messages through ${kind}: ${init.text}`);
        const answer = await sse.nextMessage(10000);
        assert.ok(answer, 'the /sse stream ended before the initialize answer');
        assert.equal(answer.msg.id, 1);
        assert.equal(answer.msg.result.protocolVersion, '2024-11-05');
        assert.equal(answer.msg.result.serverInfo.name, 'mcpd');
        assert.equal((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
        const call = await post(toolCall(2, 'countdown', { n: 4, interval_ms: 400 }, { progressToken: 'legacy' }));
        assert.equal(call.status, 202, call.text);
        const progress = [];
        let done;
        while (!done) {
          const m = await sse.nextMessage(20000);
          assert.ok(m, `the /sse stream ended; progress so far ${JSON.stringify(progress)}`);
          if (m.msg.method === 'notifications/progress') progress.push({ p: m.msg.params.progress, at: Date.now() });
          else if (m.msg.id === 2) done = { msg: m.msg, at: Date.now() };
        }
        assert.equal(done.msg.result.content[0].text, 'countdown finished');
        assert.deepEqual(progress.map((x) => x.p), [1, 2, 3, 4]);
        assertIncremental(progress.map((x) => x.at), done.at, 4, 400);
      } finally {
        get.destroy();
      }
    });

    for (const transport of ['http', 'sse']) {
      const name = transport === 'http' ? 'mcp-bridge --cacert through the proxy' : 'mcp-bridge --transport sse (the legacy transport) through the proxy';
      test(name, { skip: !fs.existsSync(BRIDGE_BIN) && 'mcp-bridge is not built' }, async () => {
        const args = ['--cacert', stack.ca];
        if (stack.token) args.push('--token-env', 'DEPLOY_TEST_TOKEN');
        const url = transport === 'http' ? stack.url : `https://localhost:${stack.port}/sse`;
        if (transport !== 'http') args.push('--transport', transport);
        const b = new BridgeProc([...args, url], { env: { DEPLOY_TEST_TOKEN: stack.token ?? '' } });
        try {
          assert.equal((await b.init()).result.serverInfo.name, 'mcpd');
          b.send(toolCall(2, 'echo', { message: `bridged through ${kind}` }));
          assert.equal((await b.response(2, 20000)).result.content[0].text, `bridged through ${kind}`);
          b.end();
          assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
        } finally {
          await b.cleanup();
        }
      });
    }

    test('the proxy is killed mid-stream and started again: Last-Event-ID resumes the stream exactly', async () => {
      const init = await httpsOpen(stack, {
        body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'resume', version: '0' } } },
      });
      await readBody(init);
      assert.equal(init.statusCode, 200);
      const session = init.headers['mcp-session-id'];
      assert.ok(session, 'a session id through the proxy');
      const sh = { 'Mcp-Session-Id': session };
      const note = await httpsOpen(stack, { headers: sh, body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
      await readBody(note);
      assert.equal(note.statusCode, 202);

      const post = await httpsOpen(stack, {
        headers: sh,
        body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'countdown', arguments: { n: 10, interval_ms: 300 }, _meta: { progressToken: 'drop' } } },
      });
      assert.equal(post.statusCode, 200);
      assert.match(String(post.headers['content-type']), /^text\/event-stream/);
      const sse = new SseReader(post);
      const seen = [];
      let lastId;
      while (seen.length < 3) {
        const m = await sse.nextMessage(10000);
        assert.ok(m, `stream ended after ${seen.length} progress events`);
        seen.push(m.msg.params.progress);
        lastId = m.ev.id;
      }
      assert.deepEqual(seen, [1, 2, 3]);

      // The proxy dies under the open stream, then comes back.
      await stack.proxy.stop('SIGKILL');
      await withTimeout(
        (async () => {
          while (!sse.ended) await sleep(50);
        })(),
        10000,
        'the client sees the connection drop',
      );
      await stack.up();

      const get = await httpsOpen(stack, { method: 'GET', headers: { ...sh, 'Last-Event-ID': lastId } });
      assert.equal(get.statusCode, 200);
      const rest = await new SseReader(get).rest(20000);
      const progress = rest.filter((m) => m.msg.method === 'notifications/progress').map((m) => m.msg.params.progress);
      const last = rest[rest.length - 1].msg;
      // Whatever the dropped connection did not deliver, exactly once.
      assert.deepEqual(progress, [4, 5, 6, 7, 8, 9, 10]);
      assert.equal(last.id, 7);
      assert.equal(last.result.content[0].text, 'countdown finished');
    });

    // Last: it also reads what every test before it left in the logs.
    test('no credential reaches a log: the proxy\'s (access and error, also with its upstream down), mcpd\'s, mcp-admin logs', { skip: !withTokens && 'mcpd has no --auth or mcp-admin is not built yet' }, async () => {
      // A token mcpd does not know is a credential all the same (a typo of
      // a real one, or one for another server).
      const unknown = `mcpd_${crypto.randomBytes(32).toString('base64url')}`;
      const wsUrl = (port) => `wss://localhost:${port}/mcp/ws`;
      /** A WebSocket carrying `token` as the `bearer.` subprotocol, as a browser must. */
      const wsOpen = (port, pem, token) => {
        const ws = new WebSocket(wsUrl(port), ['mcp', `bearer.${token}`], { ca: pem });
        const opened = new Promise((res, rej) => (ws.once('open', res), ws.once('error', rej)));
        return { ws, opened: withTimeout(opened, 10000, `wss open through ${kind}`) };
      };
      const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'logs', version: '0' } } };

      // The token as a subprotocol: accepted, and the session answers.
      const good = wsOpen(stack.port, stack.caPem, stack.token);
      try {
        await good.opened;
        assert.equal(good.ws.protocol, 'mcp');
        const reply = withTimeout(new Promise((res) => good.ws.once('message', (d) => res(JSON.parse(String(d))))), 10000, 'initialize over wss');
        good.ws.send(JSON.stringify(init));
        assert.equal((await reply).result.serverInfo.name, 'mcpd');
      } finally {
        good.ws.close();
      }
      // An unknown token as a subprotocol: refused.
      const bad = wsOpen(stack.port, stack.caPem, unknown);
      await assert.rejects(bad.opened, /401/);
      // Authorization on a POST, with the token in the query string as well
      // (mcpd ignores it; a client that was given such a URL sends it).
      for (const [token, status] of [[stack.token, 200], [unknown, 401]]) {
        const r = await httpsOpen(stack, { path: `/mcp?access_token=${token}`, auth: false, headers: { Authorization: `Bearer ${token}` }, body: init });
        await readBody(r);
        assert.equal(r.statusCode, status);
      }

      // mcp-bridge given a URL with the token in its query (and the token
      // itself): its own log (stderr, at debug) names the server without it.
      let bridgeLog = '';
      if (fs.existsSync(BRIDGE_BIN)) {
        const b = new BridgeProc(['--cacert', stack.ca, '--token-env', 'DEPLOY_TEST_TOKEN', '--log-level', 'debug', `${stack.url}?api_key=${stack.token}`], { env: { DEPLOY_TEST_TOKEN: stack.token } });
        try {
          assert.equal((await b.init()).result.serverInfo.name, 'mcpd');
          b.end();
          assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
          bridgeLog = b.stderr;
        } finally {
          await b.cleanup();
        }
        assert.ok(!bridgeLog.includes(stack.token), 'mcp-bridge logged the token in its URL');
        assert.match(bridgeLog, new RegExp(`event=bridge_ready msg="relaying stdio to https://localhost:${stack.port}/mcp"`));
      }

      // The same proxy config with its upstream down: the request fails
      // (502), and Caddy logs a failed request with all of its headers.
      const deadDir = fs.mkdtempSync(path.join(tmp, `${kind}-dead-`));
      const dead = await makeProxy(kind, deadDir, await freePort());
      try {
        const pem = await proxyUp(kind, dead);
        await assert.rejects(wsOpen(dead.httpsPort, pem, stack.token).opened, /502/);
        const r = await httpsOpen({ ...stack, port: dead.httpsPort, caPem: pem }, { body: init });
        await readBody(r);
        assert.equal(r.statusCode, 502);
      } finally {
        await dead.proxy.stop();
      }

      // nginx writes a request's access line when it ends, mcpd's logs
      // table is written by its group commit: give both a moment.
      await sleep(1000);
      /** Every file under dir, as text. */
      const readAll = (dir) =>
        fs
          .readdirSync(dir, { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile())
          .map((e) => ({ file: path.join(e.parentPath ?? e.path, e.name), text: fs.readFileSync(path.join(e.parentPath ?? e.path, e.name), 'latin1') }));
      const admin = (args) => ({ file: `mcp-admin ${args.join(' ')}`, text: execFileSync(ADMIN_BIN, ['--db', stack.mcpd.db, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 }) });
      const logs = [
        ...readAll(stack.dir),
        ...readAll(deadDir),
        admin(['logs', '--level', 'debug', '--limit', '1000000']),
        admin(['--json', 'logs', '--level', 'debug', '--limit', '1000000']),
        { file: "mcp-bridge's stderr", text: bridgeLog },
      ];
      for (const { file, text } of logs) {
        for (const [what, token] of [['the token', stack.token], ['an unknown token', unknown]]) assert.ok(!text.includes(token), `${what} is in ${file}`);
      }

      // ... and the logs did record those requests (logging is on as shipped).
      const text = (dir, name) => fs.readFileSync(path.join(dir, name), 'utf8');
      if (kind === 'caddy') {
        assert.match(text(stack.dir, 'caddy.out'), /"uri": "\/mcp\/ws".*"Sec-Websocket-Protocol": "REDACTED"/, 'Caddy logged the WebSocket request, its subprotocol filtered');
        assert.match(text(stack.dir, 'caddy.out'), /"uri": "\/mcp\?REDACTED"/, 'Caddy logged the POST, its query filtered');
        assert.match(text(deadDir, 'caddy.out'), /"logger":"http\.log\.error[^\n]*"Sec-Websocket-Protocol":"REDACTED"/, 'Caddy\'s error log has the failed WebSocket request, filtered');
      } else {
        assert.match(text(stack.dir, 'access.log'), /"GET \/mcp\/ws HTTP\/1\.1" 101 /, 'nginx logged the WebSocket request');
        assert.match(text(stack.dir, 'access.log'), /"POST \/mcp HTTP\/1\.1" 401 /, 'nginx logged the POST, without its query');
        assert.match(text(deadDir, 'error.log'), /connect\(\) failed/, 'nginx\'s error log has the failed requests');
      }
      // mcpd names the token (its principal), never the token itself.
      assert.match(text(stack.dir, 'mcpd.stderr'), new RegExp(`event=request msg="GET /mcp/ws status=\\d+ principal=${kind}-test `), 'mcpd logged the WebSocket request');
    });
  });
}
