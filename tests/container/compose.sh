#!/usr/bin/env bash
# Compose test: brings up docker/compose.cluster.yaml — Redis, two relays
# sharing it (cluster.redis_url), the kimi-relay-mock upstream — checks that
# the relays are healthy and share one set of per-key limits, and tears it
# down. CI runs it only when RELAY_CONTAINER_TESTS=1 (.ci/run), after
# tests/container/run.sh, whose image layers it reuses.
#
#   tests/container/compose.sh           build (cached layers are reused), up, check, down
#   JOBS=2 tests/container/compose.sh    compile with 2 jobs (default 1: leave cores to others)
#   KEEP=1 tests/container/compose.sh    leave the stack up afterwards (prints how to remove it)
#
# How the stack is run, first found:
#   1. ../shared/tools/podman.sh (relative to the repo): our machines have no
#      Docker engine and reach no registry. The stack runs with podman-compose
#      (Debian's package, 1.0.3; installed here if missing) given
#      `--podman-path ../shared/tools/podman.sh`: podman-compose then sends
#      every podman command through that wrapper, so `run` gets the runc
#      runtime (crun fails on this sandbox's cgroups) and ulimits within the
#      hard limits, and every other command the runc runtime. No
#      containers.conf and no plain-podman translation of the compose file are
#      needed: the file is used as written.
#   2. podman-compose from PATH;  3. docker compose.
# The two images are built first with the engine itself (podman.sh build:
# host networking for apt, docker format for HEALTHCHECK; `nice`, JOBS=1), from
# the Dockerfiles and tags the compose file names: podman-compose 1.0.3 ignores
# a failed build, the engine does not. Then `up -d` only starts containers.
#
# What podman-compose 1.0.3 does not do, and what the script does instead:
# it ignores the top-level `name:` (the script passes -p), depends_on
# conditions and stop_grace_period; and podman without systemd runs no health
# check timers. So the script waits itself: it runs each image's HEALTHCHECK
# (`podman healthcheck run`) until Redis and both relays pass it.
#
# What is checked:
#   - Redis: its health check passes, it runs as uid 999, answers NOAUTH
#     without the password, has appendonly yes and maxmemory-policy noeviction
#   - both relays: healthy, /readyz 200, kimi_relay_redis_up 1 in /metrics, a
#     chat completion through each reaches the mock
#   - shared state: key burst-demo (rpm 1, rpm_burst 5) gets 10 requests
#     alternating between the two relays: exactly 5 are admitted (each relay
#     admits some), the other 5 get 429 with Retry-After; Redis holds the
#     key's bucket (kr:{burst-demo})
#   - SIGTERM (stop) ends a relay with exit code 0
# Ports: the four published ports are picked free at run time (RELAY_*_PORT).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

if [[ -x ../shared/tools/podman.sh ]]; then
  engine=("$repo/../shared/tools/podman.sh") kind=podman
  if ! command -v podman-compose >/dev/null; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman-compose >/dev/null
  fi
  compose_cmd=(podman-compose --podman-path "$repo/../shared/tools/podman.sh")
elif command -v podman-compose >/dev/null && command -v podman >/dev/null; then
  engine=(podman) kind=podman compose_cmd=(podman-compose)
elif command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
  engine=(docker) kind=docker compose_cmd=(docker compose)
else
  echo "compose test: no ../shared/tools/podman.sh, podman-compose or docker compose found" >&2
  exit 1
fi
ce() { "${engine[@]}" "$@"; }

project=kr-compose-$$
jobs=${JOBS:-1}
work=$(mktemp -d)
compose_log=$work/compose.log
source tests/container/lib.sh
declare -A took

RELAY_A_PORT=$(free_port) RELAY_A_ADMIN_PORT=$(free_port) RELAY_B_PORT=$(free_port) RELAY_B_ADMIN_PORT=$(free_port)
export RELAY_A_PORT RELAY_A_ADMIN_PORT RELAY_B_PORT RELAY_B_ADMIN_PORT
# The example's values work as they are with the mock (and the demo keys).
export RELAY_ENV_FILE=$repo/docker/relay.env.example JOBS=$jobs
compose() { "${compose_cmd[@]}" -p "$project" -f docker/compose.cluster.yaml "$@"; }
# podman-compose names containers PROJECT_SERVICE_1, docker compose PROJECT-SERVICE-1.
container() { if [[ $kind == podman ]]; then echo "${project}_$1_1"; else echo "$project-$1-1"; fi; }

