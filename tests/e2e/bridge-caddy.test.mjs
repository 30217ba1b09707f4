// mcp-bridge through a real TLS reverse proxy: Debian's caddy, started here
// on loopback with `tls internal` (its own CA; skip_install_trust keeps the
// system trust store untouched) in front of mcpd. The bridge trusts Caddy's
// root certificate only through --cacert. SSE progress must reach the client
// as it is sent, not all at once at the end; without --cacert the bridge
// says the certificate is not trusted.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { freePort, sleep, startMcpd, withTimeout } from './lib/mcpd.mjs';
import { BridgeProc, toolCall } from './fixtures/bridge-proc.mjs';

const haveCaddy = spawnSync('caddy', ['version'], { encoding: 'utf8' }).status === 0;

let mcpd, caddy, caddyExited, dir, port, rootCert;

const portOpen = (p) =>
  new Promise((resolve) => {
    const s = net.connect(p, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });

before(async () => {
  if (!haveCaddy) return;
  mcpd = await startMcpd();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-caddy-'));
  port = await freePort();
  const httpPort = await freePort();
  const caddyfile = path.join(dir, 'Caddyfile');
  fs.writeFileSync(
    caddyfile,
    `{
  admin off
  skip_install_trust
  auto_https disable_redirects
  http_port ${httpPort}
  https_port ${port}
}
https://127.0.0.1:${port} {
  bind 127.0.0.1
  tls internal
  reverse_proxy 127.0.0.1:${mcpd.port}
}
`,
  );
  const env = { ...process.env, XDG_DATA_HOME: path.join(dir, 'data'), XDG_CONFIG_HOME: path.join(dir, 'config'), HOME: dir };
  caddy = spawn('caddy', ['run', '--config', caddyfile, '--adapter', 'caddyfile'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  caddy.stderr.setEncoding('utf8');
  caddy.stderr.on('data', (d) => (log = (log + d).slice(-20000)));
  caddyExited = new Promise((r) => caddy.on('exit', r));
  rootCert = path.join(dir, 'data', 'caddy', 'pki', 'authorities', 'local', 'root.crt');
  const deadline = Date.now() + 30000;
  while (!(fs.existsSync(rootCert) && (await portOpen(port)))) {
    if (Date.now() > deadline || caddy.exitCode !== null) throw new Error(`caddy did not start:\n${log}`);
    await sleep(100);
  }
});

after(async () => {
  if (caddy && caddy.exitCode === null) {
    caddy.kill('SIGTERM');
    await withTimeout(caddyExited, 5000, 'caddy exit').catch(() => caddy.kill('SIGKILL'));
  }
  await mcpd?.cleanup();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('through Caddy with tls internal and --cacert: SSE progress arrives as it is sent', { skip: !haveCaddy && 'caddy is not installed' }, async () => {
  const b = new BridgeProc(['--cacert', rootCert, `https://127.0.0.1:${port}/mcp`]);
  try {
    const init = await b.init();
    assert.equal(init.result.serverInfo.name, 'mcpd');
    const seen = new Map(); // message index -> arrival time
    const watch = setInterval(() => {
      for (let i = 0; i < b.msgs.length; i++) if (!seen.has(i)) seen.set(i, Date.now());
    }, 10);
    const t0 = Date.now();
    b.send(toolCall(2, 'countdown', { n: 5, interval_ms: 400 }, { progressToken: 'caddy' }));
    const done = await b.response(2, 30000);
    clearInterval(watch);
    for (let i = 0; i < b.msgs.length; i++) if (!seen.has(i)) seen.set(i, Date.now());
    assert.equal(done.result.content[0].text, 'countdown finished');
    const idx = b.msgs.map((m, i) => [m, i]);
    const prog = idx.filter(([m]) => m.method === 'notifications/progress' && m.params.progressToken === 'caddy').map(([m, i]) => ({ p: m.params.progress, t: seen.get(i) }));
    const resultAt = seen.get(b.msgs.indexOf(done));
    assert.deepEqual(prog.map((x) => x.p), [1, 2, 3, 4, 5]);
    // sent 400 ms apart over 2 s: a buffering path would deliver them all
    // together with the result; as-sent delivery spreads them out
    assert.ok(prog[4].t - prog[0].t >= 800, `progress spread ${prog[4].t - prog[0].t} ms`);
    assert.ok(resultAt - prog[0].t >= 800, `first progress ${resultAt - prog[0].t} ms before the result`);
    assert.ok(prog[0].t - t0 < resultAt - t0);
    b.send(toolCall(3, 'echo', { message: 'over TLS' }));
    assert.equal((await b.response(3)).result.content[0].text, 'over TLS');
    b.end();
    assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
  } finally {
    await b.cleanup();
  }
});

test('--transport ws through Caddy: wss with --cacert, progress and a reply', { skip: !haveCaddy && 'caddy is not installed' }, async () => {
  const b = new BridgeProc(['--transport', 'ws', '--cacert', rootCert, `wss://127.0.0.1:${port}/mcp/ws`]);
  try {
    const init = await b.init();
    assert.equal(init.result.serverInfo.name, 'mcpd');
    b.send(toolCall(2, 'countdown', { n: 3, interval_ms: 100 }, { progressToken: 'wss' }));
    assert.equal((await b.response(2, 30000)).result.content[0].text, 'countdown finished');
    const prog = b.msgs.filter((m) => m.method === 'notifications/progress' && m.params.progressToken === 'wss');
    assert.deepEqual(prog.map((m) => m.params.progress), [1, 2, 3]);
    b.end();
    assert.deepEqual(await b.waitExit(), { code: 0, signal: null });
  } finally {
    await b.cleanup();
  }
});

test('without --cacert the certificate is not trusted, and the error says what to do', { skip: !haveCaddy && 'caddy is not installed' }, async () => {
  const b = new BridgeProc([`https://127.0.0.1:${port}/mcp`]);
  try {
    b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } });
    const r = await b.response(1);
    assert.match(r.error.message, /TLS certificate of 127\.0\.0\.1:\d+ is not trusted.*--cacert/);
  } finally {
    await b.cleanup();
  }
});
