#!/usr/bin/env bash
# Measures kimi-relay against the mock upstream directly and against nginx as a
# reverse proxy, side by side in one run (method: ../docs/benchmarks.md).
#
#   bench/run.sh                 # all scenarios, 10 s each
#   DURATION=5 bench/run.sh      # shorter runs
#   ONLY=relay bench/run.sh      # skip the nginx reference
#   bench/run.sh --compare REF   # also a build of git revision REF, side by side
#                                # in the same runs (built once into build-ref-<sha>)
#
# Topology: h2load -> proxy -> kimi-relay-mock, all on 127.0.0.1, HTTP/1.1
# keep-alive on both legs. The proxy is pinned to CPU 1 (one worker), the mock
# and the load generator share CPU 0. The robust figure is the proxy's CPU time
# per request (utime+stime from /proc/PID/stat); requests/s alone can hide the
# generator's core being the limit.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
only=${ONLY:-}
compare=
if [[ ${1:-} == --compare ]]; then
  compare=${2:?--compare needs a git revision}
fi

bench_need h2load taskset
if [[ -z $only ]] && ! command -v nginx >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null
fi
ref_bin=
if [[ -n $compare ]]; then
  ref_sha=$(git rev-parse --short "$compare")
  ref_bin=$root/build-ref-$ref_sha
  if [[ ! -x $ref_bin/kimi-relay ]]; then
    src=$(mktemp -d)
    git worktree add --detach "$src" "$compare" >/dev/null
    # As that revision's own scripts/build.sh builds it (from a profile since
    # the profile-guided build came in), so that the two are alike.
    BUILD_DIR=$ref_bin "$src/scripts/build.sh" -DRELAY_BUILD_TESTS=OFF -DRELAY_BUILD_BENCH=OFF >/dev/null
    git worktree remove --force "$src"
  fi
fi

bench_cleanup_extra() {
  [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true
}
bench_start

mock_port=28081 relay_port=28080 relay_tls_port=28083 nginx_port=28082 hot_port=28084
burst_port=28085 nginx_burst_port=28086 ref_port=28087 paced_port=28088 nginx_paced_port=28089

# A throwaway certificate for the TLS runs.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" -subj /CN=localhost >/dev/null 2>&1

taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$mock_port --name bench --api-key "$upstream_key" \
  --workers 1 --chunks 19 --chunk-delay-ms 0 --no-record >"$work/mock.log" 2>&1 &
pids+=($!)
# The unfavourable SSE case: an upstream that writes the whole stream at once,
# so one read delivers all 21 events.
taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$burst_port --name burst --api-key "$upstream_key" \
  --workers 1 --chunks 19 --chunk-delay-ms 0 --no-record --coalesce >"$work/burst.log" 2>&1 &
pids+=($!)
# The shape of a model that streams tokens: the upstream waits 1 ms between
# events, so that each event arrives in a read of its own and leaves in a
# write of its own, and the proxy sleeps and wakes between them. (At full
# load the events of the unpaced mock above mostly arrive several to a read.)
taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$paced_port --name paced --api-key "$upstream_key" \
  --workers 1 --chunks 19 --chunk-delay-ms 1 --no-record >"$work/paced.log" 2>&1 &
pids+=($!)

cat >"$work/relay.yaml" <<EOF
server:
  listen: ["127.0.0.1:$relay_port"]
  tls_listen: [{address: "127.0.0.1:$relay_tls_port", cert: "$work/tls.crt", key: "$work/tls.key"}]
  workers: 1
keys:
  - name: bench
    sha256: "$key_sha"
upstreams:
  - name: mock
    base_url: "http://127.0.0.1:$mock_port/v1"
    api_key: "$upstream_key"
    allow_insecure_http: true
    models: {kimi-k2: kimi-k2}
  - name: burst
    base_url: "http://127.0.0.1:$burst_port/v1"
    api_key: "$upstream_key"
    allow_insecure_http: true
    models: {kimi-k2-burst: kimi-k2}
  - name: paced
    base_url: "http://127.0.0.1:$paced_port/v1"
    api_key: "$upstream_key"
    allow_insecure_http: true
    models: {kimi-k2-paced: kimi-k2}
log: {level: warn}
EOF
taskset -c 1 "$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
relay_pid=$!
pids+=($relay_pid)
ref_pid=
if [[ -n $ref_bin ]]; then
  sed -e "s/$relay_port/$ref_port/" -e "/tls_listen/d" "$work/relay.yaml" >"$work/ref.yaml"
  taskset -c 1 "$ref_bin/kimi-relay" --config "$work/ref.yaml" >"$work/ref.log" 2>&1 &
  ref_pid=$!
  pids+=($ref_pid)
fi

nginx_pid=
if [[ -z $only ]]; then
  cat >"$work/nginx.conf" <<EOF
worker_processes 1;
master_process off;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  # kimi-relay keeps a connection for any number of requests: so does nginx
  # here (its default closes after 1,000, and h2load has hung on the close).
  keepalive_requests 1000000;
  upstream mock { server 127.0.0.1:$mock_port; keepalive 128; keepalive_requests 1000000; }
  upstream burst { server 127.0.0.1:$burst_port; keepalive 128; keepalive_requests 1000000; }
  upstream paced { server 127.0.0.1:$paced_port; keepalive 128; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$nginx_paced_port;
    location / {
      proxy_pass http://paced;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer $upstream_key";
      proxy_buffering off;
    }
  }
  server {
    listen 127.0.0.1:$nginx_burst_port;
    location / {
      proxy_pass http://burst;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer $upstream_key";
      proxy_buffering off;
    }
  }
  server {
    listen 127.0.0.1:$nginx_port;
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer $upstream_key";
      proxy_buffering off;
    }
  }
}
EOF
  taskset -c 1 nginx -c "$work/nginx.conf" -g 'daemon off;' &
  nginx_pid=$!
  pids+=($nginx_pid)
