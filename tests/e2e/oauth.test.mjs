// mcpd as an OAuth 2.1 resource server (issue 35), against a real OpenID
// provider (oidc-provider from npm, tests/e2e/lib/oidc.mjs) on loopback,
// with resource indicators and JWT access tokens:
//
//   - the protected resource metadata (RFC 9728) at both well-known paths;
//   - 401 with WWW-Authenticate: Bearer resource_metadata="…", scope="…"
//     without a token, on /mcp, the WebSocket handshake and legacy /sse;
//   - a token from the provider (client_credentials) initializes and calls
//     tools; the session's principal is "oauth:<iss>#<sub>";
//   - a bad-token table, each 401 invalid_token (or 403 insufficient_scope
//     for a missing scope) with the metadata URL: wrong audience, wrong
//     issuer, signed by another key, expired, not yet valid, alg none,
//     HS256 keyed with the public key, a tampered payload, no token in a
//     log line;
//   - an unknown kid refetches the key set at most once per 10 s: a flood
//     of random kids costs no fetch, and a key the provider added is
//     accepted after the interval;
//   - the provider unreachable: fail closed with no key held, then keys
//     once it answers, and cached keys keep serving when it goes away;
//   - --oauth-audience replaces the resource in the aud check;
//   - TCP's mcpd/connect and the official SDK client (its own OAuth
//     support, client credentials) sign in;
//   - the token's expiry ends the event stream and the WebSocket it opened.
//
// Runs on SQLite and (MCPD_TEST_DB=postgres) PostgreSQL. Every process this
// file signals is one it started.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Oidc, mint, rsaKey, CLIENT_ID, CLIENT_SECRET, RS_ID, RS_SECRET } from './lib/oidc.mjs';
import { TcpClient } from './lib/tcp-client.mjs';
import { ACCEPT_BOTH, freePort, mcpAdmin, newId, openStream, request, rpc, sleep, startMcpd, waitFor } from './lib/mcpd.mjs';

const REQUIRED = 'mcp:tools';
/** The interval at which mcpd may refetch the key set (JWKS_REFRESH_MIN_MS). */
const REFRESH_MS = 10000;

/** mcpd with --auth oauth against a fresh provider; fn(m, oidc). */
async function withOauth({ scopes = REQUIRED, auth = 'oauth', extra = [], format, introspect = false } = {}, fn) {
  const port = await freePort();
  const oidc = await Oidc.start(`http://127.0.0.1:${port}/mcp`, { format });
  const args = ['--auth', auth, '--oauth-issuer', oidc.issuer, ...(scopes ? ['--oauth-scopes', scopes] : []), ...extra];
  if (introspect)
    args.push('--oauth-introspection-url', `${oidc.issuer}/token/introspection`, '--oauth-client-id', RS_ID, '--oauth-client-secret', RS_SECRET);
  let m;
  try {
    m = await startMcpd({ args, port });
    await fn(m, oidc);
    const ex = await m.stop('SIGTERM', 8000);
    assert.equal(ex.code, 0, `mcpd exit after SIGTERM: ${JSON.stringify(ex)}`);
  } catch (e) {
    if (m) e.message += `\n--- mcpd stderr (tail) ---\n${m.stderr.slice(-4000)}`;
    throw e;
  } finally {
    if (m) await m.cleanup();
    await oidc.stop();
  }
}

const metadataUrl = (m) => `http://127.0.0.1:${m.port}/.well-known/oauth-protected-resource/mcp`;

function initialize(port, token) {
  return rpc(
    port,
    {
      jsonrpc: '2.0',
      id: newId(),
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'oauth-e2e', version: '1' } },
    },
    { version: null, headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } },
  );
}

/** initialize + initialized with the token; the session id. */
async function session(port, token) {
  const r = await initialize(port, token);
  assert.equal(r.status, 200, JSON.stringify(r.messages));
  const sid = r.headers['mcp-session-id'];
  const n = await request(port, {
    headers: {
      'Content-Type': 'application/json',
      Accept: ACCEPT_BOTH,
      'Mcp-Session-Id': sid,
      'MCP-Protocol-Version': '2025-11-25',
      Authorization: `Bearer ${token}`,
    },
    body: { jsonrpc: '2.0', method: 'notifications/initialized' },
  });
  assert.equal(n.status, 202, n.text);
  return sid;
}

async function echo(port, sid, token, message) {
  const id = newId();
  const r = await rpc(
    port,
    { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { message } } },
    { session: sid, headers: { Authorization: `Bearer ${token}` } },
  );
  assert.equal(r.status, 200, JSON.stringify(r.messages));
  const reply = r.messages.find((x) => x.id === id);
  assert.equal(reply?.result?.content?.[0]?.text, message, JSON.stringify(r.messages));
}

/** The refusal of a request with this token: {status, challenge}. */
async function refusal(m, token) {
  const r = await initialize(m.port, token);
  return { status: r.status, challenge: r.headers['www-authenticate'] };
}

