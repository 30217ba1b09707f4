// mcp-bridge tcp://HOST:PORT: a desktop client's stdio relayed to mcpd's
// raw TCP transport (--tcp-listen), with the token of --token-env sent in
// mcpd/connect:
//   - initialize, tools/list, a countdown with progress, through the bridge;
//   - mcpd SIGKILLed mid-countdown and restarted on the same database and
//     ports: the bridge reconnects, resumes with the last event id it saw,
//     and the call gets exactly one reply, its progress once, in order;
//   - a bad token: the client's request gets one error saying the server
//     refused the token;
//   - plain tcp:// to a host that is not loopback is refused (no TLS).

import { test } from 'node:test';

import { bridgeBadToken, bridgeRefusesRemote, bridgeSurvivesRestart } from './lib/raw-bridge.mjs';

test('mcp-bridge tcp://: token in mcpd/connect, calls relayed, SIGKILL + restart resumed from the last event id', () =>
  bridgeSurvivesRestart('tcp', { resumed: /event=ws_resumed msg="reconnected and resumed after the last event"/ }));

test('mcp-bridge tcp:// with a bad token: the request gets one error saying the server refused the token', () =>
  bridgeBadToken('tcp', /^mcp-bridge: 127\.0\.0\.1:\d+ refused the connection: Unauthorized.*token/));

test('mcp-bridge tcp:// to a host that is not loopback is refused without --allow-http (no TLS on raw TCP)', () => bridgeRefusesRemote('tcp'));
