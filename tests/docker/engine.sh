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
if ! timeout 10 docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null || { log "dockerd missing (apt-get install docker.io)"; exit 1; }
    # A daemon that died uncleanly leaves its pid file, and a new one
    # refuses to start while the file names a process that is gone.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    log "starting dockerd (vfs storage, no iptables, no bridge: works inside a container)"
    # setsid + nohup: the daemon outlives this script and make, and is reused
    # by later runs; it is not ours to stop.
    setsid nohup dockerd --storage-driver=vfs --iptables=false --bridge=none \
        >"$CACHE/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do
        timeout 5 docker info >/dev/null 2>&1 && break
        sleep 1
    done
    timeout 10 docker info >/dev/null 2>&1 || { log "dockerd did not come up; see $CACHE/dockerd.log"; tail -20 "$CACHE/dockerd.log" >&2; exit 1; }
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
