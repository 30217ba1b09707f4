#!/usr/bin/env bash
# gateway_children.sh: mcpd as a gateway (--upstream, per-session mode) with
# GATEWAY_CHILDREN (1,000) sessions, each holding its own upstream child.
# Prints mcpd's threads idle and with the children (the number must not
# depend on the children: their pipes are served by the event loops), and
# mcpd's own resident memory (VmRSS of its process, children excluded).
# Prints figures; not a test.
#
# The upstream is tiny_upstream.sh (POSIX sh, about 1 MiB resident each),
# so a thousand of them fit on a small machine. Starts its own mcpd on
# loopback (a fresh temp --db) with --upstream-max and --max-sessions above
# N, --upstream-idle-ms longer than the run (no child is stopped for
# idleness under the measurement), --upstream-start-timeout-ms 60000 (the
# spawner's queue counts against it; when children were forked, a few of
# 1,000 started at once on a busy 2-core machine timed out at 10 s, its
# default), --max-connections-per-ip 0. The client
# is ws_sessions.mjs over WebSocket, without streaming; its last step sends
# tools/call echo on every session, which only its child can answer, and
# counts the answers. mcpd starts every child on one thread (its spawner),
# one after another (each a clone that shares mcpd's memory until it
# execs: 1,000 in under a second here, where forks took 18-59 s), so an
# initialize waits for the starts queued before it:
# the client keeps 16 in flight and waits up to 120 s for each. Its last line, relabelled, is printed as is (run.sh's
# BENCH_GATEWAY_CHILDREN reads it):
#   GATEWAYCHILDREN n=.. initialized=.. answered=.. children=..
#     rss_idle_kib=.. rss_streaming_kib=.. kib_per_session=..
#     threads_idle=.. threads_sessions=..
#
# Environment (all optional):
#   MCPD_BIN          default <repo>/build/bin/mcpd
#   GATEWAY_CHILDREN  sessions, hence children (1000)
#   GATEWAY_UPSTREAM  the upstream command (default: 'sh tests/bench/tiny_upstream.sh')
#   GATEWAY_CHILDREN_TIMEOUT  seconds for the whole client run (240)
#   NODE              node binary (the Node 22 tests/package.json pins, else node on PATH)
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
GATEWAY_CHILDREN=${GATEWAY_CHILDREN:-1000}
GATEWAY_UPSTREAM=${GATEWAY_UPSTREAM:-"sh $HERE/tiny_upstream.sh"}
GATEWAY_CHILDREN_TIMEOUT=${GATEWAY_CHILDREN_TIMEOUT:-240}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "gateway_children: $*" >&2; exit 1; }
note() { echo "gateway_children: $*" >&2; }

[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"
"$NODE" --version >/dev/null 2>&1 || die "node not found"

# mcpd holds a socket and three pipes per session (the child's stdin,
# stdout, stderr); the client a socket.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" -ge $((GATEWAY_CHILDREN * 4 + 256)) ] ||
  die "ulimit -n is $(ulimit -n) (hard $(ulimit -Hn)): too few descriptors for $GATEWAY_CHILDREN children"

# shellcheck source=lib.sh
. "$HERE/lib.sh"

port=$(free_port)
start mcpd-gateway-children "$port" "$MCPD_BIN" --listen "127.0.0.1:$port" --db "$TMP/mcpd-gateway-children.db" \
  --log-level error --max-connections-per-ip 0 --max-sessions $((GATEWAY_CHILDREN + 64)) \
  --upstream "$GATEWAY_UPSTREAM" --upstream-mode per-session --upstream-max $((GATEWAY_CHILDREN + 64)) \
  --upstream-idle-ms $(((GATEWAY_CHILDREN_TIMEOUT + 120) * 1000)) --upstream-start-timeout-ms 60000 || die "mcpd did not start"
pid=$LAST_PID
note "mcpd (pid $pid, ulimit -n $(ulimit -n)): opening $GATEWAY_CHILDREN sessions, each with an upstream child ($GATEWAY_UPSTREAM)"
timeout -k 5 $((GATEWAY_CHILDREN_TIMEOUT + 90)) "$NODE" "$HERE/ws_sessions.mjs" "127.0.0.1:$port" "$pid" "$GATEWAY_CHILDREN" \
  --timeout "$GATEWAY_CHILDREN_TIMEOUT" --parallel 16 --request-timeout 120 --stream-percent 0 --final echo --label GATEWAYCHILDREN |
  grep '^GATEWAYCHILDREN' || die "no result"
grep -E 'level=(warn|error)' "$TMP/mcpd-gateway-children.log" | head -5 >&2
exit 0
