#!/usr/bin/env bash
# profile.sh: where mcpd's CPU goes under the benchmark's load. Not a test.
#
# Starts one mcpd on loopback (fresh temp --db, or BENCH_DB=:memory:), opens a
# session, drives `tools/call echo` with wrk (echo.lua) at PROFILE_CONC, and
# records mcpd with `perf record -g` for PROFILE_SECONDS while wrk runs. Prints
# wrk's figures, the context switches mcpd made (from /proc), and the top of
# `perf report` by self time and by caller. The raw perf.data is kept in
# PROFILE_OUT so it can be read again with `perf report -i`.
#
# Environment (all optional):
#   MCPD_BIN         default <repo>/build/bin/mcpd (a Release build with symbols is best)
#   PROFILE_MODE     json | sse (json)        PROFILE_CONC     wrk connections (64)
#   PROFILE_SECONDS  seconds recorded (10)    PROFILE_OUT      folder for perf.data (/tmp/mcpd-profile)
#   BENCH_DB         --db for mcpd (a fresh file; ":memory:" for the in-memory store)
#   PROFILE_ARGS     extra mcpd arguments
#   PROFILE_EVENT    what perf record samples (its default, CPU time); e.g.
#                    sched:sched_switch to see where threads go to sleep
# Needs perf (apt-get install linux-perf) and wrk.
# Usage: tests/bench/profile.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
PROFILE_MODE=${PROFILE_MODE:-json}
PROFILE_CONC=${PROFILE_CONC:-64}
PROFILE_SECONDS=${PROFILE_SECONDS:-10}
PROFILE_OUT=${PROFILE_OUT:-/tmp/mcpd-profile}
PERF=${PERF:-$(command -v perf || echo /usr/bin/perf)}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "profile: $*" >&2; exit 1; }
note() { echo "profile: $*" >&2; }

[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
[ -x "$PERF" ] || die "perf not found (apt-get install linux-perf)"
[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"

# shellcheck source=lib.sh
. "$HERE/lib.sh"
declare -A PORT
mkdir -p "$PROFILE_OUT"

PORT[mcpd]=$(free_port)
db=${BENCH_DB:-$TMP/mcpd.db}
# shellcheck disable=SC2086
start mcpd "${PORT[mcpd]}" "$MCPD_BIN" --listen "127.0.0.1:${PORT[mcpd]}" --db "$db" \
  --reply-mode "$PROFILE_MODE" --log-level error ${PROFILE_ARGS:-} || die "mcpd did not start"
pid=$LAST_PID
sid=$(session_on mcpd) ||
  die "cannot open a session"
run_wrk mcpd "$sid" 16 2 # warm-up

run_wrk mcpd "$sid" "$PROFILE_CONC" $((PROFILE_SECONDS + 2)) &
wrk_pid=$!
sleep 1
# Counters first (perf stat alone disturbs little), then the call graphs.
half=$((PROFILE_SECONDS / 2))
[ "$half" -gt 0 ] || half=1
"$PERF" stat -x, -e task-clock,context-switches,cpu-migrations -o "$TMP/stat.txt" -p "$pid" \
  -- sleep "$half" >/dev/null 2>&1 || note "perf stat failed (perf_event_paranoid? run as root)"
"$PERF" record -q ${PROFILE_EVENT:+-e "$PROFILE_EVENT"} --call-graph "${PROFILE_CALLGRAPH:-dwarf,16384}" -o "$PROFILE_OUT/perf.data" -p "$pid" -- sleep $((PROFILE_SECONDS - half)) \
  >/dev/null 2>&1 || note "perf record failed (perf_event_paranoid? run as root)"
wait "$wrk_pid"
out=$TMP/wrk-mcpd-$PROFILE_CONC.txt
rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")

echo "mcpd $PROFILE_MODE c=$PROFILE_CONC db=$db: $rps req/s; $(grep -E '^ +(50|99)%' "$out" | tr -s ' ' | tr '\n' ' ')"
# Per request, over the perf stat window (wrk's rate is steady by then).
awk -F, -v rps="${rps:-0}" -v secs="$half" '
  $3 == "task-clock" { cpu = $1 }            # ms of CPU
  $3 == "context-switches" { cs = $1 }
  $3 == "cpu-migrations" { mig = $1 }
  END { n = rps * secs; if (n > 0)
    printf "per request: %.1f us of mcpd CPU, %.2f context switches, %.3f migrations\n",
      cpu * 1000 / n, cs / n, mig / n }' "$TMP/stat.txt"
echo
echo "== self time (top 40) =="
"$PERF" report -i "$PROFILE_OUT/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -40
echo
echo "== inclusive, by function (top 40) =="
"$PERF" report -i "$PROFILE_OUT/perf.data" --children --sort symbol --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -40
echo
echo "== by shared object =="
"$PERF" report -i "$PROFILE_OUT/perf.data" --no-children --sort dso --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -15
echo
echo "perf.data kept in $PROFILE_OUT (perf report -i $PROFILE_OUT/perf.data)"
