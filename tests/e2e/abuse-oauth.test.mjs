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
//   - DPoP-bound tokens (RFC 9449) from the provider: accepted with a good
//     proof, and a table of bad ones, each refused 401 under the DPoP
//     scheme (invalid_dpop_proof) or as an invalid token: no proof, a
//     replayed one, another method, URL, token (ath) or time, a private
//     key or alg none in the header, two proofs, another key's proof, a
//     bound token sent as Bearer, an unbound one sent with DPoP; and a
//     proof spent once stays spent after a SIGKILL and a restart, and on
//     PostgreSQL on another replica of the same database (the store keeps
//     the spent proofs: RFC 9449 11.1);
//   - a flood of made-up opaque tokens (with introspection): the calls to
//     the provider stay within mcpd's budget (20 a second, 40 at once),
//     the rest are answered 503 with Retry-After, a token already checked
//     keeps working meanwhile, and a new one is checked once it is over;
//     and a flood from one client (behind a trusted proxy, by
//     X-Forwarded-For; an IPv6 client by its /64, here from a new address
//     of it each time) spends only that client's share (5 a second, 10 at
//     once): another client's new token is checked during it;
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

import { dpopKey, mint, rsaKey } from './lib/oidc.mjs';
import { REFRESH_MS, REQUIRED, assertInvalid, metadataUrl, refusal, withOauth } from './lib/oauth-mcpd.mjs';
import { ACCEPT_BOTH, ON_POSTGRES, request, sleep, startMcpd, waitFor } from './lib/mcpd.mjs';