stack_up=0
down() {
  compose down -v >>"$compose_log" 2>&1 || true
  # podman-compose 1.0.3 leaves the network behind.
  if [[ $kind == podman ]]; then ce network rm -f "${project}_default" >/dev/null 2>&1 || true; fi
  stack_up=0
}
cleanup() {
  if ((stack_up)) && [[ ${KEEP:-0} == 1 ]]; then
    echo "stack left up; remove it with: ${compose_cmd[*]} -p $project -f docker/compose.cluster.yaml down -v"
  elif ((stack_up)); then
    down
  fi
  rm -rf "$work"
}
trap cleanup EXIT

env_value() { sed -n "s/^$1=//p" docker/relay.env.example | tail -n1; }
demo_key=kr-demo-key-for-local-use-only
burst_key=kr-demo-burst-key-for-local-use-only
redis_password=$(env_value REDIS_PASSWORD)

# ---------------------------------------------------------------------------
log "build kimi-relay:latest and kimi-relay-redis:latest with ${engine[*]} (JOBS=$jobs)"
fmt=()
[[ $kind == podman ]] && fmt=(--format docker)   # OCI drops HEALTHCHECK
started=$SECONDS
nice -n 10 "${engine[@]}" build "${fmt[@]}" -f docker/Dockerfile --build-arg "JOBS=$jobs" -t kimi-relay:latest .
took[build_relay]=$((SECONDS - started))
started=$SECONDS
nice -n 10 "${engine[@]}" build "${fmt[@]}" -t kimi-relay-redis:latest docker/redis
took[build_redis]=$((SECONDS - started))
echo "builds took ${took[build_relay]} s (relay) + ${took[build_redis]} s (redis)"

# ---------------------------------------------------------------------------
log "up: project $project (API on 127.0.0.1:$RELAY_A_PORT and :$RELAY_B_PORT)"
started=$SECONDS
stack_up=1
if ! compose up -d >"$compose_log" 2>&1; then
  cat "$compose_log" >&2
  exit 1
fi
for svc in redis mock relay-a relay-b; do
  state=$(ce inspect --format '{{.State.Status}}' "$(container "$svc")" 2>/dev/null || echo missing)
  check "$svc is running ($state)" test "$state" = running
done
if ((failures)); then
  cat "$compose_log" >&2
  exit 1
fi

healthy() { # the container's own HEALTHCHECK, run now
  if [[ $kind == podman ]]; then
    ce healthcheck run "$(container "$1")" >/dev/null 2>&1
  else
    [[ $(ce inspect --format '{{.State.Health.Status}}' "$(container "$1")") == healthy ]]
  fi
}
for svc in redis relay-a relay-b; do
  ok=0
  for _ in $(seq 120); do
    if healthy "$svc"; then ok=1 && break; fi
    sleep 0.5
  done
  if ((ok)); then pass "$svc: its image's health check passes"; else
    fail "$svc: never healthy"
    ce logs "$(container "$svc")" 2>&1 | tail -20 >&2
  fi
done
took[up]=$((SECONDS - started))
((failures == 0)) || exit 1

# ---------------------------------------------------------------------------
log "redis"
started=$SECONDS
rexec() { ce exec "$(container redis)" "$@"; }
uid=$(rexec id -u 2>&1 || true)
check "runs as uid 999 (got $uid)" test "$uid" = 999
noauth=$(rexec redis-cli ping 2>&1 || true)
check "refuses a client without the password ($noauth)" grep -q NOAUTH <<<"$noauth"
rcli() { rexec env REDISCLI_AUTH="$redis_password" redis-cli "$@"; }
check "appendonly yes" test "$(rcli config get appendonly | tail -n1)" = yes
check "maxmemory-policy noeviction" test "$(rcli config get maxmemory-policy | tail -n1)" = noeviction

