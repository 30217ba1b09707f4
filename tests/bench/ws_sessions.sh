#!/usr/bin/env bash
# ws_sessions.sh: mcpd's resident memory and threads with WS_SESSIONS (10,000)
# WebSocket sessions (/mcp/ws), a share of them streaming progress. Prints
# figures; not a test.
#
# Starts its own mcpd on loopback (a fresh temp --db, the built-in tools)
# with what N sessions from one address need: --max-connections-per-ip 0
# (every socket comes from 127.0.0.1), --max-connections and --max-sessions
# above N, and --max-workers above the streaming share (each countdown is a
# handler that waits: a fiber on the event loop, not a thread). Raises the open-files limit for itself, hence for mcpd and the
# client (each holds one descriptor per socket). Then ws_sessions.mjs opens N
# WebSockets, initializes a session on each, starts the built-in countdown
# tool (progress every WS_INTERVAL_MS) on WS_STREAM_PERCENT of them, pings
# every socket and counts the answers; see it for the steps. Its last line
# is printed as is (run.sh's BENCH_WS_SESSIONS reads it):
#   WSSESSIONS n=.. initialized=.. streaming=.. answered=.. ...
#     kib_per_session=.. threads_idle=.. threads_sessions=..
#
# Environment (all optional):
#   MCPD_BIN           default <repo>/build/bin/mcpd
#   WS_SESSIONS        sessions (10000)
#   WS_STREAM_PERCENT  share of them with a countdown streaming (10)
#   WS_INTERVAL_MS     milliseconds between a countdown's notifications (1000)
#   WS_SESSIONS_TIMEOUT  seconds for the whole client run (240)
#   NODE               node binary (the Node 22 tests/package.json pins, else node on PATH)
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
WS_SESSIONS=${WS_SESSIONS:-10000}
WS_STREAM_PERCENT=${WS_STREAM_PERCENT:-10}
WS_INTERVAL_MS=${WS_INTERVAL_MS:-1000}
WS_SESSIONS_TIMEOUT=${WS_SESSIONS_TIMEOUT:-240}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "ws_sessions: $*" >&2; exit 1; }
note() { echo "ws_sessions: $*" >&2; }

[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"
"$NODE" --version >/dev/null 2>&1 || die "node not found"

# One descriptor per socket in each process, plus mcpd's own (store,
# listeners, event loops): N + 256 at least.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" -ge $((WS_SESSIONS + 256)) ] ||
  die "ulimit -n is $(ulimit -n) (hard $(ulimit -Hn)): too few descriptors for $WS_SESSIONS sockets"

# shellcheck source=lib.sh
. "$HERE/lib.sh"

port=$(free_port)
max_conn=$((WS_SESSIONS + 64))
[ "$max_conn" -lt 16384 ] && max_conn=16384
start mcpd-ws-sessions "$port" "$MCPD_BIN" --listen "127.0.0.1:$port" --db "$TMP/mcpd-ws-sessions.db" \
  --log-level error --max-connections "$max_conn" --max-connections-per-ip 0 \
  --max-sessions $((WS_SESSIONS + 64)) --max-workers $((WS_SESSIONS * WS_STREAM_PERCENT / 100 + 64)) ||
  die "mcpd did not start"
pid=$LAST_PID
note "mcpd (pid $pid, ulimit -n $(ulimit -n)): opening $WS_SESSIONS WebSocket sessions, $WS_STREAM_PERCENT% streaming"
timeout -k 5 $((WS_SESSIONS_TIMEOUT + 90)) "$NODE" "$HERE/ws_sessions.mjs" "127.0.0.1:$port" "$pid" "$WS_SESSIONS" \
  --timeout "$WS_SESSIONS_TIMEOUT" --stream-percent "$WS_STREAM_PERCENT" --interval-ms "$WS_INTERVAL_MS" |
  grep '^WSSESSIONS' || die "no result"
# mcpd's warnings, if it lowered its caps or refused connections.
grep -E 'level=(warn|error)' "$TMP/mcpd-ws-sessions.log" | head -5 >&2
exit 0
