// mcpd with --auth oauth in front of a real OpenID provider (oidc.mjs),
// and the requests the OAuth tests make: shared by oauth.test.mjs and
// abuse-oauth.test.mjs.

import assert from 'node:assert/strict';

import { Oidc, RS_ID, RS_SECRET } from './oidc.mjs';
import { ACCEPT_BOTH, freePort, newId, request, rpc, startMcpd } from './mcpd.mjs';

export const REQUIRED = 'mcp:tools';
/** The interval at which mcpd may refetch the key set (JWKS_REFRESH_MIN_MS). */
export const REFRESH_MS = 10000;

/**
 * mcpd with --auth oauth against a fresh provider; fn(m, oidc). resource:
 * the public /mcp URL's path, when a proxy would serve mcpd under a prefix.
 */
export async function withOauth({ scopes = REQUIRED, auth = 'oauth', extra = [], format, introspect = false, accessTTL, resource = '/mcp' } = {}, fn) {
  const port = await freePort();
  const oidc = await Oidc.start(`http://127.0.0.1:${port}${resource}`, { format, accessTTL });
  const args = ['--auth', auth, '--oauth-issuer', oidc.issuer, ...(scopes ? ['--oauth-scopes', scopes] : []), ...extra];
  if (resource !== '/mcp') args.push('--oauth-resource', `http://127.0.0.1:${port}${resource}`);
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

export const metadataUrl = (m) => `http://127.0.0.1:${m.port}/.well-known/oauth-protected-resource/mcp`;

export function initialize(port, token) {
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
export async function session(port, token) {
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

export async function echo(port, sid, token, message) {
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
export async function refusal(m, token) {
  const r = await initialize(m.port, token);
  return { status: r.status, challenge: r.headers['www-authenticate'] };
}

export function assertInvalid(m, got, what) {
  assert.equal(got.status, 401, what);
  assert.match(got.challenge, /^Bearer /, what);
  assert.ok(got.challenge.includes(`resource_metadata="${metadataUrl(m)}"`), `${what}: ${got.challenge}`);
  assert.ok(got.challenge.includes('error="invalid_token"'), `${what}: ${got.challenge}`);
}
