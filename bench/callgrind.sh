#!/usr/bin/env bash
# Instructions per request, repeatable to a few hundred: the relay (1 worker)
# under valgrind's callgrind, a warm-up, counters zeroed, N requests from
# h2load, counters dumped (method: ../docs/benchmarks.md, "Instruction counts").
#
#   bench/callgrind.sh                # 2,000 JSON requests, c=8
#   MODE=sse bench/callgrind.sh       # 21-event SSE streams instead
#   MODE=sse BURST=1 bench/callgrind.sh  # ... from an upstream that writes each stream at once
#   MODE=sse SPREAD=5 bench/callgrind.sh # ... from an upstream that waits 5 ms between events, so
#                                     # that each arrives in a read of its own, as in bench/run.sh
#                                     # (without it, the relay under valgrind is slow enough that
#                                     # a stream's events queue up and arrive in one read;
#                                     # with BURST it turns the one write off, and
#                                     # without MODE=sse it delays each JSON answer)
#   NGINX=1 bench/callgrind.sh        # nginx as the proxy instead: the line (any MODE, BURST)
#   LIMITS=1 bench/callgrind.sh       # the key with rpm, tpm and concurrency limits
#                                     # (generous: every request passes them)
#   N=5000 C=16 bench/callgrind.sh
#   TOP=25 bench/callgrind.sh         # also the 25 costliest functions (inclusive)
#   CACHE=1 bench/callgrind.sh        # also simulated cache misses and branch mispredictions
#                                     # per request (valgrind's model of this CPU's L1 caches:
#                                     # what instructions alone do not show; slower to run)
#   BUILD_DIR=build-ref-abc1234 bench/callgrind.sh   # another build
#
# Prints "instructions/request: N"; the dump stays in $OUT (default
# /tmp/kimi-relay-callgrind.out) for callgrind_annotate.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
mode=${MODE:-json}
n=${N:-2000}
clients=${C:-8}
warm=${WARM:-500}
out=${OUT:-/tmp/kimi-relay-callgrind.out}
vg_args=(${VG_ARGS:-})
[[ -n ${CACHE:-} ]] && vg_args+=(--cache-sim=yes --branch-sim=yes)
bench_need h2load valgrind callgrind_control callgrind_annotate
bench_start
rm -f "$out"*

mock_port=28181 relay_port=28180
bench_mock $mock_port ${BURST:+--coalesce} ${SPREAD:+--chunk-delay-ms $SPREAD}
bench_relay_yaml "$work/relay.yaml" $relay_port $mock_port
if [[ -n ${LIMITS:-} ]]; then
  sed -i "s|    sha256: \"$key_sha\"|    sha256: \"$key_sha\"\n    limits: {rpm: 100000000, tpm: 100000000000, concurrency: 100000}|" \
    "$work/relay.yaml"
fi
if [[ -n ${NGINX:-} ]]; then
  # nginx's worker is the process measured: one process, in the foreground.
  bench_need nginx
  bench_nginx_conf "$work/nginx.conf" $relay_port $mock_port
  sed -i '1i daemon off;' "$work/nginx.conf"
  valgrind --tool=callgrind "${vg_args[@]}" --callgrind-out-file="$out" nginx -c "$work/nginx.conf" -p "$work" \
    >"$work/relay.log" 2>&1 &
else
  valgrind --tool=callgrind "${vg_args[@]}" --callgrind-out-file="$out" "$bin/kimi-relay" --config "$work/relay.yaml" \
    >"$work/relay.log" 2>&1 &
fi
relay_pid=$!
pids+=($relay_pid)
for _ in $(seq 300); do
  curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$relay_port/v1/models" && break
  sleep 0.1
done

body=$work/body.json
[[ $mode == sse ]] && body=$work/stream.json
load() {
  h2load --h1 -c "$clients" -n "$1" -d "$body" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' "http://127.0.0.1:$relay_port/v1/chat/completions" >"$work/h2load.txt"
  grep -q "succeeded, 0 failed, 0 errored" "$work/h2load.txt" ||
    { echo "bench: requests failed" >&2; cat "$work/h2load.txt" >&2; exit 1; }
}
load "$warm"
callgrind_control -z "$relay_pid" >/dev/null
load "$n"
callgrind_control -d "$relay_pid" >/dev/null
# The dump of the zeroed interval is the newest file written for the pid.
dump=$(ls -t "$out"* | head -1)
total=$(awk '/^summary:|^totals:/{print $2; exit}' "$dump")
proxy=kimi-relay
[[ -n ${NGINX:-} ]] && proxy=nginx
printf 'proxy: %s, mode: %s%s%s, requests: %d, c=%d\ninstructions/request: %d\n' "$proxy" \
  "$mode" "${BURST:+, whole stream in one write}" \
  "${LIMITS:+, with key limits}" "$n" "$clients" $((total / n))
if [[ -n ${CACHE:-} ]]; then
  # The totals line holds one count per event, in the order "events:" names them.
  awk -v n="$n" '
    /^events:/ { for (i = 2; i <= NF; ++i) name[i] = $i }
    /^summary:|^totals:/ { for (i = 2; i <= NF; ++i) v[name[i]] = $i; exit }
    END {
      printf "per request: data reads %.0f, data writes %.0f\n", v["Dr"] / n, v["Dw"] / n
      printf "  L1 instruction misses %.0f, L1 data misses %.0f read + %.0f write\n",
        v["I1mr"] / n, v["D1mr"] / n, v["D1mw"] / n
      printf "  conditional branches %.0f, mispredicted %.0f; indirect %.0f, mispredicted %.0f\n",
        v["Bc"] / n, v["Bcm"] / n, v["Bi"] / n, v["Bim"] / n
    }' "$dump"
fi
if [[ -n ${TOP:-} ]]; then
  callgrind_annotate --inclusive=yes "$dump" 2>/dev/null | sed -n "1,$((TOP + 25))p" | tail -n "$TOP"
fi
