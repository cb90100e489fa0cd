#!/usr/bin/env bash
# tests/docker/test.sh - builds the service and load-balancer images, runs them on loopback and checks real answers.
#
# Usage: tests/docker/test.sh [BUILD_DIR]     (make test-docker)
# Needs docker.io, debootstrap, docker-compose and curl. Starts dockerd when
# none runs and makes the debian:bookworm-slim base image with debootstrap
# when missing (tests/docker/engine.sh), so no registry is needed. Containers
# use --network host and a free 127.0.0.1 port; all are removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/replicas/common.sh

BUILD_DIR=${1:-build}
OUT="$BUILD_DIR/docker"
mkdir -p "$OUT"
IMAGE=${ATTN_IMAGE:-attn-server:test}
LB_IMAGE=${ATTN_LB_IMAGE:-attn-lb:test}
TAG="attn-test-$$"
T0=$(date +%s)
step() { printf '[docker %3ds] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }
fail() { printf 'test-docker: FAIL: %s\n' "$*" >&2; exit 1; }

PROJECT="attntest$$"
compose() { ATTN_IMAGE="$IMAGE" ATTN_LB_IMAGE="$LB_IMAGE" ATTN_PUBLISH="127.0.0.1:${COMPOSE_PORT:-8080}" \
    timeout 180 docker-compose -p "$PROJECT" -f docker/compose.yaml "$@"; }
cleanup() {
    docker rm -f "$TAG-srv" "$TAG-lb" >/dev/null 2>&1 || true
    compose down --timeout 5 >/dev/null 2>&1 || true
}
trap cleanup EXIT

step "engine and base image"
timeout 1500 tests/docker/engine.sh "$BUILD_DIR"

step "compose file: docker-compose config"
command -v docker-compose >/dev/null || fail "docker-compose missing (apt-get install docker-compose)"
docker-compose -f docker/compose.yaml config -q || fail "docker/compose.yaml does not validate"

# Host networking for the build: the engine runs without a bridge, and
# apt-get in the build stage must reach the Debian mirror.
# The build stage gets a tag of its own so that it stays as the cache of the
# next run instead of turning into an anonymous image; the images a rebuild
# replaces are removed (with vfs storage each one is a full copy on disk).
images=("$IMAGE-build" "$IMAGE" "$LB_IMAGE")
old_ids=$(docker image inspect -f '{{.Id}}' "${images[@]}" 2>/dev/null || true)
step "build $IMAGE"
{ timeout 1200 docker build --force-rm --network host --target build -t "$IMAGE-build" . &&
  timeout 600 docker build --force-rm --network host -t "$IMAGE" . ; } >"$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log" >&2; fail "image build failed (log: $OUT/build.log)"; }
step "build $LB_IMAGE"
timeout 600 docker build --force-rm --network host -f docker/nginx.Dockerfile -t "$LB_IMAGE" . >"$OUT/build-lb.log" 2>&1 \
    || { tail -30 "$OUT/build-lb.log" >&2; fail "nginx image build failed (log: $OUT/build-lb.log)"; }
new_ids=$(docker image inspect -f '{{.Id}}' "${images[@]}")
for id in $old_ids; do
    case "$new_ids" in *"$id"*) ;; *) docker rmi "$id" >/dev/null 2>&1 || true ;; esac
done
# Build stages left untagged (sources changed between the two builds above).
docker image prune -f --filter label=org.attn.stage=build >/dev/null 2>&1 || true

user=$(docker image inspect -f '{{.Config.User}}' "$IMAGE")
case "$user" in ""|root|0|0:*) fail "image runs as root (User=\"$user\")" ;; esac
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
step "image user $user, size $(( size / 1000000 )) MB"

PORT=$(free_port)
step "run $IMAGE on 127.0.0.1:$PORT"
# The image listens on 0.0.0.0; on the host network that would expose the
# test on every interface, so bind loopback here. A short health interval
# lets the test see the HEALTHCHECK pass without waiting its default 10 s.
# Read-only, no capabilities: as docker/k8s.yaml runs it.
docker run -d --name "$TAG-srv" --network host \
    -e ATTN_BIND=127.0.0.1 -e ATTN_PORT="$PORT" \
    --read-only --cap-drop ALL --security-opt no-new-privileges \
    --health-interval 1s "$IMAGE" >/dev/null
wait_http "http://127.0.0.1:$PORT/healthz" 30 || { docker logs "$TAG-srv" >&2; fail "container did not answer /healthz"; }