function assertInvalid(m, got, what) {
  assert.equal(got.status, 401, what);
  assert.match(got.challenge, /^Bearer /, what);
  assert.ok(got.challenge.includes(`resource_metadata="${metadataUrl(m)}"`), `${what}: ${got.challenge}`);
  assert.ok(got.challenge.includes('error="invalid_token"'), `${what}: ${got.challenge}`);
}

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

  test('the bad-token table: each refused with the right status and WWW-Authenticate', async () => {
    await withOauth({}, async (m, oidc) => {
      const now = Math.floor(Date.now() / 1000);
      const stranger = rsaKey('k1'); // another issuer's key, under the provider's kid
      const pem = crypto.createPublicKey({ key: oidc.keys[0].publicJwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
      const good = oidc.sign();
      const [h, c, s] = good.split('.');
      const tamperedClaims = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(c, 'base64url')), sub: 'root' })).toString('base64url');
      const flipped = (s[5] === 'A' ? 'B' : 'A');
      const table = [
        ['wrong audience', oidc.sign({ aud: 'http://127.0.0.1:1/mcp' })],
        ['audience with a trailing slash', oidc.sign({ aud: `http://127.0.0.1:${m.port}/mcp/` })],
        ['wrong issuer (signed with the provider key)', oidc.sign({ iss: 'http://127.0.0.1:1' })],
        ['another issuer, its own key', oidc.sign({ iss: 'http://127.0.0.1:1' }, { key: stranger })],
        ['signed by a key not the provider', oidc.sign({}, { key: stranger })],
        ['expired', oidc.sign({ iat: now - 3600, exp: now - 600 })],
        ['not yet valid', oidc.sign({ nbf: now + 600 })],
        ['no exp', oidc.sign({ exp: undefined })],
        ['alg none', mint({ alg: 'none', typ: 'at+jwt', kid: 'k1' }, oidc.claims())],
        ['alg none, signature kept', `${mint({ alg: 'none', kid: 'k1' }, oidc.claims())}${s}`],
        ['HS256 keyed with the public key (PEM)', mint({ alg: 'HS256', kid: 'k1' }, oidc.claims(), { secret: pem })],
        ['HS256 keyed with the JWK n', mint({ alg: 'HS256', kid: 'k1' }, oidc.claims(), { secret: oidc.keys[0].publicJwk.n })],
        ['tampered payload', `${h}.${tamperedClaims}.${s}`],
        ['tampered signature', `${h}.${c}.${s.slice(0, 5)}${flipped}${s.slice(6)}`],
        ['a critical header parameter', oidc.sign({}, { header: { crit: ['exp'] } })],
        ['not a JWT', 'abc.def.ghi'],
        ['one segment', 'opaque-token-value'],
      ];
      for (const [what, token] of table) assertInvalid(m, await refusal(m, token), what);
      // The provider's real token for these scopes works; without the
      // required one it is 403 insufficient_scope with the scope to ask for.
      const { access_token: extraOnly } = await oidc.token({ scope: 'mcp:extra' });
      const f = await refusal(m, extraOnly);
      assert.equal(f.status, 403);
      assert.equal(
        f.challenge,
        `Bearer resource_metadata="${metadataUrl(m)}", scope="${REQUIRED}", error="insufficient_scope", ` +
          'error_description="the token lacks a required scope"',
      );
      assert.equal((await refusal(m, good)).status, 200);
      for (const [what, token] of table)
        if (token.length > 20) assert.ok(!m.stderr.includes(token), `the ${what} token appears in mcpd log`);
    });
  });

  test('an unknown kid: one refetch per interval, however many; a key the provider added is accepted', async () => {
    await withOauth({}, async (m, oidc) => {
      assert.equal((await refusal(m, oidc.sign())).status, 200);
      const firstFetch = Date.now();
      assert.equal(oidc.jwksHits, 1);
      // The provider rotates in a second key; a token under it arrives
      // within the interval: refused, no refetch.
      const k2 = rsaKey('k2');
      oidc.setKeys([oidc.keys[0], k2]);
      const t2 = oidc.sign({}, { key: k2 });
      assertInvalid(m, await refusal(m, t2), 'k2 within the interval');
      // A flood of tokens with random kids: refused, and not one fetch.
      const flood = [];
      for (let i = 0; i < 300; i++) flood.push(oidc.sign({}, { header: { kid: crypto.randomBytes(8).toString('hex') } }));
      for (let i = 0; i < flood.length; i += 30) {
        const got = await Promise.all(flood.slice(i, i + 30).map((t) => refusal(m, t)));
        for (const g of got) assertInvalid(m, g, 'random kid');
      }
      assert.equal(oidc.jwksHits, 1, 'the key set was refetched for unknown kids within the interval');
      // After the interval, the k2 token makes one refetch, and passes.
      await sleep(Math.max(0, firstFetch + REFRESH_MS + 200 - Date.now()));
      assert.equal((await refusal(m, t2)).status, 200);
      assert.equal(oidc.jwksHits, 2);
      // Once more random kids: the interval starts again.
      for (let i = 0; i < 50; i++) assertInvalid(m, await refusal(m, flood[i]), 'random kid');
      assert.equal(oidc.jwksHits, 2);
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
    });
  });
});