fi

for _ in $(seq 50); do
  grep -q listening "$work/mock.log" 2>/dev/null && curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$relay_port/v1/models" && break
  sleep 0.1
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM/{print $2}' "/proc/$1/status"; }
hz=$(getconf CLK_TCK)

# run NAME URL BODY CLIENTS PID -> one result line. Direct runs carry the
# upstream's key (the mock checks it); proxied runs the caller's key.
run() {
  local name=$1 url=$2 body=$3 clients=$4 pid=${5:-} mode=${6:---h1}
  local key=$key
  [[ $name == direct* ]] && key=$upstream_key
  local -a proto
  read -r -a proto <<<"$mode"  # "--h1", or "-m 16" for HTTP/2 streams per connection
  local log="$work/$name-$clients.log"
  # (h2load has been seen to hang past -D when nginx closes keep-alive
  # connections under it: bounded, so one stuck warm-up cannot stall the run.)
  timeout -s INT $((warmup + 20)) taskset -c 0 h2load "${proto[@]}" -c "$clients" -D "$warmup" -d "$body" \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$url" >/dev/null 2>&1 || true
  local before=0
  [[ -n $pid ]] && before=$(cpu_ticks "$pid")
  timeout -s INT $((duration + 20)) taskset -c 0 h2load "${proto[@]}" -c "$clients" -D "$duration" \
    -d "$body" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' --log-file="$log" \
    "$url" >"$work/out.txt" 2>&1 || true
  local after=0
  [[ -n $pid ]] && after=$(cpu_ticks "$pid")
  local ok rps
  ok=$(awk '/^requests:/{print $8}' "$work/out.txt")
  rps=$(awk '/^finished in/{gsub(",","",$4); print $4}' "$work/out.txt")
  local p50 p99
  read -r p50 p99 < <(awk -F'\t' '$2==200{print $3}' "$log" | sort -n |
    awk '{v[NR]=$1} END{if(NR==0){print "- -"} else {print v[int(NR*0.50)+1], v[int(NR*0.99)+1]}}')
  local cpu_us=-
  if [[ -n $pid && ${ok:-0} -gt 0 ]]; then
    cpu_us=$(awk -v d=$((after - before)) -v hz="$hz" -v n="$ok" 'BEGIN{printf "%.1f", d / hz * 1e6 / n}')
  fi
  printf '| %-14s | %3s | %9s | %8s | %8s | %8s |\n' "$name" "$clients" "${rps:-0}" "$p50" "$p99" "$cpu_us"
  echo "$name $clients $p50 $p99" >>"$work/latencies"
}

echo
echo "kimi-relay $("$bin/kimi-relay" --version | awk '{print $2}'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, ${duration}s per run"
echo
echo '| target         |  c  |   req/s   | p50 µs   | p99 µs   | CPU µs/req |'
echo '|----------------|-----|-----------|----------|----------|------------|'
for c in 1 4 64; do
  run direct "http://127.0.0.1:$mock_port/v1/chat/completions" "$work/body.json" $c
  [[ -n $nginx_pid ]] && run nginx "http://127.0.0.1:$nginx_port/v1/chat/completions" "$work/body.json" $c "$nginx_pid"
  run kimi-relay "http://127.0.0.1:$relay_port/v1/chat/completions" "$work/body.json" $c "$relay_pid"
  [[ -n $ref_pid ]] && run "relay@$ref_sha" "http://127.0.0.1:$ref_port/v1/chat/completions" "$work/body.json" $c "$ref_pid"
