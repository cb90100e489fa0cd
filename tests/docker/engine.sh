#!/usr/bin/env bash
# tests/docker/engine.sh - makes sure a Docker engine runs and the local
# debian:bookworm-slim base image exists, so the image builds with no registry.
#
# Usage: tests/docker/engine.sh [BUILD_DIR]   (default build)
# The debootstrap root filesystem is cached as BUILD_DIR/docker/bookworm-minbase.tar
# because making it takes minutes; delete that file to rebuild it.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${1:-build}
CACHE="$BUILD_DIR/docker"
BASE_IMAGE=${ATTN_BASE_IMAGE:-debian:bookworm-slim}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$CACHE"

log() { printf 'engine: %s\n' "$*" >&2; }

# A Docker CLI from another package may sit earlier on PATH; any works.
if ! command -v docker >/dev/null; then
    log "docker CLI missing (apt-get install docker.io)"; exit 1
fi

# --- the engine -----------------------------------------------------------
# containerd is started on its own before dockerd: a dockerd that starts it
# itself gives it 15 s, which a loaded machine can miss ("failed to start
# containerd: timeout waiting for containerd to start", one CI run). Both
# are waited for with a bound, and each start is tried twice.
# setsid + nohup: the daemons outlive this script and make, and are reused
# by later runs; they are not ours to stop.
CONTAINERD_SOCK=/run/containerd/containerd.sock

# wait_for SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS.
wait_for() {
    local limit=$1; shift
    local end=$(( $(date +%s) + limit ))
    while [ "$(date +%s)" -lt "$end" ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 1
    done
    return 1
}

# start_daemon NAME LOG CHECK... : starts NAME (with the arguments in the
# DAEMON_ARGS array) unless CHECK already succeeds, twice at most.
start_daemon() {
    local name=$1 logf=$2; shift 2
    timeout 10 "$@" >/dev/null 2>&1 && return 0
    command -v "$name" >/dev/null || { log "$name missing (apt-get install docker.io)"; return 1; }
    local try
    for try in 1 2; do
        log "starting $name (try $try)"
        setsid nohup "$name" "${DAEMON_ARGS[@]}" >>"$logf" 2>&1 </dev/null &
        local pid=$!
        wait_for 120 timeout 10 "$@" && return 0
        kill "$pid" 2>/dev/null || true
        sleep 2
    done
    log "$name did not come up; the end of $logf:"
    tail -30 "$logf" >&2
    return 1
}

if ! timeout 10 docker info >/dev/null 2>&1; then
    # A daemon that died uncleanly leaves its pid file, and a new one
    # refuses to start while the file names a process that is gone.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    DAEMON_ARGS=()
    start_daemon containerd "$CACHE/containerd.log" ctr --address "$CONTAINERD_SOCK" version || exit 1
    log "dockerd: vfs storage, no iptables, no bridge (works inside a container)"
    DAEMON_ARGS=(--containerd="$CONTAINERD_SOCK" --storage-driver=vfs --iptables=false --bridge=none)
    start_daemon dockerd "$CACHE/dockerd.log" docker info || exit 1
fi

# --- the base image ---------------------------------------------------------
if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    exit 0
fi
TAR="$CACHE/bookworm-minbase.tar"
if [ ! -s "$TAR" ]; then
    command -v debootstrap >/dev/null || { log "debootstrap missing (apt-get install debootstrap)"; exit 1; }
    ROOT="$CACHE/rootfs"
    rm -rf "$ROOT"
    log "debootstrap --variant=minbase bookworm from $MIRROR (a few minutes)"
    start=$(date +%s)
    timeout 1200 debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || { log "debootstrap failed; see $CACHE/debootstrap.log"; tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    # Same trims as the official slim image: no downloaded .debs or lists.
    rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
    tar -C "$ROOT" -cf "$TAR.tmp" . && mv "$TAR.tmp" "$TAR"
    rm -rf "$ROOT"
    log "debootstrap took $(( $(date +%s) - start ))s"
fi
log "importing $TAR as $BASE_IMAGE"
docker import "$TAR" "$BASE_IMAGE" >/dev/null
