// stdio-echo.mjs — the gateway benchmark's upstream: the smallest stdio MCP
// server the official SDK makes (McpServer + StdioServerTransport) with one
// `echo` tool. gateway.sh puts the same command behind mcpd --upstream and
// behind supergateway, so both gateways relay identical work.
//
// Usage: node stdio-echo.mjs   (NDJSON on stdin/stdout)
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'bench-stdio-echo', version: '1.0.0' });
server.registerTool(
  'echo',
  { description: 'Echo a message back', inputSchema: { message: z.string() } },
  async ({ message }) => ({ content: [{ type: 'text', text: message }] }),
);
await server.connect(new StdioServerTransport());
