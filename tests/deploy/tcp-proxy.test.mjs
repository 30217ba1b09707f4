// deploy/nginx-tcp.conf, Debian's nginx (with libnginx-mod-stream) on
// loopback terminating TLS in front of a native mcpd's --tcp-listen, with a
// CA and certificate made here by openssl. The file is used with only its
// ports, upstream address, certificate, pid and log paths replaced (each
// replacement must match exactly, so a changed file fails here rather than
// being tested half). Checked:
//   - `nginx -t` passes, and fails on a broken copy;
//   - proxy_timeout is longer than mcpd's default --tcp-idle-ms, and with a
//     short --tcp-idle-ms mcpd's own "idle timeout" error reaches the TLS
//     client before the connection ends (mcpd, not nginx, ends it);
//   - a Node TLS client trusting the test CA: mcpd/connect with a token,
//     initialize, tools/call echo, in NDJSON and in Content-Length framing;
//     an unknown token is refused by mcpd through the proxy;
//   - plain TCP to the TLS port fails cleanly: nginx closes it, answers no
//     JSON, mcpd never sees the bytes, and the next TLS client is served;
//   - limit_conn, the per-address cap that replaces mcpd's behind the
//     proxy: past it a connection is closed before its TLS handshake;
//   - no token (a real one, an unknown one) in nginx's logs (access and
//     error; the stream access log has no payload variables to write) nor
//     in mcpd's stderr, and the access log did record the connections.
// mcpd runs with --auth token where it and mcp-admin have it, as the file's
// header says it must behind the proxy.

import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import tls from 'node:tls';

import { ADMIN_BIN, LATEST, MCPD_BIN, REPO_ROOT, freePort, sleep, startMcpd, withTimeout } from '../e2e/lib/mcpd.mjs';
import { TcpClient } from '../e2e/lib/tcp-client.mjs';

const CONF = path.join(REPO_ROOT, 'deploy', 'nginx-tcp.conf');
const STREAM_MODULE = '/usr/lib/nginx/modules/ngx_stream_module.so';
const has = (cmd, args = ['--version']) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
const mcpdHelp = spawnSync(MCPD_BIN, ['--help'], { encoding: 'utf8' }).stdout ?? '';
const nginxV = spawnSync('nginx', ['-V'], { encoding: 'utf8' });
const nginxBuild = `${nginxV.stdout ?? ''}${nginxV.stderr ?? ''}`;
// Debian builds the stream module dynamic: it is there once
// libnginx-mod-stream is installed (deploy/install-deps.sh --test).
const streamStatic = /--with-stream(?!=dynamic)(\s|$)/.test(nginxBuild);
const skip =
  (!has('nginx', ['-v']) && 'nginx is not installed') ||
  (!has('openssl', ['version']) && 'openssl is not installed') ||
  (!streamStatic && !fs.existsSync(STREAM_MODULE) && `no nginx stream module (${STREAM_MODULE}; apt-get install libnginx-mod-stream)`) ||
  (!/--tcp-listen\b/.test(mcpdHelp) && 'mcpd has no --tcp-listen');
const withTokens = /--auth\b/.test(mcpdHelp) && fs.existsSync(ADMIN_BIN);
// mcpd's default --tcp-idle-ms, which the shipped proxy_timeout must exceed.
const MCPD_IDLE_MS = 300000;
const IDLE_MS = 1500; // this test's mcpd: short, to see mcpd end an idle connection

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-tcp-proxy-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Replace `from` in `text`, asserting it occurs exactly `times` times. */
function replaceExactly(text, from, to, times = 1) {
  const n = text.split(from).length - 1;
  assert.equal(n, times, `deploy/nginx-tcp.conf: expected ${times}× ${JSON.stringify(from)}, found ${n}`);
  return text.split(from).join(to);
}

