// mcp-bridge udp://HOST:PORT: a desktop client's stdio relayed to mcpd's
// UDP transport (--udp-listen; README "UDP wire rules"), with the token of
// --token-env sent in mcpd/connect:
//   - initialize, tools/list, a 20,000-character echo (fragments both
//     ways), a countdown with progress, through the bridge;
//   - mcpd SIGKILLed mid-countdown and restarted on the same database and
//     ports: mcpd says it has no state for the bridge (a reset), the bridge
//     gets a new cookie, resumes with the last event id it saw, and the
//     call gets exactly one reply, its progress once, in order;
//   - a bad token: the client's request gets one error saying the server
//     refused the token;
//   - plain udp:// to a host that is not loopback is refused (no TLS).

import { test } from 'node:test';

import { bridgeBadToken, bridgeRefusesRemote, bridgeSurvivesRestart, echoOk } from './lib/raw-bridge.mjs';

test('mcp-bridge udp://: token in mcpd/connect, calls relayed, SIGKILL + restart resumed from the last event id', () =>
  bridgeSurvivesRestart('udp', {
    calls: async (b) => {
      await echoOk(b, 30, 'ü'.repeat(10000));
      return [30];
    },
    resumed: /event=udp_connected msg="resumed after the last event"/,
  }));

test('mcp-bridge udp:// with a bad token: the request gets one error saying the server refused the token', () =>
  bridgeBadToken('udp', /^mcp-bridge: 127\.0\.0\.1:\d+ refused the token: .*/));

test('mcp-bridge udp:// to a host that is not loopback is refused without --allow-http (no TLS on UDP)', () => bridgeRefusesRemote('udp'));
