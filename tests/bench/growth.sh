#!/usr/bin/env bash
# growth.sh: does mcpd's cost stay flat as its store grows? Prints figures; not a test.
#
# 1. Throughput: `tools/call echo` (JSON replies, c=GROWTH_CONC) on an empty
#    store, on a store seeded with GROWTH_SESSIONS sessions and GROWTH_CHUNKS
#    stored chunks (bench_seed, through the store's own API), and on an empty
#    store again; the ratio is seeded / mean of the two empty runs.
# 2. Restart: from exec to the first 200 from /readyz on the seeded store,
#    once after a clean stop and once after a SIGKILL under load (the WAL
#    then needs recovery).
# 3. Reaper: a store holding the same amount of expired data (half in
#    expired sessions, half as old streams of live sessions) under live
#    traffic: back-to-back wrk windows of GROWTH_WINDOW seconds while the
#    reaper purges it; the worst window p99 during the purge against the
#    worst before and after it, the purge's duration (from /metrics
#    mcpd_store_purged_total, sampled every 100 ms), and a check with
#    sqlite3 that nothing expired is left.
# The last line is machine-readable (run.sh's BENCH_GROWTH=1 reads it):
#   GROWTH sessions=.. chunks=.. empty_rps=.. seeded_rps=.. ratio=..
#     restart_ms=.. restart_after_kill_ms=.. purge_ms=.. purge_rows=..
#     purge_chunks=.. left_chunks=.. p99_base_ms=.. p99_purge_ms=..
#     holds_over_20ms=.. holds_over_50ms=.. (the reaper run's commit-lock
#     holds, from mcpd_store_commit_lock_seconds; its store_slow_* warnings
#     are printed too)
#     integrity=ok|FAILED (SQLite's quick_check of both stores at the end)
#
# Environment (all optional):
#   MCPD_BIN         default <repo>/build/bin/mcpd
#   SEED_BIN         default <repo>/build/bin/bench_seed (built if missing)
#   GROWTH_SESSIONS  100000        GROWTH_CHUNKS  1000000
#   GROWTH_CONC      64            BENCH_SECONDS  10 (per throughput run)
#   GROWTH_WINDOW    2 (seconds per wrk window during the purge)
# Needs wrk, curl, sqlite3 and node (open_session.mjs).
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MCPD_BIN=${MCPD_BIN:-$REPO/build/bin/mcpd}
SEED_BIN=${SEED_BIN:-$REPO/build/bin/bench_seed}
GROWTH_SESSIONS=${GROWTH_SESSIONS:-100000}
GROWTH_CHUNKS=${GROWTH_CHUNKS:-1000000}
GROWTH_CONC=${GROWTH_CONC:-64}
GROWTH_WINDOW=${GROWTH_WINDOW:-2}
BENCH_SECONDS=${BENCH_SECONDS:-10}
# shellcheck source=tools.sh
. "$HERE/tools.sh"

die() { echo "growth: $*" >&2; exit 1; }
note() { echo "growth: $*" >&2; }

[ -x "$WRK" ] || die "wrk not found (apt-get install wrk)"
command -v sqlite3 >/dev/null || die "sqlite3 not found (apt-get install sqlite3)"
command -v curl >/dev/null || die "curl not found"
[ -x "$MCPD_BIN" ] || die "mcpd not found at $MCPD_BIN"
if [ ! -x "$SEED_BIN" ]; then
  cmake --build "$REPO/build" --target bench_seed >/dev/null || die "cannot build bench_seed"
  SEED_BIN=$REPO/build/bin/bench_seed
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=lib.sh
. "$HERE/lib.sh"
declare -A PORT RPS P50 P99 ERR

now_ms() { date +%s%3N; }