step "POST /attention/scaled_dot"
code=$(curl -s -m 10 -o "$OUT/answer.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data "$SMALL_REQUEST" "http://127.0.0.1:$PORT/attention/scaled_dot")
[ "$code" = 200 ] || fail "POST answered $code: $(head -c 300 "$OUT/answer.json")"
check_small_answer "$OUT/answer.json" || fail "wrong attention result from the container"

step "demo and OpenAPI served from the image"
for pair in /:demo/index.html /openapi.yaml:openapi.yaml; do
    path=${pair%%:*} file=${pair#*:}
    code=$(curl -s -m 5 -o "$OUT/served" -w '%{http_code}' "http://127.0.0.1:$PORT$path")
    [ "$code" = 200 ] || fail "GET $path answered $code"
    # Byte for byte: the server falls back to a built-in page when the demo
    # directory is missing, which a status check alone would not notice.
    cmp -s "$OUT/served" "$file" || fail "GET $path is not the repository's $file (missing from the image?)"
done

# No cluster here, so docker/k8s.yaml is checked against the image it
# deploys: its probes must answer 200 and its uid and port must be the image's.
step "docker/k8s.yaml agrees with the image"
read -r k8s_uid k8s_port k8s_paths < <("$PY" - <<'PYEOF'
import yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open("docker/k8s.yaml"))}
assert set(docs) == {"Deployment", "Service"}, docs.keys()
tmpl = docs["Deployment"]["spec"]["template"]
pod = tmpl["spec"]
c = pod["containers"][0]
sel = docs["Deployment"]["spec"]["selector"]["matchLabels"]
assert sel == docs["Service"]["spec"]["selector"], "Service selector does not match the Deployment"
assert all(tmpl["metadata"]["labels"].get(k) == v for k, v in sel.items()), "pod labels miss the selector"
assert docs["Service"]["spec"]["ports"][0]["targetPort"] in (c["ports"][0]["name"], c["ports"][0]["containerPort"])
paths = [c[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe", "startupProbe")]
print(pod["securityContext"]["runAsUser"], c["ports"][0]["containerPort"], " ".join(paths))
PYEOF
) || fail "docker/k8s.yaml is malformed"
[ "${user%%:*}" = "$k8s_uid" ] || fail "k8s runAsUser $k8s_uid but the image runs as $user"
[ "$(docker image inspect -f '{{range $p, $_ := .Config.ExposedPorts}}{{$p}}{{end}}' "$IMAGE")" = "$k8s_port/tcp" ] \
    || fail "k8s containerPort $k8s_port is not the image's exposed port"
for path in $k8s_paths; do
    code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT$path")
    [ "$code" = 200 ] || fail "k8s probe path $path answered $code"
done

step "HEALTHCHECK turns healthy"
health=""
for _ in $(seq 1 30); do
    health=$(docker inspect -f '{{.State.Health.Status}}' "$TAG-srv")
    [ "$health" = healthy ] && break
    sleep 1
done
[ "$health" = healthy ] || fail "container health is '$health'"

LB_PORT=$(free_port)
step "nginx image on 127.0.0.1:$LB_PORT in front of the container"
# Same config as compose, but on the host network: the upstream is the
# container's loopback port instead of the compose service name.
sed -e "s/listen 8080;/listen 127.0.0.1:$LB_PORT;/" -e "s/server attn:8080/server 127.0.0.1:$PORT/" \
    docker/nginx.conf >"$OUT/nginx-test.conf"
chmod 644 "$OUT/nginx-test.conf"
docker run -d --name "$TAG-lb" --network host \
    -v "$PWD/$OUT/nginx-test.conf:/etc/nginx/nginx.conf:ro" "$LB_IMAGE" >/dev/null
wait_http "http://127.0.0.1:$LB_PORT/nginx-health" 20 || { docker logs "$TAG-lb" >&2; fail "nginx container did not start"; }
code=$(curl -s -m 10 -o "$OUT/answer-lb.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data "$SMALL_REQUEST" "http://127.0.0.1:$LB_PORT/attention/scaled_dot")
[ "$code" = 200 ] || fail "POST through nginx answered $code"
check_small_answer "$OUT/answer-lb.json" || fail "wrong attention result through nginx"

step "docker stop drains and exits 0"
timeout 60 docker stop -t 20 "$TAG-srv" >/dev/null
rc=$(docker inspect -f '{{.State.ExitCode}}' "$TAG-srv")
[ "$rc" = 0 ] || { docker logs "$TAG-srv" 2>&1 | tail -5 >&2; fail "server exited $rc on SIGTERM (want 0)"; }

# The whole stack as a user starts it, minus the build (done above) and on a
# loopback port: three replicas on a compose network behind the nginx image.
COMPOSE_PORT=$(free_port)
step "docker-compose up: 3 replicas + nginx on 127.0.0.1:$COMPOSE_PORT"
compose up -d --no-build >"$OUT/compose-up.log" 2>&1 || { cat "$OUT/compose-up.log" >&2; fail "docker-compose up failed"; }
wait_http "http://127.0.0.1:$COMPOSE_PORT/healthz" 60 || { compose logs --no-color 2>&1 | tail -20 >&2; fail "compose stack did not answer"; }
for i in $(seq 1 12); do
    code=$(curl -s -m 10 -o "$OUT/answer-compose.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data "$SMALL_REQUEST" "http://127.0.0.1:$COMPOSE_PORT/attention/scaled_dot")
    [ "$code" = 200 ] || fail "POST $i through the compose stack answered $code"
    check_small_answer "$OUT/answer-compose.json" || fail "wrong attention result through the compose stack"
done
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$COMPOSE_PORT/")
[ "$code" = 200 ] || fail "the demo (GET /) through the compose stack answered $code"
# Each replica logs its requests; round robin must have reached all three.
compose logs --no-color attn >"$OUT/compose-attn.log" 2>&1
served=$(grep 'POST /attention/scaled_dot 200' "$OUT/compose-attn.log" | cut -d'|' -f1 | sort -u | wc -l)
[ "$served" = 3 ] || fail "only $served of 3 replicas served requests (see $OUT/compose-attn.log)"
healthy=$(compose ps | grep -c '(healthy)' || true)
step "compose: 12 answers right, all 3 replicas served, $healthy containers healthy"
compose down --timeout 20 >/dev/null 2>&1 || fail "docker-compose down failed"

step "PASS"
echo "test-docker: ok in $(( $(date +%s) - T0 ))s"
