#!/bin/sh
# The stand-in's entrypoint (see the Dockerfile): as root, hand the data
# folder to postgres and run again as postgres; as postgres, create the
# cluster if PGDATA holds none, then exec the server. Like the official
# image, POSTGRES_PASSWORD is required (POSTGRES_PASSWORD_FILE may name a
# file holding it), POSTGRES_USER defaults to postgres and POSTGRES_DB to
# the user; the password is set by initdb from a file and the database made
# in single-user mode, so no server listens before the cluster is complete
# and neither ever appears on a command line.
set -eu
if [ "$(id -u)" = 0 ]; then
    install -d -o postgres -g postgres -m 0700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    POSTGRES_PASSWORD="$(cat "$POSTGRES_PASSWORD_FILE")"
fi
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "postgres stand-in: POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) must be set" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    # Every address inside the container network, with the password.
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    if [ "$db" != postgres ]; then
        # Single-user mode takes no quoting from us: the name is an identifier.
        printf 'CREATE DATABASE "%s";\n' "$(printf '%s' "$db" | sed 's/"/""/g')" |
            postgres --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "postgres stand-in: cluster created in $PGDATA (user $user, database $db)"
fi
exec "$@"
