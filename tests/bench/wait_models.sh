#!/usr/bin/env bash
# wait_models.sh: the threading-model experiment (wait_models.c). Not a test.
#
# Runs the models of wait_models.c in turn (WAIT_MODELS, default all eight),
# WAIT_ROUNDS times (the rounds interleave, so that a busy spell of the
# machine falls on every model alike), each on a fresh database, under wrk
# at WAIT_CONC connections with echo.lua's request. Prints per round req/s,
# p99, the server's CPU per request (from /proc/PID/stat) and, when perf is
# installed, its context switches per request (perf stat, attached before
# wrk connects so that it follows every connection's thread), then the
# median of each over the rounds and each model's req/s beside the first
# model's (tpc-bare by default: the thread-per-connection ceiling; pool-bare
# is the ceiling that run.sh measures now).
#
# Environment (all optional):
#   WAIT_MODELS_BIN  default <repo>/build/bin/bench_wait_models (built by CMake)
#   WAIT_ROUNDS (3)  WAIT_SECONDS per run (5)  WAIT_CONC (64)
#   WAIT_MODELS      which models, in order (all eight)
#   NODE, WRK        as run.sh            PERF  perf binary (perf on PATH)
# Usage: tests/bench/wait_models.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${WAIT_MODELS_BIN:-$REPO/build/bin/bench_wait_models}
ROUNDS=${WAIT_ROUNDS:-3}
SECS=${WAIT_SECONDS:-5}
CONC=${WAIT_CONC:-64}
MODELS=${WAIT_MODELS:-"tpc-bare tpc-commit pool-bare pool-commit pool-streams pool-queued pool-block pool8-block"}
PERF=${PERF:-$(command -v perf || true)}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "wait_models: $*" >&2; exit 1; }
note() { echo "wait_models: $*" >&2; }

[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
"$NODE" --version >/dev/null 2>&1 || die "node not found"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=lib.sh
. "$HERE/lib.sh"
declare -A PORT RPS P50 P99 ERR CPU CSW

# It links mcpd's store (pool-streams has it make mcpd's schema): built by CMake only.
[ -x "$BIN" ] || die "no $BIN: cmake --build build --target bench_wait_models"

median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-12s %5s %10s %9s %11s %13s\n' model round "req/s" "p99 ms" "CPU us/req" "switches/req"
for r in $(seq "$ROUNDS"); do
  for m in $MODELS; do
    PORT[$m]=$(free_port)
    start "$m" "${PORT[$m]}" "$BIN" "$m" "${PORT[$m]}" "$TMP/$m-$r.db" || die "$m did not start"
    pid=$LAST_PID
    run_wrk "$m" none 16 1 # warm-up
    t0=$(cpu_ticks "$pid")
    stat_pid=
    if [ -n "$PERF" ]; then
      "$PERF" stat -x, -e context-switches -o "$TMP/stat-$m-$r.txt" -p "$pid" -- sleep "$SECS" \
        >/dev/null 2>&1 &
      stat_pid=$!
      sleep 0.5
    fi
    measure "$m" none "$CONC" "$SECS" fixed
    t1=$(cpu_ticks "$pid")
    [ -n "$stat_pid" ] && wait "$stat_pid"
    kill -TERM "$pid" && wait "$pid" 2>/dev/null
    rps=${RPS[$m-$CONC]}
    CPU[$m-$r]=$(cpu_us_per_request "$t0" "$t1" "$rps" "$SECS")
    CSW[$m-$r]=$(awk -F, -v n="$rps" -v s="$SECS" '$3 == "context-switches" && n > 0 {
      printf "%.2f", $1 / (n * (s - 0.5)); found = 1 } END { if (!found) print "nan" }' "$TMP/stat-$m-$r.txt" 2>/dev/null || echo nan)
    RPS[$m-$r]=$rps
    P99[$m-$r]=${P99[$m-$CONC]}
    [ "${ERR[$m-$CONC]}" = 0 ] || note "$m round $r: ${ERR[$m-$CONC]} errors"
    printf '%-12s %5s %10s %9s %11s %13s\n' "$m" "$r" "$rps" "${P99[$m-$r]}" "${CPU[$m-$r]}" "${CSW[$m-$r]}"
  done
done

echo
echo "medians over $ROUNDS rounds of ${SECS} s at c=$CONC:"
printf '%-12s %10s %9s %11s %13s %11s\n' model "req/s" "p99 ms" "CPU us/req" "switches/req" "x tpc-bare"
base=
for m in $MODELS; do
  rps=$(for r in $(seq "$ROUNDS"); do echo "${RPS[$m-$r]}"; done | median)
  p99=$(for r in $(seq "$ROUNDS"); do echo "${P99[$m-$r]}"; done | median)
  cpu=$(for r in $(seq "$ROUNDS"); do echo "${CPU[$m-$r]}"; done | median)
  csw=$(for r in $(seq "$ROUNDS"); do echo "${CSW[$m-$r]}"; done | median)
  [ -n "$base" ] || base=$rps
  printf '%-12s %10.0f %9s %11s %13s %11s\n' "$m" "$rps" "$p99" "$cpu" "$csw" "$(ratio "$rps" "$base")"
done
