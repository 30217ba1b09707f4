// The whole sign-in chain with real parts: the official SDK client over
// stdio → mcp-bridge → mcpd (--auth oauth) → oidc-provider (a certified
// OpenID provider, tests/e2e/lib/oidc.mjs). mcp-bridge finds the provider
// through mcpd's protected resource metadata, registers itself, signs the
// user in through its loopback redirect (the "browser" is curl, following
// the provider's redirects with cookies), and calls mcpd's tools with the
// provider's token:
//
//   - JWT access tokens, bound to the bridge's key (DPoP, RFC 9449: the
//     provider offers it, so the bridge asks, and mcpd checks the proofs):
//     the session is the user's (oauth:<iss>#alice), the token file (with
//     the key) is reused by the next run without a sign-in, a token half-way
//     through its life is refreshed quietly (the provider's refresh token,
//     which it only issues for offline_access asked with prompt=consent),
//     and no token reaches either log;
//   - the same over --transport ws: the handshake is refused 401, the
//     bridge signs in and makes it again with the DPoP-bound token and a
//     proof; the next run reuses the kept token; --logout forgets it;
//   - opaque tokens, checked by introspection: a token the provider ended
//     is refused by mcpd (401), and the bridge refreshes and carries on in
//     the same session, with no second sign-in.
//
// Runs on SQLite and (MCPD_TEST_DB=postgres) PostgreSQL.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { spawnSync } from 'node:child_process';

import { BRIDGE_BIN, sdkBridge } from './fixtures/bridge-proc.mjs';
import { ACCOUNT } from './lib/oidc.mjs';
import { withOauth } from './lib/oauth-mcpd.mjs';
import { sleep, waitFor } from './lib/mcpd.mjs';

const BROWSER = ['--oauth-open-command', "curl -sS -L -b '' -o /dev/null"];

/** A bridge run: connect through it, call echo with each message, close. */
async function use(m, dir, messages, args = [`http://127.0.0.1:${m.port}/mcp`]) {
  const b = await sdkBridge(['--log-level', 'debug', ...BROWSER, ...args], {
    env: { XDG_CONFIG_HOME: dir },
  });
  try {
    for (const message of messages) {
      const r = await b.client.callTool({ name: 'echo', arguments: { message } });
      assert.equal(r.content?.[0]?.text, message, JSON.stringify(r));
    }
  } catch (e) {
    e.message += `\n--- mcp-bridge stderr (tail) ---\n${b.stderr().slice(-4000)}`;
    throw e;
  } finally {
    await b.client.close();
  }
  return b.stderr();
}

const tokenFile = (dir) => path.join(dir, 'mcp-bridge', 'oauth.json');
const kept = (dir, m, p = '/mcp') => JSON.parse(fs.readFileSync(tokenFile(dir), 'utf8'))[`http://127.0.0.1:${m.port}${p}`];

function noTokenIn(log, dir, m, what) {
  const t = kept(dir, m);
  for (const v of [t.access_token, t.refresh_token]) if (v) assert.ok(!log.includes(v), `a token in ${what}`);
}

