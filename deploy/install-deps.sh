#!/usr/bin/env bash
# Installs the Debian packages mcpd needs to build, and with --test also what
# its test suite needs, skipping whatever is already there. Safe to re-run.
set -euo pipefail

packages=(build-essential cmake pkg-config libulfius-dev libmicrohttpd-dev libjansson-dev libcurl4-gnutls-dev
          libsqlite3-dev libpq-dev libcjose-dev libssl-dev libgoogle-perftools-dev)
if [ "${1:-}" = "--test" ]; then
    # Node runs npm ci; the tests themselves run on the Node 22 that
    # tests/package.json pins. wrk drives the benchmark.
    command -v node >/dev/null || packages+=(nodejs)
    command -v npm >/dev/null || packages+=(npm)
    command -v python3 >/dev/null || packages+=(python3) # a test upstream that never flushes
    # clang and its runtime build the libFuzzer harnesses.
    packages+=(wrk procps clang libclang-rt-14-dev)
    # caddy: a real TLS reverse proxy in front of mcpd for the mcp-bridge tests.
    packages+=(caddy)
    # sqlite3: the abuse tests run PRAGMA integrity_check on mcpd's database.
    packages+=(sqlite3)
    # gdb: an mcpd that does not exit in time has every thread's stack put
    # in the failure (tests/e2e/lib/mcpd.mjs, threadStacks).
    packages+=(gdb)
    # postgresql-15: the throwaway server (tests/pg/pg-server.sh) of the
    # tests that run mcpd and its store on PostgreSQL.
    packages+=(postgresql-15)
    # devscripts: hardening-check, on the binaries the build hardens.
    packages+=(devscripts)
    # universal-ctags: tests/core-window.sh lists the core's functions.
    packages+=(universal-ctags)
    # The deployment files are checked with their own tools and run in front
    # of mcpd: docker-compose (config -q, no engine needed), nginx, openssl.
    packages+=(docker-compose nginx openssl)
    # Debian's nginx has its stream module apart: deploy/nginx-tcp.conf
    # (TLS in front of --tcp-listen, tests/deploy/tcp-proxy.test.mjs).
    packages+=(libnginx-mod-stream)
    # tests/deploy/compose-e2e.sh: a Docker engine of its own, and a base
    # image built with debootstrap where none can be pulled.
    packages+=(docker.io debootstrap)
fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
