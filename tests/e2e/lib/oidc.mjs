// A real OpenID provider for mcpd's OAuth tests: oidc-provider (a certified
// implementation) on loopback, with resource indicators (RFC 8707) and JWT
// access tokens for one resource, and the client_credentials grant, which
// is how the tests get real tokens without a browser.
//
// Users sign in too (the authorization code flow, for mcp-bridge): clients
// register themselves (RFC 7591), and the provider's interactions are
// answered by the test server at once, as if the user ACCOUNT had signed
// in and consented to what the client asked for. A "browser" that follows
// redirects and keeps cookies (curl -L -b '') walks the whole flow.
// Every grant the token endpoint gave is counted by type (grants).
//
// The provider runs behind a small HTTP server of the test's own, which
//   - counts the requests for the key set (jwksHits) and for introspection
//     (introspections), so a test can see what mcpd asked;
//   - can play an unreachable provider (down = true: every connection is
//     dropped);
//   - can swap in a provider with other keys (setKeys), as an issuer does
//     when it rotates them.
//
// mint() signs tokens of the test's own making with node:crypto, with the
// provider's key or any other, for the bad-token cases (the provider never
// issues an expired or wrongly signed token).

import crypto from 'node:crypto';
import http from 'node:http';

import Provider from 'oidc-provider';

import { freePort } from './mcpd.mjs';

export const CLIENT_ID = 'mcpd-tests';
export const CLIENT_SECRET = 'mcpd-tests-secret-0123456789abcdef';
export const SCOPES = 'mcp:tools mcp:extra';
/** mcpd's own client, for token introspection (RFC 7662). */
export const RS_ID = 'mcpd-rs';
export const RS_SECRET = 'mcpd-rs-secret-0123456789abcdef';

/** A fresh RSA signing key: {jwk (private), publicJwk, key (KeyObject)}. */
export function rsaKey(kid) {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  const { d, p, q, dp, dq, qi, ...publicJwk } = jwk;
  return { jwk, publicJwk, key: privateKey, kid };
}

/**
 * A DPoP proof-of-possession key (RFC 9449): {key, jwk (public), proof()}.
 * proof(htm, htu, {token, iat, jti, over, header}) signs a proof for a
 * request; token's hash goes as ath; over and header override claims and
 * header members (undefined drops one).
 */
export function dpopKey() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const proof = (htm, htu, { token, iat = Math.floor(Date.now() / 1000), jti = crypto.randomUUID(), over = {}, header = {} } = {}) => {
    const h = { typ: 'dpop+jwt', alg: 'ES256', jwk, ...header };
    const c = { jti, htm, htu, iat, ...(token ? { ath: crypto.createHash('sha256').update(token).digest('base64url') } : {}), ...over };
    const input = `${b64u(h)}.${b64u(c)}`;
    const sig = crypto.sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
    return `${input}.${sig}`;
  };
  return { key: privateKey, jwk, proof };
}

const b64u = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/**
 * A compact JWS of header and claims. alg RS256/PS256 with `key` (a
 * KeyObject), HS256 with `secret` (a Buffer or string), none unsigned.
 */
export function mint(header, claims, { key, secret } = {}) {
  const input = `${b64u(header)}.${b64u(claims)}`;
  let sig = '';
  if (header.alg === 'RS256') sig = crypto.sign('sha256', Buffer.from(input), key).toString('base64url');
  else if (header.alg === 'PS256')
    sig = crypto
      .sign('sha256', Buffer.from(input), { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 })
      .toString('base64url');
  else if (header.alg === 'HS256') sig = crypto.createHmac('sha256', secret).update(input).digest('base64url');
  else if (header.alg !== 'none') throw new Error(`mint: ${header.alg}`);
  return `${input}.${sig}`;
}

/** The account every sign-in is for (the tokens' sub). */
export const ACCOUNT = 'alice';

function makeProvider(issuer, resource, keys, format, accessTTL) {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: SCOPES,
      },
      { client_id: RS_ID, client_secret: RS_SECRET, grant_types: [], redirect_uris: [], response_types: [] },
    ],
    jwks: { keys: keys.map((k) => k.jwk) },
    // offline_access: refresh tokens, as real providers give them
    scopes: [...SCOPES.split(' '), 'offline_access'],
    ttl: { ClientCredentials: 300 },
    // what the code flow needs: no dev login pages (the test server answers
    // the interactions), open registration, RFC 9207's iss in the redirect
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      // mcpd's client may introspect any token.
      introspection: { enabled: true, allowedPolicy: async () => true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator) => {
          if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
          return { scope: SCOPES, audience: resource, accessTokenTTL: accessTTL, accessTokenFormat: format };
        },
      },
    },
  });
  provider.on('server_error', (ctx, err) => console.error('oidc-provider:', err));
  return provider;
}

