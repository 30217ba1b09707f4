// ping_flood.mjs — N pings on one WebSocket and N on one stdio connection
// (issue 7, defect 2): a long-lived push connection must serve any number
// of requests with constant threads and memory. The e2e test
// (tests/e2e/abuse-push.test.mjs) runs a scaled-down count under ASan; this
// runs the full figure against whatever MCPD_BIN is (Release by default).
//
// Prints, per transport, the time taken and the process's threads,
// mappings, descriptors and RSS before the flood, at each quarter and after.
// The last line per transport is machine-readable:
//   PING_FLOOD transport=ws n=.. ms=.. threads=A->B rss_kib=A->B maps=A->B
//
// Usage: MCPD_BIN=build/bin/mcpd node tests/bench/ping_flood.mjs [N=100000]
import fs from 'node:fs';

import { startMcpd, tempDb } from '../e2e/lib/mcpd.mjs';
import { StdioClient, WsClient, pingFlood, procSample } from '../e2e/lib/push-clients.mjs';

const N = Number(process.argv[2] || 100000);

async function measure(transport, client, pid) {
  await pingFlood(client, 2000, { prefix: 'warm' });
  const before = procSample(pid);
  console.log(transport, 'before', JSON.stringify(before));
  const r = await pingFlood(client, N, {
    every: Math.ceil(N / 4),
    onProgress: (done) => console.log(transport, done, JSON.stringify(procSample(pid))),
  });
  const after = procSample(pid);
  console.log(
    `PING_FLOOD transport=${transport} n=${N} ms=${r.ms} threads=${before.threads}->${after.threads}` +
      ` rss_kib=${before.rssKb}->${after.rssKb} maps=${before.maps}->${after.maps} fds=${before.fds}->${after.fds}`,
  );
}

const m = await startMcpd();
try {
  const c = await WsClient.open(m.port);
  await c.init();
  await measure('ws', c, m.pid);
  await c.close();
} finally {
  await m.cleanup();
}

const { dir, db } = tempDb();
const s = new StdioClient({ args: ['--db', db] });
try {
  await s.init();
  await measure('stdio', s, s.pid);
  await s.close();
} finally {
  s.proc.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
}
