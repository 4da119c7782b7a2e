#!/usr/bin/env bash
# CPU per JSON request (or SSE stream) split into user and system time, kimi-relay against
# nginx (and a reference build), in alternating rounds: which side of the
# line the difference is on (method: ../docs/benchmarks.md).
#
#   bench/cpu_split.sh                        # 3 rounds of 5 s each, c=64
#   MODE=sse bench/cpu_split.sh               # 21-event SSE streams, c=16 (as bench/run.sh)
#   MODE=paced bench/cpu_split.sh             # the same, the upstream pacing events 1 ms apart, c=64
#   C=1 bench/cpu_split.sh                    # another concurrency
#   ROUNDS=5 DURATION=8 bench/cpu_split.sh
#   REF=build-ref-abc1234 bench/cpu_split.sh  # also that build (bench/run.sh --compare makes one)
#
# Same topology as bench/run.sh: each proxy pinned to CPU 1 with one worker,
# the mock and h2load on CPU 0. Prints one line per proxy and round: user,
# system and total µs per request (utime and stime of /proc/PID/stat), and
# context switches per request.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
duration=${DURATION:-5}
mode=${MODE:-json}
case $mode in
  json) clients=${C:-64} delay=0 ;;
  sse) clients=${C:-16} delay=0 ;;
  paced) clients=${C:-64} delay=1 ;;
  *) echo "bench: MODE is json, sse or paced" >&2; exit 1 ;;
esac
bench_need h2load taskset nginx
bench_cleanup_extra() {
  [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true
}
bench_start

mock_port=28381 relay_port=28380 nginx_port=28382 ref_port=28383
taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$mock_port --name bench --api-key "$upstream_key" \
  --workers 1 --chunks 19 --chunk-delay-ms $delay --no-record >"$work/mock.log" 2>&1 &
pids+=($!)
bench_relay_yaml "$work/relay.yaml" $relay_port $mock_port
taskset -c 1 "$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
relay_pid=$!
pids+=($relay_pid)
ref_pid=
if [[ -n ${REF:-} ]]; then
  bench_relay_yaml "$work/ref.yaml" $ref_port $mock_port
  taskset -c 1 "$REF/kimi-relay" --config "$work/ref.yaml" >"$work/ref.log" 2>&1 &
  ref_pid=$!
  pids+=($ref_pid)
fi
bench_nginx_pinned $nginx_port $mock_port
bench_wait_ready $relay_port $nginx_port ${ref_pid:+$ref_port}
hz=$(getconf CLK_TCK)

# measure NAME PORT PID: a warm-up, then one timed run.
measure() {
  local name=$1 port=$2 pid=$3
  local body=$work/body.json
  [[ $mode != json ]] && body=$work/stream.json
  local -a load=(taskset -c 0 h2load --h1 -c "$clients" -d "$body" -H "Authorization: Bearer $key"
    -H 'Content-Type: application/json' "http://127.0.0.1:$port/v1/chat/completions")
  "${load[@]}" -D 2 >/dev/null 2>&1 || true
  local u0 s0 u1 s1 c0 c1 n
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  c0=$(awk '/ctxt_switches/{s += $2} END{print s}' "/proc/$pid/status")
  "${load[@]}" -D "$duration" >"$work/out.txt" 2>&1 || true
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  c1=$(awk '/ctxt_switches/{s += $2} END{print s}' "/proc/$pid/status")
  n=$(awk '/^requests:/{print $8}' "$work/out.txt")
  awk -v name="$name" -v n="${n:-0}" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v c=$((c1 - c0)) -v hz="$hz" 'BEGIN{
    if (n == 0) { printf "%-10s no requests completed\n", name; exit }
    printf "%-10s %8d requests  user %6.2f  system %6.2f  total %6.2f µs/request  %.3f context switches/request\n",
      name, n, u / hz * 1e6 / n, s / hz * 1e6 / n, (u + s) / hz * 1e6 / n, c / n }'
}

echo "kimi-relay $("$bin/kimi-relay" --version | awk '{print $2}'), $(date -u +%Y-%m-%dT%H:%MZ), ${duration}s per run, $mode, c=$clients"
for _ in $(seq "${ROUNDS:-3}"); do
  measure kimi-relay $relay_port $relay_pid
  [[ -n $ref_pid ]] && measure reference $ref_port $ref_pid
  measure nginx $nginx_port $nginx_pid
done | tee "$work/rounds.txt"
# The verdict over the rounds: this VM's own swings between rounds are
# larger than the gap, so one round (or one bench/run.sh) decides nothing.
awk '$3 == "requests" && $8 == "total" {
       total[$1, ++n[$1]] = $9
       if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 }
     }
     END {
       for (i = 1; i <= k; ++i) {
         p = order[i]; m = n[p]
         for (a = 1; a <= m; ++a) v[a] = total[p, a]
         for (a = 2; a <= m; ++a) for (b = a; b > 1 && v[b - 1] > v[b]; --b) { t = v[b]; v[b] = v[b - 1]; v[b - 1] = t }
         med = m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
         printf "%-10s median %6.2f µs over %d rounds\n", p, med, m
       }
       if (n["nginx"] > 0 && n["kimi-relay"] == n["nginx"]) {
         under = 0
         for (a = 1; a <= n["nginx"]; ++a) under += total["kimi-relay", a] <= total["nginx", a]
         printf "kimi-relay at or under nginx in %d of %d rounds\n", under, n["nginx"]
       }
     }' "$work/rounds.txt"
