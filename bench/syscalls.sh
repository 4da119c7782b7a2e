#!/usr/bin/env bash
# System calls per request, kimi-relay and nginx side by side: each proxy (one
# worker) under `strace -c -f` for N requests from h2load after a warm-up
# (method: ../docs/benchmarks.md, "Fewer rounds through the scheduler").
#
#   bench/syscalls.sh              # 2,000 JSON requests, c=8
#   MODE=sse bench/syscalls.sh     # 21-event SSE streams instead
#   ONLY=relay bench/syscalls.sh   # without nginx
#
# strace slows every call down: compare counts, not times.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n=${N:-2000}
only=${ONLY:-}
bench_need h2load strace
if [[ -z $only ]] && ! command -v nginx >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null
fi
bench_cleanup_extra() {
  [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true
}
bench_start

mock_port=28281 relay_port=28280 nginx_port=28282
bench_mock $mock_port
bench_relay_yaml "$work/relay.yaml" $relay_port $mock_port
"$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
relay_pid=$!
pids+=($relay_pid)
targets=("kimi-relay $relay_pid $relay_port")
if [[ -z $only ]]; then
  bench_nginx_conf "$work/nginx.conf" $nginx_port $mock_port
  nginx -c "$work/nginx.conf" -g 'daemon off;' &
  pids+=($!)
  targets+=("nginx $! $nginx_port")
fi
for _ in $(seq 100); do
  curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$relay_port/v1/models" && break
  sleep 0.05
done

body=$work/body.json
[[ ${MODE:-json} == sse ]] && body=$work/stream.json
load() {  # PORT COUNT
  h2load --h1 -c 8 -n "$2" -d "$body" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' "http://127.0.0.1:$1/v1/chat/completions" >"$work/h2load.txt"
  grep -q "succeeded, 0 failed, 0 errored" "$work/h2load.txt" ||
    { echo "bench: requests failed" >&2; cat "$work/h2load.txt" >&2; exit 1; }
}
for target in "${targets[@]}"; do
  read -r name pid port <<<"$target"
  load "$port" 500
  strace -c -f -p "$pid" -o "$work/strace-$name.txt" 2>/dev/null &
  tracer=$!
  sleep 0.5  # attached to every thread
  load "$port" "$n"
  kill -INT "$tracer"
  wait "$tracer" || true
  echo "$name, ${MODE:-json}, $n requests, c=8: system calls per request"
  awk -v n="$n" '$4 ~ /^[0-9]+$/ && $NF != "total" && $4 / n >= 0.01 {printf "  %-16s %6.2f\n", $NF, $4 / n}
                 $NF == "total" {printf "  %-16s %6.2f\n", "total", $4 / n}' "$work/strace-$name.txt"
done
