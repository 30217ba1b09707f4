#!/usr/bin/env bash
# replicas.sh: mcpd on PostgreSQL and as several replicas (issue 30), one
# command. It prints figures; it is not a test.
#
# Starts its own PostgreSQL (tests/pg/pg-server.sh: a temp folder, a free
# loopback port, fsync on, so every commit is a real one) and, on loopback,
# side by side in one run:
#   1. one mcpd on PostgreSQL against one on SQLite (`tools/call echo`
#      with wrk at c=64, echo.lua; the default --reply-mode auto answers
#      it with JSON, and a countdown with progress with SSE): BENCH_ROUNDS paired
#      rounds, each server once per round back to back in an order that
#      rotates (as run.sh), each warmed up right before its run; the target
#      is the median of the rounds' ratios: PostgreSQL >= 0.5 x SQLite;
#   2. 1, 2 and 3 replicas on one PostgreSQL database (fresh for each
#      count), one session opened on the first; the c=64 connections are
#      spread over the replicas (one wrk per replica, 64/N connections each,
#      run at once; req/s summed, latency the worst replica's). No balancer
#      in front: a balancer process would take a share of the 2 CPUs that
#      the replicas need, and a round-robin balancer spreads the same load;
#   3. the delay from a commit on one replica to its delivery on another
#      (wake_delay.mjs: a legacy /sse stream on replica 1, pings POSTed to
#      /messages on replica 2; from the writer's 202 to the reader's event),
#      BENCH_WAKE_SAMPLES samples, beside the same path within one replica;
#      target p99 <= 10 ms;
#   4. the time a client waits after its replica dies (resume_kill.mjs: a
#      countdown on replica 1, SIGKILL, GET with Last-Event-ID on replica
#      2), BENCH_KILL_SAMPLES times, restarting replica 1 each time; the
#      replicas run with --replica-lease-ms BENCH_LEASE_MS (1000; mcpd's
#      default is 5000), after which the call ends with an error event.
# mcpd's and PostgreSQL's CPU per request (from /proc) and the store's
# group commits (from /metrics: writes per commit, the commit lock's mean
# hold) stand beside each throughput. With BENCH_PROFILE=1 it then runs
# profile.sh on a fresh database of the same PostgreSQL server (perf
# record -g of one mcpd under the c=64 load). Prints a summary and the same
# as markdown. It warns when the CPUs were busy before the run, or when
# other processes took more than 10% of them during it (from /proc: the
# machine's busy time less what this script's processes and PostgreSQL
# used). A shared machine: run it under `nice`, which slows every process
# it starts alike.
#
# Environment (all optional):
#   MCPD_BIN         default <repo>/build/bin/mcpd (a Release build)
#   BENCH_WARMUP     warm-up seconds before each run (2)
#   BENCH_ROUNDS     paired rounds of part 1 (3)   BENCH_ROUND_SECONDS  seconds per run (10)
#   BENCH_REPLICAS   the replica counts of part 2 ("1 2 3")
#   BENCH_WAKE_SAMPLES  part 3's samples (500)     BENCH_KILL_SAMPLES  part 4's (3)
#   BENCH_LEASE_MS   --replica-lease-ms of every replica (1000)
#   BENCH_PROFILE    1: profile.sh on PostgreSQL afterwards (0)
#   NODE, WRK        as run.sh
# Usage: nice tests/bench/replicas.sh
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
BENCH_WARMUP=${BENCH_WARMUP:-2}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH_ROUND_SECONDS=${BENCH_ROUND_SECONDS:-10}
BENCH_REPLICAS=${BENCH_REPLICAS:-"1 2 3"}
BENCH_WAKE_SAMPLES=${BENCH_WAKE_SAMPLES:-500}
BENCH_KILL_SAMPLES=${BENCH_KILL_SAMPLES:-3}
BENCH_LEASE_MS=${BENCH_LEASE_MS:-1000}
CONC=64
PG_SERVER=$REPO/tests/pg/pg-server.sh
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }

