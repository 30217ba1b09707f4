// mcpd as an OAuth 2.1 resource server (issue 35), against a real OpenID
// provider (oidc-provider from npm, tests/e2e/lib/oidc.mjs) on loopback,
// with resource indicators and JWT access tokens:
//
//   - the protected resource metadata (RFC 9728) at both well-known paths;
//   - 401 with WWW-Authenticate: Bearer resource_metadata="…", scope="…"
//     without a token, on /mcp, the WebSocket handshake and legacy /sse;
//   - a token from the provider (client_credentials) initializes and calls
//     tools; the session's principal is "oauth:<iss>#<sub>";
//   - (the bad-token table and the flood of random kids are in
//     abuse-oauth.test.mjs);
//   - the provider unreachable: fail closed with no key held, then keys
//     once it answers, and cached keys keep serving when it goes away;
//   - --oauth-audience replaces the resource in the aud check;
//   - TCP's mcpd/connect and the official SDK client (its own OAuth
//     support, client credentials) sign in;
//   - the token's expiry ends the event stream and the WebSocket it opened,
//     and refuses a request waiting for its reply (with the metadata URL).
//
// Runs on SQLite and (MCPD_TEST_DB=postgres) PostgreSQL. Every process this
// file signals is one it started.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { CLIENT_ID, CLIENT_SECRET, RS_SECRET } from './lib/oidc.mjs';
import { REFRESH_MS, REQUIRED, assertInvalid, echo, metadataUrl, refusal, session, withOauth } from './lib/oauth-mcpd.mjs';
import { TcpClient } from './lib/tcp-client.mjs';
import { freePort, mcpAdmin, newId, openStream, request, rpc, sleep, startMcpd, waitFor } from './lib/mcpd.mjs';

