# shellcheck shell=bash
# Sourced by compose-e2e.sh and compose-replicas-e2e.sh: the counting, the
# engine and the stack's lifetime, and the checks both make on a stack.
#
#   compose_begin NAME FILE...   in the repository ($repo), an engine (else
#                                "SKIP NAME" and a failed finish), a project
#                                of its own on loopback ports and a private
#                                subnet, FILEs (relative to $repo) as the
#                                compose files, torn down (down -v) and the
#                                engine stopped on exit; $work is a
#                                temporary folder removed then, $start the
#                                time it began.
#   check NAME COMMAND...        runs COMMAND, prints ok/not ok, counts it.
#   finish                       prints "N passed, N failed" and exits.
#   healthy SERVICE              waits (90 s) for the container's HEALTHCHECK.
#   caddy_ca FILE                Caddy's local CA root, once Caddy made it.
#   no_secret_in LOGFILE SECRET...  none of the SECRETs is in LOGFILE (the
#                                lines that hold one are shown, masked).
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
project=""
work=""
# shellcheck source=engine.sh
. "$repo/tests/deploy/engine.sh"

passed=0
failed=0
check() { # check NAME COMMAND...
    local name="$1"
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "ok - $name"
    else
        failed=$((failed + 1))
        echo "not ok - $name"
        return 1
    fi
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

compose_files=()
compose() {
    local args=() f
    for f in "${compose_files[@]}"; do args+=(-f "$f"); done
    docker-compose -p "$project" "${args[@]}" "$@"
}
compose_cleanup() {
    compose down -v --remove-orphans >/dev/null 2>&1
    rm -rf "$work"
    engine_stop
}
compose_begin() { # compose_begin NAME FILE...
    local name="$1" f
    shift
    start=$(date +%s)
    cd "$repo" || exit 1
    compose_files=()
    for f in "$@"; do compose_files+=("$repo/$f"); done
    if ! engine_start; then
        # Never a silent pass: a machine without an engine fails this suite.
        echo "SKIP $name: no Docker engine: ${ENGINE_WHY:-?}"
        failed=1
        finish
    fi
    project="${name//-/}$$"
    work="$(mktemp -d)"
    trap compose_cleanup EXIT
    export MCPD_BIND=127.0.0.1 MCPD_HTTP_PORT MCPD_HTTPS_PORT
    export MCPD_PROXY_SUBNET="172.30.$((RANDOM % 200 + 20)).0/24"
    MCPD_HTTP_PORT="$(free_port)"
    MCPD_HTTPS_PORT="$(free_port)"
}

healthy() { # healthy SERVICE
    local id status
    id="$(compose ps -q "$1")"
    for _ in $(seq 1 90); do
        status="$(docker inspect -f '{{.State.Health.Status}}' "$id" 2>/dev/null)"
        [ "$status" = healthy ] && return 0
        sleep 1
    done
    echo "$1 health: $status"
    compose logs --tail 20 "$1"
    return 1
}

caddy_ca() { # caddy_ca FILE
    for _ in $(seq 1 30); do
        compose exec -T caddy cat /data/caddy/pki/authorities/local/root.crt >"$1" 2>/dev/null
        [ -s "$1" ] && return 0
        sleep 1
    done
    return 1
}

no_secret_in() { # no_secret_in LOGFILE SECRET...
    local file="$1" s masked
    shift
    local args=()
    for s in "$@"; do args+=(-e "$s"); done
    grep -qF "${args[@]}" "$file" || return 0
    echo "a secret is in the logs:"
    masked="$(grep -F "${args[@]}" "$file")"
    for s in "$@"; do masked="${masked//"$s"/<secret>}"; done
    echo "$masked" | cut -c1-300 | head -n 5
    return 1
}
