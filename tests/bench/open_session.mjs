// open_session.mjs — open an MCP session for the benchmark and print its id.
//
// Sends initialize (protocol 2025-11-25) and then notifications/initialized to
// URL with plain fetch (the same requests any client makes), and prints the
// Mcp-Session-Id on stdout. Works with JSON or SSE replies. Exit 1 on failure.
//
// Usage: node open_session.mjs http://127.0.0.1:PORT/mcp
const url = process.argv[2];
if (!url) {
  console.error('usage: node open_session.mjs URL');
  process.exit(2);
}
const PROTO = '2025-11-25';
const headers = {
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
};

async function main() {
  const init = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: PROTO,
        capabilities: {},
        clientInfo: { name: 'mcpd-bench', version: '1.0.0' },
      },
    }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await init.text(); // JSON body or a finished SSE stream
  const sid = init.headers.get('mcp-session-id');
  if (init.status !== 200 || !sid || !text.includes('"result"')) {
    throw new Error(`initialize: HTTP ${init.status}, session ${sid}, body ${text.slice(0, 200)}`);
  }
  const note = await fetch(url, {
    method: 'POST',
    headers: { ...headers, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTO },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    signal: AbortSignal.timeout(10_000),
  });
  await note.text();
  if (note.status !== 202) throw new Error(`notifications/initialized: HTTP ${note.status}`);
  process.stdout.write(sid + '\n');
}

main().catch((err) => {
  console.error(`open_session: ${err.message}`);
  process.exit(1);
});
