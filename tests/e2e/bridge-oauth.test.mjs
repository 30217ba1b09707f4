// mcp-bridge's own OAuth sign-in against a small in-test MCP server and
// authorization server (node:http on loopback): the sign-in through the
// loopback redirect (the "browser" is curl, via --oauth-open-command), the
// token file (0600, reused by the next run, forgotten by --logout), refresh
// before expiry and after a 401, no token in the bridge's log, and no OAuth
// at all when a static token is given. The official conformance suite's
// 47 auth runs are in tests/client-auth-conformance.sh.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { BRIDGE_BIN, sdkBridge } from './fixtures/bridge-proc.mjs';

/** The MCP server at /mcp and its authorization server, one process. */
async function startServers({ expiresIn = 3600 } = {}) {
  const s = { authorize: 0, grants: [], valid: new Set(), revoked: new Set(), prm: 0, seq: 0 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const url = new URL(req.url, s.base);
      const json = (status, v, headers = {}) => {
        res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers });
        res.end(JSON.stringify(v));
      };
      if (url.pathname === '/.well-known/oauth-protected-resource/mcp') {
        s.prm++;
        return json(200, { resource: `${s.base}/mcp`, authorization_servers: [s.base], scopes_supported: ['mcp'] });
      }
      if (url.pathname === '/.well-known/oauth-authorization-server')
        return json(200, {
          issuer: s.base, authorization_endpoint: `${s.base}/authorize`, token_endpoint: `${s.base}/token`,
          registration_endpoint: `${s.base}/register`, response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'], code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none'], authorization_response_iss_parameter_supported: true,
        });
      if (url.pathname === '/register') return json(201, { client_id: 'c-1', redirect_uris: JSON.parse(body).redirect_uris });
      if (url.pathname === '/authorize') {
        s.authorize++;
        const to = new URL(url.searchParams.get('redirect_uri'));
        to.searchParams.set('code', 'code-1');
        to.searchParams.set('state', url.searchParams.get('state'));
        to.searchParams.set('iss', s.base);
        res.writeHead(302, { Location: to.toString() });
        return res.end();
      }
      if (url.pathname === '/token') {
        const form = new URLSearchParams(body);
        s.grants.push(form.get('grant_type'));
        const access = `at-${++s.seq}-secret`;
        s.valid.add(access);
        return json(200, { access_token: access, token_type: 'Bearer', expires_in: expiresIn, refresh_token: `rt-${s.seq}-secret` });
      }
      if (url.pathname !== '/mcp') return json(404, {});
      if (req.method !== 'POST') return json(405, {});
      const token = (req.headers.authorization || '').replace(/^Bearer /, '');
      if (!s.valid.has(token) || s.revoked.has(token))
        return json(401, { error: 'invalid_token' }, {
          'WWW-Authenticate': `Bearer resource_metadata="${s.base}/.well-known/oauth-protected-resource/mcp", scope="mcp"`,
        });
      const m = JSON.parse(body);
      if (m.id === undefined) { res.writeHead(202); return res.end(); }
      const result = m.method === 'initialize'
        ? { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 't', version: '1' } }
        : m.method === 'tools/list' ? { tools: [{ name: 'hi', inputSchema: { type: 'object' } }] }
        : m.method === 'tools/call' ? { content: [{ type: 'text', text: 'hello' }] } : {};
      return json(200, { jsonrpc: '2.0', id: m.id, result });
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  s.base = `http://127.0.0.1:${server.address().port}`;
  s.url = `${s.base}/mcp`;
  s.stop = () => new Promise((r) => server.close(r));
  return s;
}

const configDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-oauth-'));
const OPEN = ['--oauth-open-command', 'curl -sS -L -o /dev/null'];

async function useOnce(s, env, extra = []) {
  const b = await sdkBridge(['--log-level', 'debug', ...OPEN, ...extra, s.url], { env });
  try {
    const r = await b.client.callTool({ name: 'hi', arguments: {} });
    assert.equal(r.content[0].text, 'hello');
  } finally {
    await b.client.close();
  }
  return b.stderr();
}

test('sign-in through the loopback redirect, kept 0600, reused, forgotten by --logout', async () => {
  const s = await startServers();
  const dir = configDir();
  const env = { XDG_CONFIG_HOME: dir };
  try {
    const log = await useOnce(s, env);
    assert.equal(s.authorize, 1);
    assert.deepEqual(s.grants, ['authorization_code']);
    const file = path.join(dir, 'mcp-bridge', 'oauth.json');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700);
    assert.ok(JSON.parse(fs.readFileSync(file, 'utf8'))[s.url].access_token.startsWith('at-'));
    assert.match(log, /oauth_signed_in/);
    assert.doesNotMatch(log, /at-\d+-secret|rt-\d+-secret/, 'no token in the log');

    await useOnce(s, env); // the kept token: no new sign-in
    assert.equal(s.authorize, 1);

    const out = spawnSync(BRIDGE_BIN, ['--logout', s.url], { env: { ...process.env, ...env }, encoding: 'utf8' });
    assert.equal(out.status, 0, out.stderr);
    assert.equal(JSON.parse(fs.readFileSync(file, 'utf8'))[s.url], undefined);
    await useOnce(s, env);
    assert.equal(s.authorize, 2);
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('refresh: quietly before expiry, and after the server refuses the token', async () => {
  // 4 s tokens: shorter than twice the bridge's 30 s margin, so refreshed half-way
  const s = await startServers({ expiresIn: 4 });
  const dir = configDir();
  const env = { XDG_CONFIG_HOME: dir };
  try {
    await useOnce(s, env);
    assert.equal(s.authorize, 1);
    assert.deepEqual(s.grants, ['authorization_code'], 'a fresh token is not refreshed at once');
    await new Promise((r) => setTimeout(r, 2500));
    await useOnce(s, env);
    assert.equal(s.authorize, 1, 'half-way through its life: a refresh, not a sign-in');
    assert.ok(s.grants.includes('refresh_token'), `grants: ${s.grants}`);

    for (const t of s.valid) s.revoked.add(t); // every token so far is refused
    const before = s.grants.length;
    await useOnce(s, env);
    assert.equal(s.authorize, 1, 'a refresh, not a new sign-in');
    assert.ok(s.grants.slice(before).includes('refresh_token'));
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a static token turns OAuth off: a 401 is reported, no discovery', async () => {
  const s = await startServers();
  const dir = configDir();
  try {
    const b = await sdkBridge([...OPEN, '--token-env', 'T', s.url], { env: { XDG_CONFIG_HOME: dir, T: 'static-token' } });
    await assert.rejects(b.client.listTools(), /401/);
    await b.client.close().catch(() => {});
  } catch (e) {
    // the bridge may refuse the initialize itself: that is the 401 too
    assert.match(String(e), /401/);
  } finally {
    assert.equal(s.prm, 0);
    assert.equal(s.authorize, 0);
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('an --oauth-open-command that reads stdin does not get the client\'s messages', async () => {
  const s = await startServers();
  const dir = configDir();
  try {
    // with the client's stdin, cat would swallow the MCP stream and never end
    const b = await sdkBridge(['--oauth-open-command', 'cat >/dev/null; curl -sS -L -o /dev/null', s.url], {
      env: { XDG_CONFIG_HOME: dir },
    });
    try {
      const r = await b.client.callTool({ name: 'hi', arguments: {} });
      assert.equal(r.content[0].text, 'hello');
      assert.equal(s.authorize, 1);
    } finally {
      await b.client.close();
    }
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
