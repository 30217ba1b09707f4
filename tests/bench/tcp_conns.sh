#!/usr/bin/env bash
# tcp_conns.sh: mcpd's resident memory and threads with TCP_CONNS (10,000)
# open raw TCP connections (--tcp-listen). Prints figures; not a test.
#
# Starts its own mcpd on loopback (a fresh temp --db) with what N
# connections from one address need: --max-connections-per-ip 0 (every
# connection comes from 127.0.0.1), --max-connections above N, and a
# --tcp-idle-ms longer than the run (the connections sit quiet between
# steps). Raises the open-files limit for itself, hence for mcpd and the
# client (each holds one descriptor per connection). Then tcp_conns.mjs
# greets on every connection (mcpd/connect), measures, initializes a session
# on each, measures again; see it for the steps. Its last line is printed
# as is (run.sh's BENCH_TCP_CONNS reads it):
#   TCPCONNS n=.. connected=.. sessions=.. ... kib_per_connection=..
#     kib_per_connection_and_session=.. threads_idle=.. threads_sessions=..
#
# Environment (all optional):
#   MCPD_BIN    default <repo>/build/bin/mcpd
#   TCP_CONNS   connections (10000)
#   TCP_CONNS_TIMEOUT  seconds for the whole client run (200)
#   NODE        node binary (the Node 22 tests/package.json pins, else node on PATH)
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
TCP_CONNS=${TCP_CONNS:-10000}
TCP_CONNS_TIMEOUT=${TCP_CONNS_TIMEOUT:-200}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "tcp_conns: $*" >&2; exit 1; }
note() { echo "tcp_conns: $*" >&2; }

[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"
"$NODE" --version >/dev/null 2>&1 || die "node not found"
grep -q -- '--tcp-listen' <<<"$("$MCPD_BIN" --help 2>&1)" || die "$MCPD_BIN has no --tcp-listen"

# One descriptor per connection in each process, plus mcpd's own (store,
# listeners, event loops): N + 256 at least.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" -ge $((TCP_CONNS + 256)) ] ||
  die "ulimit -n is $(ulimit -n) (hard $(ulimit -Hn)): too few descriptors for $TCP_CONNS connections"

# shellcheck source=lib.sh
. "$HERE/lib.sh"

http_port=$(free_port)
tcp_port=$(free_port)
max_conn=$((TCP_CONNS + 64))
[ "$max_conn" -lt 16384 ] && max_conn=16384
start mcpd-tcp-conns "$http_port" "$MCPD_BIN" --listen "127.0.0.1:$http_port" --tcp-listen "127.0.0.1:$tcp_port" \
  --db "$TMP/mcpd-tcp-conns.db" --log-level error --max-connections "$max_conn" --max-connections-per-ip 0 \
  --tcp-idle-ms $(((TCP_CONNS_TIMEOUT + 120) * 1000)) || die "mcpd did not start"
pid=$LAST_PID
wait_port "$tcp_port" "$pid" mcpd-tcp-conns || die "mcpd does not listen on TCP port $tcp_port"
note "mcpd (pid $pid, ulimit -n $(ulimit -n)): opening $TCP_CONNS TCP connections"
timeout -k 5 $((TCP_CONNS_TIMEOUT + 60)) "$NODE" "$HERE/tcp_conns.mjs" "127.0.0.1:$tcp_port" "$pid" "$TCP_CONNS" \
  --timeout "$TCP_CONNS_TIMEOUT" | grep '^TCPCONNS' || die "no result"
# mcpd's warnings, if it lowered its caps or refused connections.
grep -E 'level=(warn|error)' "$TMP/mcpd-tcp-conns.log" | head -5 >&2
exit 0
