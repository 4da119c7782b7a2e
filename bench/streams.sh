#!/usr/bin/env bash
# Many concurrent open SSE streams through one gateway (2 workers): 10,000
# over 100 HTTP/2 connections, then as many over HTTP/1.1 as the file
# descriptor limit allows (two per stream: the caller's and the upstream's).
# The mock holds each stream open (a chunk every second for STREAM_SECONDS).
# Reported: streams completed and failed, the gateway's RSS at the peak and
# per stream, the latency of a new request made while they are open, and the
# RSS over the 30 s after the last stream (what the workers give back).
#
#   bench/streams.sh
#   H2_STREAMS=10000 H1_STREAMS=9000 STREAM_SECONDS=20 RELAY_LOG_LEVEL=debug bench/streams.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
h2_streams=${H2_STREAMS:-10000}
h1_streams=${H1_STREAMS:-9000}
seconds=${STREAM_SECONDS:-20}
bench_need h2load
bench_start

mock_port=28281 fast_port=28282 relay_port=28280
ulimit -n "$(ulimit -Hn)"
"$bin/kimi-relay-mock" --listen 127.0.0.1:$mock_port --api-key up --workers 2 --no-record \
  --chunks "$seconds" --chunk-delay-ms 1000 >"$work/mock.log" 2>&1 &
pids+=($!)
# The probe's own upstream answers at once: its latency is the gateway's.
"$bin/kimi-relay-mock" --listen 127.0.0.1:$fast_port --api-key up --workers 1 --no-record \
  --chunks 1 --chunk-delay-ms 0 >"$work/fast.log" 2>&1 &
pids+=($!)
cat >"$work/relay.yaml" <<EOF
server:
  listen: ["127.0.0.1:$relay_port"]
  workers: 2
  max_connections: 19000
  max_connections_per_ip: 19000
  http2: {max_concurrent_streams: 128}
keys: [{name: bench, sha256: "$key_sha"}]
upstreams:
  - {name: mock, base_url: "http://127.0.0.1:$mock_port/v1", api_key: up, allow_insecure_http: true,
     models: [kimi-k2]}
  - {name: fast, base_url: "http://127.0.0.1:$fast_port/v1", api_key: up, allow_insecure_http: true,
     models: [kimi-probe]}
log: {level: ${RELAY_LOG_LEVEL:-warn}}
EOF
"$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
relay_pid=$!
pids+=($relay_pid)
for _ in $(seq 100); do curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$relay_port/v1/models" && break; sleep 0.05; done
printf '%s' '{"model":"kimi-k2","messages":[{"role":"user","content":"hold this stream open"}],"stream":true}' >"$work/body.json"

rss() { awk '/^VmRSS/{print $2}' "/proc/$relay_pid/status"; }
probe() {
  curl -s --noproxy '*' -o /dev/null -w '%{time_total}' "http://127.0.0.1:$relay_port/v1/chat/completions" \
    -H "Authorization: Bearer $key" -d '{"model":"kimi-probe","messages":[{"role":"user","content":"ping"}]}'
}

idle=$(rss)
quiet=$(probe)
echo "kimi-relay $("$bin/kimi-relay" --version | awk '{print $2}'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs"
echo "idle: RSS ${idle} KiB; a request alone: $(awk -v t="$quiet" 'BEGIN{printf "%.1f", t*1000}') ms"

# run LABEL STREAMS OPEN-FDS H2LOAD-ARGS... (the probes are made once the
# gateway has held OPEN-FDS descriptors for half a second: every stream open,
# not during the ramp-up)
run() {
  local label=$1 streams=$2 open_fds=$3
  shift 3
  h2load "$@" -n "$streams" -d "$work/body.json" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' "http://127.0.0.1:$relay_port/v1/chat/completions" >"$work/h2load.txt" 2>&1 &
  local gen=$!
  local peak=0 during= reached=
  for _ in $(seq $((seconds * 2))); do
    sleep 0.5
    local now
    now=$(rss)
    ((now > peak)) && peak=$now
    if [[ -z $during && $(ls "/proc/$relay_pid/fd" | wc -l) -ge $open_fds ]]; then
      # Half a second after the last streams opened (their first writes
      # done), the median of three probes: one probe can land in a burst.
      if [[ -n $reached ]]; then
        during=$( (probe; echo; probe; echo; probe; echo) | sort -n | sed -n 2p)
      fi
      reached=1
    fi
  done
  wait $gen || true
  local done failed
  done=$(awk '/^requests:/{print $8}' "$work/h2load.txt")
  failed=$(awk '/^requests:/{print $10 + $12 + $14}' "$work/h2load.txt")
  printf '%s: %s streams requested, %s completed, %s failed; peak RSS %s KiB (%s KiB per stream over idle); a new request while they were open: %s ms\n' \
    "$label" "$streams" "${done:-0}" "${failed:-?}" "$peak" \
    "$(awk -v p="$peak" -v i="$idle" -v n="$streams" 'BEGIN{printf "%.1f", (p - i) / n}')" \
    "$(awk -v t="${during:-0}" 'BEGIN{printf "%.1f", t*1000}')"
  sleep 2
}

run "HTTP/2 (h2c), 100 connections" "$h2_streams" $((h2_streams * 99 / 100 + 100)) -c 100 -m $(((h2_streams + 99) / 100))
run "HTTP/1.1, one stream per connection" "$h1_streams" $((h1_streams * 2 * 99 / 100)) --h1 -c "$h1_streams"
echo "after: RSS $(rss) KiB (idle before: $idle KiB)"
# Each worker returns what the streams left on its first 10 s tick spent
# idle (src/app/memory_release.hpp): within 20 s of the last stream.
for s in $(seq 30); do
  sleep 1
  ((s % 5 == 0 || s == 12)) && echo "after ${s} s idle: RSS $(rss) KiB"
done
# With RELAY_LOG_LEVEL=debug, each worker's hand-back: RSS before and after, time taken.
grep 'idle: heap swept' "$work/relay.log" || true