/** A CA and a leaf for localhost/127.0.0.1 signed by it (as proxies.test.mjs). */
function makeCerts(dir) {
  const o = (args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=mcpd test CA', '-keyout', 'ca.key', '-out', 'ca.crt']);
  o(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'leaf.key', '-out', 'leaf.csr']);
  fs.writeFileSync(path.join(dir, 'leaf.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  o(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'leaf.ext', '-out', 'leaf.crt']);
  return { ca: path.join(dir, 'ca.crt'), cert: path.join(dir, 'leaf.crt'), key: path.join(dir, 'leaf.key') };
}

/** deploy/nginx-tcp.conf with only what a loopback test must change. */
function nginxConf(dir, { tlsPort, upstreamPort, certs, perAddress = 256 }) {
  let c = fs.readFileSync(CONF, 'utf8');
  if (streamStatic) c = replaceExactly(c, `load_module ${STREAM_MODULE};`, '');
  c = replaceExactly(c, 'pid /run/nginx-mcpd-tcp.pid;', `pid ${dir}/nginx.pid;`);
  c = replaceExactly(c, '/var/log/nginx/mcpd-tcp-error.log', `${dir}/error.log`);
  c = replaceExactly(c, '/var/log/nginx/mcpd-tcp-access.log', `${dir}/access.log`);
  c = replaceExactly(c, '/etc/letsencrypt/live/mcp.example.com/fullchain.pem', certs.cert);
  c = replaceExactly(c, '/etc/letsencrypt/live/mcp.example.com/privkey.pem', certs.key);
  c = replaceExactly(c, 'worker_processes auto;', 'worker_processes 1;');
  c = replaceExactly(c, 'listen 9443 ssl;', `listen 127.0.0.1:${tlsPort} ssl;`);
  c = replaceExactly(c, 'listen [::]:9443 ssl;', '');
  c = replaceExactly(c, 'server 127.0.0.1:9000;', `server 127.0.0.1:${upstreamPort};`);
  c = replaceExactly(c, 'limit_conn mcpd_tcp_addr 256;', `limit_conn mcpd_tcp_addr ${perAddress};`);
  const file = path.join(dir, 'nginx.conf');
  fs.writeFileSync(file, c);
  return file;
}

/** A TCP (and TLS) connection's outcome: resolves once it is closed, with what arrived. */
function closedWith(sock) {
  let got = Buffer.alloc(0);
  sock.on('data', (d) => (got = Buffer.concat([got, d])));
  sock.on('error', () => {});
  return new Promise((resolve) => sock.on('close', () => resolve(got)));
}

/** A TLS connection through the proxy, wrapped in the e2e raw-TCP client. */
async function tlsClient(stack, framing = 'ndjson') {
  const c = new TcpClient(framing);
  await withTimeout(
    new Promise((resolve, reject) => {
      c.sock = tls.connect({ host: '127.0.0.1', port: stack.tlsPort, servername: 'localhost', ca: stack.caPem }, resolve);
      c.sock.once('error', reject);
      c._wire();
    }),
    10000,
    'TLS handshake through nginx',
  );
  return c;
}

const greet = (token, id = 'hello') => ({ jsonrpc: '2.0', id, method: 'mcpd/connect', params: token ? { token } : {} });

describe('deploy/nginx-tcp.conf: TLS in front of mcpd --tcp-listen', { skip }, () => {
  let stack;
  let nginx;
  let nginxOut = '';

  before(async () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'stack-'));
    const tcpPort = await freePort();
    const args = ['--tcp-listen', `127.0.0.1:${tcpPort}`, '--tcp-idle-ms', String(IDLE_MS), '--max-connections-per-ip', '0', '--log-level', 'debug'];
    if (withTokens) args.push('--auth', 'token');
    const mcpd = await startMcpd({ args });
    const mcpdLog = path.join(dir, 'mcpd.stderr');
    fs.writeFileSync(mcpdLog, '');
    mcpd.proc.stderr.on('data', (d) => fs.appendFileSync(mcpdLog, d));
    const token = withTokens ? execFileSync(ADMIN_BIN, ['--db', mcpd.db, 'tokens', 'add', 'tcp-proxy-test'], { encoding: 'utf8' }).trim() : undefined;
    const certs = makeCerts(dir);
    const tlsPort = await freePort();
    const conf = nginxConf(dir, { tlsPort, upstreamPort: tcpPort, certs, perAddress: 3 });
    const t = spawnSync('nginx', ['-t', '-p', dir, '-c', conf], { encoding: 'utf8' });
    assert.equal(t.status, 0, `${t.stdout}${t.stderr}`);
    // Its own process group, so that stopping it takes its worker too.
    nginx = spawn('nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    nginx.stdout.on('data', (d) => (nginxOut += d));
    nginx.stderr.on('data', (d) => (nginxOut += d));
    stack = { dir, mcpd, mcpdLog, token, tlsPort, tcpPort, caPem: fs.readFileSync(certs.ca), conf };
    const deadline = Date.now() + 15000;
    for (;;) {
      const up = await new Promise((resolve) => {
        const s = net.connect(tlsPort, '127.0.0.1', () => (s.destroy(), resolve(true)));
        s.on('error', () => resolve(false));
      });
      if (up) break;
      if (Date.now() > deadline || nginx.exitCode !== null) throw new Error(`nginx did not start:\n${nginxOut}`);
      await sleep(100);
    }
  });

  after(async () => {
    if (nginx && nginx.exitCode === null && nginx.signalCode === null) {
      const exited = new Promise((r) => nginx.once('exit', r));
      try {
        process.kill(-nginx.pid, 'SIGTERM');
      } catch {
        /* gone */
      }
      await withTimeout(exited, 10000, 'nginx exit').catch(() => {
        try {
          process.kill(-nginx.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      });
    }
    await stack?.mcpd.cleanup();
  });

  test('nginx -t passes on the file, and fails on a broken copy', () => {
    const broken = path.join(stack.dir, 'broken.conf');
    fs.writeFileSync(broken, fs.readFileSync(stack.conf, 'utf8').replace('proxy_timeout 10m;', 'proxy_timeout sideways;'));
    assert.notEqual(spawnSync('nginx', ['-t', '-p', stack.dir, '-c', broken], { stdio: 'ignore' }).status, 0);
  });

  test('proxy_timeout outlasts mcpd\'s default --tcp-idle-ms; nothing logs a payload', () => {
    const c = fs.readFileSync(CONF, 'utf8');
    const m = /^\s*proxy_timeout\s+(\d+)(ms|s|m|h)?;/m.exec(c);
    assert.ok(m, 'proxy_timeout is set');
    const ms = Number(m[1]) * { ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2] ?? 's'];
    assert.ok(ms > MCPD_IDLE_MS, `proxy_timeout ${m[1]}${m[2] ?? ''} <= --tcp-idle-ms ${MCPD_IDLE_MS} ms`);
    // The stream module has no variable holding the payload; no format may
    // name a variable beyond the connection's metadata.
    const fmt = /log_format\s+mcpd_tcp\s+((?:'[^']*'\s*)+);/.exec(c);
    assert.ok(fmt, 'the mcpd_tcp log format');
    const vars = [...fmt[1].matchAll(/\$(\w+)/g)].map((x) => x[1]).sort();
    assert.deepEqual(vars, ['bytes_received', 'bytes_sent', 'protocol', 'remote_addr', 'session_time', 'ssl_protocol', 'status', 'time_local']);
  });

  for (const framing of ['ndjson', 'content-length']) {
    test(`TLS client (${framing}): mcpd/connect with the token, initialize, tools/call echo`, async () => {
      const c = await tlsClient(stack, framing);
      try {
        const hello = await c.request(greet(stack.token));
        assert.equal(hello.result?.transport, 'tcp', JSON.stringify(hello));
        const sid = await c.init();
        assert.ok(sid, 'a session id');
        const r = await c.request({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: `over tls, ${framing}` } } });
        assert.equal(r.result?.content?.[0]?.text, `over tls, ${framing}`, JSON.stringify(r));
        assert.equal(c.sock.getProtocol()?.startsWith('TLSv1.'), true);
      } finally {
        c.destroy();
      }
    });
  }

  test('an unknown token is refused by mcpd through the proxy', { skip: !withTokens && 'mcpd has no --auth or mcp-admin is not built' }, async () => {
    const c = await tlsClient(stack);
    const unknown = `mcpd_${crypto.randomBytes(32).toString('base64url')}`;
    stack.unknown = unknown;
    const r = await c.request(greet(unknown));
    assert.equal(r.error?.code, -32001, JSON.stringify(r));
    assert.equal(r.error.data?.reason, 'unauthorized');
    await withTimeout(c.closed, 10000, 'mcpd closes the refused connection');
  });

  test('mcpd, not nginx, ends an idle connection: its "idle timeout" error arrives over TLS', async () => {
    const c = await tlsClient(stack);
    await c.request(greet(stack.token));
    await c.init();
    const t0 = Date.now();
    const m = await c.next(IDLE_MS + 10000);
    assert.equal(m.id, null);
    assert.equal(m.error?.data?.reason, 'idle timeout', JSON.stringify(m));
    await withTimeout(c.closed, 10000, 'the connection ends after the error');
    assert.ok(Date.now() - t0 >= IDLE_MS - 500, 'not before --tcp-idle-ms');
  });

  test('plain TCP to the TLS port fails cleanly: closed, no JSON back, mcpd sees nothing, and TLS still works', async () => {
    const before = fs.readFileSync(stack.mcpdLog, 'utf8').length;
    const s = net.connect(stack.tlsPort, '127.0.0.1');
    const got = closedWith(s);
    await withTimeout(new Promise((r) => s.once('connect', r)), 5000, 'TCP connect');
    s.write(`${JSON.stringify(greet(stack.token, 'plain'))}\n`);
    const bytes = await withTimeout(got, 15000, 'nginx closes a plain-TCP connection');
    // At most a TLS alert record (content type 21), never a JSON-RPC reply.
    assert.ok(bytes.length === 0 || bytes[0] === 0x15, `unexpected bytes: ${bytes.toString('latin1')}`);
    assert.ok(!bytes.includes('jsonrpc'), 'no JSON-RPC in the answer');
    await sleep(200);
    const after = fs.readFileSync(stack.mcpdLog, 'utf8').slice(before);
    assert.doesNotMatch(after, /plain/, 'the plain request reached mcpd');
    // and the proxy is fine
    const c = await tlsClient(stack);
    try {
      assert.equal((await c.request(greet(stack.token))).result?.transport, 'tcp');
    } finally {
      c.destroy();
    }
  });

  test('limit_conn: past the per-address cap a connection is closed before its TLS handshake', async () => {
    // This stack's cap is 3 (the shipped 256, replaced).
    const held = [];
    try {
      for (let i = 0; i < 3; i++) {
        const c = await tlsClient(stack);
        held.push(c);
        assert.equal((await c.request(greet(stack.token, `held-${i}`))).result?.transport, 'tcp');
      }
      await assert.rejects(tlsClient(stack), /socket disconnected|ECONNRESET|closed/i, 'the fourth is refused');
    } finally {
      for (const c of held) c.destroy();
    }
    // Freed: nginx counts them down as they close.
    const deadline = Date.now() + 10000;
    for (;;) {
      try {
        const c = await tlsClient(stack);
        c.destroy();
        break;
      } catch (e) {
        if (Date.now() > deadline) throw e;
        await sleep(100);
      }
    }
  });

  // Last: it reads what every test before it left in the logs.
  test('no token in nginx\'s logs (access, error, stderr) nor mcpd\'s; the access log recorded the connections', async () => {
    await sleep(500); // nginx writes a stream's access line when it ends
    const files = fs.readdirSync(stack.dir).filter((f) => f.endsWith('.log') || f.endsWith('.stderr'));
    assert.ok(files.includes('access.log') && files.includes('error.log') && files.includes('mcpd.stderr'), files.join(' '));
    const texts = [...files.map((f) => ({ file: f, text: fs.readFileSync(path.join(stack.dir, f), 'latin1') })), { file: "nginx's stderr", text: nginxOut }];
    for (const { file, text } of texts) {
      if (stack.token) assert.ok(!text.includes(stack.token), `the token is in ${file}`);
      if (stack.unknown) assert.ok(!text.includes(stack.unknown), `the unknown token is in ${file}`);
    }
    const access = fs.readFileSync(path.join(stack.dir, 'access.log'), 'utf8');
    assert.match(access, /^127\.0\.0\.1 \[[^\]]+\] TCP 200 \d+ \d+ [\d.]+ "TLSv1\.[23]"$/m, 'a proxied TLS connection');
    assert.match(access, /^127\.0\.0\.1 \[[^\]]+\] TCP 503 /m, 'the one limit_conn refused');
    // mcpd logged the connections too (the proxy's address), and the refusal.
    const mcpdLog = fs.readFileSync(stack.mcpdLog, 'utf8');
    assert.match(mcpdLog, /event=tcp_connected msg="client 127\.0\.0\.1"/);
    if (stack.unknown) assert.match(mcpdLog, /event=tcp_connect_refused msg="client 127\.0\.0\.1: Unauthorized: unknown token"/);
  });
});