# start_ready NAME DB [ARGS...]: starts mcpd and sets READY_MS, the time from
# exec to the first 200 from /readyz (polled every 5 ms, up to 60 s).
start_ready() {
  local name=$1 db=$2 port t0 i
  shift 2
  port=${PORT[$name]:-$(free_port)}
  PORT[$name]=$port
  t0=$(now_ms)
  # The stored sessions count against --max-sessions (10,000 by default):
  # lifted, as the point is a store that holds 100,000.
  "$MCPD_BIN" --listen "127.0.0.1:$port" --db "$db" --reply-mode json --log-level "${START_LOG_LEVEL:-error}" \
    --max-connections-per-ip 0 --max-sessions 0 "$@" >>"$TMP/$name.log" 2>&1 &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
  READY_MS=
  for i in $(seq 12000); do
    kill -0 "$LAST_PID" 2>/dev/null || { note "$name exited:"; tail -5 "$TMP/$name.log" >&2; return 1; }
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; then
      READY_MS=$(($(now_ms) - t0))
      return 0
    fi
    sleep 0.005
  done
  return 1
}

stop_pid() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

# throughput NAME DB: one warm-up and one measured run; figures in RPS[NAME-CONC] etc.
throughput() {
  local name=$1 db=$2 sid
  start_ready "$name" "$db" || die "mcpd ($name) did not start"
  local pid=$LAST_PID
  sid=$(session_on "$name") || die "cannot open a session on $name"
  run_wrk "$name" "$sid" 16 2
  sid=$(session_on "$name") || die "cannot open a session on $name"
  measure "$name" "$sid" "$GROWTH_CONC" "$BENCH_SECONDS"
  note "$name: ${RPS[$name-$GROWTH_CONC]} req/s, p99 ${P99[$name-$GROWTH_CONC]} ms"
  stop_pid "$pid"
}

seed() { # DB ARGS... (sets SEED_MS)
  local db=$1 t0
  shift
  t0=$(now_ms)
  "$SEED_BIN" --db "$db" "$@" 2> >(sed 's/^/growth: /' >&2) || die "bench_seed failed"
  SEED_MS=$(($(now_ms) - t0))
}

# --- 1 and 2: throughput and restart --------------------------------------------
note "seeding $GROWTH_SESSIONS sessions and $GROWTH_CHUNKS chunks"
seed "$TMP/seeded.db" --sessions "$GROWTH_SESSIONS" --chunks "$GROWTH_CHUNKS"
note "store: $(du -m "$TMP/seeded.db" | cut -f1) MB"

throughput empty1 "$TMP/empty1.db"
throughput seeded "$TMP/seeded.db"
RESTART_MS=$READY_MS
throughput empty2 "$TMP/empty2.db"
EMPTY_RPS=$(awk -v a="${RPS[empty1-$GROWTH_CONC]}" -v b="${RPS[empty2-$GROWTH_CONC]}" 'BEGIN { printf "%.0f", (a + b) / 2 }')
SEEDED_RPS=${RPS[seeded-$GROWTH_CONC]}
note "restart on the seeded store: ready in $RESTART_MS ms"

# SIGKILL under load, then restart on the same file.
start_ready killed "$TMP/seeded.db" || die "mcpd (killed) did not start"
pid=$LAST_PID
sid=$(session_on killed) || die "cannot open a session"
run_wrk killed "$sid" "$GROWTH_CONC" 4 &
wrk_pid=$!
sleep 2
kill -KILL "$pid"
wait "$wrk_pid" 2>/dev/null
start_ready killed "$TMP/seeded.db" || die "mcpd did not restart after SIGKILL"
KILL_RESTART_MS=$READY_MS
note "restart after SIGKILL under load: ready in $KILL_RESTART_MS ms"
stop_pid "$LAST_PID"

# --- 3: the reaper ------------------------------------------------------------------
# The expired data is dated so that it expires a known while after mcpd has
# started and warmed up: the windows before that are the baseline, and the
# purge does not coincide with a cold start.
IDLE_MS=3600000
half_s=$((GROWTH_SESSIONS / 2))
half_c=$((GROWTH_CHUNKS / 2))
EXPIRE_AT=$(($(now_ms) + 2 * SEED_MS + 15000))
note "seeding $GROWTH_CHUNKS chunks that expire in $(((EXPIRE_AT - $(now_ms)) / 1000)) s" \
  "(half in sessions that expire, half as streams of live sessions)"
seed "$TMP/old.db" --sessions "$half_s" --chunks "$half_c" --at-ms "$((EXPIRE_AT - IDLE_MS))"
seed "$TMP/old.db" --sessions "$((GROWTH_SESSIONS - half_s))" --chunks "$((GROWTH_CHUNKS - half_c))" \
  --at-ms "$((EXPIRE_AT - IDLE_MS))" --live-sessions
