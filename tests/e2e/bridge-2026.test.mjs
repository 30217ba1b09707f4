// mcp-bridge and MCP 2026-07-28 (issue 34): a client of the stateless
// revision speaks through the bridge to a real mcpd, which refuses any
// request whose MCP-Protocol-Version, Mcp-Method, Mcp-Name or Mcp-Param-*
// headers are missing or disagree with the body (-32020); the bridge learns
// the tools' x-mcp-header declarations and leaves out the invalid tools; a
// dual-era client's server/discover probe to a legacy server is answered
// -32601 so that the client falls back to initialize; and a dropped stream
// is resumed no sooner than the SSE retry: the server gave.

import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, test } from 'node:test';

import { startMcpd } from './lib/mcpd.mjs';
import { BridgeProc, initialize, initialized } from './fixtures/bridge-proc.mjs';
import { startSdkServer } from './fixtures/bridge-sdk-server.mjs';
import { json, startHttpFixture } from './fixtures/http-fixture.mjs';

const MODERN = '2026-07-28';
const meta = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'bridge-2026-e2e', version: '0.0.0' },
};
const req = (id, method, params = {}) => ({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } });

let mcpd;
before(async () => {
  mcpd = await startMcpd();
});
after(async () => {
  await mcpd?.cleanup();
});

async function withBridge(url, fn) {
  const b = new BridgeProc(['--log-level', 'warn', url]);
  try {
    return await fn(b);
  } finally {
    await b.cleanup();
  }
}

test('2026-07-28 through mcp-bridge to mcpd: discover, a tools/call with an x-mcp-header argument, prompts and resources', async () => {
  await withBridge(mcpd.url, async (b) => {
    b.send(req(1, 'server/discover'));
    const d = await b.response(1);
    assert.equal(d.error, undefined, `server/discover: ${JSON.stringify(d.error)}`);
    assert.ok(d.result.supportedVersions.includes(MODERN));

    // a call before any tools/list: the bridge lists the tools itself to
    // learn that region goes in Mcp-Param-Region
    b.send(req(2, 'tools/call', { name: 'test_header_param', arguments: { region: 'eu-west-1' } }));
    const c = await b.response(2);
    assert.equal(c.error, undefined, `tools/call: ${JSON.stringify(c.error)}`);
    assert.equal(c.result.content[0].text, 'region: eu-west-1');

    b.send(req(3, 'tools/list'));
    const l = await b.response(3);
    assert.ok(l.result.tools.some((t) => t.name === 'test_header_param'));
    // a value a header cannot carry as it is goes base64-encoded
    b.send(req(4, 'tools/call', { name: 'test_header_param', arguments: { region: ' région\tnord ' } }));
    const c2 = await b.response(4);
    assert.equal(c2.error, undefined, `tools/call (base64 header): ${JSON.stringify(c2.error)}`);
    assert.equal(c2.result.content[0].text, 'region:  région\tnord ');

    b.send(req(5, 'prompts/list'));
    const prompt = (await b.response(5)).result.prompts.find((p) => !p.arguments?.some((a) => a.required));
    b.send(req(6, 'prompts/get', { name: prompt.name }));
    const g = await b.response(6);
    assert.equal(g.error, undefined, `prompts/get: ${JSON.stringify(g.error)}`);

    b.send(req(7, 'resources/list'));
    const resource = (await b.response(7)).result.resources[0];
    b.send(req(8, 'resources/read', { uri: resource.uri }));
    const r = await b.response(8);
    assert.equal(r.error, undefined, `resources/read: ${JSON.stringify(r.error)}`);

    // a 2025 session on the same bridge is unaffected
    b.send(initialize(9));
    assert.ok((await b.response(9)).result.protocolVersion);
    b.send(initialized);
    b.send({ jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'echo', arguments: { message: 'still 2025' } } });
    assert.equal((await b.response(10)).result.content[0].text, 'still 2025');
  });
});

