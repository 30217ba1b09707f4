// Abuse of mcpd's OAuth resource server (issue 35), against a real OpenID
// provider (oidc-provider, tests/e2e/lib/oidc.mjs) on loopback:
//
//   - a bad-token table: each token is answered 401 with
//     WWW-Authenticate: Bearer resource_metadata="…", error="invalid_token"
//     (or 403 error="insufficient_scope" with the scope, for a real token
//     without the required scope): wrong audience, an audience with a
//     trailing slash, wrong issuer (with the provider's key, and with its
//     own), signed by another key under the provider's kid, expired, not
//     yet valid, no exp, alg none (with and without a signature), HS256
//     keyed with the public key (PEM, and the JWK's n), a tampered payload,
//     a tampered signature, a crit header, not a JWT; and no token reaches
//     mcpd's log;
//   - an unknown kid refetches the key set at most once per 10 s
//     (JWKS_REFRESH_MIN_MS): 300 tokens with random kids within the
//     interval cost no fetch (the provider counts its JWKS requests), and
//     a key the provider rotated in is accepted after it, with one fetch.
//
// Runs on SQLite and (MCPD_TEST_DB=postgres) PostgreSQL. Every process this
// file signals is one it started.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, test } from 'node:test';

import { mint, rsaKey } from './lib/oidc.mjs';
import { REFRESH_MS, REQUIRED, assertInvalid, metadataUrl, refusal, withOauth } from './lib/oauth-mcpd.mjs';
import { sleep } from './lib/mcpd.mjs';

describe('abuse of mcpd as an OAuth resource server', () => {
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
});
