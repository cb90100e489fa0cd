#!/bin/sh
# deps.sh - installs the Debian packages `make run` (or, with the argument
# `test` or `bench`, `make test` or `make bench`) needs when any is missing (with apt-get, as root or
# through sudo); otherwise says what to install.
# Idempotent, and quick when everything is present: one dpkg-query a package.
set -eu

PKGS="build-essential pkg-config libmicrohttpd-dev libjansson-dev"
# make test: libcurl for the HTTP tests, Node + Chromium for the OpenAPI and
# browser tests, nginx and Prometheus for the replica and metrics tests,
# requests + numpy for the Python client example. make bench: the same, and
# OpenBLAS (the BLAS column), ONNX (the ORT peer's models) and wrk (small
# requests).
if [ "${1:-}" = bench ]; then
    PKGS="$PKGS libopenblas-dev python3-onnx wrk"
fi
if [ "${1:-}" = test ] || [ "${1:-}" = bench ]; then
    PKGS="$PKGS ca-certificates curl libcurl4-openssl-dev chromium nginx prometheus python3 python3-numpy python3-requests python3-yaml python3-torch"
    # A Node.js from elsewhere (e.g. NodeSource, which bundles npm and
    # conflicts with Debian's npm package) is used as it is.
    command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
    command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
fi

missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps.sh: not a Debian system; please install:$missing" >&2
    echo "  (a C11 compiler, make, pkg-config, libmicrohttpd and jansson development files)" >&2
    exit 1
fi

if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "deps.sh: missing Debian packages:$missing" >&2
    echo "  install them with: sudo apt-get install$missing" >&2
    exit 1
fi

echo "deps.sh: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
