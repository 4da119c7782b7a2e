#!/usr/bin/env bash
# Installs, builds and starts the gateway on config/demo.yaml against two local
# kimi-relay-mock upstreams playing "holysheep" and "moonshot" — no internet,
# no real keys. Ctrl-C stops all three.
#
#   main port 127.0.0.1:8080, admin 127.0.0.1:9090, demo caller key in README.md
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
bin=${BUILD_DIR:-build}

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$bin/kimi-relay-mock" --listen 127.0.0.1:18081 --name holysheep --api-key demo-holysheep-key \
  --chunks 12 --chunk-delay-ms 40 &
pids+=($!)
"$bin/kimi-relay-mock" --listen 127.0.0.1:18082 --name moonshot --api-key demo-moonshot-key \
  --moonshot --chunks 12 --chunk-delay-ms 40 &
pids+=($!)

export HOLYSHEEP_API_KEY=demo-holysheep-key MOONSHOT_API_KEY=demo-moonshot-key
"$bin/kimi-relay" --config config/demo.yaml &
pids+=($!)
sleep 0.5
cat <<'MSG'

kimi-relay is running on http://127.0.0.1:8080 (admin on :9090). Try, in another terminal:

  curl -s http://127.0.0.1:8080/v1/chat/completions \
    -H "Authorization: Bearer kr-demo-key-for-local-use-only" \
    -d '{"model":"kimi-k2","messages":[{"role":"user","content":"hello"}]}'

Ctrl-C stops the gateway and both mock upstreams.
MSG
wait -n "${pids[@]}"
