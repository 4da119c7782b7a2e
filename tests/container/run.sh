#!/usr/bin/env bash
# Container test: builds docker/Dockerfile, runs the image against a
# kimi-relay-mock upstream on the host, and checks what a user of the image
# relies on. CI runs it only when RELAY_CONTAINER_TESTS=1 (.ci/run): it needs a
# container engine and takes minutes (the image compiles the gateway).
#
#   tests/container/run.sh                 build (cached layers are reused) and test
#   JOBS=2 tests/container/run.sh          compile with 2 jobs (default 1: leave cores to others)
#   IMAGE=kimi-relay:ci tests/container/run.sh
#
# Container engine, first found:
#   1. ../shared/tools/podman.sh (relative to the repo): our machines have no
#      Docker engine and reach no registry; that wrapper installs podman, makes
#      the debian:bookworm-slim base image locally with debootstrap, and adds the
#      flags the sandbox needs. It passes every other command to podman.
#   2. podman from PATH;  3. docker from PATH.
# The same Dockerfile builds unchanged with any of them.
#
# What is checked:
#   - the image builds; the runtime stage holds only what it needs (size printed)
#   - its metadata: non-root USER, HEALTHCHECK running `kimi-relay healthcheck`,
#     STOPSIGNAL SIGTERM, EXPOSE 8080 9090, ENTRYPOINT/CMD
#   - the default /etc/kimi-relay/relay.yaml passes --check-config with its env
#   - the gateway, on a mounted config pointing at the mock, becomes healthy
#     (the container engine's health check, which runs the binary in the container)
#   - a chat completion with curl, a streamed one, and one with the OpenAI SDK
#   - the process in the container is not root (id -u and /proc/1/status)
#   - `stop` (SIGTERM) ends it with exit code 0
#
# Networking: the mock and the gateway use the host's network (--network host),
# on ports picked free at run time, so nothing depends on bridge networking or
# on 8080/9090 being free on the machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

if [[ -x ../shared/tools/podman.sh ]]; then
  engine=("$repo/../shared/tools/podman.sh") kind=podman
elif command -v podman >/dev/null; then
  engine=(podman) kind=podman
elif command -v docker >/dev/null; then
  engine=(docker) kind=docker
else
  echo "container test: no ../shared/tools/podman.sh, podman or docker found" >&2
  exit 1
fi
ce() { "${engine[@]}" "$@"; }

image=${IMAGE:-kimi-relay:test}
jobs=${JOBS:-1}
tag="kr-ct-$$"
mock_name="$tag-mock" relay_name="$tag-relay"
work=$(mktemp -d)
source tests/container/lib.sh