test('mcp-bridge signs in at the provider, uses mcpd as the user, refreshes quietly (JWT)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-oidc-'));
  try {
    // 6 s tokens: the bridge refreshes them after 3 s
    await withOauth({ accessTTL: 6 }, async (m, oidc) => {
      const log1 = await use(m, dir, ['first']);
      assert.equal(oidc.signIns, 1);
      assert.deepEqual(oidc.grants, ['authorization_code']);
      const t = kept(dir, m);
      assert.ok(t.refresh_token, 'the provider gave a refresh token (offline_access with consent)');
      assert.equal(t.access_token.split('.').length, 3, 'a JWT');
      const claims = JSON.parse(Buffer.from(t.access_token.split('.')[1], 'base64url'));
      assert.ok(claims.cnf?.jkt, 'bound to the bridge\'s key (DPoP)');
      assert.match(t.dpop_key, /BEGIN PRIVATE KEY/, 'the key kept with the tokens');
      assert.equal(fs.statSync(tokenFile(dir)).mode & 0o777, 0o600);
      // the session was the user's (the bridge deleted it on closing)
      assert.ok(m.stderr.includes(`oauth:${oidc.issuer}#${ACCOUNT}`), 'the principal in the log');

      await sleep(3500);
      const log2 = await use(m, dir, ['second', 'third']);
      assert.equal(oidc.signIns, 1, 'the kept token: no second sign-in');
      assert.ok(oidc.grants.includes('refresh_token'), `grants: ${oidc.grants}`);
      assert.equal(oidc.grants.filter((g) => g === 'authorization_code').length, 1);
      noTokenIn(log1 + log2, dir, m, "mcp-bridge's log");
      noTokenIn(m.stderr, dir, m, "mcpd's log");
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('over --transport ws: the handshake signs in, with DPoP; kept, reused, forgotten by --logout', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-oidc-'));
  try {
    await withOauth({}, async (m, oidc) => {
      const ws = [`ws://127.0.0.1:${m.port}/mcp/ws`]; // the scheme selects --transport ws
      await use(m, dir, ['over ws'], ws);
      assert.equal(oidc.signIns, 1);
      const t = kept(dir, m, '/mcp/ws');
      assert.ok(t?.access_token, 'kept under the http form of the URL');
      assert.ok(JSON.parse(Buffer.from(t.access_token.split('.')[1], 'base64url')).cnf?.jkt, 'DPoP-bound');
      assert.match(m.stderr, /GET \/mcp\/ws status=401 principal=- transport=ws/, 'refused first');
      await use(m, dir, ['again'], ws);
      assert.equal(oidc.signIns, 1, 'the kept token: no second sign-in');
      // (a WebSocket's request line is logged when it closes)
      await waitFor(() => m.stderr.includes(`principal=\\"oauth:${oidc.issuer}#${ACCOUNT}\\" transport=ws`), 5000, "the user's WebSocket");
      const out = spawnSync(BRIDGE_BIN, ['--logout', ws[0]], { env: { ...process.env, XDG_CONFIG_HOME: dir }, encoding: 'utf8' });
      assert.equal(out.status, 0, out.stderr);
      assert.equal(kept(dir, m, '/mcp/ws'), undefined, 'forgotten');
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a token the provider ended: mcpd refuses it, mcp-bridge refreshes and goes on (introspection)', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-oidc-'));
  try {
    await withOauth({ format: 'opaque', introspect: true }, async (m, oidc) => {
      const b = await sdkBridge(['--log-level', 'debug', ...BROWSER, `http://127.0.0.1:${m.port}/mcp`], {
        env: { XDG_CONFIG_HOME: dir },
      });
      try {
        const call = async (message) => {
          const r = await b.client.callTool({ name: 'echo', arguments: { message } });
          assert.equal(r.content?.[0]?.text, message, JSON.stringify(r));
        };
        await call('before');
        assert.deepEqual(oidc.grants, ['authorization_code']);
        const first = kept(dir, m).access_token;
        assert.notEqual(first.split('.').length, 3, 'an opaque token');
        await oidc.destroyAccessToken(first);
        // mcpd keeps an introspection answer 10 s (INTROSPECT_CACHE_MS): past
        // that, it asks again and hears the token is no longer active
        await sleep(10500);
        const logged = m.stderr.length;
        await call('after');
        assert.equal(oidc.signIns, 1, 'a refresh, not a second sign-in');
        assert.deepEqual(oidc.grants, ['authorization_code', 'refresh_token']);
        assert.notEqual(kept(dir, m).access_token, first);
        assert.match(m.stderr.slice(logged), /status=401/, 'mcpd refused the ended token');
      } catch (e) {
        e.message += `\n--- mcp-bridge stderr (tail) ---\n${b.stderr().slice(-4000)}`;
        throw e;
      } finally {
        await b.client.close();
      }
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
