#!/usr/bin/env bash
# instructions.sh: instructions per request, counted, not timed. Not a test.
#
# On this project's 2-core VM, req/s and CPU time per request move by 10-15%
# between identical runs, so a change worth 3% cannot be seen with wrk. This
# counts instead: it runs mcpd under valgrind's callgrind, sends N0 and then
# N0 + INSN_REQUESTS `tools/call echo` requests over one keep-alive
# connection (curl, one at a time), and divides the difference in executed
# instructions by INSN_REQUESTS, so start-up and shutdown cancel out. Two
# runs of one build agree within about 0.5%.
#
# What it does not show: anything that only happens under concurrency (group
# commits of many requests, context switches, lock waits) and the cost of an
# instruction (a 32 KiB memset counts 32 Ki instructions under valgrind).
# Use it for A/B of code on the request path; use run.sh and profile.sh for
# the rest.
#
# Environment (all optional):
#   MCPD_BIN        default <repo>/build/bin/mcpd
#   MCPD_BIN_B      a second build: prints both, and B/A
#   INSN_MODES      reply modes measured ("json sse")
#   INSN_REQUESTS   requests counted (1000)
#   INSN_TOP        also print the N functions with the most instructions
#                   (self) in the last run of each build
# Needs valgrind (apt-get install valgrind) and curl.
# Usage: tests/bench/instructions.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
MCPD_BIN_B=${MCPD_BIN_B:-}
INSN_MODES=${INSN_MODES:-json sse}
INSN_REQUESTS=${INSN_REQUESTS:-1000}
INSN_TOP=${INSN_TOP:-0}
N0=100
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "instructions: $*" >&2; exit 1; }
note() { echo "instructions: $*" >&2; }

command -v valgrind >/dev/null || die "valgrind not found (apt-get install valgrind)"
command -v curl >/dev/null || die "curl not found"
for b in "$MCPD_BIN" $MCPD_BIN_B; do [ -x "$b" ] || die "mcpd not found at $b"; done

# shellcheck source=lib.sh
. "$HERE/lib.sh"
declare -A PORT IR
COUNTED=

# count BIN MODE N: into COUNTED, the instructions callgrind counted for a
# whole run of BIN that served N echo requests after opening its session.
# Runs in this shell, not a $(...) subshell, so that the valgrind process
# it starts is in PIDS and the exit trap stops it when a step fails.
count() {
  local bin=$1 mode=$2 n=$3 name=cg port pid sid out=$TMP/cg.out
  PORT[$name]=$(free_port)
  port=${PORT[$name]}
  # The tunable mcpd would re-exec itself for (malloc_tune.h), set up
  # front so that the process valgrind starts is the one that serves.
  GLIBC_TUNABLES=glibc.malloc.tcache_count=32 start "$name" "$port" \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --listen "127.0.0.1:$port" \
    --db "$TMP/insn.db" --reply-mode "$mode" --log-level error || return 1
  pid=$LAST_PID
  sid=$(session_on "$name" 60) || { note "no session"; return 1; }
  curl -s --fail-early "http://127.0.0.1:$port/mcp?n=[1-$n]" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}' \
    >"$TMP/replies" || { note "requests failed"; return 1; }
  [ "$(grep -o '"text":"hello"' "$TMP/replies" | wc -l)" -eq "$n" ] || { note "not every reply was an echo"; return 1; }
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  rm -f "$TMP/insn.db"*
  COUNTED=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
  [ -n "$COUNTED" ]
}

printf '%-6s %-28s %14s\n' mode build "instr/request"
for mode in $INSN_MODES; do
  for b in "$MCPD_BIN" $MCPD_BIN_B; do
    count "$b" "$mode" "$N0" || die "run failed ($b, $mode)"
    lo=$COUNTED
    count "$b" "$mode" $((N0 + INSN_REQUESTS)) || die "run failed ($b, $mode)"
    hi=$COUNTED
    IR[$b-$mode]=$(((hi - lo) / INSN_REQUESTS))
    printf '%-6s %-28s %14s\n' "$mode" "$b" "${IR[$b-$mode]}"
    if [ "$INSN_TOP" -gt 0 ]; then
      callgrind_annotate "$TMP/cg.out" 2>/dev/null | awk '/file:function/ {f = 1; next} f && NF' |
        sed -n "2,$((INSN_TOP + 1))p"
    fi
  done
  [ -n "$MCPD_BIN_B" ] &&
    echo "$mode   B/A $(ratio "${IR[$MCPD_BIN_B-$mode]}" "${IR[$MCPD_BIN-$mode]}")"
done
