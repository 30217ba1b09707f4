// sdk-server.mjs — the benchmark's peer: the official TypeScript SDK's
// Streamable HTTP server with the same `echo` tool as mcpd.
//
// It follows the SDK's own stateful example, minus express: one
// StreamableHTTPServerTransport (and one McpServer) per session, created on
// an initialize POST and kept in a map by session id; every other request is
// routed to its session's transport. Plain node:http, 127.0.0.1 only.
//
// Usage: node sdk-server.mjs PORT [--json]
//   --json  enableJsonResponse: true (a request is answered with one JSON body)
//   default replies are SSE (text/event-stream), the SDK's default.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const port = Number(process.argv[2]);
const jsonMode = process.argv.includes('--json');
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node sdk-server.mjs PORT [--json]');
  process.exit(2);
}

function newServer() {
  const server = new McpServer({ name: 'sdk-bench-peer', version: '1.0.0' });
  server.registerTool(
    'echo',
    { description: 'Echo a message back', inputSchema: { message: z.string() } },
    async ({ message }) => ({ content: [{ type: 'text', text: message }] }),
  );
  return server;
}

const transports = new Map(); // session id -> StreamableHTTPServerTransport

function sendError(res, status, code, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } }));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname !== '/mcp') return sendError(res, 404, -32000, 'Not found');
  const sid = req.headers['mcp-session-id'];

  if (req.method === 'POST') {
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      return sendError(res, 400, -32700, 'Parse error');
    }
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) return sendError(res, 404, -32001, 'Session not found');
      if (!isInitializeRequest(body)) {
        return sendError(res, 400, -32000, 'Bad Request: no valid session ID');
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: jsonMode,
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) transports.delete(transport.sessionId);
      };
      await newServer().connect(transport);
    }
    return transport.handleRequest(req, res, body);
  }

  if (req.method === 'GET' || req.method === 'DELETE') {
    const transport = sid ? transports.get(sid) : undefined;
    if (!transport) return sendError(res, sid ? 404 : 400, -32000, 'Invalid or missing session ID');
    return transport.handleRequest(req, res);
  }
  return sendError(res, 405, -32000, 'Method not allowed');
}

const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    if (!res.headersSent) sendError(res, 500, -32603, String(err && err.message));
    else res.end();
  });
});
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(port, '127.0.0.1', () => {
  console.error(`sdk-server listening on 127.0.0.1:${port} (${jsonMode ? 'json' : 'sse'} replies)`);
});
const stop = () => httpServer.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
