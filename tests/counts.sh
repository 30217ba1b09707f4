# counts.sh — sourced by the scripts that end with "N passed, N failed"
# (run.sh, replicas.sh): the running totals and how each stage adds to them.
passed=0
failed=0
failures=()

count() { # count NAME PASSED FAILED
    passed=$((passed + $2))
    failed=$((failed + $3))
    [ "$3" -eq 0 ] || failures+=("$1: $3 failed")
    echo "== $1: $2 passed, $3 failed (at ${SECONDS}s)"
}

# The closing lines: each failed stage, then the totals; the status is the
# verdict.
counts_end() {
    local line
    for line in "${failures[@]}"; do echo "FAILED: $line"; done
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
