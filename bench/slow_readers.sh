#!/usr/bin/env bash
# Slow readers: callers that take their streams more slowly than the upstream
# sends them, kimi-relay against nginx in alternating rounds. The upstream
# (kimi-relay-mock --coalesce) writes each 500-event stream (~96 KB) at once;
# each of CONNS callers (bench/slow_reader.py) reads at RATE bytes/s through
# a RCVBUF-byte receive buffer and asks for the next stream when one ends.
# A proxy must stop reading the upstream, or hold what the caller has not
# taken: this measures what holding costs. With the kernel's own send
# buffers (SEND_BUFFER unset) a loopback caller's socket grows to take a
# whole stream, and the proxies hold nothing for long; with SEND_BUFFER set
# (both proxies' callers' sockets) what does not fit waits in the proxy.
#
# Per proxy and round: streams completed and failed, CPU µs per stream and
# per MiB delivered (utime + stime of /proc/PID/stat over the run; kimi-relay
# asks the upstream for usage, which adds `"usage":null` to every event, so
# its streams are some 7 % longer: per MiB is the fair figure), and the peak
# RSS over the run above the proxy's RSS before it, per connection (sampled
# every 0.2 s).
# Same topology as bench/run.sh: each proxy pinned to CPU 1 with one worker,
# the mock and the callers on CPU 0.
#
#   bench/slow_readers.sh                            # 3 rounds of 15 s, 200 callers at 64 KiB/s
#   CONNS=1000 RATE=16384 ROUNDS=2 bench/slow_readers.sh
#   SEND_BUFFER=16384 bench/slow_readers.sh          # callers' send buffers fixed (both proxies;
#                                                    # a REF build must know server.send_buffer_bytes)
#   REF=build-ref-abc1234 bench/slow_readers.sh      # also that build
set -euo pipefail
source "$(dirname "$0")/lib.sh"
duration=${DURATION:-15}
rounds=${ROUNDS:-3}
conns=${CONNS:-200}
rate=${RATE:-65536}
rcvbuf=${RCVBUF:-8192}
events=${EVENTS:-500}
bench_need taskset nginx python3
bench_cleanup_extra() {
  [[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true
}
bench_start
ulimit -n "$(ulimit -Hn)"
# Each proxy keeps as many idle upstream connections as kimi-relay does by
# default (upstreams[].max_idle_connections): a caller's next stream finds one.
export NGINX_KEEPALIVE=${NGINX_KEEPALIVE:-256}

mock_port=28581 relay_port=28580 nginx_port=28582 ref_port=28583
taskset -c 0 "$bin/kimi-relay-mock" --listen 127.0.0.1:$mock_port --name bench --api-key "$upstream_key" \
  --workers 1 --chunks "$events" --chunk-delay-ms 0 --coalesce --no-record >"$work/mock.log" 2>&1 &
pids+=($!)
bench_relay_yaml "$work/relay.yaml" $relay_port $mock_port
taskset -c 1 "$bin/kimi-relay" --config "$work/relay.yaml" >"$work/relay.log" 2>&1 &
pids+=($!)
declare -A pid_of=([kimi-relay]=$!) port_of=([kimi-relay]=$relay_port [nginx]=$nginx_port)
if [[ -n ${REF:-} ]]; then
  bench_relay_yaml "$work/ref.yaml" $ref_port $mock_port
  taskset -c 1 "$REF/kimi-relay" --config "$work/ref.yaml" >"$work/ref.log" 2>&1 &
  pids+=($!)
  pid_of[reference]=$!
  port_of[reference]=$ref_port
fi
bench_nginx_pinned $nginx_port $mock_port
pid_of[nginx]=$nginx_pid
bench_wait_ready $relay_port $nginx_port ${REF:+$ref_port}

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }

# one NAME: a timed run through that proxy, one line of figures.
one() {
  local name=$1 pid=${pid_of[$1]} port=${port_of[$1]}
  local before_rss peak before after out
  before_rss=$(rss_kib "$pid")
  before=$(cpu_ticks "$pid")
  taskset -c 0 python3 bench/slow_reader.py --port "$port" --key "$key" --body "$work/stream.json" \
    --conns "$conns" --rate "$rate" --rcvbuf "$rcvbuf" --duration "$duration" >"$work/out.json" &
  local client=$!
  peak=$before_rss
  while kill -0 $client 2>/dev/null; do
    local now_rss
    now_rss=$(rss_kib "$pid")
    ((now_rss > peak)) && peak=$now_rss
    sleep 0.2
  done
  wait $client
  after=$(cpu_ticks "$pid")
  out=$(cat "$work/out.json")
  python3 - "$name" "$out" $((after - before)) "$hz" "$before_rss" "$peak" "$conns" <<'PY'
import json, sys
name, out, ticks, hz, before, peak, conns = sys.argv[1], json.loads(sys.argv[2]), *map(int, sys.argv[3:])
n, mib = out["completed"], out["bytes"] / 2**20
us = ticks / hz * 1e6
print(f"{name:<11} {n:6d} streams  {out['failed']:3d} failed  {mib:7.1f} MiB"
      f"  CPU {us / n if n else 0:6.1f} µs/stream {us / mib if mib else 0:6.0f} µs/MiB"
      f"  RSS {before / 1024:5.1f} -> {peak / 1024:5.1f} MiB ({(peak - before) / conns:5.1f} KiB/connection)")
PY
}

echo "kimi-relay $("$bin/kimi-relay" --version | awk '{print $2}'), $(date -u +%Y-%m-%dT%H:%MZ);" \
  "$conns callers at $rate B/s, rcvbuf $rcvbuf, $events-event streams written at once, ${duration}s per run," \
  "callers' send buffers: ${SEND_BUFFER:-autotuned}"
for round in $(seq "$rounds"); do
  for name in kimi-relay nginx ${REF:+reference}; do
    one "$name"
  done
done
