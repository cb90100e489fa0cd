# docker/nginx.Dockerfile - the load balancer image for compose: Debian's nginx, so only Debian packages are needed.
# Build context is the repository root (see docker/compose.yaml).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx \
 && rm -rf /var/lib/apt/lists/*
COPY docker/nginx.conf /etc/nginx/nginx.conf
COPY docker/healthcheck.sh /usr/local/bin/attn-healthcheck
# Unprivileged: the config listens on 8080 and keeps pid and temp files in /tmp.
USER www-data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=3s --retries=3 \
    CMD ["/usr/local/bin/attn-healthcheck", "/nginx-health", "8080"]
# -e stderr: the compiled-in error log under /var/log is not writable by www-data.
CMD ["nginx", "-e", "stderr", "-g", "daemon off;"]
