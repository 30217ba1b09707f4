# shellcheck shell=bash
# Sourced by compose-lib.sh: a Docker engine to run the stack on, and the
# images these machines cannot pull.
#
# engine_start uses the engine DOCKER_HOST (or the default socket) names when
# one answers; otherwise it starts a dockerd of its own with every path under
# ENGINE_ROOT, so it never touches a system engine, and engine_stop stops only
# that one, by PID. ENGINE_ROOT persists across runs on purpose: the imported
# base image and the build cache make a second run much faster. Where no
# engine can start, engine_start prints why and returns 1.
#
# base_image_ensure, caddy_image_ensure and postgres_image_ensure make
# debian:bookworm-slim, the Caddy image and the PostgreSQL image available:
# pulled when a registry answers, else built locally (debootstrap from the
# apt mirror this machine is configured with; Debian's caddy and
# postgresql-15 packages laid out like the official images).

ENGINE_ROOT="${ENGINE_ROOT:-/var/tmp/mcpd-engine}"
engine_pid=""

engine_log() { echo "engine: $*" >&2; }

engine_start() {
    if docker info >/dev/null 2>&1; then
        engine_log "using the running engine (${DOCKER_HOST:-default socket})"
        return 0
    fi
    if ! command -v dockerd >/dev/null; then
        ENGINE_WHY="dockerd is not installed"
        return 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        ENGINE_WHY="no engine answers and starting dockerd needs root"
        return 1
    fi
    mkdir -p "$ENGINE_ROOT/data" "$ENGINE_ROOT/exec"
    # A dockerd left by a run that was killed holds the pidfile: stop that one
    # (it is ours: its pidfile lives under ENGINE_ROOT) before starting anew.
    if [ -f "$ENGINE_ROOT/dockerd.pid" ]; then
        local old
        old="$(cat "$ENGINE_ROOT/dockerd.pid")"
        if [ -n "$old" ] && kill -0 "$old" 2>/dev/null &&
           grep -q dockerd "/proc/$old/cmdline" 2>/dev/null; then
            kill "$old"
            for _ in $(seq 1 40); do kill -0 "$old" 2>/dev/null || break; sleep 0.5; done
        fi
        rm -f "$ENGINE_ROOT/dockerd.pid"
    fi
    export DOCKER_HOST="unix://$ENGINE_ROOT/docker.sock"
    dockerd --data-root "$ENGINE_ROOT/data" --exec-root "$ENGINE_ROOT/exec" \
        --pidfile "$ENGINE_ROOT/dockerd.pid" -H "$DOCKER_HOST" \
        >"$ENGINE_ROOT/dockerd.log" 2>&1 &
    engine_pid=$!
    for _ in $(seq 1 120); do
        docker info >/dev/null 2>&1 && { engine_log "started dockerd (pid $engine_pid)"; return 0; }
        kill -0 "$engine_pid" 2>/dev/null || break
        sleep 0.5
    done
    ENGINE_WHY="dockerd did not start: $(tail -n 3 "$ENGINE_ROOT/dockerd.log" | tr '\n' ' ')"
    engine_stop
    return 1
}

engine_stop() {
    [ -n "$engine_pid" ] || return 0
    kill "$engine_pid" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$engine_pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$engine_pid" 2>/dev/null && kill -KILL "$engine_pid"
    wait "$engine_pid" 2>/dev/null
    engine_pid=""
}

# The first deb URI of apt's own configuration (deb822 or one-line form).
apt_mirror() {
    local uri
    uri="$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
           grep -v security | head -n 1)"
    [ -n "$uri" ] || uri="$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' \
                            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
                            grep -v security | head -n 1)"
    echo "${uri:-http://deb.debian.org/debian}"
}

base_image_ensure() { # base_image_ensure IMAGE (debian:bookworm-slim)
    local image="$1"
    docker image inspect "$image" >/dev/null 2>&1 && return 0
    docker pull -q "$image" >/dev/null 2>&1 && return 0
    command -v debootstrap >/dev/null || { engine_log "debootstrap is not installed"; return 1; }
    local dir="$ENGINE_ROOT/rootfs" mirror
    mirror="$(apt_mirror)"
    engine_log "$image cannot be pulled: debootstrap bookworm from $mirror"
    rm -rf "$dir"
    debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$ENGINE_ROOT/debootstrap.log" 2>&1 ||
        { engine_log "debootstrap failed: $(tail -n 3 "$ENGINE_ROOT/debootstrap.log")"; return 1; }
    # Like the official slim image: no apt lists or caches, and dpkg leaves
    # out documentation and translations, now and in every later install.
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
        "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/*
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
        'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
        >"$dir/etc/dpkg/dpkg.cfg.d/docker-slim"
    printf '%s\n' 'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' \
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
        >"$dir/etc/apt/apt.conf.d/docker-clean"
    tar -C "$dir" -c . | docker import - "$image" >/dev/null || return 1
    rm -rf "$dir"
}

# An image pulled when a registry answers, else built from a stand-in's
# folder under deploy/ on the base image.
standin_image_ensure() { # standin_image_ensure IMAGE BASE_IMAGE FOLDER WHAT
    local image="$1" base="$2" dir="$3" what="$4" here
    docker image inspect "$image" >/dev/null 2>&1 && return 0
    docker pull -q "$image" >/dev/null 2>&1 && return 0
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    engine_log "$image cannot be pulled: building it from $what"
    docker build -q --build-arg "BASE=$base" -t "$image" "$here/deploy/$dir" >/dev/null
}

caddy_image_ensure() { # caddy_image_ensure IMAGE BASE_IMAGE
    standin_image_ensure "$1" "$2" caddy-standin "Debian's caddy package"
}

postgres_image_ensure() { # postgres_image_ensure IMAGE BASE_IMAGE
    standin_image_ensure "$1" "$2" postgres-standin "Debian's postgresql-15"
}