# ---------------------------------------------------------------------------
log "relays"
metric() { curl --noproxy '*' -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
for r in a b; do
  api_var=RELAY_${r^^}_PORT admin_var=RELAY_${r^^}_ADMIN_PORT
  api=${!api_var} admin=${!admin_var}
  check "relay-$r: /readyz is 200" curl --noproxy '*' -sf "http://127.0.0.1:$admin/readyz" -o /dev/null
  up=
  for _ in $(seq 50); do
    up=$(metric "$admin" kimi_relay_redis_up)
    [[ $up == 1 ]] && break
    sleep 0.2
  done
  check "relay-$r: kimi_relay_redis_up is 1 (got '$up')" test "$up" = 1
  reply=$(curl --noproxy '*' -s -D "$work/headers-$r" "http://127.0.0.1:$api/v1/chat/completions" \
    -H "Authorization: Bearer $demo_key" -H 'content-type: application/json' \
    -d '{"model":"kimi-k2","messages":[{"role":"user","content":"compose"}]}' || true)
  # shellcheck disable=SC2016 # expanded by the inner bash
  check "relay-$r: a chat completion reaches the mock" \
    bash -c '[[ $1 == *"\"object\":\"chat.completion\""* ]] && grep -qi "^x-relay-upstream: mock" "$2"' _ "$reply" "$work/headers-$r"
done

# ---------------------------------------------------------------------------
log "shared limit: burst-demo (rpm 1, rpm_burst 5), 10 requests alternating relay-a, relay-b"
declare -A admitted=([a]=0 [b]=0)
codes=() refused=0 retry_after=0
for i in $(seq 0 9); do
  if ((i % 2 == 0)); then r=a port=$RELAY_A_PORT; else r=b port=$RELAY_B_PORT; fi
  code=$(curl --noproxy '*' -s -D "$work/burst-headers" -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$port/v1/chat/completions" \
    -H "Authorization: Bearer $burst_key" -H 'content-type: application/json' \
    -d '{"model":"kimi-k2","messages":[{"role":"user","content":"burst"}]}' || true)
  codes+=("relay-$r:$code")
  if [[ $code == 200 ]]; then admitted[$r]=$((admitted[$r] + 1)); fi
  if [[ $code == 429 ]]; then
    refused=$((refused + 1))
    grep -qi '^retry-after: [0-9]' "$work/burst-headers" && retry_after=$((retry_after + 1))
  fi
done
echo "   ${codes[*]}"
total=$((admitted[a] + admitted[b]))
check "exactly 5 of 10 admitted over both relays (relay-a ${admitted[a]}, relay-b ${admitted[b]})" test "$total" = 5
check "both relays admitted some (the bucket is one, not one per relay)" test "${admitted[a]}" -gt 0 -a "${admitted[b]}" -gt 0
check "the other 5 got 429 ($refused), each with Retry-After ($retry_after)" test "$refused" = 5 -a "$retry_after" = 5
keys=$(rcli --scan --pattern 'kr:{burst-demo}*' 2>&1 || true)
check "Redis holds the key's bucket: ${keys//$'\n'/ }" grep -q 'kr:{burst-demo}' <<<"$keys"

# ---------------------------------------------------------------------------
log "stop relay-b (SIGTERM drain)"
ce stop -t 35 "$(container relay-b)" >/dev/null
code=$(ce inspect --format '{{.State.ExitCode}}' "$(container relay-b)")
check "exit code after stop is 0 (got $code)" test "$code" = 0
took[checks]=$((SECONDS - started))

log "down"
started=$SECONDS
if [[ ${KEEP:-0} != 1 ]]; then
  down
  left=$(ce ps -a --filter "label=com.docker.compose.project=$project" --format '{{.Names}}')
  check "no container of the project is left ($left)" test -z "$left"
  left=$(ce volume ls --filter "label=com.docker.compose.project=$project" --format '{{.Name}}')
  check "no volume of the project is left ($left)" test -z "$left"
fi
took[down]=$((SECONDS - started))

echo
echo "timings: build relay ${took[build_relay]} s, build redis ${took[build_redis]} s, up until healthy ${took[up]} s," \
  "checks ${took[checks]} s, down ${took[down]} s"
if ((failures)); then
  echo "compose test: $failures check(s) failed" >&2
  exit 1
fi
echo "compose test: all checks passed"