test('mcp-bridge mirrors x-mcp-header arguments (nested, encoded, null omitted) and leaves out tools whose declarations are invalid', async () => {
  const tools = [
    {
      name: 'nested',
      inputSchema: {
        type: 'object',
        properties: {
          outer: { type: 'object', properties: { inner: { type: 'string', 'x-mcp-header': 'Inner' } } },
          count: { type: 'integer', 'x-mcp-header': 'Count' },
          flag: { type: 'boolean', 'x-mcp-header': 'Flag' },
          note: { type: 'string' },
        },
      },
    },
    { name: 'bad_number', inputSchema: { type: 'object', properties: { x: { type: 'number', 'x-mcp-header': 'X' } } } },
    {
      name: 'bad_in_items',
      inputSchema: {
        type: 'object',
        properties: { xs: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Xs' } } },
      },
    },
    {
      name: 'bad_duplicate',
      inputSchema: {
        type: 'object',
        properties: { a: { type: 'string', 'x-mcp-header': 'Dup' }, b: { type: 'string', 'x-mcp-header': 'dup' } },
      },
    },
    { name: 'bad_token', inputSchema: { type: 'object', properties: { a: { type: 'string', 'x-mcp-header': 'A B' } } } },
    { name: 'outil-é', inputSchema: { type: 'object', properties: {} } },
  ];
  const fx = await startHttpFixture((req, res, msg) => {
    if (msg?.method === 'tools/list') return json(res, { jsonrpc: '2.0', id: msg.id, result: { resultType: 'complete', tools } });
    return json(res, { jsonrpc: '2.0', id: msg?.id ?? null, result: { resultType: 'complete', content: [] } });
  });
  try {
    await withBridge(fx.url, async (b) => {
      b.send(req(1, 'tools/list'));
      const l = await b.response(1);
      assert.deepEqual(
        l.result.tools.map((t) => t.name),
        ['nested', 'outil-é'],
      );
      b.send(req(2, 'tools/call', { name: 'nested', arguments: { outer: { inner: 'x y' }, count: -7, flag: false, note: 'n' } }));
      await b.response(2);
      b.send(req(3, 'tools/call', { name: 'nested', arguments: { outer: { inner: 'Grüße' }, count: null } }));
      await b.response(3);
      b.send(req(4, 'tools/call', { name: 'outil-é', arguments: {} }));
      await b.response(4);
    });
    const calls = fx.requests.filter((r) => r.body?.method === 'tools/call');
    const h = calls.map((r) => r.headers);
    assert.equal(h[0]['mcp-protocol-version'], MODERN);
    assert.equal(h[0]['mcp-method'], 'tools/call');
    assert.equal(h[0]['mcp-name'], 'nested');
    assert.equal(h[0]['mcp-param-inner'], 'x y');
    assert.equal(h[0]['mcp-param-count'], '-7');
    assert.equal(h[0]['mcp-param-flag'], 'false');
    assert.equal(h[0]['mcp-param-note'], undefined);
    assert.equal(h[0]['mcp-session-id'], undefined);
    assert.equal(h[1]['mcp-param-inner'], `=?base64?${Buffer.from('Grüße').toString('base64')}?=`);
    assert.equal(h[1]['mcp-param-count'], undefined, 'a null argument has no header');
    assert.equal(h[2]['mcp-name'], `=?base64?${Buffer.from('outil-é').toString('base64')}?=`);
  } finally {
    await fx.close();
  }
});

test('a server/discover probe to a legacy server is answered -32601, and the client falls back to initialize', async () => {
  const sdk = await startSdkServer();
  try {
    await withBridge(sdk.url, async (b) => {
      b.send(req(1, 'server/discover'));
      const p = await b.response(1);
      assert.equal(p.error?.code, -32601, JSON.stringify(p));
      b.send(initialize(2));
      assert.ok((await b.response(2)).result.protocolVersion);
      b.send(initialized);
      b.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { message: 'fell back' } } });
      assert.equal((await b.response(3)).result.content[0].text, 'fell back');
    });
  } finally {
    await sdk.close();
  }

  // the other shapes a legacy server's refusal takes, and a modern one's
  const answers = {
    404: (res) => {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not Found');
    },
    legacyVersion: (res, msg) =>
      json(res, { jsonrpc: '2.0', id: msg.id, error: { code: -32022, message: 'use HTTP', data: { supported: ['2025-11-25'] } } }, 400),
    notFound: (res, msg) => json(res, { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no' } }, 404),
    modernVersion: (res, msg) =>
      json(res, { jsonrpc: '2.0', id: msg.id, error: { code: -32022, message: 'v', data: { supported: [MODERN] } } }, 400),
  };
  for (const [kind, answer] of Object.entries(answers)) {
    const fx = await startHttpFixture((req, res, msg) => answer(res, msg));
    try {
      await withBridge(fx.url, async (b) => {
        b.send(req(1, 'server/discover'));
        const p = await b.response(1);
        assert.equal(p.error?.code, kind === 'modernVersion' ? -32022 : -32601, `${kind}: ${JSON.stringify(p)}`);
      });
    } finally {
      await fx.close();
    }
  }
});