PURGE_CHUNKS=$(sqlite3 "$TMP/old.db" "SELECT COUNT(*) FROM chunks")
[ "$(now_ms)" -lt "$EXPIRE_AT" ] || note "WARNING: seeding took longer than planned; the purge starts at once"

# The reaper runs every second (its interval is capped at 1 s). Warnings
# on: a commit that holds the store's lock 50 ms or more says why.
START_LOG_LEVEL=warn start_ready reaper "$TMP/old.db" --session-idle-ms "$IDLE_MS" \
  --stream-retention-ms "$IDLE_MS" || die "mcpd (reaper) did not start"
pid=$LAST_PID
T0=$(now_ms)
# The sampler starts no process per sample: on two CPUs a curl every 100 ms
# alone raised the live p99 of 2-s windows from about 11 to 14-20 ms. It asks
# over bash's /dev/tcp and times with EPOCHREALTIME and read -t.
(
  exec 4<> <(:)
  while kill -0 "$pid" 2>/dev/null; do
    v=0
    if exec 3<>"/dev/tcp/127.0.0.1/${PORT[reaper]}"; then
      printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "${PORT[reaper]}" >&3
      while IFS= read -r line <&3; do
        [[ $line == "mcpd_store_purged_total "* ]] && v=${line#* }
      done
      exec 3<&-
    fi
    t=${EPOCHREALTIME/./}
    echo "$((t / 1000)) ${v%$'\r'}"
    read -r -t 0.1 -u 4 || true
  done
) >"$TMP/purged.txt" 2>/dev/null &
sampler=$!
PIDS+=("$sampler")
sid=$(session_on reaper) || die "cannot open a session"
PORT[reaper-warm]=${PORT[reaper]}
run_wrk reaper-warm "$sid" 16 2

# Windows until the purge has run and the purged count has stood still for
# three windows (up to 10 minutes).
declare -a WIN_START WIN_END WIN_P99
w=0
after=0
last_count=-1
deadline=$(($(now_ms) + 600000))
while [ "$after" -lt 3 ] && [ "$(now_ms)" -lt "$deadline" ]; do
  sid=$(session_on reaper) || die "cannot open a session"
  WIN_START[w]=$(now_ms)
  PORT[reaper-w$w]=${PORT[reaper]}
  measure "reaper-w$w" "$sid" "$GROWTH_CONC" "$GROWTH_WINDOW"
  WIN_END[w]=$(now_ms)
  WIN_P99[w]=${P99[reaper-w$w-$GROWTH_CONC]}
  count=$(tail -1 "$TMP/purged.txt" | cut -d' ' -f2)
  if [ "${count:-0}" -gt 0 ] && [ "$count" = "$last_count" ]; then
    after=$((after + 1))
  fi
  last_count=${count:-0}
  w=$((w + 1))
done
kill "$sampler" 2>/dev/null
# Commit-lock holds longer than 20 and 50 ms over the whole reaper run
# (the histogram's count less its 0.02 and 0.05 buckets).
read -r HOLDS_20 HOLDS_50 < <(curl -s "http://127.0.0.1:${PORT[reaper]}/metrics" | awk '
  /^mcpd_store_commit_lock_seconds_count / { n = $2 }
  /^mcpd_store_commit_lock_seconds_bucket\{le="0.02"\} / { b20 = $2 }
  /^mcpd_store_commit_lock_seconds_bucket\{le="0.05"\} / { b50 = $2 }
  END { if (n == "") print "n/a n/a"; else print n - b20, n - b50 }')
stop_pid "$pid"
grep -E 'event=store_slow_(commit|checkpoint)' "$TMP/reaper.log" | sed 's/^/growth: /' >&2

# The purge ran from the first sample that moved to the last one that did.
read -r P_FIRST P_LAST PURGE_ROWS < <(awk -v t0="$T0" '
  { if (prev != "" && $2 != prev) { if (first == "") first = $1; last = $1 } prev = $2; rows = $2 }
  END { if (first == "") first = last = t0; print first, last, rows + 0 }' "$TMP/purged.txt")
PURGE_MS=$((P_LAST - P_FIRST))
P99_BEFORE=0
P99_PURGE=0
P99_AFTER=0
worst() { awk -v a="$1" -v b="$2" 'BEGIN { print (b + 0 > a + 0) ? b : a }'; }
for ((i = 0; i < w; i++)); do
  # A window is "during" when it overlaps the purge (one sample's slack at
  # each end); those before and after it are the baseline.
  if [ "${WIN_END[i]}" -lt $((P_FIRST - 100)) ]; then
    P99_BEFORE=$(worst "$P99_BEFORE" "${WIN_P99[i]}")
    when=before
  elif [ "${WIN_START[i]}" -le $((P_LAST + 100)) ]; then
    P99_PURGE=$(worst "$P99_PURGE" "${WIN_P99[i]}")
    when=during
  else
    P99_AFTER=$(worst "$P99_AFTER" "${WIN_P99[i]}")
    when=after
  fi
  note "reaper window $i ($when): +$((WIN_START[i] - T0)) ms, p99 ${WIN_P99[i]} ms, ${RPS[reaper-w$i-$GROWTH_CONC]} req/s"
done
P99_BASE=$(worst "$P99_BEFORE" "$P99_AFTER")
LEFT=$(sqlite3 "$TMP/old.db" "SELECT COUNT(*) FROM chunks WHERE created_ms < $EXPIRE_AT - $IDLE_MS + 1")
# After all that load, purging and checkpointing, the file must be intact.
INTEGRITY=$(sqlite3 "$TMP/old.db" "PRAGMA quick_check" 2>&1 | head -1)
SEEDED_INTEGRITY=$(sqlite3 "$TMP/seeded.db" "PRAGMA quick_check" 2>&1 | head -1)
[ "$INTEGRITY" = ok ] && [ "$SEEDED_INTEGRITY" = ok ] ||
  note "WARNING: quick_check: reaper store '$INTEGRITY', seeded store '$SEEDED_INTEGRITY'"
note "reaper: $PURGE_ROWS sessions and streams ($PURGE_CHUNKS chunks) purged in $PURGE_MS ms; $LEFT expired chunks left"

echo "growth: tools/call echo c=$GROWTH_CONC, JSON replies; $(nproc) CPUs"
echo "  empty store:  ${RPS[empty1-$GROWTH_CONC]} and ${RPS[empty2-$GROWTH_CONC]} req/s (mean $EMPTY_RPS)"
echo "  seeded store: $SEEDED_RPS req/s with $GROWTH_SESSIONS sessions and $GROWTH_CHUNKS chunks" \
  "(ratio $(ratio "$SEEDED_RPS" "$EMPTY_RPS"))"
echo "  restart on the seeded store: $RESTART_MS ms to /readyz; after SIGKILL under load: $KILL_RESTART_MS ms"
echo "  reaper: $PURGE_CHUNKS expired chunks purged in $PURGE_MS ms ($LEFT left);" \
  "live p99 (worst ${GROWTH_WINDOW}-s window) $P99_BEFORE ms before, $P99_PURGE ms during, $P99_AFTER ms after;" \
  "commit lock held over 20 ms $HOLDS_20 times, over 50 ms $HOLDS_50"
echo "GROWTH sessions=$GROWTH_SESSIONS chunks=$GROWTH_CHUNKS empty_rps=$EMPTY_RPS seeded_rps=$SEEDED_RPS" \
  "ratio=$(ratio "$SEEDED_RPS" "$EMPTY_RPS") restart_ms=$RESTART_MS restart_after_kill_ms=$KILL_RESTART_MS" \
  "purge_ms=$PURGE_MS purge_rows=$PURGE_ROWS purge_chunks=$PURGE_CHUNKS left_chunks=$LEFT" \
  "p99_base_ms=$P99_BASE p99_purge_ms=$P99_PURGE holds_over_20ms=$HOLDS_20 holds_over_50ms=$HOLDS_50" \
  "integrity=$([ "$INTEGRITY" = ok ] && [ "$SEEDED_INTEGRITY" = ok ] && echo ok || echo FAILED)"
