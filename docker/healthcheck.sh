#!/bin/bash
# docker/healthcheck.sh - container health probe: GET /healthz with bash's /dev/tcp, 200 means healthy.
# Usage: attn-healthcheck [PATH] [PORT]   (defaults /healthz and $ATTN_PORT or 8080)
# Used by the image's HEALTHCHECK and by the nginx image (with its own path and
# port), so neither image needs curl. The server's address is $ATTN_BIND (a
# wildcard, 0.0.0.0 or ::, is probed on loopback); set the port with ATTN_PORT,
# not --port, which the probe cannot see.
set -u
path=${1:-/healthz}
port=${2:-${ATTN_PORT:-8080}}
case "${ATTN_BIND:-127.0.0.1}" in
    0.0.0.0) host=127.0.0.1 ;;
    ::) host=::1 ;;
    *) host=${ATTN_BIND:-127.0.0.1} ;;
esac
# A hung server must fail the probe, not hang it: every step is time-bounded.
exec 3<>"/dev/tcp/$host/$port" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$path" >&3
IFS= read -r -t 2 status <&3 || exit 1
case "$status" in
    "HTTP/1."[01]" 200"*) exit 0 ;;
    *) echo "unhealthy: $status" >&2; exit 1 ;;
esac
