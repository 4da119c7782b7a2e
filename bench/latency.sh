#!/usr/bin/env bash
# Added latency at low concurrency, kimi-relay against nginx, in alternating
# rounds: the upstream called directly, through nginx, through kimi-relay
# and through kimi-relay with server.busy_poll_us (a worker polls that long
# before it sleeps), each for DURATION seconds at each concurrency: the p50
# and p99 each proxy adds to the direct figures of the same round, and the
# proxy's CPU per request (method: ../docs/benchmarks.md, "Busy polling").
# Same topology as bench/run.sh: each proxy pinned to CPU 1 with one worker,
# the mock and h2load on CPU 0.
#
#   bench/latency.sh                      # 3 rounds of 5 s at c=1 and c=4
#   ROUNDS=5 CONC="4" BUSY_POLL_US=50 bench/latency.sh
#   REF=build-ref-abc1234 bench/latency.sh  # also that build
set -euo pipefail
source "$(dirname "$0")/lib.sh"
duration=${DURATION:-5}
rounds=${ROUNDS:-3}
conc=${CONC:-1 4}
bench_need h2load taskset nginx
bench_cleanup_extra() {
  [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true
}
bench_start

busy_poll_us=${BUSY_POLL_US:-100}
mock_port=28481 relay_port=28480 nginx_port=28482 ref_port=28483 poll_port=28484
taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$mock_port --name bench --api-key "$upstream_key" \
  --workers 1 --chunks 19 --chunk-delay-ms 0 --no-record >"$work/mock.log" 2>&1 &
pids+=($!)
bench_relay_yaml "$work/relay.yaml" $relay_port $mock_port
taskset -c 1 "$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
pids+=($!)
declare -A pid_of=([kimi-relay]=$!)
bench_relay_yaml "$work/poll.yaml" $poll_port $mock_port
sed -i "s/  workers: 1/  workers: 1\n  busy_poll_us: $busy_poll_us/" "$work/poll.yaml"
taskset -c 1 "$bin/kimi-relay" --config "$work/poll.yaml" >"$work/poll.log" 2>&1 &
pids+=($!)
pid_of[polling]=$!
if [[ -n ${REF:-} ]]; then
  bench_relay_yaml "$work/ref.yaml" $ref_port $mock_port
  taskset -c 1 "$REF/kimi-relay" --config "$work/ref.yaml" >"$work/ref.log" 2>&1 &
  pids+=($!)
  pid_of[reference]=$!
fi
bench_nginx_pinned $nginx_port $mock_port
pid_of[nginx]=$nginx_pid
bench_wait_ready $relay_port $poll_port $nginx_port ${REF:+$ref_port}

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# percentiles PORT KEY CLIENTS [PID] -> "p50 p99 cpu" of one timed run: µs,
# and the CPU µs per request of PID over it (0 without one).
percentiles() {
  local port=$1 k=$2 clients=$3 pid=${4:-} log="$work/lat.log"
  local -a load=(taskset -c 0 h2load --h1 -c "$clients" -d "$work/body.json" -H "Authorization: Bearer $k"
    -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/chat/completions")
  timeout -s INT 30 "${load[@]}" -D 1 >/dev/null 2>&1 || true
  rm -f "$log"
  local before=0 after=0
  [[ -n $pid ]] && before=$(cpu_ticks "$pid")
  timeout -s INT $((duration + 20)) "${load[@]}" -D "$duration" --log-file="$log" >/dev/null 2>&1 || true
  [[ -n $pid ]] && after=$(cpu_ticks "$pid")
  awk -F'\t' '$2==200{print $3}' "$log" | sort -n |
    awk -v d=$((after - before)) -v hz="$hz" '{v[NR]=$1}
      END{if(NR==0){print "0 0 0"} else {printf "%d %d %.1f\n", v[int(NR*0.50)+1], v[int(NR*0.99)+1], d / hz * 1e6 / NR}}'
}

echo "kimi-relay $("$bin/kimi-relay" --version | awk '{print $2}'), $(date -u +%Y-%m-%dT%H:%MZ), ${duration}s per run;"
echo "polling: kimi-relay with busy_poll_us: $busy_poll_us. Added p50 / p99 µs, CPU µs per request:"
for round in $(seq "$rounds"); do
  for c in $conc; do
    read -r d50 d99 _ < <(percentiles $mock_port "$upstream_key" "$c")
    line="round $round c=$c  direct $d50 / $d99;"
    for target in "nginx $nginx_port" "kimi-relay $relay_port" "polling $poll_port" ${REF:+"reference $ref_port"}; do
      read -r name port <<<"$target"
      read -r p50 p99 cpu < <(percentiles "$port" "$key" "$c" "${pid_of[$name]}")
      line+=$(printf '  %s %+d / %+d, %s' "$name" $((p50 - d50)) $((p99 - d99)) "$cpu")
    done
    echo "$line"
  done
done