test('a 2026-07-28 result without resultType reaches the client as complete (the revision\'s default), others unchanged', async () => {
  const fx = await startHttpFixture((req, res, msg) => {
    if (msg?.method === 'tools/list') return json(res, { jsonrpc: '2.0', id: msg.id, result: { resultType: 'complete', tools: [{ name: 'bare', inputSchema: { type: 'object' } }] } });
    if (msg?.params?.name === 'bare') return json(res, { jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: 'no type' }] } });
    if (msg?.params?.name === 'asks') return json(res, { jsonrpc: '2.0', id: msg.id, result: { resultType: 'input_required', inputRequests: { k: { method: 'roots/list', params: {} } } } });
    return json(res, { jsonrpc: '2.0', id: msg?.id ?? null, error: { code: -32601, message: 'no' } });
  });
  try {
    await withBridge(fx.url, async (b) => {
      b.send(req(1, 'tools/call', { name: 'bare', arguments: {} }));
      assert.deepEqual((await b.response(1)).result, { content: [{ type: 'text', text: 'no type' }], resultType: 'complete' });
      b.send(req(2, 'tools/call', { name: 'asks', arguments: {} }));
      assert.equal((await b.response(2)).result.resultType, 'input_required');
      b.send(req(3, 'tools/call', { name: 'other', arguments: {} }));
      assert.equal((await b.response(3)).error.code, -32601);
    });
  } finally {
    await fx.close();
  }
});

test('mcp-bridge resumes a dropped stream no sooner than the SSE retry: the server gave (800 ms)', async () => {
  const RETRY = 800;
  let pending = null;
  const closes = [];
  const fx = await startHttpFixture((req, res, msg) => {
    if (req.method === 'GET') {
      if (!req.headers['last-event-id'] || pending === null) {
        res.writeHead(405);
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const id = pending;
      pending = null;
      res.end(`id: r${id}\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'resumed' }] } })}\n\n`);
      return;
    }
    if (msg?.method === 'initialize') {
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' });
      return res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'fx', version: '1' } } }));
    }
    if (msg?.method === 'tools/call') {
      pending = msg.id;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`id: p${msg.id}\nretry: ${RETRY}\ndata: \n\n`);
      setTimeout(() => {
        closes.push(performance.now());
        res.end();
      }, 30);
      return;
    }
    res.writeHead(202);
    res.end();
  });
  try {
    await withBridge(fx.url, async (b) => {
      await b.init();
      for (let id = 2; id <= 4; id++) {
        b.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 't', arguments: {} } });
        assert.equal((await b.response(id)).result.content[0].text, 'resumed');
      }
    });
    const resumes = fx.requests.filter((r) => r.method === 'GET' && r.headers['last-event-id']).map((r) => r.at);
    assert.equal(resumes.length, 3);
    const delays = resumes.map((at, i) => Math.round(at - closes[i]));
    // the bridge's clock starts when it sees the end of the stream, after
    // the server closed it: a delay below the retry means it came back early
    // (a few ms of slack for timer rounding)
    for (const d of delays) assert.ok(d >= RETRY - 20, `reconnected after ${d} ms against retry: ${RETRY} (${delays})`);
  } finally {
    await fx.close();
  }
});
