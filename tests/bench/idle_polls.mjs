// idle_polls.mjs — what N idle long polls cost mcpd.
//
//   node idle_polls.mjs URL PID [N=500] [SECONDS=10]
//
// Opens N "stream": true requests whose first message is a minute away
// (countdown n=1, interval 60 s), then N concurrent mcpd/poll calls with
// wait_ms 30000 on them, so every poll is parked waiting. While they wait it
// reads mcpd's CPU time (utime + stime from /proc/PID/stat) over SECONDS and
// prints one line:  IDLE polls=N seconds=S cpu_ms=C cpu_percent=P
// Every request is bounded by a timeout; the polls are abandoned at the end.
import fs from 'node:fs';
import http from 'node:http';

const [url, pidArg, nArg, secArg] = process.argv.slice(2);
if (!url || !pidArg) {
  console.error('usage: node idle_polls.mjs URL PID [N] [SECONDS]');
  process.exit(2);
}
const pid = Number(pidArg);
const N = Number(nArg || 500);
const SECONDS = Number(secArg || 10);
const SESSIONS = Math.ceil(N / 100);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const ticks = Number(process.env.CLK_TCK || 100);

function post(body, session, timeout = 40000) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers = {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-11-25',
    };
    if (session) headers['Mcp-Session-Id'] = session;
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers, agent, timeout },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (data += d));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, data }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

function cpuMs() {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticks; // utime, stime
}

const sessions = [];
for (let s = 0; s < SESSIONS; s++) {
  const r = await post({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'idle-polls', version: '1' } },
  });
  sessions.push(r.headers['mcp-session-id']);
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sessions[s]);
}
const streams = await Promise.all(
  Array.from({ length: N }, async (_, i) => {
    const session = sessions[i % SESSIONS];
    const r = await post(
      {
        jsonrpc: '2.0',
        id: 100 + i,
        method: 'tools/call',
        params: { name: 'countdown', arguments: { n: 1, interval_ms: 60000 }, stream: true },
      },
      session,
    );
    return { session, stream_id: JSON.parse(r.data).result.stream_id };
  }),
);
// Park N polls, then measure while they wait.
const polls = streams.map((s, i) =>
  post(
    { jsonrpc: '2.0', id: 10000 + i, method: 'mcpd/poll', params: { stream_id: s.stream_id, from_seq: 0, wait_ms: 30000 } },
    s.session,
  ).catch(() => null),
);
await new Promise((r) => setTimeout(r, 1000));
const before = cpuMs();
await new Promise((r) => setTimeout(r, SECONDS * 1000));
const used = cpuMs() - before;
console.log(
  `IDLE polls=${N} seconds=${SECONDS} cpu_ms=${used.toFixed(0)} cpu_percent=${((used / (SECONDS * 1000)) * 100).toFixed(2)}`,
);
agent.destroy();
void polls;
process.exit(0);