describe('mcpd as an OAuth resource server', () => {
  test('serves the protected resource metadata at both well-known paths', async () => {
    await withOauth({ scopes: 'mcp:tools mcp:extra' }, async (m, oidc) => {
      for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
        const r = await request(m.port, { method: 'GET', path: p });
        assert.equal(r.status, 200, p);
        assert.match(r.headers['content-type'], /^application\/json/);
        assert.deepEqual(r.json, {
          resource: `http://127.0.0.1:${m.port}/mcp`,
          authorization_servers: [oidc.issuer],
          scopes_supported: ['mcp:tools', 'mcp:extra'],
          bearer_methods_supported: ['header'],
          dpop_signing_alg_values_supported: ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'],
        });
      }
    });
  });

  test('no metadata without --auth oauth', async () => {
    const m = await startMcpd({ args: ['--auth', 'token'] });
    try {
      const r = await request(m.port, { method: 'GET', path: '/.well-known/oauth-protected-resource' });
      assert.equal(r.status, 404);
    } finally {
      await m.cleanup();
    }
  });

  test('no token: 401 with the metadata URL and the scope, on every way in', async () => {
    await withOauth({}, async (m) => {
      const want = `Bearer resource_metadata="${metadataUrl(m)}", scope="${REQUIRED}"`;
      const r = await refusal(m, undefined);
      assert.equal(r.status, 401);
      assert.equal(r.challenge, want);
      const g = await request(m.port, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
      assert.equal(g.status, 401);
      assert.equal(g.headers['www-authenticate'], want);
      const ws = await request(m.port, {
        method: 'GET',
        path: '/mcp/ws',
        headers: {
          Connection: 'Upgrade',
          Upgrade: 'websocket',
          'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
          'Sec-WebSocket-Protocol': 'mcp',
        },
      });
      assert.equal(ws.status, 401);
      assert.equal(ws.headers['www-authenticate'], want);
    });
  });

  test("a provider's token initializes and calls tools; the principal is issuer + sub", async () => {
    await withOauth({}, async (m, oidc) => {
      const { access_token: token } = await oidc.token();
      const sid = await session(m.port, token);
      await echo(m.port, sid, token, 'hello through oauth');
      const r = mcpAdmin(m.dbUrl, '--json', 'sessions', '--active');
      assert.equal(r.status, 0, r.stderr);
      const rows = JSON.parse(r.stdout);
      const mine = (Array.isArray(rows) ? rows : rows.sessions).find((s) => s.id === sid || s.session_id === sid);
      assert.ok(mine, r.stdout);
      assert.equal(mine.principal, `oauth:${oidc.issuer}#${CLIENT_ID}`);
      // A session belongs to its principal: a static-token-less other
      // subject cannot use it.
      const other = oidc.sign({ sub: 'mallory' });
      const stolen = await rpc(
        m.port,
        { jsonrpc: '2.0', id: newId(), method: 'tools/list' },
        { session: sid, headers: { Authorization: `Bearer ${other}` } },
      );
      assert.notEqual(stolen.status, 200);
      assert.ok(!m.stderr.includes(token.split('.')[2]), 'the token appears in mcpd log');
    });
  });

  test("the official SDK client signs in with its own OAuth support and uses mcpd", async () => {
    await withOauth({}, async (m, oidc) => {
      // Given only mcpd's URL and its client credentials, the SDK follows
      // the 401 to the resource metadata, then the provider's metadata, gets
      // a token for this resource, and retries.
      const authProvider = new ClientCredentialsProvider({
        clientId: CLIENT_ID,
        clientSecret: CLIENT_SECRET,
        scope: REQUIRED,
        expectedIssuer: oidc.issuer,
      });
      const client = new Client({ name: 'oauth-sdk', version: '1' });
      const transport = new StreamableHTTPClientTransport(new URL(m.url), { authProvider });
      try {
        await client.connect(transport);
        const tools = await client.listTools();
        assert.ok(tools.tools.some((t) => t.name === 'echo'));
        const r = await client.callTool({ name: 'echo', arguments: { message: 'sdk via oauth' } });
        assert.equal(r.content[0].text, 'sdk via oauth');
        assert.ok(authProvider.tokens()?.access_token, 'the SDK holds no token');
        const a = mcpAdmin(m.dbUrl, '--json', 'sessions', '--active');
        assert.match(a.stdout, new RegExp(`oauth:${oidc.issuer.replace(/[.:/]/g, '\\$&')}#${CLIENT_ID}`));
      } finally {
        await client.close();
      }
    });
  });

  test('--oauth-audience: aud must hold that value instead of the resource', async () => {
    await withOauth({ extra: ['--oauth-audience', 'api-client-id-0001'] }, async (m, oidc) => {
      assert.equal((await refusal(m, oidc.sign({ aud: ['other', 'api-client-id-0001'] }))).status, 200);
      assertInvalid(m, await refusal(m, oidc.sign()), 'aud is the resource, not the audience');
      // The metadata still names the resource clients reach.
      const r = await request(m.port, { method: 'GET', path: '/.well-known/oauth-protected-resource/mcp' });
      assert.equal(r.json.resource, `http://127.0.0.1:${m.port}/mcp`);
    });
  });

  test('--auth token,oauth with introspection: static tokens, JWTs and opaque tokens', async () => {
    await withOauth({ auth: 'token,oauth', format: 'opaque', introspect: true }, async (m, oidc) => {
      const { access_token: opaque } = await oidc.token();
      assert.ok(!opaque.includes('.'), opaque.length);
      const sid = await session(m.port, opaque);
      await echo(m.port, sid, opaque, 'opaque');
      const rows = mcpAdmin(m.dbUrl, '--json', 'sessions', '--active');
      assert.ok(rows.stdout.includes(`"oauth:${oidc.issuer}#${CLIENT_ID}"`), rows.stdout);
      // A JWT signed by the provider's key, and a static token, alongside.
      assert.equal((await refusal(m, oidc.sign())).status, 200);
      const added = mcpAdmin(m.dbUrl, 'tokens', 'add', 'alice');
      assert.equal(added.status, 0, added.stderr);
      const staticToken = added.stdout.match(/mcpd_[A-Za-z0-9_-]+/)[0];
      assert.equal((await refusal(m, staticToken)).status, 200);
      // Refusals: an unknown opaque value, a token without the scope.
      assertInvalid(m, await refusal(m, 'made-up-opaque-token-value-123456'), 'unknown opaque');
      assertInvalid(m, await refusal(m, 'mcpd_notAToken'), 'unknown static');
      const { access_token: extraOnly } = await oidc.token({ scope: 'mcp:extra' });
      const f = await refusal(m, extraOnly);
      assert.equal(f.status, 403);
      assert.match(f.challenge, /error="insufficient_scope"/);
      // Revoked at the provider: refused once mcpd's 10 s answer is over.
      await oidc.revoke(opaque);
      await waitFor(async () => (await refusal(m, opaque)).status === 401, 15000, 'revoked opaque token refused', 500);
      assert.ok(!m.stderr.includes(opaque) && !m.stderr.includes(RS_SECRET), 'a secret in the log');
    });
  });

  test('raw TCP: mcpd/connect takes a JWT access token', async () => {
    const tport = await freePort();
    await withOauth({ extra: ['--tcp-listen', `127.0.0.1:${tport}`] }, async (m, oidc) => {
      const { access_token: token } = await oidc.token();
      assert.ok(token.length > 255); // longer than a static token's limit was
      const bad = await TcpClient.open(tport);
      const no = await bad.request({ jsonrpc: '2.0', id: 'c', method: 'mcpd/connect', params: { token: oidc.sign({ aud: 'x' }) } });
      assert.equal(no.error?.data?.reason, 'unauthorized', JSON.stringify(no));
      bad.destroy();
      const g = await TcpClient.open(tport);
      const ok = await g.request({ jsonrpc: '2.0', id: 'c', method: 'mcpd/connect', params: { token } });
      assert.deepEqual(ok.result, { transport: 'tcp', sessionId: null }, JSON.stringify(ok));
      await g.init();
      const r = await g.request({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { message: 'tcp' } } });
      assert.equal(r.result.content[0].text, 'tcp');
      g.destroy();
    });
  });

  test('the provider unreachable: fail closed without keys, serve with cached keys', async () => {
    await withOauth({}, async (m, oidc) => {
      const token = oidc.sign();
      oidc.down = true;
      const started = Date.now();
      const r = await refusal(m, token);
      assertInvalid(m, r, 'provider down, no key held');
      assert.match(r.challenge, /keys could not be fetched/);
      assert.match(m.stderr, /oauth_fetch_failed/);
      // The provider comes back: within the refetch interval, keys again.
      oidc.down = false;
      await waitFor(async () => (await refusal(m, token)).status === 200, REFRESH_MS + 5000, 'keys after the provider came back', 500);
      assert.ok(Date.now() - started >= REFRESH_MS - 1000);
      // It goes away again: the keys held keep serving.
      oidc.down = true;
      const sid = await session(m.port, token);
      await echo(m.port, sid, token, 'served from cached keys');
    });
  });

  test("the token's expiry ends the event stream and the WebSocket it opened", async () => {
    await withOauth({}, async (m, oidc) => {
      // Expired 57 s ago: inside the 60 s leeway for 3 s more.
      const now = Math.floor(Date.now() / 1000);
      const token = oidc.sign({ exp: now - 57 });
      const sid = await session(m.port, token);
      const s = await openStream(m.port, {
        method: 'GET',
        headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25', Authorization: `Bearer ${token}` },
      });
      assert.equal(s.status, 200);
      // a request waiting for its reply when the token ends: refused as a
      // request with that token now would be, the metadata URL included
      const post = (body) =>
        request(m.port, {
          headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25', Authorization: `Bearer ${token}` },
          body: { jsonrpc: '2.0', id: newId(), ...body },
          timeout: 20000,
        });
      const ack = await post({ method: 'tools/call', params: { name: 'countdown', arguments: { n: 2, interval_ms: 10000 }, stream: true } });
      assert.equal(ack.json?.result?.status, 'streaming_started', ack.text);
      const waiting = post({ method: 'mcpd/poll', params: { stream_id: ack.json.result.stream_id, from_seq: 0, wait_ms: 30000 } });
      const ended = new Promise((resolve) => {
        let text = '';
        s.res.on('data', (d) => (text += d));
        s.res.on('close', () => resolve(text));
      });
      const ws = new WebSocket(`ws://127.0.0.1:${m.port}/mcp/ws`, ['mcp', `bearer.${token}`]);
      const wsClosed = new Promise((done) => ws.addEventListener('close', (e) => done({ code: e.code, reason: e.reason }), { once: true }));
      await new Promise((resolve, reject) => {
        ws.addEventListener('open', resolve, { once: true });
        ws.addEventListener('error', () => reject(new Error('WebSocket refused')), { once: true });
      });
      const text = await Promise.race([ended, sleep(10000).then(() => null)]);
      s.close();
      assert.notEqual(text, null, 'the stream outlived its token');
      assert.match(text, /: token expired/);
      const closed = await Promise.race([wsClosed, sleep(5000).then(() => null)]);
      assert.deepEqual(closed, { code: 1008, reason: 'token expired' });
      assertInvalid(m, await refusal(m, token), 'after expiry');
      const w = await waiting;
      assert.equal(w.status, 401, w.text);
      assertInvalid(m, { status: w.status, challenge: w.headers['www-authenticate'] }, 'the waiting request');
      assert.match(w.headers['www-authenticate'], /token expired while the request waited/);
    });
  });
});
