#!/usr/bin/env bash
# streams_load.sh: mcpd's throughput while it holds many open GET streams.
# Not a test.
#
# libmicrohttpd parks each open stream as a suspended connection, and its
# resume pass walks every suspended connection; this shows what that costs
# the live traffic. Starts one mcpd (fresh temp --db, --log-level error, no
# per-IP cap, since every client here is 127.0.0.1), drives `tools/call
# echo` with wrk (echo.lua) at STREAMS_CONC with no stream open, then opens
# STREAMS_N sessions with a GET stream each (streams_rss.mjs --hold) and
# drives the same load again beside them. Prints both figures and their
# ratio.
#
# Environment (all optional):
#   MCPD_BIN       default <repo>/build/bin/mcpd
#   STREAMS_N      open GET streams (4000)     STREAMS_CONC  wrk connections (64)
#   STREAMS_SECONDS  seconds per wrk run (8)
# Needs wrk and node; the client needs STREAMS_N descriptors (ulimit -n).
# Usage: tests/bench/streams_load.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
STREAMS_N=${STREAMS_N:-4000}
STREAMS_CONC=${STREAMS_CONC:-64}
STREAMS_SECONDS=${STREAMS_SECONDS:-8}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "streams_load: $*" >&2; exit 1; }
note() { echo "streams_load: $*" >&2; }
[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"

# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck disable=SC2034 # P50 and P99: measure (lib.sh) fills them too
declare -A PORT RPS P50 P99 ERR
PORT[mcpd]=$(free_port)
start mcpd "${PORT[mcpd]}" "$MCPD_BIN" --listen "127.0.0.1:${PORT[mcpd]}" --db "$TMP/mcpd.db" \
  --log-level error --max-connections-per-ip 0 || die "mcpd did not start"
pid=$LAST_PID
sid=$(session_on mcpd) || die "cannot open a session"

k=mcpd-$STREAMS_CONC
run_wrk mcpd "$sid" 16 2 # warm-up
measure mcpd "$sid" "$STREAMS_CONC" "$STREAMS_SECONDS"
alone=${RPS[$k]}
echo "no open stream: $alone req/s (${ERR[$k]} errors)"

hold=$((STREAMS_SECONDS + 20))
"$NODE" "$HERE/streams_rss.mjs" "http://127.0.0.1:${PORT[mcpd]}/mcp" "$pid" "$STREAMS_N" --hold "$hold" \
  >"$TMP/streams.txt" 2>"$TMP/streams.err" &
holder=$!
PIDS+=("$holder")
for _ in $(seq 300); do
  grep -q '^STREAMS ' "$TMP/streams.txt" && break
  kill -0 "$holder" 2>/dev/null || break
  sleep 1
done
line=$(grep '^STREAMS ' "$TMP/streams.txt") || die "the streams did not open: $(tail -3 "$TMP/streams.err")"
open=$(echo "$line" | sed -n 's/.* open=\([0-9]*\).*/\1/p')
measure mcpd "$sid" "$STREAMS_CONC" "$STREAMS_SECONDS"
beside=${RPS[$k]}
echo "$open open GET streams: $beside req/s (${ERR[$k]} errors)"
awk -v a="$alone" -v b="$beside" 'BEGIN { if (a > 0) printf "ratio: %.2f\n", b / a }'