done
echo
echo 'SSE, 21 events per stream (19 content chunks, the final chunk, [DONE]), 16 connections:'
echo
echo '| target         |  c  | streams/s | p50 µs   | p99 µs   | CPU µs/stream |'
echo '|----------------|-----|-----------|----------|----------|---------------|'
run direct-sse "http://127.0.0.1:$mock_port/v1/chat/completions" "$work/stream.json" 16
[[ -n $nginx_pid ]] && run nginx-sse "http://127.0.0.1:$nginx_port/v1/chat/completions" "$work/stream.json" 16 "$nginx_pid"
run kimi-relay-sse "http://127.0.0.1:$relay_port/v1/chat/completions" "$work/stream.json" 16 "$relay_pid"
[[ -n $ref_pid ]] && run "ref-sse@$ref_sha" "http://127.0.0.1:$ref_port/v1/chat/completions" "$work/stream.json" 16 "$ref_pid"
# sse_table TITLE NAME DIRECT_PORT NGINX_PORT MODEL CLIENTS: one SSE table,
# the relay reaching the upstream of MODEL (its relay.yaml upstream).
sse_table() {
  local title=$1 name=$2 direct=$3 nginx=$4 model=$5 clients=$6
  echo
  echo "$title"
  echo
  echo '| target         |  c  | streams/s | p50 µs   | p99 µs   | CPU µs/stream |'
  echo '|----------------|-----|-----------|----------|----------|---------------|'
  sed "s/\"model\":\"kimi-k2\"/\"model\":\"$model\"/" "$work/stream.json" >"$work/$name.json"
  run "direct-$name" "http://127.0.0.1:$direct/v1/chat/completions" "$work/stream.json" "$clients"
  [[ -n $nginx_pid ]] && run "nginx-$name" "http://127.0.0.1:$nginx/v1/chat/completions" "$work/stream.json" "$clients" "$nginx_pid"
  run "relay-$name" "http://127.0.0.1:$relay_port/v1/chat/completions" "$work/$name.json" "$clients" "$relay_pid"
  [[ -n $ref_pid ]] && run "ref-$name@$ref_sha" "http://127.0.0.1:$ref_port/v1/chat/completions" "$work/$name.json" "$clients" "$ref_pid"
  return 0
}
sse_table 'SSE, the same 21 events written by the upstream in one write (one read delivers the whole stream):' \
  burst $burst_port $nginx_burst_port kimi-k2-burst 16
sse_table 'SSE, the same 21 events paced 1 ms apart by the upstream (each event its own read and write), 64 connections:' \
  paced $paced_port $nginx_paced_port kimi-k2-paced 64

echo
echo 'kimi-relay over each protocol (JSON requests; HTTP/2 runs carry 16 streams per connection):'
echo
echo '| target         |  c  |   req/s   | p50 µs   | p99 µs   | CPU µs/req |'
echo '|----------------|-----|-----------|----------|----------|------------|'
run relay-h1-tls "https://127.0.0.1:$relay_tls_port/v1/chat/completions" "$work/body.json" 64 "$relay_pid"
run relay-h2c "http://127.0.0.1:$relay_port/v1/chat/completions" "$work/body.json" 4 "$relay_pid" "-m 16"
run relay-h2-tls "https://127.0.0.1:$relay_tls_port/v1/chat/completions" "$work/body.json" 4 "$relay_pid" "-m 16"
echo "kimi-relay memory after the protocol runs: VmRSS $(rss_kib "$relay_pid") KiB, VmHWM $(hwm_kib "$relay_pid") KiB"

# Admission on one hot key from every worker: the same relay config with and
# without limits (generous enough that every request passes), two workers,
# unpinned, so both workers hit the key's buckets at once.
hot_run() {
  local label=$1 limits=$2
  sed -e "s/workers: 1/workers: 2/" -e "s/$relay_port/$hot_port/" -e "/tls_listen/d" \
    "$work/relay.yaml" >"$work/hot.yaml"
  [[ -n $limits ]] && sed -i "s|    sha256: \"$key_sha\"|    sha256: \"$key_sha\"\n    limits: $limits|" "$work/hot.yaml"
  "$bin/kimi-relay" --config "$work/hot.yaml" >"$work/hot.log" 2>&1 &
  local hot_pid=$!
  for _ in $(seq 50); do curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$hot_port/v1/models" && break; sleep 0.1; done
  run "$label" "http://127.0.0.1:$hot_port/v1/chat/completions" "$work/body.json" 64 "$hot_pid"
  kill "$hot_pid"; wait "$hot_pid" 2>/dev/null || true
}
echo
echo 'One hot key from 2 workers (relay unpinned), without and with per-key limits:'
echo
echo '| target         |  c  |   req/s   | p50 µs   | p99 µs   | CPU µs/req |'
echo '|----------------|-----|-----------|----------|----------|------------|'
hot_run hot-no-limits ""
hot_run hot-limits "{rpm: 100000000, tpm: 100000000000, concurrency: 100000}"

echo
awk '$1=="direct"{d50[$2]=$3; d99[$2]=$4} $1=="kimi-relay"{r50[$2]=$3; r99[$2]=$4}
     END{for (c in r50) printf "added latency by kimi-relay at c=%s: p50 %+d µs, p99 %+d µs\n", c, r50[c]-d50[c], r99[c]-d99[c]}' \
  "$work/latencies" | sort -t= -k2 -n
echo "kimi-relay memory: VmRSS $(rss_kib "$relay_pid") KiB, VmHWM $(hwm_kib "$relay_pid") KiB"
[[ -n $nginx_pid ]] && echo "nginx memory: VmRSS $(rss_kib "$nginx_pid") KiB"
exit 0
