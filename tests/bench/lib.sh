# lib.sh — what the benchmark scripts share: starting servers on loopback,
# waiting for them to listen, and stopping exactly the processes they started
# (and those processes' children) when the script exits. Sourced; the caller
# sets NODE and defines note() first.

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

free_port() {
  "$NODE" -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
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