[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
"$NODE" --version >/dev/null 2>&1 || die "node not found"
[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN (build it, or set MCPD_BIN)"
command -v psql >/dev/null || die "psql not found (apt-get install postgresql-15)"
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=lib.sh
. "$HERE/lib.sh"

# --- PostgreSQL ---------------------------------------------------------------
# Its own folder (pg-server.sh hands it to the postgres user), stopped after
# the mcpd processes, which lib.sh's cleanup stops by PID.
PGDIR=$(mktemp -d /tmp/mcpd-bench-pg.XXXXXX)
pg_stop() {
  bash "$PG_SERVER" stop "$PGDIR" >/dev/null 2>&1
  rm -rf "$PGDIR"
}
trap 'cleanup; pg_stop' EXIT
PG_URL=$(bash "$PG_SERVER" start "$PGDIR" "$(free_port)") || die "PostgreSQL did not start"
PG_PID=$(head -1 "$PGDIR/data/postmaster.pid")
# pg_db NAME: a fresh database; prints its URL.
pg_db() {
  psql "$PG_URL" -qc "CREATE DATABASE $1" >/dev/null || die "cannot create database $1"
  echo "${PG_URL%/*}/$1"
}
# pg_ticks: the CPU of PostgreSQL's processes (the postmaster and its
# children, the backends among them), in clock ticks.
pg_ticks() {
  local p sum=0
  for p in "$PG_PID" $(descendants "$PG_PID"); do sum=$((sum + $(cpu_ticks "$p" || echo 0))); done
  echo "$sum"
}

BUSY_BEFORE=$(busy_percent 3)
[ "$BUSY_BEFORE" -gt 10 ] &&
  note "WARNING: the CPUs were ${BUSY_BEFORE}% busy before the run started; figures will be low and noisy"
# others_snapshot: "busy total ours" clock ticks: the machine's busy and
# total time (/proc/stat), and what this script's processes used: this
# shell with the children it has reaped (wrk, node, stopped mcpd), the live
# ones, and PostgreSQL's postmaster with its backends, live and exited.
others_snapshot() {
  local p ours=0
  for p in $$ $(descendants $$) "$PG_PID" $(descendants "$PG_PID"); do
    ours=$((ours + $(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }' || echo 0)))
  done
  awk -v o="$ours" '/^cpu / { print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9, o }' /proc/stat
}
OTHERS_START=$(others_snapshot)

# --- mcpd processes -------------------------------------------------------------
declare -A PORT SERVER_PID RPS P50 P99 ERR
# start_mcpd NAME DB: one mcpd on a free port (or PORT[NAME] when set).
start_mcpd() {
  PORT[$1]=${PORT[$1]:-$(free_port)}
  start "$1" "${PORT[$1]}" "$MCPD_BIN" --listen "127.0.0.1:${PORT[$1]}" --db "$2" \
    --log-level error --replica-lease-ms "$BENCH_LEASE_MS" || die "$1 did not start"
  SERVER_PID[$1]=$LAST_PID
}
# stop_mcpd NAME: SIGTERM, then SIGKILL after 10 s; forgets its PID.
stop_mcpd() {
  local pid=${SERVER_PID[$1]} p i keep=()
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null # no "Killed" line for part 4's SIGKILL
  for p in "${PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}
# store_sums NAME...: "commits writes lock_seconds" from the /metrics of
# NAME..., added up.
store_sums() {
  local name
  for name in "$@"; do curl -s "http://127.0.0.1:${PORT[$name]}/metrics"; done |
    awk '/^mcpd_store_commits_total / { c += $2 } /^mcpd_store_writes_total / { w += $2 }
      /^mcpd_store_commit_lock_seconds_sum / { s += $2 } END { print c + 0, w + 0, s + 0 }'
}
# mcpd_ticks NAME...: their CPU in clock ticks, added up.
mcpd_ticks() {
  local name sum=0
  for name in "$@"; do sum=$((sum + $(cpu_ticks "${SERVER_PID[$name]}" || echo 0))); done
  echo "$sum"
}
# commit_shape BEFORE AFTER SECONDS: the group commits between two
# store_sums: "commits/s writes/commit mean_hold_ms".
commit_shape() {
  awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN { split(a, x, " "); split(b, y, " "); n = y[1] - x[1]
    if (n > 0) printf "%.0f %.1f %.1f", n / s, (y[2] - x[2]) / n, 1000 * (y[3] - x[3]) / n; else print "- - -" }'
}

# --- the load: tools/call echo at c=64 over one or more mcpd -----------------------
# measure_group KEY NAME...: a fresh session (opened on the first NAME),
# a warm-up, then one wrk per NAME at once for BENCH_ROUND_SECONDS, the 64
# connections shared out among them. Into the G_* arrays under KEY: req/s
# (summed), p50 and p99 (the worst NAME's), errors, mcpd's and PostgreSQL's
# CPU per request, and the group commits (commit_shape).
declare -A G_RPS G_P50 G_P99 G_ERR G_CPU G_PGCPU G_COMMIT
measure_group() {
  local key=$1 sid i n c t0 t1 g0 g1 s0 s1 rps=0 p50=0 p99=0 err=0 name
  shift
  n=$#
  sid=$(session_on "$1") || die "cannot open a session on $1"
  local jobs=() # wait for these only: the servers are children too
  for name in "$@"; do
    run_wrk "$name" "$sid" $((16 / n + 1)) "$BENCH_WARMUP" &
    jobs+=($!)
  done
  wait "${jobs[@]}"
  jobs=()
  sleep 1
  t0=$(mcpd_ticks "$@") g0=$(pg_ticks) s0=$(store_sums "$@")
  i=0
  for name in "$@"; do
    c=$((CONC / n + (i < CONC % n ? 1 : 0)))
    run_wrk "$name" "$sid" "$c" "$BENCH_ROUND_SECONDS" &
    jobs+=($!)
    i=$((i + 1))
  done
  wait "${jobs[@]}"
  t1=$(mcpd_ticks "$@") g1=$(pg_ticks) s1=$(store_sums "$@")
  i=0
  for name in "$@"; do
    c=$((CONC / n + (i < CONC % n ? 1 : 0)))
    wrk_figures "$name" "$c"
    rps=$((rps + ${RPS[$name-$c]:-0}))
    err=$((err + ${ERR[$name-$c]:-0}))
    p50=$(awk -v a="$p50" -v b="${P50[$name-$c]}" 'BEGIN { print (b + 0 > a + 0 || b == "nan") ? b : a }')
    p99=$(awk -v a="$p99" -v b="${P99[$name-$c]}" 'BEGIN { print (b + 0 > a + 0 || b == "nan") ? b : a }')
    i=$((i + 1))
  done
  G_RPS[$key]=$rps G_P50[$key]=$p50 G_P99[$key]=$p99 G_ERR[$key]=$err
  G_CPU[$key]=$(cpu_us_per_request "$t0" "$t1" "$rps" "$BENCH_ROUND_SECONDS")
  G_PGCPU[$key]=$(cpu_us_per_request "$g0" "$g1" "$rps" "$BENCH_ROUND_SECONDS")
  G_COMMIT[$key]=$(commit_shape "$s0" "$s1" "$BENCH_ROUND_SECONDS")
}

# --- 1. one mcpd on PostgreSQL against one on SQLite ----------------------------------
start_mcpd sqlite "$TMP/sqlite.db"
start_mcpd pg "$(pg_db single)"
SINGLES=(sqlite pg)
for ((r = 1; r <= BENCH_ROUNDS; r++)); do
  note "1. round $r of $BENCH_ROUNDS: SQLite and PostgreSQL at c=$CONC for ${BENCH_ROUND_SECONDS}s each"
  for ((i = 0; i < ${#SINGLES[@]}; i++)); do
    name=${SINGLES[$(((i + r - 1) % ${#SINGLES[@]}))]}
    measure_group "$name-$r" "$name"
  done
done
stop_mcpd sqlite
stop_mcpd pg
# round_ratio ROUND: PostgreSQL's req/s over SQLite's in that round.
round_ratio() { ratio "${G_RPS[pg-$1]:-0}" "${G_RPS[sqlite-$1]:-0}"; }
RATIOS=()
for ((r = 1; r <= BENCH_ROUNDS; r++)); do RATIOS+=("$(round_ratio "$r")"); done
PG_RATIO=$(median "${RATIOS[@]}")

# --- 2. 1, 2 and 3 replicas on PostgreSQL ------------------------------------------------
LAST_CLUSTER=()
for n in $BENCH_REPLICAS; do
  note "2. $n replica(s) on one PostgreSQL database: c=$CONC shared out, ${BENCH_ROUND_SECONDS}s"
  for name in "${LAST_CLUSTER[@]}"; do stop_mcpd "$name"; done
  db=$(pg_db "replicas$n")
  LAST_CLUSTER=()
  for ((i = 1; i <= n; i++)); do
    start_mcpd "r$n-$i" "$db"
    LAST_CLUSTER+=("r$n-$i")
  done
  measure_group "n$n" "${LAST_CLUSTER[@]}"
done

# --- 3. commit on one replica -> delivery on another -----------------------------------
# On the last cluster of part 2 (every replica hears every signal), or on
# two fresh replicas when it had one.
if [ ${#LAST_CLUSTER[@]} -lt 2 ]; then
  db=$(pg_db wake)
  for name in w-1 w-2; do start_mcpd "$name" "$db"; done
  LAST_CLUSTER=(w-1 w-2)
fi
A=${LAST_CLUSTER[0]} B=${LAST_CLUSTER[1]}
note "3. wake-ups: $BENCH_WAKE_SAMPLES pings POSTed on $B, read on a /sse stream on $A (and on $A alone)"
wake() { # READER WRITER: wake_delay.mjs's line
  timeout -k 5 300 "$NODE" "$HERE/wake_delay.mjs" "${PORT[$1]}" "${PORT[$2]}" "$BENCH_WAKE_SAMPLES" \
    2> >(sed 's/^/bench: /' >&2) | grep '^WAKE' || true
}
WAKE_CROSS=$(wake "$A" "$B")
WAKE_SAME=$(wake "$A" "$A")

# --- 4. a replica dies under a client ------------------------------------------------------
KILLS=()
for ((k = 1; k <= BENCH_KILL_SAMPLES; k++)); do
  note "4. sample $k of $BENCH_KILL_SAMPLES: a countdown on $A, SIGKILL, resume on $B (lease ${BENCH_LEASE_MS} ms)"
  line=$(timeout -k 5 120 "$NODE" "$HERE/resume_kill.mjs" "${PORT[$A]}" "${SERVER_PID[$A]}" "${PORT[$B]}" \
    2> >(sed 's/^/bench: /' >&2) | grep '^KILL' || true)
  KILLS+=("${line:-KILL failed=1}")
  stop_mcpd "$A" # killed already, unless the sample failed early
  start_mcpd "$A" "$db" # the same port, the same database
done

# --- report ---------------------------------------------------------------------
# The share of the CPUs that other processes took while this script ran.
OTHERS=$(awk -v a="$OTHERS_START" -v b="$(others_snapshot)" 'BEGIN { split(a, x, " "); split(b, y, " ")
  t = y[2] - x[2]; o = (y[1] - x[1]) - (y[3] - x[3]); if (o < 0) o = 0
  printf "%.0f", (t > 0 ? 100 * o / t : 0) }')
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
g() { local -n arr=$1; echo "${arr[$2]:--}"; } # g ARRAY KEY -> value or -
shape() { awk -v i="$2" '{ print $i }' <<<"$(g G_COMMIT "$1")"; } # shape KEY 1|2|3

# single_rows FORMAT: per round, SQLite's and PostgreSQL's figures and the
# ratio; then the medians.
single_rows() {
  local r s p
  for ((r = 1; r <= BENCH_ROUNDS; r++)); do
    # shellcheck disable=SC2059
    printf "$1" "$r" "$(g G_RPS "sqlite-$r")" "$(g G_P99 "sqlite-$r")" "$(g G_CPU "sqlite-$r")" \
      "$(g G_RPS "pg-$r")" "$(g G_P99 "pg-$r")" "$(g G_CPU "pg-$r")" "$(g G_PGCPU "pg-$r")" \
      "$(shape "pg-$r" 2)" "$(shape "pg-$r" 3)" "$(round_ratio "$r")"
  done
  s=() p=()
  for ((r = 1; r <= BENCH_ROUNDS; r++)); do s+=("$(g G_RPS "sqlite-$r")") p+=("$(g G_RPS "pg-$r")"); done
  # shellcheck disable=SC2059
  printf "$1" median "$(median "${s[@]}")" "" "" "$(median "${p[@]}")" "" "" "" "" "" "$PG_RATIO"
}
# replica_rows FORMAT: per replica count.
replica_rows() {
  local n base=${G_RPS[n1]:-}
  for n in $BENCH_REPLICAS; do
    # shellcheck disable=SC2059
    printf "$1" "$n" "$(g G_RPS "n$n")" "$([ -n "$base" ] && ratio "${G_RPS[n$n]:-0}" "$base" || echo -)" \
      "$(g G_P50 "n$n")" "$(g G_P99 "n$n")" "$(g G_ERR "n$n")" "$(g G_CPU "n$n")" "$(g G_PGCPU "n$n")" \
      "$(shape "n$n" 1)" "$(shape "n$n" 2)" "$(shape "n$n" 3)"
  done
}
# wake_rows FORMAT
wake_rows() {
  local what line
  for what in cross same; do
    if [ $what = cross ]; then line=$WAKE_CROSS; else line=$WAKE_SAME; fi
    # shellcheck disable=SC2059
    printf "$1" "$([ $what = cross ] && echo "written on $B, read on $A" || echo "written and read on $A")" \
      "$(field "$line" samples)" "$(field "$line" p50_ms)" "$(field "$line" p90_ms)" "$(field "$line" p99_ms)" \
      "$(field "$line" max_ms)" "$(field "$line" failed)"
  done
}
# kill_rows FORMAT: per sample, then the medians.
kill_rows() {
  local k line o=() f=() e=()
  for ((k = 1; k <= ${#KILLS[@]}; k++)); do
    line=${KILLS[$((k - 1))]}
    o+=("$(field "$line" open_ms)") f+=("$(field "$line" first_ms)") e+=("$(field "$line" end_ms)")
    # shellcheck disable=SC2059
    printf "$1" "$k" "${o[-1]:--}" "${f[-1]:--}" "${e[-1]:--}" "$(field "$line" end)" "$(field "$line" progress)" \
      "$([ "$(field "$line" ok)" = 1 ] && echo yes || echo "NO $(field "$line" why)")"
  done
  # shellcheck disable=SC2059
  printf "$1" median "$(median "${o[@]}")" "$(median "${f[@]}")" "$(median "${e[@]}")" "" "" ""
}
targets() {
  echo "one mcpd: PostgreSQL / SQLite req/s, c=$CONC (median of $BENCH_ROUNDS rounds)|$PG_RATIO|>= 0.5|$(chk "$PG_RATIO" '>=' 0.5)"
  local p99
  p99=$(field "$WAKE_CROSS" p99_ms)
  echo "commit on one replica -> delivery on another, p99|${p99:--} ms|<= 10 ms|$(chk "${p99:--}" '<=' 10)"
}

PG_VERSION=$(psql "$PG_URL" -Atc 'SHOW server_version' 2>/dev/null || echo "?")
BUSY=0
[ "$BUSY_BEFORE" -gt 10 ] && BUSY=1
[ "$OTHERS" -gt 10 ] && BUSY=1
QUIET="CPUs ${BUSY_BEFORE}% busy before the run, ${OTHERS}% of them taken by other processes during it"
echo
echo "mcpd on PostgreSQL and as replicas: tools/call echo, wrk c=$CONC, loopback, $(nproc) CPUs"
echo "mcpd: $MCPD_BIN (--reply-mode auto: echo replies are JSON; --replica-lease-ms $BENCH_LEASE_MS)"
echo "PostgreSQL $PG_VERSION on the same machine, fsync on, started by this script; nice $(nice)"
echo "machine: $QUIET"
[ $BUSY = 1 ] && echo "WARNING: the machine was busy (see the line above): figures are low and noisy; run again on a quiet machine"
echo
echo "1. one mcpd, PostgreSQL against SQLite (paired rounds, ${BENCH_ROUND_SECONDS}s each, order rotated):"
printf '  %6s | %8s %7s %7s | %8s %7s %7s %7s %8s %7s | %6s\n' round sqlite p99_ms cpu_us pg p99_ms cpu_us pg_us wr/commit hold_ms pg/sqlite
single_rows '  %6s | %8s %7s %7s | %8s %7s %7s %7s %8s %7s | %6s\n'
echo "  (cpu_us: mcpd's CPU per request; pg_us: PostgreSQL's processes' CPU per request; wr/commit and hold_ms: mcpd's group commits)"
echo
echo "2. replicas on one PostgreSQL database (64 connections shared out, one wrk per replica, ${BENCH_ROUND_SECONDS}s):"
printf '  %8s | %8s %8s | %7s %7s %6s | %7s %7s | %9s %9s %7s\n' replicas req/s vs_1 p50_ms p99_ms errors cpu_us pg_us commits/s wr/commit hold_ms
replica_rows '  %8s | %8s %8s | %7s %7s %6s | %7s %7s | %9s %9s %7s\n'
echo "  (p50/p99: the worst replica's; cpu_us: all replicas' CPU per request)"
echo
echo "3. commit on one replica -> delivery on another (legacy /sse reader, pings POSTed one at a time; from the writer's 202 to the event):"
printf '  %-32s | %7s %7s %7s %7s %7s %6s\n' path samples p50_ms p90_ms p99_ms max_ms failed
wake_rows '  %-32s | %7s %7s %7s %7s %7s %6s\n'
echo
echo "4. a replica SIGKILLed under a client (countdown on $A, resumed with Last-Event-ID on $B; ms from the kill):"
printf '  %6s | %10s %12s %10s %6s %8s %s\n' sample resume_GET first_event end_event end progress once_in_order
kill_rows '  %6s | %10s %12s %10s %6s %8s %s\n'
echo "  (the call ran on the dead replica: its end is an error event written once the lease, ${BENCH_LEASE_MS} ms, lapsed)"
echo
echo "targets:"
targets | awk -F'|' '{ printf "  %-62s %10s  %-9s %s\n", $1, $2, $3, $4 }'

echo
echo "markdown:"
echo
echo "| round | SQLite req/s | p99 (ms) | mcpd µs/req | PostgreSQL req/s | p99 (ms) | mcpd µs/req | postgres µs/req | writes/commit | commit (ms) | PostgreSQL / SQLite |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
single_rows '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n'
echo
echo "| replicas | req/s | vs 1 | p50 (ms) | p99 (ms) | errors | mcpd µs/req | postgres µs/req | commits/s | writes/commit | commit (ms) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
replica_rows '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n'
echo
echo "| commit -> delivery | samples | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | failed |"
echo "|---|---:|---:|---:|---:|---:|---:|"
wake_rows '| %s | %s | %s | %s | %s | %s | %s |\n'
echo
echo "| replica killed, sample | resuming GET answered (ms) | first event (ms) | end event (ms) | end | progress events | each once, in order |"
echo "|---|---:|---:|---:|---|---:|---|"
kill_rows '| %s | %s | %s | %s | %s | %s | %s |\n'
echo
echo "| target | figure | bound | |"
echo "|---|---:|---|---|"
targets | awk -F'|' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }'
echo
echo "Machine: $(nproc) CPUs shared by mcpd, PostgreSQL and wrk; $QUIET$([ $BUSY = 1 ] && echo ' (busy: figures low and noisy)'); --replica-lease-ms $BENCH_LEASE_MS."

# --- profile (optional) -----------------------------------------------------------------
if [ "${BENCH_PROFILE:-0}" = 1 ]; then
  echo
  echo "profile: one mcpd on PostgreSQL (profile.sh, a fresh database):"
  MCPD_BIN=$MCPD_BIN NODE=$NODE WRK=$WRK BENCH_DB=$(pg_db profile) bash "$HERE/profile.sh" 2> >(sed 's/^/bench: /' >&2)
fi
exit 0