/** An initialize with these Authorization and DPoP headers (and X-Forwarded-For: from): {status, challenge}. */
async function withProof(m, authorization, dpop, from) {
  const headers = { 'Content-Type': 'application/json', Accept: ACCEPT_BOTH, Authorization: authorization };
  if (dpop !== undefined) headers.DPoP = dpop;
  if (from !== undefined) headers['X-Forwarded-For'] = from;
  const body = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'dpop-abuse', version: '1' } },
  };
  const r = await request(m.port, { headers, body });
  return { status: r.status, challenge: r.headers['www-authenticate'] || '', retryAfter: r.headers['retry-after'] };
}

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

  test('a spent DPoP proof stays spent: after a SIGKILL and a restart, and on another replica (PostgreSQL)', async () => {
    await withOauth({}, async (m, oidc) => {
      const url = `http://127.0.0.1:${m.port}/mcp`;
      const key = dpopKey();
      const bound = (await oidc.token({ dpop: key })).access_token;
      const refusedAsReplay = async (mcpd, proof, what) => {
        const r = await withProof(mcpd, `DPoP ${bound}`, proof);
        assert.equal(r.status, 401, what);
        assert.ok(r.challenge.includes('error="invalid_dpop_proof"'), `${what}: ${r.challenge}`);
      };
      const first = key.proof('POST', url, { token: bound });
      assert.equal((await withProof(m, `DPoP ${bound}`, first)).status, 200, 'the first use');
      const spent = [first];
      if (ON_POSTGRES) {
        // Another replica on the same database, serving the same public URL.
        const b = await startMcpd({ db: m.db, args: [...m.args, '--oauth-resource', url] });
        try {
          await refusedAsReplay(b, first, 'replayed to another replica');
          const second = key.proof('POST', url, { token: bound });
          assert.equal((await withProof(b, `DPoP ${bound}`, second)).status, 200, 'a new proof on the other replica');
          spent.push(second);
        } finally {
          await b.cleanup();
        }
      }
      // Spent before its answer: a SIGKILL right after loses none of it.
      m.kill('SIGKILL');
      await m.exited;
      await m.start();
      for (const [i, proof] of spent.entries()) await refusedAsReplay(m, proof, `proof ${i + 1} after a restart`);
      assert.equal((await withProof(m, `DPoP ${bound}`, key.proof('POST', url, { token: bound }))).status, 200, 'a new proof after a restart');
    });
  });

  test('DPoP-bound tokens: a good proof is accepted, and the bad-proof table refused', async () => {
    await withOauth({}, async (m, oidc) => {
      const url = `http://127.0.0.1:${m.port}/mcp`;
      const key = dpopKey();
      const bound = (await oidc.token({ dpop: key })).access_token;
      const claims = JSON.parse(Buffer.from(bound.split('.')[1], 'base64url'));
      assert.ok(claims.cnf?.jkt, 'the provider bound the token to the key');
      const plain = (await oidc.token()).access_token;
      const now = Math.floor(Date.now() / 1000);

      const good = key.proof('POST', url, { token: bound });
      assert.equal((await withProof(m, `DPoP ${bound}`, good)).status, 200, 'a good proof');
      const other = dpopKey();
      const proofError = 'invalid_dpop_proof';
      const table = [
        ['the same proof again (jti)', `DPoP ${bound}`, good, proofError],
        ['no proof', `DPoP ${bound}`, undefined, proofError],
        ['another method (htm)', `DPoP ${bound}`, key.proof('GET', url, { token: bound }), proofError],
        ['another URL (htu)', `DPoP ${bound}`, key.proof('POST', `http://127.0.0.1:${m.port}/other`, { token: bound }), proofError],
        ['another host (htu)', `DPoP ${bound}`, key.proof('POST', `http://evil.example:${m.port}/mcp`, { token: bound }), proofError],
        ['ten minutes old (iat)', `DPoP ${bound}`, key.proof('POST', url, { token: bound, iat: now - 600 }), proofError],
        ['from the future (iat)', `DPoP ${bound}`, key.proof('POST', url, { token: bound, iat: now + 600 }), proofError],
        ['for another token (ath)', `DPoP ${bound}`, key.proof('POST', url, { token: plain }), proofError],
        ['without ath', `DPoP ${bound}`, key.proof('POST', url), proofError],
        ['typ JWT', `DPoP ${bound}`, key.proof('POST', url, { token: bound, header: { typ: 'JWT' } }), proofError],
        ['alg none', `DPoP ${bound}`, `${key.proof('POST', url, { token: bound, header: { alg: 'none' } }).split('.').slice(0, 2).join('.')}.`, proofError],
        ['a private key in the header', `DPoP ${bound}`, key.proof('POST', url, { token: bound, header: { jwk: key.key.export({ format: 'jwk' }) } }), proofError],
        ['no key in the header', `DPoP ${bound}`, key.proof('POST', url, { token: bound, header: { jwk: undefined } }), proofError],
        ['two proofs', `DPoP ${bound}`, `${key.proof('POST', url, { token: bound })}, ${key.proof('POST', url, { token: bound })}`, proofError],
        ["another key's proof (cnf.jkt)", `DPoP ${bound}`, other.proof('POST', url, { token: bound }), 'invalid_token'],
        ['the bound token as Bearer', `Bearer ${bound}`, undefined, 'invalid_token'],
        ['the bound token as Bearer, with a proof', `Bearer ${bound}`, key.proof('POST', url, { token: bound }), 'invalid_token'],
        ['an unbound token with DPoP', `DPoP ${plain}`, key.proof('POST', url, { token: plain }), 'invalid_token'],
      ];
      for (const [what, authorization, proof, error] of table) {
        const r = await withProof(m, authorization, proof);
        assert.equal(r.status, 401, what);
        assert.ok(r.challenge.includes(`error="${error}"`), `${what}: ${r.challenge}`);
        assert.ok(r.challenge.includes(`resource_metadata="${metadataUrl(m)}"`), `${what}: ${r.challenge}`);
        if (authorization.startsWith('DPoP ')) assert.match(r.challenge, /^DPoP algs="ES256 /, what);
        else assert.match(r.challenge, /^Bearer /, what);
      }
      // a bound token without the required scope: only its key's holder hears so
      const narrow = (await oidc.token({ scope: 'mcp:extra', dpop: key })).access_token;
      const stranger = await withProof(m, `DPoP ${narrow}`, other.proof('POST', url, { token: narrow }));
      assert.equal(stranger.status, 401, 'another key: not a word on the scopes');
      assert.ok(stranger.challenge.includes('error="invalid_token"'), stranger.challenge);
      const holder = await withProof(m, `DPoP ${narrow}`, key.proof('POST', url, { token: narrow }));
      assert.equal(holder.status, 403, "the key's holder: step up");
      assert.ok(holder.challenge.includes('error="insufficient_scope"'), holder.challenge);
      assert.equal((await withProof(m, `Bearer ${plain}`)).status, 200, 'an unbound token as Bearer');
      assert.equal((await withProof(m, `DPoP ${bound}`, key.proof('POST', url, { token: bound }))).status, 200, 'a fresh proof');
      for (const t of [bound, plain]) assert.ok(!m.stderr.includes(t), 'no token in the log');
    });
  });

  test('DPoP behind a proxy that serves mcpd under a prefix: htu is the public URL', async () => {
    await withOauth({ resource: '/tenant/mcp' }, async (m, oidc) => {
      const key = dpopKey();
      const bound = (await oidc.token({ dpop: key })).access_token;
      const publicUrl = `http://127.0.0.1:${m.port}/tenant/mcp`;
      // the proxy strips /tenant: mcpd sees /mcp, the client used the public URL
      assert.equal((await withProof(m, `DPoP ${bound}`, key.proof('POST', publicUrl, { token: bound }))).status, 200);
      const r = await withProof(m, `DPoP ${bound}`, key.proof('POST', `http://127.0.0.1:${m.port}/mcp`, { token: bound }));
      assert.equal(r.status, 401, 'a proof for the inner URL');
      assert.ok(r.challenge.includes('error="invalid_dpop_proof"'), r.challenge);
    });
  });

  test('a flood of made-up opaque tokens: introspection is budgeted, known tokens keep working', async (t) => {
    await withOauth({ format: 'opaque', introspect: true }, async (m, oidc) => {
      const real = (await oidc.token()).access_token;
      assert.equal((await refusal(m, real)).status, 200, 'a real opaque token');
      const before = oidc.introspections;
      // (m.stderr keeps a tail: the flood's request lines would push the warning out)
      let warned = false;
      let window = '';
      m.proc.stderr.on('data', (d) => {
        window += d;
        warned ||= window.includes('oauth_introspection_limited');
        window = window.slice(-400); // a line cut between two chunks
      });
      const t0 = Date.now();
      // in waves of 100: under mcpd's 256 connections per address
      const got = [];
      for (let wave = 0; wave < 4; wave++)
        got.push(
          ...(await Promise.all(
            Array.from({ length: 100 }, () => withProof(m, `Bearer ${crypto.randomBytes(24).toString('base64url')}`)),
          )),
        );
      const seconds = (Date.now() - t0) / 1000;
      const calls = oidc.introspections - before;
      t.diagnostic(`${calls} introspections for 400 made-up tokens in ${seconds.toFixed(1)} s`);
      assert.ok(calls <= 40 + Math.ceil(20 * seconds) + 2, `${calls} introspections in ${seconds} s`);
      const statuses = new Set(got.map((r) => r.status));
      assert.ok([...statuses].every((s) => s === 401 || s === 503), `statuses ${[...statuses]}`);
      const busy = got.filter((r) => r.status === 503);
      assert.ok(busy.length > 0, 'some were answered 503');
      assert.ok(busy.every((r) => r.retryAfter === '1'), 'with Retry-After');
      assert.equal((await refusal(m, real)).status, 200, 'the checked token still served');
      await waitFor(() => warned, 5000, 'the oauth_introspection_limited warning');
      await sleep(2500); // the budget fills again
      const fresh = (await oidc.token()).access_token;
      assert.equal((await refusal(m, fresh)).status, 200, 'a new token is checked again');
    });
  });

  test('a flood of made-up opaque tokens from one client: another client\'s new token is checked meanwhile', async (t) => {
    await withOauth({ format: 'opaque', introspect: true, extra: ['--trusted-proxies', 'loopback'] }, async (m, oidc) => {
      // One IPv6 host, from a new address of its /64 each time: one client.
      let n = 0;
      const flooder = () => `2001:db8:1:2::${(++n % 4000) + 1}`;
      const before = oidc.introspections;
      const t0 = Date.now();
      let stop = false;
      const got = [];
      const flood = (async () => {
        // until the other client's request is answered (bounded: 40 waves)
        for (let wave = 0; wave < 40 && !stop; wave++)
          got.push(
            ...(await Promise.all(
              Array.from({ length: 50 }, () =>
                withProof(m, `Bearer ${crypto.randomBytes(24).toString('base64url')}`, undefined, flooder()),
              ),
            )),
          );
      })();
      await sleep(300);
      const fresh = (await oidc.token()).access_token;
      const other = await withProof(m, `Bearer ${fresh}`, undefined, '198.51.100.9');
      stop = true;
      await flood;
      const seconds = (Date.now() - t0) / 1000;
      const calls = oidc.introspections - before - 1; // the other client's one
      t.diagnostic(`${calls} introspections for the flooder's ${got.length} made-up tokens in ${seconds.toFixed(1)} s`);
      assert.equal(other.status, 200, "the other client's new token is checked during the flood");
      assert.ok(calls <= 10 + Math.ceil(5 * seconds) + 2, `the flooder cost ${calls} introspections in ${seconds} s`);
      const busy = got.filter((r) => r.status === 503);
      assert.ok(busy.length > 0 && busy.every((r) => r.retryAfter === '1'), 'the flooder is answered 503 with Retry-After');
      assert.ok(got.every((r) => r.status === 401 || r.status === 503), `statuses ${[...new Set(got.map((r) => r.status))]}`);
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