cleanup() {
  ce rm -f -t 0 "$relay_name" "$mock_name" >/dev/null 2>&1 || ce rm -f "$relay_name" "$mock_name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT


# ---------------------------------------------------------------------------
log "build $image with ${engine[*]} (JOBS=$jobs)"
build_args=(build -f docker/Dockerfile --build-arg "JOBS=$jobs" -t "$image")
# OCI image format has no HEALTHCHECK field: podman keeps it only in docker format.
[[ $kind == podman ]] && build_args+=(--format docker)
started=$SECONDS
ce "${build_args[@]}" .
echo "build took $((SECONDS - started)) s"

size=$(ce image inspect --format '{{.Size}}' "$image")
echo "image size: $size bytes ($((size / 1000 / 1000)) MB)"
ce images "$image"

# ---------------------------------------------------------------------------
log "image metadata"
inspect() { ce image inspect --format "$1" "$image"; }
check "USER is 10001:10001 (numeric, non-root)" test "$(inspect '{{.Config.User}}')" = 10001:10001
hc=$(inspect '{{json .Config.Healthcheck}}')
check "HEALTHCHECK runs kimi-relay healthcheck ($hc)" \
  grep -q '"CMD","kimi-relay","healthcheck","--url","http://127.0.0.1:9090/healthz"' <<<"$hc"
check "STOPSIGNAL SIGTERM" test "$(inspect '{{.Config.StopSignal}}')" = SIGTERM
ports=$(inspect '{{json .Config.ExposedPorts}}')
check "EXPOSE 8080 9090 ($ports)" bash -c '[[ $1 == *8080/tcp* && $1 == *9090/tcp* ]]' _ "$ports"
check "ENTRYPOINT kimi-relay, CMD --config /etc/kimi-relay/relay.yaml" test \
  "$(inspect '{{json .Config.Entrypoint}} {{json .Config.Cmd}}')" = '["kimi-relay"] ["--config","/etc/kimi-relay/relay.yaml"]'

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
client_key=kr-container-test-client-4f1c9e2a7b3d5e8f
admin_key=kr-container-test-admin-9a8b7c6d5e4f3a2b
upstream_key=sk-container-test-upstream-1e2d3c4b5a69

out=$(ce run --rm -e RELAY_CLIENT_KEY_SHA256="$(sha "$client_key")" -e RELAY_ADMIN_KEY_SHA256="$(sha "$admin_key")" \
  -e HOLYSHEEP_API_KEY=x -e MOONSHOT_API_KEY=y "$image" --check-config /etc/kimi-relay/relay.yaml 2>/dev/null) || true
check "the default config passes --check-config: $out" grep -q ': OK (2 upstreams' <<<"$out"
out=$(ce run --rm "$image" --check-config /etc/kimi-relay/relay.yaml 2>&1 | grep '^kimi-relay:') || true
check "without its env, the default config names the missing variable: $out" \
  grep -Eq "environment variable '(RELAY_CLIENT_KEY_SHA256|HOLYSHEEP_API_KEY|MOONSHOT_API_KEY)' is not set" <<<"$out"
check "kimi-relay-mock is in the image" \
  bash -c '"$@" >/dev/null 2>&1' _ "${engine[@]}" run --rm --entrypoint kimi-relay-mock "$image" --help

# ---------------------------------------------------------------------------
log "start kimi-relay-mock (from the image, host network)"
mock_port=$(free_port)
ce run -d --name "$mock_name" --network host --entrypoint kimi-relay-mock "$image" \
  --listen "127.0.0.1:$mock_port" --name host-mock --api-key "$upstream_key" --chunks 6 >/dev/null
for _ in $(seq 100); do
  curl --noproxy '*' -sf "http://127.0.0.1:$mock_port/_mock/stats" >/dev/null 2>&1 && break
  sleep 0.1
done
check "mock answers on 127.0.0.1:$mock_port" curl --noproxy '*' -sf "http://127.0.0.1:$mock_port/_mock/stats" -o /dev/null

main_port=$(free_port)
admin_port=$(free_port)
cat >"$work/relay.yaml" <<YAML
# Container test config: the image's layout, ports picked at run time.
server:
  listen: ["127.0.0.1:$main_port"]
  workers: 2
  drain_timeout_ms: 5000
admin:
  listen: "127.0.0.1:$admin_port"
  key_sha256: \${RELAY_ADMIN_KEY_SHA256}
keys:
  - name: container-test
    sha256: \${RELAY_CLIENT_KEY_SHA256}
upstreams:
  - name: host-mock
    base_url: "http://127.0.0.1:$mock_port/v1"
    api_key: \${HOLYSHEEP_API_KEY}
    allow_insecure_http: true
    models: [kimi-k2]
state_dir: /var/lib/kimi-relay
log: {level: info, access_log: stdout}
YAML
chmod 0644 "$work/relay.yaml"

log "start the gateway image on a mounted config"
# The image's HEALTHCHECK probes the default admin port 9090; this config
# uses a free port, so the check is given the same command in --config form.
ce run -d --name "$relay_name" --network host \
  -v "$work/relay.yaml:/etc/kimi-relay/relay.yaml:ro" \
  -e RELAY_CLIENT_KEY_SHA256="$(sha "$client_key")" -e RELAY_ADMIN_KEY_SHA256="$(sha "$admin_key")" \
  -e HOLYSHEEP_API_KEY="$upstream_key" \
  --health-cmd "kimi-relay healthcheck --config /etc/kimi-relay/relay.yaml" \
  --health-interval 2s --health-retries 3 --health-timeout 5s \
  "$image" >/dev/null

healthy=0
for _ in $(seq 60); do
  if [[ $kind == podman ]]; then
    # Runs the configured health check now: without systemd as PID 1 podman has
    # no timer to run it (and logs "unable to get systemd connection": harmless).
    if ce healthcheck run "$relay_name" >/dev/null 2>&1; then healthy=1 && break; fi
  else
    [[ $(ce inspect --format '{{.State.Health.Status}}' "$relay_name" 2>/dev/null) == healthy ]] && healthy=1 && break
  fi
  [[ $(ce inspect --format '{{.State.Running}}' "$relay_name") == true ]] || break
  sleep 0.5
done
if ((healthy)); then pass "the health check reports healthy"; else
  fail "the health check never reported healthy"
  ce logs "$relay_name" >&2 || true
fi
check "healthcheck exec'd in the container exits 0" \
  bash -c '"$@" >/dev/null' _ "${engine[@]}" exec "$relay_name" kimi-relay healthcheck --url "http://127.0.0.1:$admin_port/healthz"
check "/readyz is 200" curl --noproxy '*' -sf "http://127.0.0.1:$admin_port/readyz" -o /dev/null

# ---------------------------------------------------------------------------
log "requests"
body='{"model":"kimi-k2","messages":[{"role":"user","content":"container"}]}'
reply=$(curl --noproxy '*' -s -D "$work/headers" "http://127.0.0.1:$main_port/v1/chat/completions" \
  -H "Authorization: Bearer $client_key" -H 'content-type: application/json' -d "$body" || true)
check "curl: chat.completion ($reply)" grep -q '"object":"chat.completion"' <<<"$reply"
check "curl: x-relay-upstream: host-mock" grep -qi '^x-relay-upstream: host-mock' "$work/headers"
stream=$(curl --noproxy '*' -sN "http://127.0.0.1:$main_port/v1/chat/completions" \
  -H "Authorization: Bearer $client_key" -H 'content-type: application/json' \
  -d '{"model":"kimi-k2","stream":true,"messages":[{"role":"user","content":"container"}]}' || true)
check "curl: streamed, ends with [DONE]" bash -c '[[ $(grep -c "^data: " <<<"$1") -ge 6 && $1 == *"data: [DONE]"* ]]' _ "$stream"
code=$(curl --noproxy '*' -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$main_port/v1/chat/completions" \
  -H "Authorization: Bearer wrong-key" -H 'content-type: application/json' -d "$body" || true)
check "curl: a wrong key gets 401 (got $code)" test "$code" = 401

if [[ ! -d tests/node_modules/openai ]]; then
  (cd tests && npm ci --no-audit --no-fund --loglevel=error)
fi
sdk=$(cd tests && RELAY_URL="http://127.0.0.1:$main_port/v1" RELAY_KEY="$client_key" node --input-type=module -e '
import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.env.RELAY_URL, apiKey: process.env.RELAY_KEY, maxRetries: 0 });
const reply = await client.chat.completions.create({ model: "kimi-k2", messages: [{ role: "user", content: "sdk" }] });
let streamed = "";
const stream = await client.chat.completions.create({ model: "kimi-k2", stream: true, messages: [{ role: "user", content: "sdk" }] });
for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
console.log(JSON.stringify({ content: reply.choices[0].message.content, streamed }));
' 2>&1 || true)
check "OpenAI SDK: completion and stream ($sdk)" grep -q '"content":"sdk.*"streamed":"sdk' <<<"$sdk"

log "user"
uid=$(ce exec "$relay_name" id -u 2>&1 || true)
check "id -u in the container is 10001 (got $uid)" test "$uid" = 10001
status_uid=$(ce exec "$relay_name" sh -c 'grep ^Uid: /proc/1/status' 2>&1 || true)
check "PID 1 (kimi-relay) runs as uid 10001: $status_uid" \
  bash -c '[[ $1 =~ ^Uid:[[:space:]]+10001[[:space:]]+10001[[:space:]]+10001[[:space:]]+10001 ]]' _ "$status_uid"
comm=$(ce exec "$relay_name" cat /proc/1/comm 2>&1 || true)
check "PID 1 is the gateway itself (got $comm)" test "$comm" = kimi-relay
check "state_dir is writable by the gateway (budget state file written)" \
  ce exec "$relay_name" sh -c 'test -w /var/lib/kimi-relay && ls -A /var/lib/kimi-relay | grep -q .'

log "stop (SIGTERM drain)"
ce stop -t 15 "$relay_name" >/dev/null
exit_code=$(ce inspect --format '{{.State.ExitCode}}' "$relay_name")
check "exit code after stop is 0 (got $exit_code)" test "$exit_code" = 0
logs=$(ce logs "$relay_name" 2>&1)
check "logs on stdout/stderr: ready line, access log, drain" \
  bash -c '[[ $1 == *"ready:"* && $1 == *"\"status\":200"* && $1 == *"drained"* ]]' _ "$logs"

echo
if ((failures)); then
  echo "container test: $failures check(s) failed" >&2
  echo "--- gateway log ---" >&2
  echo "$logs" | tail -30 >&2
  exit 1
fi
echo "container test: all checks passed (image $image, $((size / 1000 / 1000)) MB)"
