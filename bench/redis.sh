#!/usr/bin/env bash
# What sharing limits and budgets through Redis (cluster.redis_url) costs per
# request: the same relay, the same key (rpm, tpm, concurrency and a budget,
# all generous enough that every request passes), with its state in the
# process and then in a local redis-server. Method: ../docs/benchmarks.md.
#
#   bench/redis.sh               # 10 s per run
#   DURATION=5 bench/redis.sh
#
# Topology as in bench/run.sh: h2load -> kimi-relay (1 worker, CPU 1) ->
# kimi-relay-mock; h2load, the mock and redis-server share CPU 0. Reported:
# the relay's CPU per request, Redis's CPU per request, and the latency
# percentiles; plus the hot key's admission round trip as Redis saw it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bench_need h2load taskset redis-server
bench_start

mock_port=28181 relay_port=28180 redis_port=28179

taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$mock_port --name bench --api-key "$upstream_key" \
  --workers 1 --no-record >"$work/mock.log" 2>&1 &
pids+=($!)
taskset -c 0 redis-server --port $redis_port --bind 127.0.0.1 --save '' --appendonly no \
  >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=($redis_pid)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

start_relay() {
  local cluster=$1
  cat >"$work/relay.yaml" <<EOF
server:
  listen: ["127.0.0.1:$relay_port"]
  workers: 1
keys:
  - name: bench
    sha256: "$key_sha"
    limits: {rpm: 100000000, tpm: 100000000000, concurrency: 100000}
    budget: {usd: 1000000, period: month}
upstreams:
  - name: mock
    base_url: "http://127.0.0.1:$mock_port/v1"
    api_key: "$upstream_key"
    allow_insecure_http: true
    models: {kimi-k2: kimi-k2}
prices:
  - {model: kimi-k2, input: 0.6, output: 2.5}
log: {level: warn}
$cluster
EOF
  taskset -c 1 "$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
  relay_pid=$!
  for _ in $(seq 100); do
    curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$relay_port/v1/models" && break
    sleep 0.05
  done
  sleep 0.3  # the Redis connection is up well within this
}

run() {
  local name=$1 clients=$2
  local log="$work/$name-$clients.log"
  taskset -c 0 h2load --h1 -c "$clients" -D "$warmup" -d "$work/body.json" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' "http://127.0.0.1:$relay_port/v1/chat/completions" >/dev/null 2>&1 || true
  local r0 s0
  r0=$(cpu_ticks "$relay_pid")
  s0=$(cpu_ticks "$redis_pid")
  taskset -c 0 h2load --h1 -c "$clients" -D "$duration" -d "$work/body.json" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' --log-file="$log" \
    "http://127.0.0.1:$relay_port/v1/chat/completions" >"$work/out.txt" 2>&1 || true
  local r1 s1 ok rps p50 p99
  r1=$(cpu_ticks "$relay_pid")
  s1=$(cpu_ticks "$redis_pid")
  ok=$(awk '/^requests:/{print $8}' "$work/out.txt")
  rps=$(awk '/^finished in/{gsub(",","",$4); print $4}' "$work/out.txt")
  read -r p50 p99 < <(awk -F'\t' '$2==200{print $3}' "$log" | sort -n |
    awk '{v[NR]=$1} END{if(NR==0){print "- -"} else {print v[int(NR*0.50)+1], v[int(NR*0.99)+1]}}')
  local relay_us redis_us
  relay_us=$(awk -v d=$((r1 - r0)) -v hz="$hz" -v n="${ok:-0}" 'BEGIN{if(n>0) printf "%.1f", d / hz * 1e6 / n; else print "-"}')
  redis_us=$(awk -v d=$((s1 - s0)) -v hz="$hz" -v n="${ok:-0}" 'BEGIN{if(n>0) printf "%.1f", d / hz * 1e6 / n; else print "-"}')
  local non200
  non200=$(awk -F'\t' '$2!=200' "$log" | wc -l)
  printf '| %-8s | %3s | %9s | %8s | %8s | %12s | %12s | %7s |\n' "$name" "$clients" "${rps:-0}" "$p50" "$p99" \
    "$relay_us" "$redis_us" "$non200"
}

echo
echo "kimi-relay $("$bin/kimi-relay" --version | awk '{print $2}'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, ${duration}s per run"
echo
echo '| state    |  c  |   req/s   | p50 µs   | p99 µs   | relay µs/req | Redis µs/req | non-200 |'
echo '|----------|-----|-----------|----------|----------|--------------|--------------|---------|'
for mode in local redis; do
  cluster=
  [[ $mode == redis ]] && cluster="cluster: {redis_url: \"redis://127.0.0.1:$redis_port/0\"}"
  start_relay "$cluster"
  for c in 1 16 64; do run "$mode" $c; done
  kill "$relay_pid"; wait "$relay_pid" 2>/dev/null || true
done
echo
echo "Redis: $(redis-cli -p $redis_port info commandstats | grep -E 'cmdstat_evalsha' | tr -d '\r')"
echo "Redis memory: $(redis-cli -p $redis_port info memory | grep -E '^used_memory_human' | tr -d '\r')"
exit 0
