#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: Debian's postgresql-15, a
# cluster in a temporary folder, listening on one loopback port and a Unix
# socket in that folder. Never the system cluster.
#
#   pg-server.sh start DIR PORT   initdb (once) and start; prints the URL
#   pg-server.sh stop DIR         fast shutdown
#   pg-server.sh kill DIR         SIGKILL the postmaster (a crash)
#   pg-server.sh url DIR          the URL of the running server
#
# initdb and postgres refuse root, so as root they run as the `postgres`
# user (which Debian's package creates) and DIR is handed to it. The
# superuser is `mcpd` with trust authentication on loopback only; each test
# creates its own database (createdb) with the URL's credentials.
set -euo pipefail

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/postgres" ] || { echo "pg-server: postgresql is not installed (deploy/install-deps.sh --test)" >&2; exit 1; }

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '6,10p' "$0" >&2; exit 2; }

case "$cmd" in
start)
    port=${3:?port}
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir/data" -U mcpd --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
            { cat "$dir/initdb.log" >&2; exit 1; }
        # Enough connections for several replicas' pools and the tests'
        # own clients; fsync stays on unless PG_TEST_FAST=1 (benchmarks
        # measure real commits).
        cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
max_connections = 300
unix_socket_directories = '$dir'
shared_buffers = 128MB
log_min_messages = warning
log_line_prefix = '%m [%p] '
CONF
        [ "${PG_TEST_FAST:-0}" = 1 ] && echo "fsync = off" >>"$dir/data/postgresql.conf"
    fi
    echo "port = $port" >>"$dir/data/postgresql.conf"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start >/dev/null ||
        { tail -20 "$dir/server.log" >&2; exit 1; }
    echo "$port" >"$dir/port"
    echo "postgres://mcpd@127.0.0.1:$port/postgres"
    ;;
stop)
    [ -f "$dir/data/postmaster.pid" ] || exit 0
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null
    ;;
kill)
    [ -f "$dir/data/postmaster.pid" ] || exit 0
    kill -9 "$(head -1 "$dir/data/postmaster.pid")"
    ;;
url)
    echo "postgres://mcpd@127.0.0.1:$(cat "$dir/port")/postgres"
    ;;
*) sed -n '6,10p' "$0" >&2; exit 2 ;;
esac
