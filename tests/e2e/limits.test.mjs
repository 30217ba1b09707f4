// Bounded storage and the command line: idle sessions expire, ended streams
// expire after their retention, the per-session storage cap ends a request
// with an error without losing what was stored, --db :memory: works, and
// bad usage exits 2 with one line on stderr.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import {
  MCPD_BIN,
  Mcpd,
  callTool,
  echo,
  freePort,
  getStream,
  initSession,
  request,
  mcpHeaders,
  sleep,
  startMcpd,
  waitFor,
} from './lib/mcpd.mjs';

/** GET with Last-Event-ID; every message until the stream ends. */
async function resume(port, session, lastEventId) {
  const s = await getStream(port, session, { lastEventId });
  if (!s.sse) {
    const { json } = await s.body;
    s.close();
    return { status: s.status, json, messages: [] };
  }
  try {
    const messages = (await s.sse.rest(5000)).map((m) => m.msg);
    return { status: s.status, messages };
  } finally {
    s.close();
  }
}

test('an idle session expires and then answers 404', async () => {
  const mcpd = await startMcpd({ args: ['--session-idle-ms', '400'] });
  try {
    const { session } = await initSession(mcpd.port);
    assert.equal(await echo(mcpd.port, session), 'still-alive');
    await sleep(1500);
    const r = await request(mcpd.port, {
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    assert.equal(r.status, 404);
    assert.equal(r.json.error.code, -32001);
  } finally {
    await mcpd.cleanup();
  }
});

test('a session at its storage cap gets room back as its ended streams expire', async () => {
  // The reaper lowers the count by what it purged; it does not re-read the
  // session's history, so this is the only way back under the cap.
  const mcpd = await startMcpd({ args: ['--session-max-bytes', '3000', '--stream-retention-ms', '300'] });
  try {
    const { session } = await initSession(mcpd.port);
    const big = await callTool(mcpd.port, session, 'countdown', { n: 200, interval_ms: 0 }, { progressToken: 'b' });
    assert.match(big.response?.error?.message ?? '', /storage limit/i);
    const full = await callTool(mcpd.port, session, 'echo', { message: 'no room' });
    assert.equal(full.response?.error?.code, -32000, `at the cap: ${JSON.stringify(full.response)}`);

    // Retention 300 ms, a reaper pass about every second: poll rather than
    // guess. Each refused echo stores its error too, but that expires as well.
    const answer = await waitFor(
      async () => {
        const r = await callTool(mcpd.port, session, 'echo', { message: 'room again' });
        return r.response?.result ? r.response.result.content?.[0]?.text : null;
      },
      10000,
      'room under the cap',
      200,
    );
    assert.equal(answer, 'room again');
    // ...and the cap still holds once that room is used up.
    const again = await callTool(mcpd.port, session, 'countdown', { n: 200, interval_ms: 0 }, { progressToken: 'c' });
    assert.match(again.response?.error?.message ?? '', /storage limit/i);
  } finally {
    await mcpd.cleanup();
  }
});

test('an ended stream is resumable within its retention, and gone after it', async () => {
  const mcpd = await startMcpd({ args: ['--stream-retention-ms', '300'] });
  try {
    const { session } = await initSession(mcpd.port);
    const r = await callTool(mcpd.port, session, 'countdown', { n: 2, interval_ms: 10 }, { progressToken: 'p' });
    assert.equal(r.sse, true);
    const first = r.events.find((e) => e.data && e.data.length > 0);
    assert.ok(first?.id, 'the first message has an event id');

    const again = await resume(mcpd.port, session, first.id);
    assert.equal(again.status, 200);
    const replayed = again.messages;
    assert.equal(replayed.length, 2, 'the second progress and the response');
    assert.equal(replayed[1].id, r.id);

    const late = await waitFor(
      async () => {
        const r = await resume(mcpd.port, session, first.id);
        return r.status === 200 ? null : r;
      },
      10000,
      'the ended stream to expire',
      100,
    );
    assert.equal(late.status, 400, 'an expired stream cannot be resumed');
    assert.equal(await echo(mcpd.port, session), 'still-alive', 'the session outlives its streams');
  } finally {
    await mcpd.cleanup();
  }
});

test('the per-session storage cap ends a request with an error and loses nothing stored', async () => {
  const mcpd = await startMcpd({ args: ['--session-max-bytes', '3000'] });
  try {
    const { session } = await initSession(mcpd.port);
    const small = await callTool(mcpd.port, session, 'countdown', { n: 2, interval_ms: 1 }, { progressToken: 's' });
    const firstId = small.events.find((e) => e.data)?.id;
    assert.ok(firstId);

    const big = await callTool(mcpd.port, session, 'countdown', { n: 200, interval_ms: 0 }, { progressToken: 'b' });
    assert.equal(big.status, 200);
    assert.ok(big.response?.error, `the capped request ends with an error: ${JSON.stringify(big.response)}`);
    assert.equal(big.response.error.code, -32000);
    assert.match(big.response.error.message, /storage limit/i);
    const progress = big.messages.filter((m) => m.method === 'notifications/progress');
    assert.ok(progress.length > 0 && progress.length < 200, `some progress was stored (${progress.length})`);

    // What was stored before the cap is still there.
    const again = await resume(mcpd.port, session, firstId);
    assert.equal(again.status, 200);
    const replayed = again.messages;
    assert.equal(replayed.at(-1).id, small.id);
    assert.deepEqual(replayed.at(-1).result.content[0].text, 'countdown finished');
  } finally {
    await mcpd.cleanup();
  }
});

test('--db :memory: gives a working throwaway store', async () => {
  const port = await freePort();
  const mcpd = new Mcpd({ db: ':memory:', port });
  await mcpd.start();
  try {
    const { session } = await initSession(mcpd.port);
    assert.equal(await echo(mcpd.port, session, 'in memory'), 'in memory');
    const r = await callTool(mcpd.port, session, 'countdown', { n: 3, interval_ms: 5 }, { progressToken: 1 });
    assert.equal(r.messages.filter((m) => m.method === 'notifications/progress').length, 3);
  } finally {
    await mcpd.cleanup();
  }
});

test('command line: --help exits 0, bad usage exits 2 with one line on stderr', () => {
  const help = spawnSync(MCPD_BIN, ['--help'], { encoding: 'utf8' });
  assert.equal(help.status, 0);
  for (const opt of ['--listen', '--db', '--reply-mode', '--session-idle-ms', '--max-body', 'MCPD_DB_TIMEOUT_MS']) {
    assert.ok(help.stdout.includes(opt), `--help documents ${opt}`);
  }
  for (const argv of [['--bogus'], ['--listen', 'nonsense'], ['--reply-mode', 'xml'], ['--max-body', '-1']]) {
    const r = spawnSync(MCPD_BIN, argv, { encoding: 'utf8' });
    assert.equal(r.status, 2, `${argv.join(' ')} → exit 2`);
    assert.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`);
    assert.match(r.stderr, /^mcpd: /);
  }
  const nonLoopback = spawnSync(MCPD_BIN, ['--listen', '0.0.0.0:0', '--db', ':memory:'], { encoding: 'utf8' });
  assert.equal(nonLoopback.status, 2);
  assert.match(nonLoopback.stderr, /non-loopback/);
});

test('/metrics counts sessions, requests and stored messages', async () => {
  const mcpd = await startMcpd();
  try {
    const scrape = async () => {
      const r = await request(mcpd.port, { method: 'GET', path: '/metrics' });
      assert.equal(r.status, 200);
      assert.match(r.headers['content-type'], /^text\/plain/);
      return Object.fromEntries(
        r.text
          .split('\n')
          .filter((l) => l && !l.startsWith('#'))
          .map((l) => l.split(' '))
          .map(([k, v]) => [k, Number(v)]),
      );
    };
    const before = await scrape();
    const { session } = await initSession(mcpd.port);
    await echo(mcpd.port, session);
    const after = await scrape();
    assert.equal(after.mcpd_sessions_created_total - before.mcpd_sessions_created_total, 1);
    assert.ok(after.mcpd_requests_total - before.mcpd_requests_total >= 1);
    assert.ok(after.mcpd_messages_stored_total - before.mcpd_messages_stored_total >= 2, 'initialize result + echo result');
    assert.ok(after.mcpd_store_commits_total > before.mcpd_store_commits_total);
    assert.equal(after.mcpd_store_ready, 1);
    // Every commit's hold of the commit lock is in the histogram (failed
    // commits and checkpoints' second phases too), in cumulative buckets.
    const hold = 'mcpd_store_commit_lock_seconds';
    assert.ok(
      after[`${hold}_count`] - before[`${hold}_count`] >= after.mcpd_store_commits_total - before.mcpd_store_commits_total,
    );
    assert.ok(after[`${hold}_sum`] > 0);
    const buckets = Object.entries(after).filter(([k]) => k.startsWith(`${hold}_bucket{`));
    assert.deepEqual(
      buckets.map(([k]) => k.match(/le="([^"]+)"/)[1]),
      ['0.0005', '0.001', '0.0025', '0.005', '0.01', '0.02', '0.05', '0.1', '1', '+Inf'],
    );
    buckets.forEach(([, v], i) => assert.ok(i === 0 || v >= buckets[i - 1][1], 'cumulative'));
    assert.equal(after[`${hold}_bucket{le="+Inf"}`], after[`${hold}_count`]);
  } finally {
    await mcpd.cleanup();
  }
});

test('started with stdin, stdout and stderr closed, mcpd holds them with /dev/null and serves', async () => {
  const fs = await import('node:fs');
  const { spawn } = await import('node:child_process');
  const port = await freePort();
  const dir = fs.mkdtempSync('/tmp/mcpd-fds-');
  const child = spawn('/bin/sh', ['-c', `exec "$0" --listen 127.0.0.1:${port} --db "$1" <&- >&- 2>&-`, MCPD_BIN, `${dir}/m.db`], {
    stdio: 'ignore',
  });
  try {
    const deadline = Date.now() + 10000;
    let ok = false;
    while (!ok && Date.now() < deadline) {
      ok = await request(port, { method: 'GET', path: '/healthz', timeout: 1000 }).then((r) => r.status === 200, () => false);
      if (!ok) await sleep(50);
    }
    assert.ok(ok, 'mcpd answers /healthz');
    for (const fd of [0, 1, 2]) assert.equal(fs.readlinkSync(`/proc/${child.pid}/fd/${fd}`), '/dev/null', `fd ${fd}`);
    const { session } = await initSession(port);
    assert.equal(await echo(port, session), 'still-alive');
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.on('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('config file and --upstream: bad input exits 2 naming the problem; command line > environment > file', async () => {
  const fs = await import('node:fs');
  const dir = fs.mkdtempSync('/tmp/mcpd-config-');
  try {
    const bad = (argv, env, re) => {
      const r = spawnSync(MCPD_BIN, argv, { encoding: 'utf8', env: { ...process.env, ...env } });
      assert.equal(r.status, 2, `${argv.join(' ')} → exit 2 (${r.stderr})`);
      assert.equal(r.stderr.trim().split('\n').length, 1, `one line: ${r.stderr}`);
      assert.match(r.stderr, re);
    };
    fs.writeFileSync(`${dir}/unknown.conf`, '# comment\nlisten = 127.0.0.1:0\nbogus = 1\n');
    bad(['--config', `${dir}/unknown.conf`], {}, /unknown\.conf:3: unknown setting 'bogus'/);
    fs.writeFileSync(`${dir}/noeq.conf`, 'listen 127.0.0.1:0\n');
    bad(['--config', `${dir}/noeq.conf`], {}, /noeq\.conf:1: expected key = value/);
    fs.writeFileSync(`${dir}/nan.conf`, 'max-body = lots\n');
    bad(['--config', `${dir}/nan.conf`], {}, /max-body needs a non-negative number/);
    bad(['--config', `${dir}/missing.conf`], {}, /cannot read config file/);
    bad(['--upstream', "node 'unbalanced"], {}, /unbalanced '/);
    bad(['--upstream', '   '], {}, /empty/);
    bad(['--upstream-mode', 'sometimes'], {}, /per-session or shared/);
    bad([], { MCPD_MAX_BODY: 'x' }, /MCPD_MAX_BODY: max-body needs a non-negative number/);
    // The PostgreSQL pool's sizes are read before any connection is tried.
    for (const [name, value] of [['MCPD_DB_WRITERS', 'two'], ['MCPD_DB_READERS', '0'], ['MCPD_DB_READERS', '65'], ['MCPD_DB_WRITERS', '2x']]) {
      const r = spawnSync(MCPD_BIN, ['--listen', '127.0.0.1:0', '--db', 'postgres://nobody@127.0.0.1:1/none'], { encoding: 'utf8', env: { ...process.env, [name]: value }, timeout: 10000 });
      assert.equal(r.status, 1, `${name}=${value}: ${r.stderr}`);
      assert.equal(r.stderr, `mcpd: ${name} must be a whole number from 1 to 64, got '${value}'\n`);
    }
    // So is a call's timeout (db_pg.c).
    for (const value of ['soon', '50', '600001', '10s']) {
      const r = spawnSync(MCPD_BIN, ['--listen', '127.0.0.1:0', '--db', 'postgres://nobody@127.0.0.1:1/none'], { encoding: 'utf8', env: { ...process.env, MCPD_DB_TIMEOUT_MS: value }, timeout: 10000 });
      assert.equal(r.status, 1, `MCPD_DB_TIMEOUT_MS=${value}: ${r.stderr}`);
      assert.equal(r.stderr, `mcpd: MCPD_DB_TIMEOUT_MS must be a whole number from 100 to 600000, got '${value}'\n`);
    }

    // Precedence: the file says one port, the environment another, the
    // command line a third; the command line wins, then the environment.
    const [pf, pe, pc] = [await freePort(), await freePort(), await freePort()];
    fs.writeFileSync(`${dir}/ok.conf`, `listen = 127.0.0.1:${pf}\ndb = ${dir}/a.db\n`);
    const { spawn } = await import('node:child_process');
    for (const [argv, env, port] of [
      [['--config', `${dir}/ok.conf`], {}, pf],
      [['--config', `${dir}/ok.conf`], { MCPD_LISTEN: `127.0.0.1:${pe}` }, pe],
      [['--config', `${dir}/ok.conf`, '--listen', `127.0.0.1:${pc}`], { MCPD_LISTEN: `127.0.0.1:${pe}` }, pc],
    ]) {
      const child = spawn(MCPD_BIN, argv, { stdio: 'ignore', env: { ...process.env, ...env } });
      try {
        let ok = false;
        for (let i = 0; i < 100 && !ok; i++) {
          ok = await request(port, { method: 'GET', path: '/healthz', timeout: 500 }).then((r) => r.status === 200, () => false);
          if (!ok) await sleep(50);
        }
        assert.ok(ok, `mcpd listens on ${port} for ${argv.join(' ')} ${JSON.stringify(env)}`);
      } finally {
        child.kill('SIGTERM');
        await new Promise((r) => child.on('exit', r));
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
