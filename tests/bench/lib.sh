# lib.sh — what the benchmark scripts share: starting servers on loopback,
# waiting for them to listen, opening sessions on them, stopping exactly the
# processes they started (and those processes' children) when the script
# exits, measuring them with wrk, and the arithmetic of the reports
# (medians, targets met or missed, how busy the machine was). Sourced; the
# caller sets NODE, WRK and HERE, declares the PORT, RPS, P50, P99 and ERR
# arrays, and defines note() first.

TMP=$(mktemp -d /tmp/mcpd-bench.XXXXXX)
PIDS=()
LAST_PID=

# descendants PID: its children, recursively (from /proc)
descendants() {
  local p=$1 c f
  for f in /proc/"$p"/task/*/children; do
    [ -r "$f" ] || continue
    for c in $(cat "$f" 2>/dev/null); do
      echo "$c"
      descendants "$c"
    done
  done
}

cleanup() {
  local p i kids=()
  for p in "${PIDS[@]}"; do
    kids+=($(descendants "$p"))
    kill -TERM "$p" 2>/dev/null
  done
  for i in $(seq 50); do
    local alive=0
    for p in "${PIDS[@]}" "${kids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in "${PIDS[@]}" "${kids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port: a port free on 127.0.0.1 for TCP and for UDP (it may be
# mcpd's --udp-listen, and a port free for TCP can be a UDP client's); after
# 50 tries, one free for TCP.
free_port() {
  "$NODE" -e '
    const net = require("net"), dgram = require("dgram");
    (function pick(tries) {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const p = s.address().port;
        s.close();
        const u = dgram.createSocket("udp4");
        u.once("error", () => { u.close(); if (tries > 1) pick(tries - 1); else console.log(p); });
        u.bind(p, "127.0.0.1", () => u.close(() => console.log(p)));
      });
    })(50);'
}

# wait_port PORT PID NAME: up to 15 s for a listener; fails if the process dies.
wait_port() {
  local i
  for i in $(seq 150); do
    kill -0 "$2" 2>/dev/null || { note "$3 exited; its log:"; tail -20 "$TMP/$3.log" >&2; return 1; }
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  note "$3 did not listen on port $1 within 15 s"
  return 1
}

# start NAME PORT CMD...: runs CMD in the background, logs to $TMP/NAME.log,
# and waits for it to listen.
start() {
  local name=$1 port=$2
  shift 2
  "$@" >"$TMP/$name.log" 2>&1 &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
  wait_port "$port" "$LAST_PID" "$name"
}

to_ms() { # "485.00us" | "11.29ms" | "1.20s" | "2.00m" -> milliseconds
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    printf "%.2f", n }'
}

# session_on NAME [SECONDS]: opens an MCP session on PORT[NAME]; prints its id.
# Each measured run takes a fresh one: every stored message counts against
# a session's storage cap (--session-max-bytes, 64 MiB), and one session of
# echo replies at c=64 reaches it in under a minute.
session_on() { timeout "${2:-20}" "$NODE" "$HERE/open_session.mjs" "http://127.0.0.1:${PORT[$1]}/mcp"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# cpu_ticks PID: the process's user + system CPU in clock ticks (the fields
# after the comm, which may hold spaces).
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'; }
# cpu_us_per_request TICKS0 TICKS1 RPS SECONDS: a server's CPU per request
# answered over a run (wrk's req/s times its length), or "-".
cpu_us_per_request() {
  awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" -v r="${3:-0}" -v s="$4" \
    'BEGIN { if (a != "" && b != "" && r > 0) printf "%.1f", (b - a) / hz * 1e6 / (r * s); else print "-" }'
}

# run_wrk NAME SESSION CONC SECONDS: tools/call echo (echo.lua) on PORT[NAME].
# NAME mcpd-tcp is mcpd's raw TCP port: TCP_ECHO_BIN (tcp_echo.c) drives it
# instead, with a session per connection, and writes what wrk writes; NAME
# mcpd-udp is its UDP port, driven the same way by UDP_ECHO_BIN (udp_echo.c).
run_wrk() {
  local name=$1 sid=$2 c=$3 secs=$4 t=2
  if [ "$name" = mcpd-tcp ] || [ "$name" = mcpd-udp ]; then
    local bin=$TCP_ECHO_BIN
    [ "$name" = mcpd-udp ] && bin=$UDP_ECHO_BIN
    timeout -k 5 $((secs + 60)) "$bin" 127.0.0.1 "${PORT[$name]}" "$c" "$secs" >"$TMP/wrk-$name-$c.txt" 2>&1
    return
  fi
  [ "$c" -lt 2 ] && t=1
  MCP_SESSION_ID=$sid timeout -k 5 $((secs + 30)) "$WRK" -t$t -c"$c" -d"${secs}s" --timeout 5s --latency \
    -s "$HERE/echo.lua" "http://127.0.0.1:${PORT[$name]}/mcp" >"$TMP/wrk-$name-$c.txt" 2>&1
}

# measure NAME SESSION CONC SECONDS [fixed]: one wrk run, its figures into
# RPS, P50, P99 and ERR[NAME-CONC] (declared by the caller). Errors are
# non-2xx replies and bodies without a result (echo.lua) plus socket errors;
# with "fixed" (a server answering a fixed body) only socket errors count.
measure() {
  run_wrk "$1" "$2" "$3" "$4"
  wrk_figures "$1" "$3" "${5:-}"
}

# wrk_figures NAME CONC [fixed]: the figures of run_wrk's last run on NAME
# at CONC, as measure keeps them (for runs started in the background).
wrk_figures() {
  local name=$1 c=$2 fixed=${3:-}
  local out=$TMP/wrk-$name-$c.txt rps p50 p99 lua_err sock_err first
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")
  p50=$(awk '$1 == "50%" {print $2}' "$out")
  p99=$(awk '$1 == "99%" {print $2}' "$out")
  lua_err=$(sed -n 's/.*BENCH responses=[0-9]* errors=\([0-9]*\).*/\1/p' "$out")
  sock_err=$(awk '/Socket errors:/ {gsub(",", ""); print $4 + $6 + $8 + $10}' "$out")
  [ -n "$fixed" ] && lua_err=0
  RPS[$name-$c]=${rps:-0}
  P50[$name-$c]=$([ -n "$p50" ] && to_ms "$p50" || echo nan)
  P99[$name-$c]=$([ -n "$p99" ] && to_ms "$p99" || echo nan)
  ERR[$name-$c]=$((${lua_err:-0} + ${sock_err:-0}))
  if [ -z "$rps" ]; then
    note "$name c=$c: wrk produced no figures:"
    tail -5 "$out" >&2
  fi
  first=$(sed -n 's/.*first_error=\(..*\)$/\1/p' "$out")
  [ -n "$first" ] && [ -z "$fixed" ] && note "$name c=$c: first error: $first"
  [ "${sock_err:-0}" != 0 ] && note "$name c=$c: $(grep 'Socket errors' "$out")"
  return 0
}

# busy_percent SECONDS: the share of all CPUs that was not idle, from /proc/stat.
busy_percent() {
  local a b
  a=$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat)
  sleep "$1"
  b=$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
    t = (y[1] - x[1]) + (y[2] - x[2]); printf "%.0f", (t > 0 ? 100 * (y[1] - x[1]) / t : 0) }'
}
# median V...: the middle value (the mean of the middle two for an even count).
median() {
  printf '%s\n' "$@" | { grep -v -e '^-$' -e '^n/a$' -e '^$' || true; } | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
      else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# chk VALUE OP BOUND -> met | MISSED | - (no figure)
chk() {
  case $1 in -|''|nan|n/a) echo - ; return ;; esac
  awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {
    ok = (op == ">=") ? a >= b : (op == "<") ? a < b : a <= b; print ok ? "met" : "MISSED" }'
}
