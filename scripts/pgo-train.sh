#!/usr/bin/env bash
# The training run of a profile-guided build (scripts/build.sh runs it): the
# instrumented kimi-relay of BUILD_DIR, one worker, in front of the
# instrumented mock, serves the common requests over HTTP/1.1 keep-alive, and
# writes its profile when it exits.
#   scripts/pgo-train.sh BUILD_DIR
#
# What is trained is what a gateway spends its time on: chat completions as
# JSON and as SSE streams (with usage, with per-key limits, most requests
# admitted), and a few of the common refusals (a wrong key, bad JSON, an
# unknown model) so that their checks are not laid out as if they never
# fail. Code the run never reaches (HTTP/2, TLS, Redis, the admin API) is
# compiled as without a profile (-fprofile-partial-training).
#
# Only bash, coreutils and the two binaries: the client is bash's /dev/tcp, so
# this also runs in the container image's build stage. Loopback only; two free
# ports are picked from 20000 up to the kernel's range for outgoing
# connections (net.ipv4.ip_local_port_range): a port in that range can be the
# local end of a connection (thousands, after a benchmark), which answers no
# connect but fails a bind.
set -euo pipefail
export LC_ALL=C
bin=${1:?usage: scripts/pgo-train.sh BUILD_DIR}
json_requests=${PGO_JSON_REQUESTS:-1500}  # and one SSE stream per five of them
work=$(mktemp -d)
pids=()
cleanup() {
  local status=$?
  # Waited for: each writes its profile as it exits, and the caller may
  # clear the profile directory for another run as soon as this returns.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((status != 0)); then  # what the two processes said, for the build log
    tail -n 20 "$work/relay.log" "$work/mock.log" >&2 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 1" TERM INT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
outgoing_from=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
((outgoing_from > 21000)) || outgoing_from=60000  # an unusual range: the old span
pick_port() {
  local port
  for _ in $(seq 50); do
    port=$((20000 + RANDOM % (outgoing_from - 20000)))
    port_free "$port" && echo "$port" && return 0
  done
  return 1
}
# wait_port PORT PID: until PORT accepts; fails at once if PID has exited (a
# port taken between pick_port and the bind would otherwise be someone else's).
wait_port() {
  for _ in $(seq 200); do
    if ! kill -0 "$2" 2>/dev/null; then
      echo "pgo-train: the process for 127.0.0.1:$1 exited" >&2
      return 1
    fi
    port_free "$1" || return 0
    sleep 0.05
  done
  echo "pgo-train: nothing listens on 127.0.0.1:$1" >&2
  return 1
}

key=kr-pgo-training-key
key_sha=$(printf %s "$key" | sha256sum | cut -d' ' -f1)
mock_port=$(pick_port)
relay_port=$(pick_port)
while ((relay_port == mock_port)); do relay_port=$(pick_port); done
"$bin/kimi-relay-mock" --listen "127.0.0.1:$mock_port" --name train --api-key train-upstream-key \
  --workers 1 --chunks 19 --chunk-delay-ms 0 --no-record >"$work/mock.log" 2>&1 &
mock_pid=$!
pids+=("$mock_pid")
cat >"$work/relay.yaml" <<YAML
server:
  listen: ["127.0.0.1:$relay_port"]
  workers: 1
keys:
  - name: train
    sha256: "$key_sha"
    limits: {rpm: 100000000, tpm: 100000000000, concurrency: 100000}
upstreams:
  - name: mock
    base_url: "http://127.0.0.1:$mock_port/v1"
    api_key: "train-upstream-key"
    allow_insecure_http: true
    models: {kimi-k2: kimi-k2}
log: {level: error}
YAML
"$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
relay_pid=$!
pids+=("$relay_pid")
wait_port "$mock_port" "$mock_pid"
wait_port "$relay_port" "$relay_pid"

connect() { exec 3<>"/dev/tcp/127.0.0.1/$relay_port"; }
connect
# request NAME BODY [AUTH]: a request written to a file, to be sent by
# `post NAME` in one write. (Bash's own printf writes the head and the body
# separately, and the body then waits out the gateway's delayed ACK, 40 ms.)
request() {
  printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nUser-Agent: pgo-train\r\nAccept: */*\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "${3:-$key}" "${#2}" "$2" >"$work/$1.http"
}
post() { cat "$work/$1.http" >&3; }
# answer EXPECTED_STATUS: reads one whole answer (Content-Length or chunked);
# a new connection when the gateway closes this one (it does after a refusal).
answer() {
  local line status length= chunked= close= size rest
  IFS= read -t 30 -r line <&3
  status=${line#HTTP/1.1 }
  status=${status%% *}
  while IFS= read -t 30 -r line <&3; do
    line=${line%$'\r'}
    [[ -z $line ]] && break
    case ${line,,} in
      content-length:*) length=${line#*:} length=${length// /} ;;
      transfer-encoding:*chunked*) chunked=1 ;;
      connection:*close*) close=1 ;;
    esac
  done
  if [[ -n $chunked ]]; then
    while IFS= read -t 30 -r line <&3; do
      size=$((16#${line%$'\r'}))
      if ((size == 0)); then
        IFS= read -t 30 -r line <&3
        break
      fi
      read -t 30 -r -N $((size + 2)) rest <&3
    done
  elif [[ -n $length ]] && ((length > 0)); then
    read -t 30 -r -N "$length" rest <&3
  fi
  if [[ -n $close ]]; then
    exec 3<&-
    connect
  fi
  if [[ $status != "$1" ]]; then
    echo "pgo-train: expected $1, got '$status'" >&2
    return 1
  fi
}

request json '{"model":"kimi-k2","messages":[{"role":"system","content":"You are a planner in an agent swarm. Answer briefly."},{"role":"user","content":"Split the task into subtasks for worker agents."}],"temperature":0.6,"max_tokens":256}'
request stream '{"model":"kimi-k2","messages":[{"role":"user","content":"Draft three follow-up emails."}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64}'
request wrong-key '{"model":"kimi-k2","messages":[{"role":"user","content":"hi"}]}' kr-not-a-key
request bad-json '{"model":"kimi-k2","messages":['
request no-model '{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}'
for ((i = 0; i < json_requests; ++i)); do
  post json
  answer 200
  if ((i % 5 == 0)); then
    post stream
    answer 200
  fi
  if ((i % 100 == 0)); then
    post wrong-key
    answer 401
    post bad-json
    answer 400
    post no-model
    answer 404
  fi
done
exec 3<&-

# The profile is written as each process exits.
kill -TERM "$relay_pid" "$mock_pid"
wait "$relay_pid" || true
wait "$mock_pid" || true
pids=()
