# Dockerfile - the attention service image: build on Debian, ship the binary, demo and OpenAPI spec.
#
#   docker build -t attn-server .
#   docker run --rm -p 8080:8080 attn-server        # demo on http://localhost:8080
#
# Configuration is by environment variables (ATTN_PORT, ATTN_THREADS, ...; see
# the README); the image sets only what differs inside a container. BASE lets
# an offline build use a locally made Debian image (see tests/docker/engine.sh).
# No "# syntax=" line: that would make BuildKit pull a frontend from a registry.

ARG BASE=debian:bookworm-slim

# ---------------------------------------------------------------- build stage
FROM ${BASE} AS build
# Marks the stage's leftover images as safe to prune (tests/docker/test.sh).
LABEL org.attn.stage=build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc make libc6-dev pkg-config libmicrohttpd-dev libjansson-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the server build reads, so editing tests or docs keeps the cache.
COPY Makefile ./
COPY lib/ lib/
COPY server/ server/
COPY models/ models/
# Kernels pick their instruction set at run time, so a generic -O2 build is
# right for any x86-64 host the image lands on; the models' own loops at -O3
# (MODELS_OPT, which a given CFLAGS otherwise leaves empty).
RUN make -j"$(nproc)" server CFLAGS="-O2" MODELS_OPT=-O3 && strip build/attn-server

# -------------------------------------------------------------- runtime stage
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libjansson4 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 attn \
 && useradd --system --uid 10001 --gid attn --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin attn
COPY --from=build /src/build/attn-server /usr/local/bin/attn-server
COPY demo/ /usr/share/attn/demo/
COPY openapi.yaml /usr/share/attn/openapi.yaml
# The trained translation models (GET /models): weights, tokenizer, scores.
COPY training/weights/ /usr/share/attn/models/weights/
COPY training/bpe.json training/results.json /usr/share/attn/models/
COPY docker/healthcheck.sh /usr/local/bin/attn-healthcheck

# 0.0.0.0: inside a container loopback is unreachable from the host or the
# load balancer; the container boundary is the isolation.
ENV ATTN_BIND=0.0.0.0 \
    ATTN_PORT=8080 \
    ATTN_STATIC_DIR=/usr/share/attn/demo \
    ATTN_OPENAPI=/usr/share/attn/openapi.yaml \
    ATTN_MODELS_DIR=/usr/share/attn/models/weights

# Numeric so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
EXPOSE 8080
# The probe is bash's /dev/tcp: no curl (and its dozen libraries) in the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/attn-healthcheck"]
# exec form: the server is PID 1 and receives SIGTERM itself, so
# `docker stop` drains in-flight requests instead of killing them.
ENTRYPOINT ["/usr/local/bin/attn-server"]