export class Oidc {
  /**
   * Starts on a free loopback port; resource: the mcpd resource URL;
   * accessTTL: the access tokens' lifetime in seconds.
   */
  static async start(resource, { keys, format = 'jwt', accessTTL = 300 } = {}) {
    const o = new Oidc();
    o.format = format; // of the access tokens it issues: 'jwt' or 'opaque'
    o.accessTTL = accessTTL;
    o.grants = []; // grant_type of every token the token endpoint issued
    o.signIns = 0; // interactions answered
    o.resource = resource;
    o.keys = keys || [rsaKey('k1')];
    o.jwksHits = 0;
    o.introspections = 0;
    o.down = false;
    o.server = http.createServer((req, res) => {
      if (o.down) {
        req.socket.destroy();
        return;
      }
      if (req.url.startsWith('/jwks')) o.jwksHits++;
      if (req.url.startsWith('/token/introspection')) o.introspections++;
      if (req.url.startsWith('/interaction/')) {
        o.interact(req, res).catch((e) => {
          res.writeHead(500);
          res.end(String(e));
        });
        return;
      }
      o.handler(req, res);
    });
    o.sockets = new Set();
    o.server.on('connection', (s) => {
      o.sockets.add(s);
      s.on('close', () => o.sockets.delete(s));
    });
    // A port from freePort, not listen(0): the kernel could give this
    // server the port freePort just chose for the mcpd in front of it.
    const port = await freePort();
    await new Promise((r) => o.server.listen(port, '127.0.0.1', r));
    o.port = o.server.address().port;
    o.issuer = `http://127.0.0.1:${o.port}`;
    o.setKeys(o.keys);
    return o;
  }

  /** Serves these keys (the first signs) from now on. */
  setKeys(keys) {
    this.keys = keys;
    this.provider = makeProvider(this.issuer, this.resource, keys, this.format, this.accessTTL);
    this.provider.on('grant.success', (ctx) => this.grants.push(ctx.oidc.params.grant_type));
    this.handler = this.provider.callback();
  }

  /**
   * One interaction of a sign-in, answered as the user would: log in as
   * ACCOUNT, then consent to the scopes and resource the client asked for.
   * The provider then redirects the browser on.
   */
  async interact(req, res) {
    const p = this.provider;
    const details = await p.interactionDetails(req, res);
    const { prompt, params, session } = details;
    let result;
    if (prompt.name === 'login') {
      result = { login: { accountId: ACCOUNT } };
    } else {
      const grant = details.grantId
        ? await p.Grant.find(details.grantId)
        : new p.Grant({ accountId: session.accountId, clientId: params.client_id });
      const missing = prompt.details;
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {}))
        grant.addResourceScope(indicator, scopes.join(' '));
      result = { consent: { grantId: await grant.save() } };
      this.signIns++;
    }
    await p.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
  }

  /** Ends an access token the provider issued (opaque ones: introspection
   * then says it is not active). */
  async destroyAccessToken(value) {
    const t = await this.provider.AccessToken.find(value);
    if (!t) throw new Error('destroyAccessToken: no such token');
    await t.destroy();
  }

  /**
   * A real access token by client_credentials: {access_token, ...}; with
   * dpop (a dpopKey()), bound to that key (token_type DPoP).
   */
  async token({ scope = SCOPES, resource = this.resource, dpop } = {}) {
    const body = new URLSearchParams({ grant_type: 'client_credentials', scope, resource });
    const r = await fetch(`${this.issuer}/token`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        Authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`,
        ...(dpop ? { DPoP: dpop.proof('POST', `${this.issuer}/token`) } : {}),
      },
      body,
    });
    const j = await r.json();
    if (r.status !== 200) throw new Error(`token endpoint: ${r.status} ${JSON.stringify(j)}`);
    return j;
  }

  /** Revokes a token at the provider (RFC 7009). */
  async revoke(token) {
    const r = await fetch(`${this.issuer}/token/revocation`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        Authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`,
      },
      body: new URLSearchParams({ token }),
    });
    if (r.status !== 200) throw new Error(`revocation endpoint: ${r.status}`);
  }

  /** Claims as the provider would write them, overridden by `over`. */
  claims(over = {}) {
    const now = Math.floor(Date.now() / 1000);
    return { iss: this.issuer, sub: CLIENT_ID, aud: this.resource, iat: now, exp: now + 300, scope: SCOPES, ...over };
  }

  /** A token signed with the provider's first key (or `key`). */
  sign(over = {}, { key = this.keys[0], header = {} } = {}) {
    return mint({ alg: 'RS256', typ: 'at+jwt', kid: key.kid, ...header }, this.claims(over), { key: key.key });
  }

  async stop() {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}
